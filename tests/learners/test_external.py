"""Backbones from factories (MODULE:FUNCTION, timm:NAME) and pretrained state dicts."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from vistabench.errors import InputError
from vistabench.learners.external import ExternalBackbone, load_pretrained
from vistabench.learners.models import build_model
from vistabench.learners.trainer import Trainer, TrainConfig

NETS = "learners.user_nets"


@pytest.fixture(autouse=True)
def _tests_on_path(monkeypatch):
    import pathlib
    monkeypatch.syspath_prepend(str(pathlib.Path(__file__).resolve().parents[1]))


def test_factory_called_with_its_own_argument_names():
    m = build_model(f"{NETS}:tiny", num_classes=5, in_channels=1, image_size=8, seed=0)
    assert isinstance(m, ExternalBackbone)
    assert (m.num_classes, m.in_channels, m.feature_dim) == (5, 1, 4)
    assert m.net.body[0].in_channels == 1 and m.classifier.out_features == 5
    x = torch.randn(2, 1, 8, 8)
    assert torch.equal(m(x), m.classifier(m.features(x)))
    import learners.user_nets as nets
    build_model(f"{NETS}:tiny_timm_names", num_classes=7, in_channels=2, image_size=16)
    assert nets.tiny_timm_names.seen == {"num_classes": 7, "in_chans": 2, "img_size": 16}


def test_factory_seeded_weights_are_reproducible():
    a = build_model(f"{NETS}:tiny", num_classes=3, in_channels=1, seed=4)
    b = build_model(f"{NETS}:tiny", num_classes=3, in_channels=1, seed=4)
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.mark.parametrize("name, message", [
    ("no_such_module_xyz:f", "cannot import module 'no_such_module_xyz'"),
    (f"{NETS}:missing", "has no attribute 'missing'"),
    (f"{NETS}:NOT_CALLABLE", "is a int, not a callable"),
    (f"{NETS}:not_a_module", "returned a str, not a torch.nn.Module"),
    (f"{NETS}:no_classes", "takes no number of classes"),
    (f"{NETS}:needs_depth", "requires depth"),
    (f"{NETS}:headless", "has no final nn.Linear with 3 outputs"),
    (":f", "expected MODULE:FUNCTION"),
])
def test_bad_factories_are_one_line(name, message):
    with pytest.raises(InputError, match=message) as e:
        build_model(name, num_classes=3, in_channels=1)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name, message", [
    (f"{NETS}:thirteen", r"factory 'learners.user_nets:thirteen' returns \(2, 13\) for a batch of shape "
                         r"\(2, 3, 16, 16\); expected \(2, 10\)"),
    (f"{NETS}:scaled_head", r"factory 'learners.user_nets:scaled_head' \(its features before the head 'net.fc'\) "
                            r"fails on a batch of shape \(2, 3, 16, 16\) \(RuntimeError: "),
    (f"{NETS}:wrong_width", r"factory 'learners.user_nets:wrong_width' returns \(2, 13\) for a batch of shape "
                            r"\(2, 3, 16, 16\); expected \(2, 10\)"),
    (f"{NETS}:fixed_size", r"factory 'learners.user_nets:fixed_size' fails on a batch of shape \(2, 3, 16, 16\)"),
])
def test_factory_output_checked_on_one_batch_before_training(name, message):
    """A network whose output is not (N, classes) is refused when it is built, naming the factory,
    instead of failing inside the first training step (issue 40)."""
    with pytest.raises(InputError, match=message) as e:
        build_model(name, num_classes=10, in_channels=3, image_size=16, seed=0)
    assert "\n" not in str(e.value)
    build_model(f"{NETS}:fixed_size", num_classes=10, in_channels=3, image_size=8)  # fits its own size


def test_factory_trains_and_classifier_only():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (24, 8, 8, 1), dtype=np.uint8)
    y = np.arange(24) % 3
    m = build_model(f"{NETS}:tiny", num_classes=3, in_channels=1, seed=0)
    tr = Trainer(m, TrainConfig(epochs=1, batch_size=8))
    tr.fit(x, y)
    body = [p.clone() for p in m.net.parameters()]
    tr.fit(x, y, trainable="classifier")
    assert all(torch.equal(p, q) for p, q in zip(body, m.net.parameters()))
    assert tr.features(x).shape == (24, 4) and tr.predict_logits(x).shape == (24, 3)


def _bare_state(classes: int) -> dict:
    import learners.user_nets as nets
    torch.manual_seed(1)
    return nets.TinyNet(1, classes).state_dict()


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_pretrained_loads_body_and_keeps_fresh_head(tmp_path, suffix):
    state = _bare_state(10)  # trained on 10 classes; the data have 3
    path = tmp_path / f"w{suffix}"
    if suffix == ".safetensors":
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    else:
        torch.save(state, path)
    m = build_model(f"{NETS}:tiny", num_classes=3, in_channels=1, seed=0, pretrained=str(path))
    assert torch.equal(m.net.body[0].weight, state["body.0.weight"])
    assert torch.equal(m.net.body[1].running_mean, state["body.1.running_mean"])
    assert m.classifier.out_features == 3
    report = load_pretrained(m, path)
    assert report["head_left_out"] == ["net.fc.bias", "net.fc.weight"]


def test_pretrained_into_a_registered_backbone(tmp_path):
    src = build_model("cnn28", num_classes=10, in_channels=1, seed=1)
    torch.save(src.state_dict(), tmp_path / "c.pt")
    m = build_model("cnn28", num_classes=4, in_channels=1, seed=0, pretrained=str(tmp_path / "c.pt"))
    body = [k for k in src.state_dict() if not k.startswith("classifier.")]
    assert all(torch.equal(m.state_dict()[k], src.state_dict()[k]) for k in body)
    assert m.classifier.out_features == 4


def test_pretrained_errors_are_one_line(tmp_path):
    wide = build_model("cnn28", num_classes=4, in_channels=1, seed=0, width=8)
    torch.save(wide.state_dict(), tmp_path / "wide.pt")
    with pytest.raises(InputError, match=r"tensor '\S+' has shape \(8, 1, 3, 3\)"):
        build_model("cnn28", num_classes=4, in_channels=1, pretrained=str(tmp_path / "wide.pt"))
    with pytest.raises(InputError, match="does not exist"):
        build_model("cnn28", num_classes=4, in_channels=1, pretrained=str(tmp_path / "nope.pt"))
    torch.save([1, 2, 3], tmp_path / "list.pt")
    with pytest.raises(InputError, match="not a state dict"):
        build_model("cnn28", num_classes=4, in_channels=1, pretrained=str(tmp_path / "list.pt"))
    (tmp_path / "junk.safetensors").write_bytes(b"not a file")
    with pytest.raises(InputError, match="not a readable safetensors"):
        build_model("cnn28", num_classes=4, in_channels=1, pretrained=str(tmp_path / "junk.safetensors"))
    torch.save(_bare_state(3), tmp_path / "other.pt")
    with pytest.raises(InputError, match="does not have") as e:
        build_model("cnn28", num_classes=4, in_channels=1, pretrained=str(tmp_path / "other.pt"))
    assert "\n" not in str(e.value)


def test_timm_interface_network_keeps_its_head_in_place(tmp_path):
    """A network with timm's interface (the tests' own, as timm does not import here): its head is the
    classifier in place, features are forward_head(pre_logits=True), a pretrained file of the bare
    network loads everything but the head."""
    import learners.user_nets as nets
    from safetensors.torch import save_file
    m = build_model(f"{NETS}:timm_style", num_classes=3, in_channels=1, seed=0)
    assert m.classifier is m.net.head and m.feature_dim == 5 and m.head_path == ""
    x = torch.randn(4, 1, 8, 8)
    assert torch.equal(m.features(x), m.net.forward_head(m.net.forward_features(x), pre_logits=True))
    assert torch.equal(m(x), m.net(x))
    torch.manual_seed(2)
    src = nets.TimmStyleNet(1, 10).state_dict()  # trained on 10 classes
    save_file({k: v.contiguous() for k, v in src.items()}, str(tmp_path / "t.safetensors"))
    head = m.classifier.weight.clone()
    report = load_pretrained(m, tmp_path / "t.safetensors")
    assert torch.equal(m.net.stem[0].weight, src["stem.0.weight"]) and torch.equal(m.net.pre.weight, src["pre.weight"])
    assert torch.equal(m.classifier.weight, head) and m.classifier.out_features == 3
    assert report["head_left_out"] == ["net.head.bias", "net.head.weight"]


def test_timm_short_form_calls_create_model(monkeypatch):
    """The ``timm:NAME`` plumbing (name check, create_model's arguments) with a stand-in module for
    timm's two entry points; the real timm is exercised by test_timm_short_form where it imports."""
    import types

    import learners.user_nets as nets
    calls = []

    def create_model(name, num_classes, in_chans):
        calls.append((name, num_classes, in_chans))
        return nets.TimmStyleNet(in_chans, num_classes)

    stand_in = types.ModuleType("timm")
    stand_in.list_models = lambda: ["tiny_timm"]
    stand_in.create_model = create_model
    monkeypatch.setitem(sys.modules, "timm", stand_in)
    m = build_model("timm:tiny_timm", num_classes=4, in_channels=2, seed=0)
    assert calls == [("tiny_timm", 4, 2)] and m.classifier is m.net.head and m(torch.randn(2, 2, 8, 8)).shape == (2, 4)
    with pytest.raises(InputError, match=r"timm has no model 'nope' \(timm.list_models\(\) lists them\)"):
        build_model("timm:nope", num_classes=4, in_channels=2)


def _timm_or_skip():
    """Import timm, or check the one-line refusal and skip with the reason. timm imports torchvision
    (``timm.layers`` needs ``torchvision.ops.misc.FrozenBatchNorm2d``); the registry's torchvision
    wheels are CUDA builds whose ops do not load against a CPU torch, so on a CPU-only machine
    ``import timm`` fails (RuntimeError: operator torchvision::nms does not exist), and CI installs
    no timm (ModuleNotFoundError)."""
    try:
        import timm
    except Exception as exc:
        with pytest.raises(InputError, match="needs timm") as e:
            build_model("timm:resnet18", num_classes=3, in_channels=1)
        assert "\n" not in str(e.value)
        first = str(exc).splitlines()[0] if str(exc) else ""
        pytest.skip(f"timm does not import here ({type(exc).__name__}: {first}); its one-line refusal is checked")
    return timm


def test_timm_short_form(tmp_path):
    _timm_or_skip()
    m = build_model("timm:resnet18", num_classes=3, in_channels=1, seed=0)
    assert m.classifier.out_features == 3 and m(torch.randn(2, 1, 32, 32)).shape == (2, 3)
    assert m.features(torch.randn(2, 1, 32, 32)).shape == (2, m.feature_dim)
    # MODULE:FUNCTION names the same factory; a pretrained file of timm's own state dict loads
    from safetensors.torch import save_file
    other = build_model("timm.models:resnet18", num_classes=10, in_channels=1, seed=1)
    save_file({k: v.contiguous() for k, v in other.net.state_dict().items()}, str(tmp_path / "r18.safetensors"))
    report = load_pretrained(m, tmp_path / "r18.safetensors")
    assert torch.equal(m.net.conv1.weight, other.net.conv1.weight) and m.classifier.out_features == 3
    assert report["head_left_out"] == ["net.fc.bias", "net.fc.weight"]
    x = np.random.default_rng(0).integers(0, 256, (16, 32, 32, 1), dtype=np.uint8)
    res = Trainer(m, TrainConfig(epochs=1, batch_size=8, precision="bf16")).fit(x, np.arange(16) % 3)
    assert res.steps == 2 and np.isfinite(res.history[0]["loss"])
