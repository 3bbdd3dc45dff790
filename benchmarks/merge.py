"""Merge suite runs made separately (one model at a time, one half at a time, on other machines) into
one ``suite.json`` and its report.

    python -m benchmarks --model qwen2.5-coder-1.5b --split test --out runs/1.5b-test
    python -m benchmarks.merge measurements/suite.json runs/1.5b-test/suite.json --out measurements

A later file's record of the same model, method and task replaces an earlier one; the runs must share
their settings (steps, stuck limit, context, policies), or the merge is refused, since their figures would not
compare.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.__main__ import _write_all, all_tasks
from benchmarks.suite import AnyTask, succeeded

# "variant" names how runs made before the policies were patched; "policies" the loop's help since
COMPARED = ("backend", "max_steps", "stuck_limit", "temperature", "n_ctx", "variant", "policies")


def merge(paths: list[Path], out: Path) -> Path:
    """Merge the runs at ``paths`` into ``out/suite.json``; return its path."""
    runs = [json.loads(path.read_text()) for path in paths]
    settings = runs[0]["settings"]
    for path, run in zip(paths[1:], runs[1:], strict=True):
        differ = [k for k in COMPARED if run["settings"].get(k) != settings.get(k)]
        if differ:
            raise SystemExit(f"{path} was run with other settings ({', '.join(differ)}): its figures do not compare")
    records: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    names: list[str] = []
    for run in runs:
        for record in run["records"]:
            records[(record["model"], record["mode"], record["schema"], record["task"])] = record
            if record["model"] not in names:
                names.append(record["model"])
    wanted = {r["task"] for r in records.values()}
    tasks = [t for t in all_tasks() if t.name in wanted]
    by_name = {t.name: t for t in tasks}
    merged = [rejudged(record, by_name[record["task"]]) for record in records.values()]
    splits = sorted({r["split"] for r in merged})
    settings = {**settings, "split": splits[0] if len(splits) == 1 else "all", "merged_from": [str(p) for p in paths]}
    seconds = round(sum(run.get("seconds", 0) for run in runs), 1)
    _write_all(out, names, tasks, merged, {}, settings, seconds, extras=False)
    return out / "suite.json"


def rejudged(record: dict[str, Any], task: AnyTask) -> dict[str, Any]:
    """``record`` with its success judged again from its answer by the task's check as it is now, so
    that a mended checker applies to runs made before it; not a write task's (its check reads the
    files the run wrote, gone since)."""
    if task.kind == "write":
        return record
    answered = record["stop"] == "answered"
    checked = answered and task.check(record["answer"] or "", Path("."))
    success = succeeded(task.kind, answered=answered, checked=checked, calls=record.get("tool_calls", 0),
                        raw=record["mode"] == "raw")  # fmt: skip
    return {**record, "success": success}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.merge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("runs", nargs="+", type=Path, help="suite.json files, earliest first")
    parser.add_argument("--out", type=Path, required=True, help="folder for the merged suite.json and README.md")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.runs if not p.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    print(f"wrote {merge(args.runs, args.out)}", file=sys.stderr)


if __name__ == "__main__":
    main()
