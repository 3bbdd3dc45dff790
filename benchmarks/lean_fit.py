"""Abstention by two of the model's own numbers at once, read off BFCL's tune first steps: the lean
to calling where the step chooses (``decision_gap``, which ``Abstain`` thresholds) and the fit of the
best offered function to the request (``task_fit``, which ``FitFloor`` thresholds).

    python -m benchmarks.lean_fit --model qwen2.5-coder-0.5b --category irrelevance --category multiple
    python -m benchmarks.lean_fit --model qwen2.5-coder-1.5b --suite measurements/suite-abstain/plain-1.5b.json

The plain loop's records give each first step's lean and BFCL's verdict; the fit is measured here,
as the policy measures it, only where it can change a verdict: a first step that called with a lean
below ``--max-gap`` (a step that answered, or called with a stronger lean, keeps its verdict under
every rule read off). A rule answers where the lean is below ``g`` and the fit below ``f``; the file
``measurements/lean_fit.json`` keeps every item's numbers and, per model, each (g, f)'s items gained
(an irrelevance call turned into an answer) and lost (a right call turned into an answer), by
category, beside the lean alone (``f`` = none). It reads numbers, not words: any language.

With ``--suite RECORDS`` (a suite run of the plain loop, ``python -m benchmarks --split tune
--policies plain``), the same on the project's suite: a first step turned into an answer makes a task
where no tool fits (``no_tool``, ``irrelevant``) a success and a task that needs a tool a failure
(its first step read nothing), so a rule's tasks gained and lost are read off that run's records.

With ``--top``, the cheaper fit instead (``task_fit(top=k)``: the forward term only for the k tools
the reverse term ranks first), read off BFCL's tune first steps that offer more than one function:
each tool's two terms are kept, and for each k the items whose answer it changes against the full
fit at the model's calibrated floor (a smaller fit can only turn more calls into answers), written
to ``lean_fit_top.json``.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks import bfcl_data
from benchmarks.bfcl_report import RECORDS, latest, read_records, slug
from benchmarks.calibrate import bfcl_fit_of, bfcl_terms_of, fit_of
from benchmarks.common import MEASUREMENTS, make_brain, write
from benchmarks.suite import Progress
from shapeloop import Brain
from shapeloop.models import calibration, lookup

ABSTAIN = frozenset({"irrelevance", "live_irrelevance"})  # BFCL's categories where no function fits
SUITE_ABSTAIN = frozenset({"no_tool", "irrelevant"})  # the suite's kinds where any call fails (read as irrelevance)
GAPS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
FITS = (None, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0)
TOPS = (1, 2, 3, 4)


def first_steps(model: str, categories: Sequence[str] | None) -> list[tuple[bfcl_data.Item, dict[str, Any]]]:
    """The tune items (of ``categories``, or all single-turn ones) with the plain loop's record."""
    plain = {r["id"]: r for r in latest(read_records(RECORDS / slug(model))) if r["column"] == "plain"}
    wanted = {c: set(ids) for c, ids in bfcl_data.sample("tune").items()
              if c != "multi_turn_base" and (not categories or c in categories)}  # fmt: skip
    items = [i for c, ids in wanted.items() for i in bfcl_data.items(c) if i.index in ids and i.id in plain]
    return [(i, plain[i.id]) for i in items]


def fits_of(model: str, threads: int | None, label: str, todo: Mapping[str, Callable[[Brain], Any]]) -> dict[str, Any]:
    """Each named measure, taken on one embedded model loaded for them all."""
    brain = make_brain("llamacpp", model, None, 8192, threads)
    measured: dict[str, Any] = {}
    progress = Progress(len(todo), label=f"{label} {model}")
    try:
        for name, fit in todo.items():
            measured[name] = fit(brain)
            progress.step(name)
    finally:
        brain.close()
    return measured


def measure(model: str, categories: Sequence[str] | None, max_gap: float, threads: int | None) -> list[dict[str, Any]]:
    """Each item's lean, verdict and (where it can matter) fit."""
    chosen = first_steps(model, categories)
    lean = {i.id: r.get("decision_gap") if r["stop"] == "called" else None for i, r in chosen}
    todo = {i.id: functools.partial(bfcl_fit_of, item=i) for i, _ in chosen if _below(lean[i.id], max_gap)}
    measured = fits_of(model, threads, "fits", todo)
    return [{"id": i.id, "category": i.category, "called": r["stop"] == "called", "gap": lean[i.id],
             "fit": measured.get(i.id), "valid": bool(r["valid"])} for i, r in chosen]  # fmt: skip


