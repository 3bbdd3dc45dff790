"""Rerun the measurements behind shapeloop's design on real small models.

    python -m benchmarks                 # the full run: the three catalogue models, both halves
    python -m benchmarks --quick         # a small slice, a few minutes (CI runs this)
    python -m benchmarks --split tune --policies default,fit-floor --out measurements/experiments/NAME
    python -m benchmarks --backend ollama --model qwen2.5-coder:0.5b
    python -m benchmarks bfcl --category live_multiple --limit 20   # BFCL (python -m benchmarks.bfcl)

Every task runs through the loop (constrained) and as a raw baseline (one constrained call, no loop).
The loop runs with the policies --policies names (shapeloop.policies.resolve: a preset, a preset plus
or minus a policy: plain, default, default,fit-floor); every record says which ran and what each
did. --extras adds the design measurements (prose mode, per-tool vs flat schema, required vs optional
fields, repeat detection, extraction). Writes measurements/*.json and measurements/suite.md.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import cluster, extraction, repeats, report, required
from benchmarks.common import MEASUREMENTS, make_brain, model_info, write
from benchmarks.fc_tasks import CALL_TASKS
from benchmarks.suite import CONTEXT, AnyTask, Progress, summarise
from benchmarks.tasks import QUICK, TASKS, Task, split_of
from shapeloop import policies

FULL_MODELS = ["qwen2.5-coder-0.5b", "smollm2-135m", "qwen2.5-coder-1.5b"]  # the slowest last
TOOL_KINDS = ("read", "find", "count", "compare", "follow", "write")
LOOPING = ("find-secret", "find-log", "follow-pointer", "count-errors")
QUICK_CALLS = 4  # function-calling tasks in --quick: the first of each of these kinds
QUICK_CALL_KINDS = ("call", "choose", "irrelevant", "multi")


def all_tasks() -> list[AnyTask]:
    """Every task of both families, each with its half."""
    return [*TASKS, *CALL_TASKS]


def splits(tasks: list[AnyTask]) -> dict[str, str]:
    """Task name -> ``tune`` or ``test``, stratified by kind."""
    by_kind: dict[str, list[str]] = {}
    for task in tasks:
        by_kind.setdefault(task.kind, []).append(task.name)
    return {t.name: split_of(t.name, t.kind, by_kind[t.kind]) for t in tasks}


def choose(quick: bool, split: str) -> list[AnyTask]:
    tasks = all_tasks()
    halves = splits(tasks)
    if quick:
        calls = [next(t for t in CALL_TASKS if t.kind == kind) for kind in QUICK_CALL_KINDS]
        return [t for t in TASKS if t.name in QUICK] + calls
    return [t for t in tasks if split == "all" or halves[t.name] == split]


def _policies(spec: str) -> str:
    """A policies spec, checked by resolving it once (the runs resolve it afresh, each its own)."""
    try:
        policies.resolve(spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return spec


def _kinds() -> set[str]:
    return {t.kind for t in all_tasks()}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bfcl"]:  # the field's benchmark, by the same entry
        from benchmarks import bfcl

        bfcl.main(argv[1:])
        return
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="a small slice for CI: one model, ten tasks, extras")
    parser.add_argument("--model", action="append", help="model (repeatable); default: the catalogue's three")
    parser.add_argument("--backend", choices=["llamacpp", "ollama", "openai"], default="llamacpp")
    parser.add_argument("--base-url", help="the server, for --backend ollama or openai")
    parser.add_argument("--split", choices=["tune", "test", "all"], default="all", help="which half to run")
    parser.add_argument("--kind", action="append", help="only tasks of this kind (repeatable), e.g. multi")
    parser.add_argument("--task", action="append", help="only this task (repeatable), by name")
    parser.add_argument("--policies", default="default", type=_policies,
                        help="the loop's policies: a preset or policy names joined by commas, '-NAME' to take one "
                             f"out (default,-fit-floor); the names: {', '.join(policies.available())}")  # fmt: skip
    parser.add_argument("--step", choices=("calls", "five-field"), default="calls",
                        help="the loop's step shape: the calls step (the default a user gets) or the five-field "
                             "step (batch=False)")  # fmt: skip
    parser.add_argument("--threads", type=int, help="the embedded backend's CPU threads (default: every core)")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw baseline")
    parser.add_argument("--max-steps", type=int, default=6,
                        help="steps per task (1 measures only the first step, for quick comparisons)")  # fmt: skip
    parser.add_argument("--extras", action="store_true", help="also prose mode, flat schema, required, repeats")
    parser.add_argument("--out", type=Path, default=MEASUREMENTS, help="folder for the results (default measurements/)")
    parser.add_argument("--concurrency", type=int, default=1, help="tasks in flight at once against a server")
    parser.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                        help="run the sweep on Ray workers: a cluster's address, or none for a local Ray")  # fmt: skip
    parser.add_argument("--ray-cpus", type=int, help="CPUs of the local Ray (default: this machine's)")
    args = parser.parse_args(argv)

    names = args.model or (["smollm2-135m"] if args.quick else FULL_MODELS)
    extras = args.extras or args.quick
    tasks = [t for t in choose(args.quick, args.split) if not args.kind or t.kind in args.kind]
    tasks = [t for t in tasks if not args.task or t.name in args.task]
    if not tasks:
        parser.error(f"no task of that kind or name in the {args.split} half; the kinds are "
                     f"{', '.join(sorted(_kinds()))}")  # fmt: skip
    halves = splits(all_tasks())
    ws_tool_tasks = [t for t in tasks if isinstance(t, Task) and t.kind in TOOL_KINDS]
    looping = [t for t in ws_tool_tasks if t.name in LOOPING] or ws_tool_tasks[:1]
    per_model = len(tasks) * (1 if args.no_raw else 2)
    if extras:
        per_model += len(tasks) + len(ws_tool_tasks) + 2 * len(looping)
    progress = Progress(per_model * len(names), label="bench")
    settings = {"backend": args.backend, "base_url": args.base_url, "max_steps": args.max_steps, "stuck_limit": 2,
                "temperature": 0.0, "n_ctx": CONTEXT if args.backend == "llamacpp" else None,
                "split": args.split, "kinds": args.kind, "only_tasks": args.task, "policies": args.policies,
                "step": args.step, "threads": args.threads, "quick": args.quick,
                "concurrency": args.concurrency, "ray": args.ray}  # fmt: skip
    batch = args.step == "calls"
    started = time.perf_counter()
    if args.ray is not None:
        sweep = cluster.Sweep(names=names, backend=args.backend, base_url=args.base_url, policies=args.policies,
                              tasks=tasks, flat_tasks=ws_tool_tasks, looping=looping, extras=extras,
                              raw=not args.no_raw, max_steps=args.max_steps, batch=batch,
                              cpus=args.ray_cpus)  # fmt: skip
        records, results = cluster.sweep(args.ray or None, sweep, progress, repeat_steps=2 * len(looping))
        for record in records:
            record["split"] = halves[record["task"]]
        seconds = round(time.perf_counter() - started, 1)
        _write_all(args.out, names, tasks, records, results, settings, seconds, extras)
        print(f"wrote {args.out}/suite.md after {seconds / 60:.1f} min on Ray")
        return
    suite_runner, raw_runner = cluster.runners(args.concurrency)
    records: list[dict[str, Any]] = []
    results: dict[str, list[dict[str, Any]]] = {"required": [], "repeats": []}
    for name in names:
        brain = make_brain(args.backend, name, args.base_url, CONTEXT, args.threads)
        plan = [("constrained", "per_tool", tasks)]
        if extras:
            plan += [("prose", "per_tool", tasks), ("constrained", "flat", ws_tool_tasks)]
        for mode, schema, chosen in plan:
            ran = suite_runner(brain, chosen, mode=mode, schema=schema, progress=progress, max_steps=args.max_steps,
                               policies=args.policies, batch=batch)  # fmt: skip
            records += [{"model": name, **r} for r in ran]
        if not args.no_raw:
            records += [{"model": name, **r} for r in raw_runner(brain, tasks, progress=progress)]
        if extras:
            results["required"].append({"model": name, **required.measure(brain, ws_tool_tasks)})
            results["repeats"].append({"model": name, **repeats.measure(brain, looping)})
            for _ in range(2 * len(looping)):
                progress.step("repeats")
        with contextlib.suppress(AttributeError):
            brain.close()  # type: ignore[attr-defined]
        del brain
        for record in records:
            record["split"] = halves[record["task"]]
        # written after every model, so a long run that is stopped keeps what it measured
        done = names[: names.index(name) + 1]
        seconds = round(time.perf_counter() - started, 1)
        _write_all(args.out, done, tasks, records, results, settings, seconds, extras)
    print(f"wrote {args.out}/suite.md after {seconds / 60:.1f} min")


def _write_all(out: Path, names: list[str], tasks: list[AnyTask], records: list[dict[str, Any]],
               results: dict[str, list[dict[str, Any]]], settings: dict[str, Any], seconds: float,
               extras: bool) -> None:  # fmt: skip
    common = {"models": [model_info(n) for n in names], "settings": settings}
    main_runs = [r for r in records if r["schema"] in ("per_tool", "raw")]
    summaries = [
        {"model": name, "split": split, "method": method,
         **summarise([r for r in main_runs if r["model"] == name and r["mode"] == method
                      and (split == "all" or r["split"] == split)])}
        for name in names for split in ("tune", "test", "all") for method in ("constrained", "prose", "raw")
        if any(r["model"] == name and r["mode"] == method and (split == "all" or r["split"] == split)
               for r in main_runs)
    ]  # fmt: skip
    halves = {t.name: next((r["split"] for r in records if r["task"] == t.name), "") for t in tasks}
    write("suite", {"benchmark": "suite", **common, "tasks": len(tasks), "seconds": seconds,
                    "halves": halves, "kinds": {t.name: t.kind for t in tasks},
                    "summaries": summaries, "records": main_runs}, out)  # fmt: skip
    if extras:
        constrained = [r for r in records if r["mode"] == "constrained" and r["kind"] in TOOL_KINDS
                       and r["family"] == "workspace"]  # fmt: skip
        schema_summaries = [
            {"model": name, "schema": schema,
             **summarise([r for r in constrained if r["model"] == name and r["schema"] == schema])}
            for name in names for schema in ("per_tool", "flat")
        ]  # fmt: skip
        write("schemas", {"benchmark": "schemas", **common, "summaries": schema_summaries,
                          "records": [r for r in constrained if r["schema"] == "flat"]}, out)  # fmt: skip
        write("required", {"benchmark": "required", **common, "results": results["required"]}, out)
        write("repeats", {"benchmark": "repeats", **common, "results": results["repeats"]}, out)
        recorded = [text for r in records if r["mode"] == "prose" for text in r.get("prose_replies", [])]
        write("extraction", {"benchmark": "extraction", **common, **extraction.measure(recorded)}, out)
    report.write(out)


if __name__ == "__main__":
    main()
