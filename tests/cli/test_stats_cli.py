"""`vistabench stats welch`: an undefined test is refused with its reason (exit 2), never "t = undefined"."""

import json

import pytest
import scipy.stats as sps

from vistabench.cli import main


def _files(tmp_path, a, b):
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    return ["stats", "welch", "--a", str(tmp_path / "a.json"), "--b", str(tmp_path / "b.json")]


@pytest.mark.parametrize("a, b, message", [
    ([0.5], [0.1, 0.2, 0.3], "--a: 1 score; Welch's t-test needs at least 2 per list"),
    ([0.1, 0.2], [], "--b: 0 scores; Welch's t-test needs at least 2"),
    ([0.9, 0.9, 0.9], [0.8, 0.8], "neither --a nor --b varies"),
    ([0.3] * 3, [0.1 + 0.2] * 4, "neither --a nor --b varies"),  # rounding noise is no variance
])
def test_undefined_tests_are_refused_with_the_reason(tmp_path, capsys, a, b, message):
    for extra in ([], ["--json"]):
        assert main(_files(tmp_path, a, b) + extra) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1
        import re

        assert re.search(message, err), err


def test_one_constant_list_is_a_defined_test(tmp_path, capsys):
    a, b = [0.5, 0.5, 0.5], [0.1, 0.3, 0.2]
    assert main(_files(tmp_path, a, b) + ["--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    ref = sps.ttest_ind(a, b, equal_var=False)
    assert r["t"] == pytest.approx(ref.statistic) and r["p"] == pytest.approx(ref.pvalue)