def measure_suite(model: str, records: Path, max_gap: float, threads: int | None) -> list[dict[str, Any]]:
    """Each suite task of a plain-loop run: its first step's lean, its success, and (where it can
    matter) its fit; ``category`` is the task's kind, ``valid`` its success."""
    from benchmarks.__main__ import choose

    run = {r["task"]: r for r in json.loads(records.read_text())["records"] if r["model"] == model}
    tasks = {t.name: t for t in choose(False, "tune") if t.name in run}
    lean = {name: (run[name]["decision_gaps"] or [None])[0] if run[name]["first_step"] == "tool" else None
            for name in tasks}  # fmt: skip
    todo = {name: functools.partial(fit_of, task=tasks[name]) for name in tasks if _below(lean[name], max_gap)}
    measured = fits_of(model, threads, "suite fits", todo)
    kinds = {name: "irrelevance" if run[name]["kind"] in SUITE_ABSTAIN else run[name]["kind"] for name in tasks}
    return [{"id": name, "category": kinds[name], "called": lean[name] is not None, "gap": lean[name],
             "fit": measured.get(name), "valid": bool(run[name]["success"])} for name in tasks]  # fmt: skip


def measure_terms(model: str, max_gap: float, threads: int | None) -> list[dict[str, Any]]:
    """Each tool's reverse and forward terms, on the tune first steps offering several functions
    that called with a lean below ``max_gap`` (where the policy asks the fit)."""
    chosen = [(i, r) for i, r in first_steps(model, None)
              if len(i.functions) > 1 and r["stop"] == "called" and _below(r.get("decision_gap"), max_gap)]  # fmt: skip
    measured = fits_of(model, threads, "terms", {i.id: functools.partial(bfcl_terms_of, item=i) for i, _ in chosen})
    return [{"id": i.id, "category": i.category, "gap": r["decision_gap"], "valid": bool(r["valid"]),
             "terms": measured[i.id]} for i, r in chosen]  # fmt: skip


def read_off_tops(items: Sequence[dict[str, Any]], floor: float) -> list[dict[str, Any]]:
    """For each k, the items whose first step answers with the top-k fit and not with the full one."""
    rows = []
    for top in TOPS:
        changed: dict[str, list[str]] = {"gained": [], "lost": [], "neither": []}
        for it in items:
            terms = it["terms"]
            full = max(r + f for r, f in terms)
            ranked = sorted(terms, key=lambda t: t[0], reverse=True)[:top]
            if max(r + f for r, f in ranked) < floor <= full:
                kind = "gained" if it["category"] in ABSTAIN else "lost" if it["valid"] else "neither"
                changed[kind].append(it["id"])
        asked = sum(min(top, len(it["terms"])) for it in items)
        rows.append({"top": top, "forward_passes": asked, "of": sum(len(it["terms"]) for it in items), **changed})
    return rows


def _below(value: float | None, bound: float) -> bool:
    return value is not None and value < bound


def read_off(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each rule's items gained and lost, by category."""
    rows = []
    for gap, fit in itertools.product(GAPS, FITS):
        gained: Counter[str] = Counter()
        lost: Counter[str] = Counter()
        for it in items:
            answers = it["called"] and _below(it["gap"], gap) and (fit is None or _below(it["fit"], fit))
            if answers and it["category"] in ABSTAIN and not it["valid"]:
                gained[it["category"]] += 1
            elif answers and it["category"] not in ABSTAIN and it["valid"]:
                lost[it["category"]] += 1
        rows.append({"gap_below": gap, "fit_below": fit, "gained": sum(gained.values()), "lost": sum(lost.values()),
                     "worst_category_loss": max(lost.values(), default=0), "gained_by": dict(gained),
                     "lost_by": dict(lost)})  # fmt: skip
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lean_fit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--model", action="append", required=True)
    parser.add_argument("--category", action="append", help="a tune category (repeatable; default all single-turn)")
    parser.add_argument("--suite", type=Path, metavar="RECORDS", help="the suite instead: a plain-loop run's file")
    parser.add_argument("--top", action="store_true", help="read off the cheaper top-k fit (lean_fit_top.json)")
    parser.add_argument("--max-gap", type=float, default=max(GAPS), help="fits are measured below this lean")
    parser.add_argument("--threads", type=int, help="the embedded backend's CPU threads (default: every core)")
    parser.add_argument("--out", type=Path, default=MEASUREMENTS, help="folder for lean_fit.json")
    args = parser.parse_args(argv)
    bfcl_data.load()
    results = []
    if args.top:
        tops = []
        for model in args.model:
            items = measure_terms(model, args.max_gap, args.threads)
            floor = dict(calibration(lookup(model)))["fit_floor"]
            tops.append({"model": model, "max_gap": args.max_gap, "fit_floor": floor, "items": items,
                         "tops": read_off_tops(items, floor)})  # fmt: skip
        write("lean_fit_top", {"benchmark": "lean_fit_top", "results": tops}, args.out)
        return
    for model in args.model:
        if args.suite:
            items = measure_suite(model, args.suite, args.max_gap, args.threads)
            source = f"the suite's tune half, the plain loop's run {args.suite}"
        else:
            items = measure(model, args.category, args.max_gap, args.threads)
            source = f"BFCL's tune first steps: {', '.join(args.category or ['all single-turn'])}"
        results.append({"model": model, "source": source, "max_gap": args.max_gap, "items": items,
                        "rules": read_off(items)})  # fmt: skip
    write("lean_fit", {"benchmark": "lean_fit", "results": results}, args.out)


if __name__ == "__main__":
    main()
