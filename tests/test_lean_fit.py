"""The lean-and-fit read-off (benchmarks.lean_fit): which first steps a rule turns into answers, and
whether BFCL's verdict on each then goes up or down."""

from __future__ import annotations

from typing import Any

from benchmarks.lean_fit import read_off


def item(category: str, gap: float | None, fit: float | None, *, valid: bool, called: bool = True) -> dict[str, Any]:
    return {"id": f"{category}_{gap}_{fit}", "category": category, "called": called, "gap": gap, "fit": fit,
            "valid": valid}  # fmt: skip


ITEMS = [
    item("irrelevance", 0.3, -0.6, valid=False),  # a weak lean, no fit: the one to turn into an answer
    item("irrelevance", 0.3, 0.9, valid=False),  # a weak lean, but the function seems to fit
    item("irrelevance", 1.8, -0.6, valid=False),  # no fit, but a strong lean
    item("irrelevance", None, None, valid=True, called=False),  # answered already: right under every rule
    item("simple_python", 0.3, 0.9, valid=True),  # a right call with a weak lean and a good fit
    item("simple_python", 0.3, -0.6, valid=True),  # a right call that looks unfit: lost where both are low
    item("multiple", 0.4, -0.6, valid=False),  # a wrong call turned into an answer: still wrong, no change
]


def rule(gap: float, fit: float | None) -> dict[str, Any]:
    return next(r for r in read_off(ITEMS) if r["gap_below"] == gap and r["fit_below"] == fit)


def test_the_lean_alone_turns_every_weak_call_into_an_answer() -> None:
    alone = rule(0.5, None)
    assert (alone["gained"], alone["lost"]) == (2, 2)
    assert alone["gained_by"] == {"irrelevance": 2} and alone["lost_by"] == {"simple_python": 2}
    assert alone["worst_category_loss"] == 2


def test_both_numbers_low_keeps_the_calls_whose_function_fits() -> None:
    both = rule(0.5, 0.0)
    assert (both["gained"], both["lost"]) == (1, 1)  # the fitting call is kept, the unfit right one is lost
    strong = rule(2.0, 0.0)
    assert strong["gained"] == 2  # a higher lean bound reaches the strong-lean irrelevant call too
