"""Calibrate the embedded backend's answer bias on the tune half.

    python -m benchmarks --split tune --variant no-bias --max-steps 1 --model NAME --out /tmp/cal
    python -m benchmarks.calibrate /tmp/cal/suite.json      # merged into measurements/calibration.json

At each constrained step the embedded backend measures ``gap``: its best logit for ``tool`` minus its
best for ``answer``, where the step's action is chosen (after the reason is written). With a bias ``b``
added to ``answer``, greedy decoding answers exactly when ``gap < b``, so the first step's outcome under
any bias can be read off one run's records. Of the biases that cost at most two points of the tune
half's tasks that need a tool, the chosen one abstains most (the smallest, where several abstain as
much); its figures go to measurements/calibration.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.common import MEASUREMENTS, write
from benchmarks.suite import ABSTAIN_KINDS

BIASES = [round(0.5 * i, 1) for i in range(0, 25)]
MAX_COST = 0.02  # the bar: at most two points on the tasks that need a tool


def first_gap(record: dict[str, Any]) -> float | None:
    gaps = record.get("decision_gaps") or []
    return gaps[0] if gaps else None


def outcomes(records: list[dict[str, Any]], bias: float) -> dict[str, Any]:
    """How the first steps of these records would go with ``bias``."""
    abstain = [r for r in records if r["kind"] in ABSTAIN_KINDS]
    needs_tool = [r for r in records if r["kind"] not in ABSTAIN_KINDS and r["kind"] != "escape"]

    def answers(r: dict[str, Any]) -> bool:
        gap = first_gap(r)
        return r["first_step"] == "answer" or (gap is not None and gap < bias)

    lost = [r["task"] for r in needs_tool if r["first_step"] == "tool" and answers(r)]
    return {
        "bias": bias,
        "abstention": round(sum(answers(r) for r in abstain) / (len(abstain) or 1), 3),
        "tool_tasks_turned_to_answers": len(lost),
        "cost": round(len(lost) / (len(needs_tool) or 1), 3),
        "lost": lost,
    }


def calibrate(records: list[dict[str, Any]]) -> dict[str, Any]:
    table = [outcomes(records, b) for b in BIASES]
    # the most abstention within the cost, and of the biases that reach it the smallest
    chosen = max((row for row in table if row["cost"] <= MAX_COST), key=lambda row: (row["abstention"], -row["bias"]))
    return {"chosen": chosen["bias"], "max_cost": MAX_COST, "table": table,
            "records": len(records), "with_gap": sum(first_gap(r) is not None for r in records)}  # fmt: skip


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
            print(model, "bias", results[-1]["chosen"], [(row["bias"], row["abstention"], row["cost"])
                                                         for row in results[-1]["table"][:13]])  # fmt: skip
    # a model calibrated again replaces its earlier result; the others stay
    mine = {r["model"] for r in results}
    merged = [r for r in kept if r["model"] not in mine] + results
    write("calibration", {"benchmark": "calibration", "results": merged}, args.out)


if __name__ == "__main__":
    main()
