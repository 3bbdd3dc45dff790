"""Run the task suite on a brain, through the loop and as a raw baseline, and reduce records to figures.

Two families of tasks share one runner: workspace tasks (``benchmarks.tasks``: file tools over the
fixture workspace) and function-calling tasks (``benchmarks.fc_tasks``: each with its own tools). A
task's record says whether it succeeded end to end and, for function-calling tasks, whether the
first step was the right call (name and arguments against the allowed values) or, where no tool
fits, an answer.

What help the loop gives is a policies spec (``shapeloop.policies.resolve``: ``plain``, ``default``,
``default,fit-floor``, ``default,-fit-floor``), resolved afresh for every run and written in every
record with the policies that ran and how often each intervened: a variant of the loop is a preset
minus or plus a policy, never a patched module.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.fc_tasks import CallTask, first_call_ok
from benchmarks.tasks import WORKSPACE, Task
from shapeloop import AgentRun, Brain, RunSettings, Tool, run_agent, workspace_tools
from shapeloop.events import (
    AnswerGiven,
    AnswerRejected,
    CallRefused,
    Event,
    PolicyIntervened,
    ReplyReceived,
    ReplyUnreadable,
    ToolCalled,
    ToolReturned,
)
from shapeloop.policies import resolve as resolve_policies

AnyTask = Task | CallTask
CONTEXT = 4096  # the embedded backend's window for the suite
WRONG_TOOL = ("ERROR: there is no tool", "ERROR: the step has action")
ABSTAIN_KINDS = ("no_tool", "irrelevant")  # tasks where any tool call is a failure


class Progress:
    """A one-line progress bar on stderr: done of total, elapsed, and an estimate of what is left."""

    def __init__(self, total: int, label: str = "") -> None:
        self.total, self.done, self.label = max(total, 1), 0, label
        self.started = time.monotonic()

    def step(self, note: str = "") -> None:
        self.done += 1
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * max(self.total - self.done, 0)
        bar = "#" * min(24, int(24 * self.done / self.total))
        print(
            f"\r{self.label} [{bar:<24}] {self.done}/{self.total} {_clock(elapsed)} elapsed, ~{_clock(left)} left "
            f"{note[:30]:<30}",
            end="" if self.done < self.total else "\n",
            file=sys.stderr,
            flush=True,
        )


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def family(task: AnyTask) -> str:
    return "functions" if isinstance(task, CallTask) else "workspace"


def tools_for(task: AnyTask, root: Path) -> list[Tool]:
    return list(task.tools) if isinstance(task, CallTask) else workspace_tools(root, write=task.write)


@contextlib.contextmanager
def fresh_workspace() -> Iterator[Path]:
    """A copy of the fixture workspace that the task may change, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="shapeloop-bench-") as tmp:
        yield Path(shutil.copytree(WORKSPACE, Path(tmp) / "ws"))


