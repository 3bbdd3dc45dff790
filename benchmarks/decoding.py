"""Decoding figures for the embedded backend, side by side in one process on the same prompts:

- tokens per second, free text vs constrained to the step schema;
- prompt tokens evaluated per step, with the prompt cache reused vs not.

Run alone (nothing else decoding): ``python -m benchmarks.decoding --model qwen2.5-coder-0.5b``.
Writes ``measurements/decoding.json``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import median, model_info, write
from shapeloop import Message, run_agent, step_schema, workspace_tools
from shapeloop.backends.llamacpp import LlamaCppBrain
from shapeloop.events import ReplyReceived
from shapeloop.prompts import system_prompt

DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo"
TASKS = [
    "Read colour.txt and tell me the colour it names.",
    "List the files in the workspace.",
    "Which file in the workspace mentions a colour?",
]


def speed(brain: LlamaCppBrain, root: Path, repeats: int) -> dict[str, Any]:
    """Completion tokens per second, free vs constrained, prompt already in the cache."""
    tools = workspace_tools(root)
    schema = step_schema(tools)
    rows: list[dict[str, Any]] = []
    for task in TASKS:
        messages = [
            Message(role="system", content=system_prompt(tools, prose=True)),
            Message(role="user", content=task),
        ]
        brain.count_tokens(messages)
        for _ in range(repeats):
            for mode, step_json in (("free", None), ("constrained", schema)):
                brain.ask(messages, step_json)  # warm: the prompt is evaluated once, then reused
                started = time.perf_counter()
                reply = brain.ask(messages, step_json)
                seconds = time.perf_counter() - started
                tokens = reply.usage.completion_tokens if reply.usage else 0
                rows.append({"task": task, "mode": mode, "tokens": tokens, "seconds": round(seconds, 4),
                             "tokens_per_second": round(tokens / seconds, 2) if seconds else 0.0,
                             "finish": reply.finish.value})  # fmt: skip
    summary = {
        mode: {
            "median_tokens_per_second": median([r["tokens_per_second"] for r in rows if r["mode"] == mode]),
            "median_tokens": median([r["tokens"] for r in rows if r["mode"] == mode]),
            "median_seconds": median([r["seconds"] for r in rows if r["mode"] == mode]),
        }
        for mode in ("free", "constrained")
    }
    ratio = summary["constrained"]["median_tokens_per_second"] / (summary["free"]["median_tokens_per_second"] or 1)
    return {"summary": summary, "constrained_over_free_rate": round(ratio, 3), "runs": rows}


def cache(brain: LlamaCppBrain, root: Path) -> dict[str, Any]:
    """Prompt tokens evaluated per step on the same runs, with the cache reused and without."""
    out: dict[str, Any] = {}
    for reuse in (True, False):
        brain.reuse_cache = reuse
        steps: list[dict[str, int]] = []
        for task in TASKS:
            run = run_agent(brain, workspace_tools(root), task, max_steps=4)
            for event in run.events:
                if isinstance(event, ReplyReceived) and event.usage is not None:
                    usage = event.usage
                    steps.append(
                        {"step": event.step, "prompt_tokens": usage.prompt_tokens,
                         "evaluated": usage.evaluated_tokens, "reused": usage.cached_tokens}
                    )  # fmt: skip
        later = [s["evaluated"] for s in steps if s["step"] > 1]
        out["reused" if reuse else "not_reused"] = {
            "median_evaluated_per_step": median([s["evaluated"] for s in steps]),
            "median_evaluated_per_later_step": median([float(v) for v in later]),
            "steps": steps,
        }
    brain.reuse_cache = True
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", help="catalogue name (repeatable); default qwen2.5-coder-0.5b")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(shutil.copytree(DEMO, Path(tmp) / "demo"))
        for name in args.model or ["qwen2.5-coder-0.5b"]:
            brain = LlamaCppBrain(name, n_ctx=4096, max_tokens=256)
            started = time.perf_counter()
            entry = {"model": model_info(name), "backend": {"name": "llamacpp", "n_ctx": 4096, "max_tokens": 256,
                     "temperature": 0.0, "engine": "llama.cpp-grammar"},
                     "speed": speed(brain, root, args.repeats), "cache": cache(brain, root)}  # fmt: skip
            entry["seconds"] = round(time.perf_counter() - started, 1)
            results.append(entry)
            print(
                name,
                entry["speed"]["summary"],
                {k: v["median_evaluated_per_later_step"] for k, v in entry["cache"].items()},
            )
            del brain
    print(write("decoding", {"benchmark": "decoding", "tasks": TASKS, "results": results}))


if __name__ == "__main__":
    main()
