
import pytest
import torch
from torch import nn

from vistabench.errors import InputError
from vistabench.learners.models import NormedLinear, build_model, models


@pytest.mark.parametrize("name", models.names())
@pytest.mark.parametrize("channels,size", [(1, 8), (3, 16), (13, 8)])
def test_output_and_feature_shapes(name, channels, size):
    m = build_model(name, num_classes=7, in_channels=channels, image_size=size, seed=0).eval()
    x = torch.randn(3, channels, size, size)
    with torch.no_grad():
        logits, feats = m(x), m.features(x)
    assert logits.shape == (3, 7)
    assert feats.shape == (3, m.feature_dim)
    assert isinstance(m.classifier, nn.Linear) and m.classifier.in_features == m.feature_dim
    assert m.in_channels == channels and m.num_classes == 7
    assert torch.isfinite(logits).all()
    # forward is the classifier applied to the features
    torch.testing.assert_close(logits, m.classifier(feats))


@pytest.mark.parametrize("name", ["cnn28", "resnet32", "vit_small"])
def test_other_input_sizes_than_built_for(name):
    m = build_model(name, num_classes=4, in_channels=1, image_size=28).eval()
    with torch.no_grad():
        assert m(torch.randn(2, 1, 8, 8)).shape == (2, 4)
        assert m(torch.randn(2, 1, 5, 5)).shape == (2, 4)


@pytest.mark.parametrize("name", models.names())
def test_seeded_build_is_reproducible(name):
    a = build_model(name, num_classes=3, in_channels=1, image_size=8, seed=3)
    state = torch.get_rng_state()
    b = build_model(name, num_classes=3, in_channels=1, image_size=8, seed=3)
    assert torch.equal(state, torch.get_rng_state()), "seeded build must not move the global RNG"
    c = build_model(name, num_classes=3, in_channels=1, image_size=8, seed=4)
    for (pa, pb, _pc) in zip(a.parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb)
    assert any(not torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters()))


def _params(m):
    return sum(p.numel() for p in m.parameters())


def test_parameter_counts_match_published_architectures():
    # torchvision resnet18 / resnet50 (ImageNet, 1000 classes): 11,689,512 / 25,557,032 parameters.
    assert _params(build_model("resnet18", num_classes=1000, in_channels=3, image_size=224)) == 11_689_512
    assert _params(build_model("resnet50", num_classes=1000, in_channels=3, image_size=224)) == 25_557_032
    # timm vit_small_patch16_224 (DeiT-S): 22,050,664 parameters.
    assert _params(build_model("vit_small", num_classes=1000, in_channels=3, image_size=224)) == 22_050_664
    # He et al. 2016 Table 6: ResNet-32 on CIFAR-10 has 0.46M parameters (option-A shortcuts).
    assert round(_params(build_model("resnet32", num_classes=10, in_channels=3)) / 1e6, 2) == 0.46
    # Zagoruyko & Komodakis 2016 Table: WRN-16-8 has 11.0M parameters.
    assert round(_params(build_model("wrn16_8", num_classes=10, in_channels=3)) / 1e6, 1) == 11.0


def test_resnet_stem_follows_image_size():
    assert build_model("resnet18", num_classes=2, in_channels=3, image_size=32).small_input
    assert not build_model("resnet18", num_classes=2, in_channels=3, image_size=224).small_input
    assert not build_model("resnet18", num_classes=2, in_channels=3, image_size=32, small_input=False).small_input


def test_unknown_model_and_bad_arguments():
    with pytest.raises(InputError, match="did you mean 'resnet32'"):
        build_model("resnet23", num_classes=2, in_channels=3)
    with pytest.raises(InputError, match="num_classes"):
        build_model("cnn28", num_classes=0, in_channels=3)
    with pytest.raises(InputError, match="in_channels"):
        build_model("cnn28", num_classes=2, in_channels=2.5)
    with pytest.raises(InputError, match="cnn28"):
        build_model("cnn28", num_classes=2, in_channels=1, depth=3)


def test_normed_linear_is_cosine_similarity():
    head = NormedLinear(5, 3)
    x = torch.randn(4, 5)
    expected = torch.stack([torch.stack([torch.dot(xi, w) / (xi.norm() * w.norm()) for w in head.weight])
                            for xi in x])
    torch.testing.assert_close(head(x), expected)
    assert head(x).abs().max() <= 1 + 1e-6
