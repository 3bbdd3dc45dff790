"""Decision margins read off BFCL's records: what the loop's first step would score had the step
called only where the model leans to calling by more than a margin, and gone on to a second call
only where it leans to one by more than another.

    python -m benchmarks.margins --model qwen2.5-coder-0.5b --model qwen2.5-coder-1.5b [--sample screen]

writes ``measurements/margins.json``: for each model, every pair of margins tried, gained and lost per
category, the call margin with the best net gain, and the best within the policies' rule for a
model's own preset (``within_rule``). It reads the lean alone: ``Abstain`` in that form lost on the
project's suite and was replaced by the lean and the fit together (:mod:`benchmarks.lean_fit`, whose
lean of 2.0 is the catalogue's ``call_margin`` now).

The embedded backend records, for a batch step, ``decision_gap`` (at the step's first key: the best
logit of opening a call minus the best of opening an answer) and ``more_gap`` (after the first call:
the best logit of a comma, another call, minus the best of closing the list). With greedy decoding a
call margin ``c`` turns exactly the first steps whose gap is below ``c`` into answers, and a more
margin ``m`` cuts exactly the steps whose ``more_gap`` is below ``m`` to their first call, so both are
scored here without a model: an answer by BFCL's relevance rule, the first call alone by BFCL's own
checker. Read off a column whose first step is one raw call's (``plain``), the result is what the
margins would change on the tune sample, per category, gained and lost.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import bfcl_data
from benchmarks.bfcl_report import RECORDS, latest, read_records
from benchmarks.bfcl_score import Call, score_single
from benchmarks.common import write
from benchmarks.policies import MAX_CATEGORY_LOSS, MIN_NET

CALL_MARGINS = (None, 0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0)
MORE_MARGINS = (None, 0.0, 1.0, 2.0, 3.0, 4.0, 6.0)  # a margin on the lean to a second call: measured, lost


def first_steps(model: str, column: str, sample: str, folder: Path = RECORDS) -> list[dict[str, Any]]:
    """The latest single-turn records of ``column`` for ``model`` on the sample, with their gaps."""
    chosen = {c: set(v) for c, v in bfcl_data.sample(sample).items() if c != "multi_turn_base"}
    records = [r for r in latest(read_records(folder)) if r["model"] == model and r["column"] == column]
    return [r for r in records if r["index"] in chosen.get(r["category"], set()) and "decision_gap" in r]


def _calls(record: dict[str, Any]) -> list[Call]:
    return [(name, args) for call in record.get("checker_input") or [] for name, args in call.items()]


def scored(record: dict[str, Any], call_margin: float | None, more_margin: float | None) -> bool:
    """Whether the record's first step would be right under the two margins."""
    gap, more, calls = record.get("decision_gap"), record.get("more_gap"), _calls(record)
    item = bfcl_data.items(record["category"])[record["index"]]
    if calls and call_margin is not None and gap is not None and gap <= call_margin:
        return bool(score_single(item, [], answer="(answered)", proposed=0)["valid"])
    if len(calls) > 1 and more_margin is not None and more is not None and more <= more_margin:
        return bool(score_single(item, calls[:1], answer=None, proposed=1)["valid"])
    return bool(record["valid"])


def grid(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gained and lost items per category for each pair of margins, against the records as they are."""
    out = []
    for call_margin in CALL_MARGINS:
        for more_margin in MORE_MARGINS:
            by_category: dict[str, dict[str, int]] = {}
            for record in records:
                now, then = bool(record["valid"]), scored(record, call_margin, more_margin)
                tally = by_category.setdefault(record["category"], {"gained": 0, "lost": 0, "items": 0})
                tally["items"] += 1
                tally["gained"] += int(then and not now)
                tally["lost"] += int(now and not then)
            gained = sum(t["gained"] for t in by_category.values())
            lost = sum(t["lost"] for t in by_category.values())
            out.append({"call_margin": call_margin, "more_margin": more_margin, "gained": gained, "lost": lost,
                        "worst_category_loss": max((t["lost"] - t["gained"] for t in by_category.values()),
                                                   default=0),
                        "by_category": by_category})  # fmt: skip
    return out


def best(rows: Sequence[dict[str, Any]], *, within_rule: bool = False) -> dict[str, Any] | None:
    """The call margin alone (no more margin) with the best net gain; the smallest margin on a tie.
    ``within_rule``: only among the margins the policies' rule lets into a preset (at least
    :data:`MIN_NET` more gained than lost, no category down by more than :data:`MAX_CATEGORY_LOSS`);
    None where none is."""
    alone = [r for r in rows if r["more_margin"] is None and r["call_margin"] is not None]
    if within_rule:
        alone = [r for r in alone
                 if r["gained"] - r["lost"] >= MIN_NET and r["worst_category_loss"] <= MAX_CATEGORY_LOSS]
    return max(alone, key=lambda r: (r["gained"] - r["lost"], -r["call_margin"]), default=None)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.margins", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--model", action="append", required=True)
    parser.add_argument("--column", default="plain")
    parser.add_argument("--sample", default="tune", choices=["tune", "screen"])
    parser.add_argument("--out", type=Path, help="folder for margins.json (default measurements/)")
    args = parser.parse_args(argv)
    results = []
    for model in args.model:
        records = first_steps(model, args.column, args.sample)
        rows = grid(records)
        chosen, ruled = best(rows), best(rows, within_rule=True)
        results.append({"model": model, "column": args.column, "sample": args.sample, "first_steps": len(records),
                        "best_call_margin": chosen, "within_rule": ruled, "grid": rows})  # fmt: skip
        said = "none" if ruled is None else f"{ruled['call_margin']}: +{ruled['gained']} -{ruled['lost']}"
        print(f"{model}: {len(records)} first steps; best call margin {chosen and chosen['call_margin']}: "
              f"+{chosen and chosen['gained']} -{chosen and chosen['lost']}; best within the rule {said}", flush=True)
    path = write("margins", {"benchmark": "margins", "results": results}, *([args.out] if args.out else []))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
