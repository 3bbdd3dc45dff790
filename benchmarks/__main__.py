"""Rerun the measurements behind shapeloop's design on real small models.

    python -m benchmarks                 # the full run on the three catalogue models (about an hour here)
    python -m benchmarks --quick         # a small slice, a few minutes (CI runs this)
    python -m benchmarks --backend ollama --model qwen2.5-coder:0.5b

Writes measurements/{suite,schemas,required,extraction,repeats}.json and measurements/README.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from benchmarks import extraction, repeats, report, required
from benchmarks.common import MEASUREMENTS, model_info, write
from benchmarks.suite import Progress, run_suite, summarise
from benchmarks.tasks import QUICK, TASKS
from shapeloop import Brain

FULL_MODELS = ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "smollm2-135m"]
TOOL_KINDS = ("read", "find", "count", "compare", "follow", "write")
LOOPING = ("find-secret", "find-log", "follow-pointer", "count-errors")


def make_brain(backend: str, model: str, base_url: str | None) -> Brain:
    from shapeloop import backends

    return backends.create(backend, model, base_url=base_url, context=4096 if backend == "llamacpp" else None)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="a small slice for CI: one model, six tasks")
    parser.add_argument("--model", action="append", help="model (repeatable); default: the catalogue's three")
    parser.add_argument("--backend", choices=["llamacpp", "ollama", "openai"], default="llamacpp")
    parser.add_argument("--base-url", help="the server, for --backend ollama or openai")
    parser.add_argument("--out", type=Path, default=MEASUREMENTS, help="folder for the results (default measurements/)")
    args = parser.parse_args(argv)

    names = args.model or (["smollm2-135m"] if args.quick else FULL_MODELS)
    tasks = [t for t in TASKS if t.name in QUICK] if args.quick else list(TASKS)
    tool_tasks = [t for t in tasks if t.kind in TOOL_KINDS]
    looping = [t for t in tasks if t.name in LOOPING] or tool_tasks[:1]
    per_model = 2 * len(tasks) + len(tool_tasks) + 2 * len(looping)
    progress = Progress(per_model * len(names), label="bench")
    settings = {"backend": args.backend, "base_url": args.base_url, "max_steps": 8, "stuck_limit": 2,
                "temperature": 0.0, "n_ctx": 4096 if args.backend == "llamacpp" else None}  # fmt: skip
    started = time.perf_counter()
    records: list[dict[str, Any]] = []
    results: dict[str, list[dict[str, Any]]] = {"required": [], "repeats": []}
    for name in names:
        brain = make_brain(args.backend, name, args.base_url)
        for mode, schema, chosen in (("constrained", "per_tool", tasks), ("prose", "per_tool", tasks),
                                     ("constrained", "flat", tool_tasks)):  # fmt: skip
            for record in run_suite(brain, chosen, mode=mode, schema=schema, progress=progress):
                records.append({"model": name, **record})
        results["required"].append({"model": name, **required.measure(brain, tool_tasks)})
        measured = repeats.measure(brain, looping)
        for _ in range(2 * len(looping)):
            progress.step("repeats")
        results["repeats"].append({"model": name, **measured})
        del brain
        # written after every model, so a long run that is stopped keeps what it measured
        done = names[: names.index(name) + 1]
        seconds = round(time.perf_counter() - started, 1)
        _write_all(args.out, done, tasks, records, results, settings, seconds)
    print(f"wrote {args.out}/README.md after {seconds / 60:.1f} min")


def _write_all(out: Path, names: list[str], tasks: list[Any], records: list[dict[str, Any]],
               results: dict[str, list[dict[str, Any]]], settings: dict[str, Any], seconds: float) -> None:  # fmt: skip
    common = {"models": [model_info(n) for n in names], "settings": settings}
    main_runs = [r for r in records if r["schema"] == "per_tool"]
    summaries = [
        {"model": name, "mode": mode, **summarise([r for r in main_runs if r["model"] == name and r["mode"] == mode])}
        for name in names for mode in ("constrained", "prose")
    ]  # fmt: skip
    write("suite", {"benchmark": "suite", **common, "tasks": len(tasks), "seconds": seconds,
                    "summaries": summaries, "records": main_runs}, out)  # fmt: skip
    constrained = [r for r in records if r["mode"] == "constrained" and r["kind"] in TOOL_KINDS]
    schema_summaries = [
        {"model": name, "schema": schema,
         **summarise([r for r in constrained if r["model"] == name and r["schema"] == schema])}
        for name in names for schema in ("per_tool", "flat")
    ]  # fmt: skip
    write("schemas", {"benchmark": "schemas", **common, "summaries": schema_summaries,
                      "records": [r for r in constrained if r["schema"] == "flat"]}, out)  # fmt: skip
    write("required", {"benchmark": "required", **common, "results": results["required"]}, out)
    write("repeats", {"benchmark": "repeats", **common, "results": results["repeats"]}, out)
    recorded = [text for r in records if r["mode"] == "prose" for text in r["prose_replies"]]
    write("extraction", {"benchmark": "extraction", **common, **extraction.measure(recorded)}, out)
    report.write(out)


if __name__ == "__main__":
    main()
