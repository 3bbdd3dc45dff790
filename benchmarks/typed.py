"""Typed answers and batched calls, measured on real small models.

Two task sets over the fixture workspace in ``benchmarks/typed_workspace``:

- **typed**: extract a typed record (fields, nested lists, enums, dates) from one file, with
  ``output_type=`` a pydantic model; constrained vs prose mode. A run succeeds when the validated
  object equals the record in the file.
- **batch**: questions that need two to four independent reads, named in the question; one call a
  step vs ``batch=True``, constrained. A run succeeds when the answer names what the files say.

    python -m benchmarks.typed --model qwen2.5-coder-0.5b     # one model (a few minutes)
    python -m benchmarks.typed --model qwen2.5-coder-1.5b --only typed
    python -m benchmarks.typed --model qwen2.5-coder-1.5b --config prose

Each invocation merges its records into ``measurements/typed.json`` after every run (a model and
configuration run again replaces its earlier records), so the models can be measured in slices.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from benchmarks.common import MEASUREMENTS, model_info, write
from shapeloop import AgentRun, Brain, run_agent, workspace_tools
from shapeloop.events import AnswerRejected, ToolCalled

MODELS = ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "smollm2-135m")
WORKSPACE = Path(__file__).resolve().parent / "typed_workspace"
SETTINGS = {"n_ctx": 4096, "max_tokens": 384, "temperature": 0.0, "typed_max_steps": 5, "batch_max_steps": 8}


class OrderLine(BaseModel):
    sku: str
    quantity: int


class Order(BaseModel):
    number: int
    customer: str
    placed: datetime.date
    status: Literal["pending", "shipped", "delivered"]
    items: list[OrderLine]


class Contact(BaseModel):
    name: str
    email: str
    role: Literal["engineer", "designer", "manager"]
    started: datetime.date


class Meeting(BaseModel):
    date: datetime.date
    room: str
    attendees: list[str]


class InvoiceLine(BaseModel):
    description: str
    quantity: int
    unit_price: int


class Invoice(BaseModel):
    number: int
    issued: datetime.date
    currency: Literal["EUR", "USD", "NOK"]
    total: int
    lines: list[InvoiceLine]


class ServerSettings(BaseModel):
    host: str
    port: int
    tls: bool
    mode: Literal["primary", "replica"]


class Book(BaseModel):
    title: str
    author: str
    year: int


class Shelf(BaseModel):
    books: list[Book]


@dataclass(frozen=True)
class Extract:
    """A typed-record task: the file, the type, and the record the file holds."""

    name: str
    prompt: str
    output_type: type[BaseModel]
    expected: dict[str, Any]

    def check(self, output: Any) -> bool:
        return isinstance(output, BaseModel) and canonical(output.model_dump(mode="json")) == canonical(self.expected)


@dataclass(frozen=True)
class Question:
    """A question that needs several independent reads; ``check`` reads the answer text."""

    name: str
    prompt: str
    reads: int
    check: Callable[[str], bool]


def canonical(value: Any) -> Any:
    """Strings folded and trimmed, lists in a fixed order: the comparison a person would make."""
    if isinstance(value, str):
        return " ".join(value.casefold().split())
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def names(right: Sequence[str], wrong: Sequence[str] = ()) -> Callable[[str], bool]:
    """The answer names every word in ``right`` and none in ``wrong``."""

    def check(answer: str) -> bool:
        text = answer.casefold()
        return all(w in text for w in right) and not any(w in text for w in wrong)

    return check


def number(value: int) -> Callable[[str], bool]:
    """The answer holds ``value`` as a whole number: ``42.`` ending a sentence counts, ``142`` and ``4.2`` do not."""
    pattern = re.compile(rf"(?<![\d.]){value}(?!\d|\.\d)")
    return lambda answer: pattern.search(answer.replace(",", "")) is not None


EXTRACTS = (
    Extract("order", "Read orders/order_1042.txt and extract the order.", Order, {
        "number": 1042, "customer": "Maria Jensen", "placed": "2026-03-14", "status": "shipped",
        "items": [{"sku": "MUG-BLU", "quantity": 2}, {"sku": "TEA-001", "quantity": 1}]}),
    Extract("contact", "Read people/ana.txt and extract the contact.", Contact, {
        "name": "Ana Lima", "email": "ana.lima@example.org", "role": "engineer", "started": "2024-09-02"}),
    Extract("meeting", "Read events/review.txt and extract the meeting.", Meeting, {
        "date": "2026-05-20", "room": "B2", "attendees": ["Ana Lima", "Tom Berg", "Eva Holm"]}),
    Extract("invoice", "Read invoices/inv_77.txt and extract the invoice.", Invoice, {
        "number": 77, "issued": "2026-02-01", "currency": "EUR", "total": 440,
        "lines": [{"description": "consulting", "quantity": 3, "unit_price": 120},
                  {"description": "travel", "quantity": 1, "unit_price": 80}]}),
    Extract("settings", "Read config/server.txt and extract the server settings.", ServerSettings, {
        "host": "db.internal", "port": 5432, "tls": True, "mode": "replica"}),
    Extract("shelf", "Read books/shelf.txt and extract the books on the shelf.", Shelf, {
        "books": [{"title": "The Hobbit", "author": "J. R. R. Tolkien", "year": 1937},
                  {"title": "Dune", "author": "Frank Herbert", "year": 1965},
                  {"title": "Emma", "author": "Jane Austen", "year": 1815}]}),
)  # fmt: skip

QUESTIONS = (
    Question("sum-sensors", "What is the sum of the readings in sensors/north.txt and sensors/south.txt?", 2,
             number(42)),
    Question("paints", "Which paint colours are in paint/a.txt and paint/b.txt?", 2, names(["ochre", "cobalt"])),
    Question("biggest-town", "Which town has the most inhabitants? The towns are in towns/aldby.txt, "
             "towns/brenna.txt and towns/corvik.txt.", 3, names(["brenna"], ["aldby", "corvik"])),
    Question("three-days", "List the task for each day in days/mon.txt, days/tue.txt and days/wed.txt.", 3,
             names(["fern", "permit", "plumber"])),
    Question("fewest-boxes", "Which warehouse holds the fewest boxes? They are described in stock/w1.txt, "
             "stock/w2.txt, stock/w3.txt and stock/w4.txt.", 4, names(["linden"], ["ostend", "marsh", "kettle"])),
)  # fmt: skip


def calls_per_step(run: AgentRun) -> list[int]:
    """How many calls each step that called a tool made."""
    counts: dict[int, int] = {}
    for event in run.events:
        if isinstance(event, ToolCalled):
            counts[event.step] = counts.get(event.step, 0) + 1
    return list(counts.values())


def _record(run: AgentRun, seconds: float) -> dict[str, Any]:
    per_step = calls_per_step(run)
    return {
        "stop": run.stop.value, "reason": run.reason, "answer": run.answer, "steps": run.steps,
        "tokens": run.usage.total_tokens if run.usage else None, "seconds": round(seconds, 3),
        "tool_calls": sum(per_step), "batch_steps": sum(n > 1 for n in per_step),
        "rejected_answers": sum(isinstance(e, AnswerRejected) for e in run.events), "final_mode": run.mode.value,
    }  # fmt: skip


def run_extract(brain: Brain, task: Extract, *, mode: str) -> dict[str, Any]:
    started = time.perf_counter()
    run = run_agent(brain, workspace_tools(WORKSPACE), task.prompt, output_type=task.output_type, mode=mode,  # type: ignore[arg-type]
                    max_steps=SETTINGS["typed_max_steps"], stuck_limit=2)  # fmt: skip
    record = _record(run, time.perf_counter() - started)
    return {"set": "typed", "task": task.name, "config": mode, "success": run.ok and task.check(run.output),
            "valid": run.ok, **record}  # fmt: skip


def run_question(brain: Brain, task: Question, *, batch: bool) -> dict[str, Any]:
    started = time.perf_counter()
    run = run_agent(brain, workspace_tools(WORKSPACE), task.prompt, batch=batch,
                    max_steps=SETTINGS["batch_max_steps"], stuck_limit=2)  # fmt: skip
    record = _record(run, time.perf_counter() - started)
    return {"set": "batch", "task": task.name, "config": "batch" if batch else "one call a step", "reads": task.reads,
            "success": run.ok and task.check(run.answer or ""), "valid": run.ok, **record}  # fmt: skip


def summarise(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model, set and configuration: success, steps, calls, tokens, seconds."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["model"], r["set"], r["config"]), []).append(r)
    out = []
    for (model, task_set, config), rs in groups.items():
        n = len(rs)
        tokens = [r["tokens"] for r in rs if r["tokens"] is not None]
        out.append({
            "model": model, "set": task_set, "config": config, "tasks": n,
            "success_rate": round(sum(r["success"] for r in rs) / n, 3),
            "valid_rate": round(sum(r["valid"] for r in rs) / n, 3),
            "mean_steps": round(sum(r["steps"] for r in rs) / n, 2),
            "mean_tool_calls": round(sum(r["tool_calls"] for r in rs) / n, 2),
            "batch_steps": sum(r["batch_steps"] for r in rs),
            "rejected_answers": sum(r["rejected_answers"] for r in rs),
            "mean_tokens": round(sum(tokens) / len(tokens), 1) if tokens else None,
            "mean_seconds": round(sum(r["seconds"] for r in rs) / n, 2),
        })  # fmt: skip
    return out


CONFIGS = {"constrained": "typed", "prose": "typed", "one call a step": "batch", "batch": "batch"}


def plan(configs: Sequence[str], *, quick: bool = False) -> list[tuple[str, Any, dict[str, Any]]]:
    """The runs for ``configs``: (label, runner, its options), in order."""
    extracts = EXTRACTS[:2] if quick else EXTRACTS
    questions = QUESTIONS[:2] if quick else QUESTIONS
    jobs: list[tuple[str, Any, dict[str, Any]]] = []
    for config in configs:
        if CONFIGS[config] == "typed":
            jobs += [(f"{t.name} {config}", run_extract, {"task": t, "mode": config}) for t in extracts]
        else:
            jobs += [(f"{t.name} {config}", run_question, {"task": t, "batch": config == "batch"}) for t in questions]
    return jobs


def measure(brain: Brain, model: str, configs: Sequence[str], *, quick: bool = False) -> Iterator[dict[str, Any]]:
    """Each task of ``configs`` on one brain, its record as soon as it is done."""
    jobs = plan(configs, quick=quick)
    today = datetime.date.today().isoformat()
    for done, (label, job, options) in enumerate(jobs, start=1):
        record = {"model": model, "date": today, **job(brain, **options)}
        mark = "ok" if record["success"] else "x"
        print(f"typed {model}: {done}/{len(jobs)} {label}: {mark} ({record['seconds']:.0f} s)", file=sys.stderr)
        yield record


def merge(old: dict[str, Any], records: list[dict[str, Any]], models: dict[str, Any]) -> dict[str, Any]:
    """The earlier results ``old`` with every (model, set, config) of ``records`` replaced by ``records``."""
    fresh = {(r["model"], r["set"], r["config"]) for r in records}
    kept = [r for r in old.get("records", []) if (r["model"], r["set"], r["config"]) not in fresh]
    merged = kept + records
    return {
        "settings": SETTINGS, "backend": "llamacpp", "models": {**old.get("models", {}), **models},
        "summaries": summarise(merged), "records": merged,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.typed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--model", action="append", choices=MODELS, help="model (repeatable); default: all three")
    parser.add_argument("--only", choices=["typed", "batch"], help="one task set (default: both)")
    parser.add_argument("--config", action="append", choices=list(CONFIGS), help="one configuration (repeatable)")
    parser.add_argument("--quick", action="store_true", help="two tasks of each set")
    parser.add_argument("--out", type=Path, default=MEASUREMENTS, help="folder for typed.json (default measurements/)")
    args = parser.parse_args(argv)
    from shapeloop.backends.llamacpp import LlamaCppBrain

    configs = args.config or [c for c, task_set in CONFIGS.items() if args.only in (None, task_set)]
    path = args.out / "typed.json"
    for model in args.model or MODELS:
        brain = LlamaCppBrain(model, n_ctx=SETTINGS["n_ctx"], max_tokens=SETTINGS["max_tokens"], pull=True)
        old = json.loads(path.read_text()) if path.is_file() else {}
        records: list[dict[str, Any]] = []
        for record in measure(brain, model, configs, quick=args.quick):
            records.append(record)  # written after every run: a slice cut short keeps what it measured
            write("typed", merge(old, records, {model: model_info(model)}), folder=args.out)
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
