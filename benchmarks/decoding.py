"""Decoding figures for the embedded backend, side by side in one process on the same prompts:

- seconds per step, tokens per second and decode calls per step for free text, llama.cpp's grammar
  and the fast path (llguidance masks with forced tokens evaluated in one batch), and how often
  the fast path's step differs from the grammar's;
- prompt tokens evaluated per step, with the prompt cache reused vs not.

Run alone (nothing else decoding): ``python -m benchmarks.decoding --model qwen2.5-coder-0.5b``.
Writes ``measurements/decoding.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import median, model_info, write
from shapeloop import Message, Request, run_agent, step_schema, workspace_tools
from shapeloop.backends.llamacpp import LlamaCppBrain
from shapeloop.events import ReplyReceived
from shapeloop.prompts import system_prompt

DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo"
TASKS = [
    "Read colour.txt and tell me the colour it names.",
    "List the files in the workspace.",
    "Which file in the workspace mentions a colour?",
]


ENGINES = (("free", None), ("llama.cpp-grammar", "llama.cpp"), ("llguidance", "llguidance"))


def speed(brain: LlamaCppBrain, root: Path, repeats: int) -> dict[str, Any]:
    """Seconds per step, tokens per second and decode calls: free text, llama.cpp grammar, fast path.

    Each measured call follows a warm-up call on the same prompt, so every engine finds the
    prompt already evaluated and the figures are decoding alone.
    """
    tools = workspace_tools(root)
    schema = step_schema(tools)
    rows: list[dict[str, Any]] = []
    for task in TASKS:
        messages = [
            Message(role="system", content=system_prompt(tools, prose=True)),
            Message(role="user", content=task),
        ]
        for _ in range(repeats):
            for name, engine in ENGINES:
                brain.engine = engine or "auto"
                step_json = None if engine is None else schema
                brain.ask(Request(messages=messages, schema=step_json))
                started = time.perf_counter()
                reply = brain.ask(Request(messages=messages, schema=step_json))
                seconds = time.perf_counter() - started
                tokens = reply.usage.completion_tokens if reply.usage else 0
                rows.append({
                    "task": task, "engine": name, "ran": reply.engine, "tokens": tokens, "seconds": round(seconds, 4),
                    "tokens_per_second": round(tokens / seconds, 2) if seconds else 0.0,
                    "decode_calls": brain.last_stats.get("decode_calls", tokens), "finish": reply.finish.value,
                    "forced_tokens": brain.last_stats.get("forced_tokens", 0), "text": reply.text,
                })  # fmt: skip
    brain.engine = "auto"
    summary = {name: _summary([r for r in rows if r["engine"] == name]) for name, _ in ENGINES}
    free_rate = summary["free"]["median_tokens_per_second"] or 1.0
    fast, grammar = summary["llguidance"], summary["llama.cpp-grammar"]
    return {
        "summary": summary,
        "fast_seconds_over_grammar": round(fast["median_seconds"] / (grammar["median_seconds"] or 1.0), 3),
        "fast_effective_rate_over_free": round(fast["median_tokens_per_second"] / free_rate, 3),
        "grammar_rate_over_free": round(grammar["median_tokens_per_second"] / free_rate, 3),
        "differences": _differences(rows),
        "runs": rows,
    }


def _summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    return {
        "median_seconds": median([r["seconds"] for r in rows]),
        "median_tokens": median([r["tokens"] for r in rows]),
        "median_tokens_per_second": median([r["tokens_per_second"] for r in rows]),
        "median_decode_calls": median([r["decode_calls"] for r in rows]),
        "median_forced_tokens": median([r["forced_tokens"] for r in rows]),
    }


def _differences(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How often the fast path's step differs from llama.cpp grammar's on the same prompt, and where."""
    pairs = zip(
        [r for r in rows if r["engine"] == "llama.cpp-grammar"],
        [r for r in rows if r["engine"] == "llguidance"],
        strict=True,
    )
    compared = differ = 0
    fields: dict[str, int] = {}
    for grammar, fast in pairs:
        compared += 1
        a, b = _parse(grammar["text"]), _parse(fast["text"])
        changed = [k for k in ("reason", "action", "tool", "args", "answer") if a.get(k) != b.get(k)]
        if changed:
            differ += 1
            for key in changed:
                fields[key] = fields.get(key, 0) + 1
    return {
        "compared": compared,
        "differ": differ,
        "fields_that_differ": fields,
        "why": "both engines allow the same steps; they differ only where greedy decoding sees different "
        "tokens: llama.cpp's grammar lets the model choose whitespace (its replies carry the spaces it "
        "picked, token by token) while the fast path forces json.dumps spacing and takes forced tokens in "
        "one batch, so the token sequences, and with them the model's later choices, can part",
    }


def _parse(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


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
    parser.add_argument("--model", action="append", help="catalogue name (repeatable); default: the three small ones")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(shutil.copytree(DEMO, Path(tmp) / "demo"))
        for name in args.model or ["qwen2.5-coder-0.5b", "smollm2-135m", "gemma3-270m"]:
            brain = LlamaCppBrain(name, n_ctx=4096, max_tokens=256)
            started = time.perf_counter()
            entry = {"model": model_info(name), "backend": {"name": "llamacpp", "n_ctx": 4096, "max_tokens": 256,
                     "temperature": 0.0, "engines": [e for e, _ in ENGINES]},
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
