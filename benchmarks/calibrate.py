"""Calibrate the embedded backend's fit floor and answer bias on the tune half.

    python -m benchmarks --split tune --variant no-bias --max-steps 1 --model NAME --out /tmp/cal
    python -m benchmarks.calibrate /tmp/cal/suite.json      # merged into measurements/calibration.json

At each constrained step the embedded backend measures ``gap``: its best logit for ``tool`` minus its
best for ``answer``, where the step's action is chosen (after the reason is written). With a bias ``b``
added to ``answer``, greedy decoding answers exactly when ``gap < b``, so the first step's outcome under
any bias can be read off one run's records. Of the biases that cost at most two points of the tune
half's tasks that need a tool, the chosen one abstains most (the smallest, where several abstain as
much); its figures go to measurements/calibration.json.

The fit floor is chosen first, the same way: at each first step the backend also measures the task's
fit to its best tool (``shapeloop.fit``), and a task below the floor answers. Of the floors that cost
at most two points, the chosen one abstains most; it sits halfway between the fits on either side
of it, and where several floors abstain as much, the lowest is taken. A second floor for the tasks
that share no word with any offered tool (``shapeloop.fit.shared_words``) is chosen next, the same
way, among the fits of those tasks and above the first floor. The bias is then chosen with both
floors in place, the three together held to the same two points.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

from benchmarks.common import MEASUREMENTS, write
from benchmarks.suite import ABSTAIN_KINDS, shares_words

BIASES = [round(0.5 * i, 1) for i in range(0, 25)]
MAX_COST = 0.02  # the bar: at most two points on the tasks that need a tool


def first_gap(record: dict[str, Any]) -> float | None:
    gaps = record.get("decision_gaps") or []
    return gaps[0] if gaps else None


def unfit(record: dict[str, Any], floor: float | None, unshared: float | None = None) -> bool:
    fit = record.get("fit")
    if floor is None or fit is None:
        return False
    return fit < floor or (unshared is not None and fit < unshared and not shares_words(record))


def outcomes(
    records: list[dict[str, Any]], bias: float, floor: float | None = None, unshared: float | None = None
) -> dict[str, Any]:
    """How the first steps of these records would go with ``bias``, ``floor`` and the floor for tasks
    that share no word with a tool, ``unshared``."""
    abstain = [r for r in records if r["kind"] in ABSTAIN_KINDS]
    needs_tool = [r for r in records if r["kind"] not in ABSTAIN_KINDS and r["kind"] != "escape"]

    def answers(r: dict[str, Any]) -> bool:
        gap = first_gap(r)
        return r["first_step"] == "answer" or unfit(r, floor, unshared) or (gap is not None and gap < bias)

    lost = [r["task"] for r in needs_tool if r["first_step"] == "tool" and answers(r)]
    return {
        "bias": bias,
        "floor": floor,
        "unshared_floor": unshared,
        "abstention": round(sum(answers(r) for r in abstain) / (len(abstain) or 1), 3),
        "tool_tasks_turned_to_answers": len(lost),
        "cost": round(len(lost) / (len(needs_tool) or 1), 3),
        "lost": lost,
    }


def floors(records: list[dict[str, Any]]) -> list[float | None]:
    """No floor, and a floor halfway between each two neighbouring fits."""
    fits = sorted({r["fit"] for r in records if r.get("fit") is not None})
    return [None, *(round((low + high) / 2, 3) for low, high in itertools.pairwise(fits))]


def calibrate(records: list[dict[str, Any]]) -> dict[str, Any]:
    def best(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
        # the most abstention within the cost, and of the settings that reach it the lowest
        kept = [row for row in rows if row["cost"] <= MAX_COST]
        return max(kept, key=lambda row: (row["abstention"], -(row[key] if row[key] is not None else -1e9)))

    floor_table = [outcomes(records, 0.0, floor) for floor in floors(records)]
    floor = best(floor_table, "floor")["floor"]
    unshared_floors = [] if floor is None else floors([r for r in records if not shares_words(r)])
    unshared_table = [outcomes(records, 0.0, floor, u) for u in unshared_floors if u is None or u > floor]
    unshared = best(unshared_table, "unshared_floor")["unshared_floor"] if unshared_table else None
    table = [outcomes(records, b, floor, unshared) for b in BIASES]
    chosen = best(table, "bias")
    return {"chosen": chosen["bias"], "floor": floor, "unshared_floor": unshared, "max_cost": MAX_COST,
            "table": table, "floor_table": [row for row in floor_table if row["cost"] <= 2 * MAX_COST],
            "unshared_floor_table": [row for row in unshared_table if row["cost"] <= 2 * MAX_COST],
            "records": len(records), "with_gap": sum(first_gap(r) is not None for r in records),
            "with_fit": sum(r.get("fit") is not None for r in records)}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calibrate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("runs", nargs="+", type=Path, help="suite.json files of tune-half runs")
    parser.add_argument("--out", type=Path, default=MEASUREMENTS, help="folder of calibration.json")
    args = parser.parse_args(argv)
    earlier = args.out / "calibration.json"
    kept = json.loads(earlier.read_text())["results"] if earlier.exists() else []
    results = []
    for path in args.runs:
        data = json.loads(path.read_text())
        for model in dict.fromkeys(r["model"] for r in data["records"]):
            mine = [r for r in data["records"] if r["model"] == model and r["mode"] == "constrained"
                    and r["split"] == "tune"]  # fmt: skip
            results.append({"model": model, "source": str(path), "variant": data["settings"].get("variant"),
                            **calibrate(mine)})  # fmt: skip
            found = results[-1]
            print(model, "floor", found["floor"], "unshared floor", found["unshared_floor"], "bias", found["chosen"],
                  [(row["bias"], row["abstention"], row["cost"]) for row in found["table"][:13]])  # fmt: skip
    # a model calibrated again replaces its earlier result; the others stay
    mine = {r["model"] for r in results}
    merged = [r for r in kept if r["model"] not in mine] + results
    write("calibration", {"benchmark": "calibration", "results": merged}, args.out)


if __name__ == "__main__":
    main()
