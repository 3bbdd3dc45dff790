"""Run the agent task suite on a brain, one task at a time, and reduce the records to figures."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.tasks import WORKSPACE, Task
from shapeloop import Brain, run_agent, workspace_tools
from shapeloop.events import ReplyReceived, ReplyUnreadable, ToolCalled, ToolReturned

WRONG_TOOL = ("ERROR: there is no tool", "ERROR: the step has action")


class Progress:
    """A one-line progress bar on stderr: done of total, elapsed, and an estimate of what is left."""

    def __init__(self, total: int, label: str = "") -> None:
        self.total, self.done, self.label = total, 0, label
        self.started = time.monotonic()

    def step(self, note: str = "") -> None:
        self.done += 1
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done)
        bar = "#" * int(24 * self.done / self.total)
        print(
            f"\r{self.label} [{bar:<24}] {self.done}/{self.total} {_clock(elapsed)} elapsed, ~{_clock(left)} left "
            f"{note[:30]:<30}",
            end="" if self.done < self.total else "\n",
            file=sys.stderr,
            flush=True,
        )


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def run_task(
    brain: Brain, task: Task, *, mode: str, schema: str = "per_tool", max_steps: int = 8, stuck_limit: int = 2
) -> dict[str, Any]:
    """Run one task in a fresh copy of the workspace; return its record."""
    with tempfile.TemporaryDirectory(prefix="shapeloop-bench-") as tmp:
        root = Path(shutil.copytree(WORKSPACE, Path(tmp) / "ws"))
        started = time.perf_counter()
        run = run_agent(
            brain, workspace_tools(root, write=task.write), task.prompt, max_steps=max_steps, mode=mode,  # type: ignore[arg-type]
            schema=schema, approve=lambda call: True, stuck_limit=stuck_limit,  # type: ignore[arg-type]
        )  # fmt: skip
        seconds = time.perf_counter() - started
        answer = run.answer or ""
        calls = [e for e in run.events if isinstance(e, ToolCalled)]
        results = [e for e in run.events if isinstance(e, ToolReturned)]
        replies = [e for e in run.events if isinstance(e, ReplyReceived)]
        checked = task.check(answer, root)
    if task.kind == "write":
        success = checked
    elif task.kind == "no_tool":
        success = run.ok and checked and not calls
    else:
        success = run.ok and checked
    return {
        "task": task.name, "kind": task.kind, "mode": mode, "schema": schema, "success": success,
        "stop": run.stop.value, "reason": run.reason, "answer": answer, "steps": run.steps,
        "tokens": run.usage.total_tokens if run.usage else None, "seconds": round(seconds, 3),
        "tool_calls": len(calls), "replies": len(replies),
        "unreadable": sum(isinstance(e, ReplyUnreadable) for e in run.events),
        "wrong_tool": sum(r.text.startswith(WRONG_TOOL) for r in results),
        "bad_args": sum(r.text.startswith("ERROR: invalid arguments") for r in results),
        "final_mode": run.mode.value,
        "prose_replies": [r.text for r in replies] if mode == "prose" else [],
    }  # fmt: skip


def run_suite(
    brain: Brain, tasks: Sequence[Task], *, mode: str, schema: str = "per_tool", progress: Progress | None = None,
    stuck_limit: int = 2, max_steps: int = 8,
) -> list[dict[str, Any]]:  # fmt: skip
    """Every task once, in order."""
    records = []
    for task in tasks:
        records.append(run_task(brain, task, mode=mode, schema=schema, stuck_limit=stuck_limit, max_steps=max_steps))
        if progress:
            progress.step(f"{task.name} {'ok' if records[-1]['success'] else 'x'}")
    return records


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Success rate, means and how runs ended, over a list of task records."""
    n = len(records) or 1
    replies = sum(r["replies"] for r in records) or 1
    tokens = [r["tokens"] for r in records if r["tokens"] is not None]
    no_tool = [r for r in records if r["kind"] == "no_tool"]
    return {
        "tasks": len(records),
        "success_rate": round(sum(r["success"] for r in records) / n, 3),
        "mean_steps": round(sum(r["steps"] for r in records) / n, 2),
        "mean_tokens": round(sum(tokens) / len(tokens), 1) if tokens else None,
        "mean_seconds": round(sum(r["seconds"] for r in records) / n, 2),
        "valid_step_rate": round(1 - sum(r["unreadable"] for r in records) / replies, 3),
        "wrong_tool_rate": round(sum(r["wrong_tool"] for r in records) / replies, 3),
        "bad_argument_rate": round(sum(r["bad_args"] for r in records) / replies, 3),
        "no_tool_tasks_that_called_a_tool": sum(r["tool_calls"] > 0 for r in no_tool),
        "stops": dict(Counter(r["stop"] for r in records)),
        "success_by_kind": {
            kind: round(sum(r["success"] for r in records if r["kind"] == kind) / count, 3)
            for kind, count in Counter(r["kind"] for r in records).items()
        },
    }


BrainFactory = Callable[[str], Brain]
