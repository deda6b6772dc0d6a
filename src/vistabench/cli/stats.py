"""`vistabench stats ...`: significance tests on JSON lists of scores."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from . import read_json_file
from ..config import Options, option
from .verbs import Verbs, add_verb, verb_group


@dataclass(frozen=True, kw_only=True)
class WelchOptions(Options):
    a: str = option(flags=("--a",), metavar="A.json", help="JSON list of scores of method A")
    b: str = option(flags=("--b",), metavar="B.json", help="JSON list of scores of method B")
    alternative: Literal["two-sided", "less", "greater"] = option(
        "two-sided", help="alternative hypothesis about mean(A) - mean(B)")


def register(sub: Verbs) -> None:
    s = verb_group(sub, "stats", help="significance tests on score lists (Welch's t-test)",
                   description="Statistical tests on repeated-run scores.")
    add_verb(s, "welch", WelchOptions, run=_welch, human=_welch_text,
             help="Welch's unequal-variance t-test of two score lists",
             description="Welch's t-test of mean(A) - mean(B): t = (m_a - m_b) / sqrt(s_a^2/n_a + "
                         "s_b^2/n_b), Welch-Satterthwaite df, p from Student's t (equals "
                         "scipy.stats.ttest_ind(a, b, equal_var=False)). Each file holds a JSON list "
                         "of numbers. The test is undefined, and the command refuses it (exit 2, with "
                         "the reason), for a list of fewer than 2 scores or when neither list varies (a "
                         "standard deviation below 1e-12 of the data's scale, e.g. rounding noise of a "
                         "constant list, counts as none).")


def _welch(opts: WelchOptions) -> dict[str, Any]:
    from ..metrics.stats import welch_test_of_lists

    return welch_test_of_lists(read_json_file(opts.a, "--a"), read_json_file(opts.b, "--b"),
                               alternative=opts.alternative).to_dict()


def _welch_text(r: dict) -> str:
    def f(v: float | None, d: int = 4) -> str:
        return "undefined" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{d}g}"

    return (f"Welch's t-test ({r['alternative']}): t = {f(r['t'])}, df = {f(r['df'])}, p = {f(r['p'])}  "
            f"(mean A = {f(r['mean_a'])}, n = {r['n_a']}; mean B = {f(r['mean_b'])}, n = {r['n_b']})")
