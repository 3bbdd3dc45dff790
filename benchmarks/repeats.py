"""Repeat detection: steps spent before the run stops, and whether the stop names the call that
really repeated, with detection on vs only a step limit, on tasks where small models loop."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from benchmarks.suite import run_task
from benchmarks.tasks import Task
from shapeloop import Brain

OFF = 10**6  # a stuck limit no run reaches: only max_steps stops it


def measure(brain: Brain, tasks: Sequence[Task], *, max_steps: int = 12) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for task in tasks:
        for label, limit in (("detection", 2), ("step_limit_only", OFF)):
            record = run_task(brain, task, mode="constrained", stuck_limit=limit, max_steps=max_steps)
            record["setting"] = label
            rows.append(record)
    summary = {}
    for label in ("detection", "step_limit_only"):
        mine = [r for r in rows if r["setting"] == label]
        stuck = [r for r in mine if r["stop"] == "stuck"]
        summary[label] = {
            "runs": len(mine),
            "mean_steps": round(sum(r["steps"] for r in mine) / (len(mine) or 1), 2),
            "stops": dict(Counter(r["stop"] for r in mine)),
            "stuck_stops_naming_a_call_with_its_count": sum(
                bool(re.search(r"\) was called \d+ times", r["reason"])) for r in stuck
            ),
            "success": sum(r["success"] for r in mine),
        }
    return {"summary": summary, "runs": rows}