def run_task(
    brain: Brain, task: AnyTask, *, mode: str, schema: str = "per_tool", max_steps: int = 8, stuck_limit: int = 2,
    policies: str = "default", batch: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """Run one task through the loop, with the policies ``policies`` names and the step shape ``batch``
    chooses (the calls step, or the five-field step), in a fresh copy of the workspace; return its record."""
    chosen = resolve_policies(policies)
    with fresh_workspace() as root:
        started = time.perf_counter()
        gaps: list[float | None] = []

        def note_gap(event: Event) -> None:
            # the embedded backend measures, at each step's choice, how far the model leans to a tool
            if isinstance(event, ReplyReceived):
                gaps.append(getattr(brain, "last_stats", {}).get("decision_gap"))

        tools = tools_for(task, root)
        settings = RunSettings(
            max_steps=max_steps, mode=mode, schema=schema, approve=lambda call: True,  # type: ignore[arg-type]
            stuck_limit=stuck_limit, on_event=note_gap, policies=chosen, batch=batch,
        )  # fmt: skip
        run = run_agent(brain, tools, task.prompt, settings=settings)
        seconds = time.perf_counter() - started
        checked = task.check(run.answer or "", root)
    scored = _score(task, run, checked)
    return {**describe(task), "mode": mode, "schema": schema, "step": "calls" if batch else "five-field",
            "policies": policies, **scored,
            "decision_gaps": gaps, "seconds": round(seconds, 3)}  # fmt: skip


def succeeded(kind: str, *, answered: bool, checked: bool, calls: int, raw: bool = False) -> bool:
    """Whether a run did its task: a write task by the file it left, a task that needs no tool by an
    answer its check accepts with no call made, any other by an answer its check accepts. The raw
    baseline, which sees no result, can only do a task that needs no tool."""
    if raw:
        return answered and checked and kind in ABSTAIN_KINDS
    if kind == "write":
        return checked
    return answered and checked and not (kind in ABSTAIN_KINDS and calls)


def describe(task: AnyTask) -> dict[str, Any]:
    return {"task": task.name, "kind": task.kind, "family": family(task)}


def _score(task: AnyTask, run: AgentRun, checked: bool) -> dict[str, Any]:
    calls = [e for e in run.events if isinstance(e, ToolCalled)]
    results = [e for e in run.events if isinstance(e, ToolReturned)]
    replies = [e for e in run.events if isinstance(e, ReplyReceived)]
    first_call = next((e.call for e in calls if e.step == 1), None)
    answered_first = any(isinstance(e, (AnswerGiven, AnswerRejected)) and e.step == 1 for e in run.events)
    success = succeeded(task.kind, answered=run.ok, checked=checked, calls=len(calls))
    first_ok, first_why = judge_first(task, first_call.tool if first_call else None,
                                 dict(first_call.args) if first_call else None, answered_first)  # fmt: skip
    return {
        "success": success, "first_ok": first_ok, "first_why": first_why,
        "first_step": "tool" if first_call else "answer" if answered_first else "none",
        "stop": run.stop.value, "reason": run.reason, "answer": run.answer or "", "steps": run.steps,
        "tokens": run.usage.total_tokens if run.usage else None,
        "prompt_tokens": replies[0].usage.prompt_tokens if replies and replies[0].usage else None,
        "tool_calls": len(calls), "calls": [str(e.call) for e in calls][:6], "replies": len(replies),
        "unreadable": sum(isinstance(e, ReplyUnreadable) for e in run.events),
        "wrong_tool": sum(r.text.startswith(WRONG_TOOL) for r in results),
        "bad_args": sum(r.text.startswith("ERROR: invalid arguments") for r in results),
        "path_hints": sum(r.text.startswith("ERROR:") and ("did you mean" in r.text or "workspace has:" in r.text)
                          for r in results),
        # what the run's policies did: which ran, how often each changed the run, the calls they refused
        "policies_ran": list(run.policies), "interventions": dict(run.interventions),
        "first_intervention": next((f"{e.policy}.{e.hook}: {e.change}" for e in run.events
                                    if isinstance(e, PolicyIntervened)), None),
        "refused_calls": sum(isinstance(e, CallRefused) for e in run.events),
        # the model's first proposed call, run or refused (first_ok judges the call that ran)
        "first_proposed": next((str(e.call) for e in run.events if isinstance(e, (ToolCalled, CallRefused))), None),
        "final_mode": run.mode.value,
        "prose_replies": [r.text for r in replies] if run.mode.value == "prose" else [],
    }  # fmt: skip


def judge_first(
    task: AnyTask, tool: str | None, args: dict[str, Any] | None, answered: bool
) -> tuple[bool | None, str]:
    """Whether the first step was right: the expected call for a function-calling task, an answer where
    no tool fits; None where the suite has no expectation for the first step."""
    if isinstance(task, CallTask):
        if tool is None and not answered:
            return False, "the first reply was no step"
        return first_call_ok(task, tool, args)
    if task.kind == "no_tool":
        return tool is None and answered, "" if tool is None else f"called {tool}"
    return None, ""


def run_suite(
    brain: Brain, tasks: Sequence[AnyTask], *, mode: str, schema: str = "per_tool", progress: Progress | None = None,
    stuck_limit: int = 2, max_steps: int = 8, policies: str = "default", batch: bool = True,
) -> list[dict[str, Any]]:  # fmt: skip
    """Every task once, in order."""
    records = []
    for task in tasks:
        records.append(run_task(brain, task, mode=mode, schema=schema, stuck_limit=stuck_limit, max_steps=max_steps,
                                policies=policies, batch=batch))  # fmt: skip
        if progress:
            progress.step(f"{task.name} {'ok' if records[-1]['success'] else 'x'}")
    return records


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Success rate, first-call and abstention rates, means and how runs ended, over task records."""
    n = len(records) or 1
    replies = sum(r.get("replies", 1) for r in records) or 1
    tokens = [r["tokens"] for r in records if r.get("tokens") is not None]
    prompts = [r["prompt_tokens"] for r in records if r.get("prompt_tokens") is not None]
    firsts = [r for r in records if r["first_ok"] is not None and r["kind"] not in ABSTAIN_KINDS]
    abstain = [r for r in records if r["kind"] in ABSTAIN_KINDS]
    return {
        "tasks": len(records),
        "success_rate": _rate(sum(r["success"] for r in records), n),
        "first_call_rate": _rate(sum(bool(r["first_ok"]) for r in firsts), len(firsts)),
        "first_call_tasks": len(firsts),
        "abstention_rate": _rate(sum(_abstained(r) for r in abstain), len(abstain)),
        "abstention_tasks": len(abstain),
        "mean_steps": round(sum(r.get("steps", 1) for r in records) / n, 2),
        "mean_tokens": round(sum(tokens) / len(tokens), 1) if tokens else None,
        "median_prompt_tokens": statistics.median(prompts) if prompts else None,
        "max_prompt_tokens": max(prompts) if prompts else None,
        "mean_seconds": round(sum(r["seconds"] for r in records) / n, 2),
        "median_seconds": round(statistics.median(r["seconds"] for r in records), 3) if records else None,
        "valid_step_rate": round(1 - sum(r.get("unreadable", 0) for r in records) / replies, 3),
        "wrong_tool_rate": round(sum(r.get("wrong_tool", 0) for r in records) / replies, 3),
        "bad_argument_rate": round(sum(r.get("bad_args", 0) for r in records) / replies, 3),
        "no_tool_tasks_that_called_a_tool": sum(r["tool_calls"] > 0 for r in abstain),
        # abstention tasks finished after a policy refused a call (never run)
        "no_tool_tasks_answered_after_a_refused_call": sum(
            bool(r["success"]) and r.get("refused_calls", 0) > 0 for r in abstain
        ),
        "calls_refused": sum(r.get("refused_calls", 0) for r in records),
        "interventions": dict(sum((Counter(r.get("interventions") or {}) for r in records), Counter())),
        "stops": dict(Counter(r["stop"] for r in records)),
        "success_by_kind": _by_kind(records, "success"),
        "first_call_by_kind": _by_kind([r for r in records if r["first_ok"] is not None], "first_ok"),
    }


def _abstained(record: dict[str, Any]) -> bool:
    return record["first_step"] == "answer" and not record["tool_calls"]


def _rate(hits: int, count: int) -> float | None:
    return round(hits / count, 3) if count else None


def _by_kind(records: Sequence[dict[str, Any]], key: str) -> dict[str, float]:
    return {
        kind: round(sum(bool(r[key]) for r in records if r["kind"] == kind) / count, 3)
        for kind, count in sorted(Counter(r["kind"] for r in records).items())
    }
