"""BFCL, the Berkeley Function Calling Leaderboard, through shapeloop: any backend, any policy set,
scored by BFCL's own checkers from the pinned ``bfcl-eval`` wheel (``benchmarks.bfcl_data``).

    python -m benchmarks.bfcl --category live_multiple --limit 20 --model qwen2.5-coder-0.5b
    python -m benchmarks.bfcl --sample tune --columns raw,plain,default --resume
    python -m benchmarks.bfcl --quick                     # 5 items each of 3 categories (CI)
    python -m benchmarks.bfcl --merge                     # rebuild measurements/bfcl.json from the records

Columns: ``raw`` (the model asked once: the functions' JSON in the system prompt, the reply
constrained to a list of calls or an answer; no loop, no policies), ``native`` (the plain loop
through the backend's native tool calls, where it has them), and any policy set for the loop:
``plain`` (no policies), ``default`` (the preset), or ``name1,name2`` (``--policies`` adds one).

Every item's record is appended to a JSON Lines file as the item ends
(``measurements/bfcl/<model>/<column>.jsonl``), so a stopped run keeps what it measured and
``--resume`` skips what is done; ``--shard K/N`` runs every N-th item from the K-th; the merge step
builds ``measurements/bfcl.json`` from every record there. ``--concurrency N`` keeps N items in
flight against a server; ``--ray [ADDRESS]`` spreads them over the workers of a Ray cluster (one
model loaded per worker, one CPU each; a local Ray without an address), the records written as
they come back, so ``--resume`` works the same. ``--transcripts DIR`` also writes each loop run's
transcript (a multi-turn entry's conversation log) to ``DIR/<model>/<column>/<id>.jsonl``, to read
what the model did.

The split. Tune data, on which any prompt, policy or mechanism may be chosen: ``live_multiple``,
``live_irrelevance``, ``live_parallel``, ``live_parallel_multiple``, ``live_relevance``, ``parallel``,
``parallel_multiple``, the four report categories from index 120 on, and ``multi_turn_base`` entries
40-199. The tune sample (``--sample tune``): 40 items each of ``live_multiple``,
``live_irrelevance``, ``parallel`` and ``parallel_multiple`` (a fixed stride: indices ``i * n // 40``),
all of ``live_parallel``, ``live_parallel_multiple`` and ``live_relevance``, 40 items each of
``simple_python``, ``multiple``, ``irrelevance`` and ``live_simple`` from a fixed stride over indices
120 to the end (376 single-turn items in all), and 24 ``multi_turn_base`` entries, 6 from each of
BFCL's blocks (40-49 the file system, 50-99 vehicle control, 100-149 the trading bot, 150-199 travel
booking). The screen sample (``--sample screen``): the first 8 tune items of each category and the
first 2 tune entries of each block, for trying candidates fast; decisions are made on the whole tune
sample. Report sample, run only to report a finished round and never used to choose anything
(``--sample report``): the first 40 of ``simple_python``, ``multiple``, ``irrelevance`` and
``live_simple``, and ``multi_turn_base`` 0-19. Held out: indices 40-119 of the four report categories
and ``multi_turn_base`` 20-39 are in no sample, test or fixture. The project is also measured on data
it does not see.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks import bfcl_data
from benchmarks.bfcl_data import BFCL_WHEEL, CATEGORIES, Item
from benchmarks.bfcl_report import RECORDS, done_ids, latest, merge, read_records, records_file, slug, table
from benchmarks.bfcl_run import run_item
from benchmarks.common import machine, make_brain, model_info

DEFAULT_COLUMNS = "raw,plain,default"
CONTEXT = 8192  # live_multiple offers up to ~30 long function docs


def plan(args: argparse.Namespace) -> list[Item]:
    """The items to run, in category order: a sample or the categories, then ``--ids``, ``--limit``, ``--shard``."""
    chosen: dict[str, list[int] | None] = {}
    if args.sample:
        chosen = dict(bfcl_data.sample(args.sample).items())
    wanted = [c for spec in args.category or [] for c in spec.split(",") if c]
    for category in wanted:
        if category not in CATEGORIES:
            raise SystemExit(f"unknown category {category!r}: choose from {', '.join(CATEGORIES)}")
    if wanted and args.sample:
        missing = [c for c in wanted if c not in chosen]
        if missing:
            raise SystemExit(f"{', '.join(missing)}: not in the {args.sample} sample, which has {', '.join(chosen)}")
        chosen = {c: chosen[c] for c in wanted}
    elif wanted:
        chosen = dict.fromkeys(wanted)
    if not chosen:
        raise SystemExit("say what to run: --category NAME (repeatable, or a comma list), --sample, or --quick")
    indices, names = bfcl_data.parse_ids(args.ids or "")
    out = []
    for category, picked in chosen.items():
        every = bfcl_data.items(category)
        some = every if picked is None else [every[i] for i in picked]
        if args.ids:
            some = [i for i in some if i.index in indices or i.id in names]
        out += some[: args.limit] if args.limit else some
    return bfcl_data.shard(out, args.shard) if args.shard else out


class Progress:
    """One line on stderr: items done, time, and the running accuracy of each column."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.started = max(total, 1), 0, time.monotonic()
        self.right: dict[str, list[int]] = {}

    def step(self, column: str, valid: bool) -> None:
        self.done += 1
        tally = self.right.setdefault(column, [0, 0])
        tally[0] += int(valid)
        tally[1] += 1
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done)
        accuracy = "  ".join(f"{c} {r}/{n} ({100 * r / n:.0f}%)" for c, (r, n) in self.right.items())
        end = "\n" if self.done >= self.total else ""
        bar = "#" * (20 * self.done // self.total)
        print(f"\rbfcl [{bar:<20}] {self.done}/{self.total} {elapsed:.0f}s, ~{left:.0f}s left  {accuracy}", end=end,
              file=sys.stderr, flush=True)  # fmt: skip


class Worker:
    """A Ray worker: it loads the model once and runs the items it is handed, one at a time (Ray runs
    an actor's calls in turn, so the embedded backend's one context is never shared)."""

    def __init__(self, backend: str, model: str, base_url: str | None, context: int) -> None:
        from shapeloop import backends

        options = {"context": context, "n_threads": 1} if backend == "llamacpp" else {}
        self.context = context
        self.brain = backends.create(backend, model, base_url=base_url, **options)

    def run(self, category: str, item_id: str, column: str, max_steps: int) -> dict[str, Any]:
        item = next(i for i in bfcl_data.items(category) if i.id == item_id)
        return run_item(self.brain, item, column, max_steps=max_steps, context=self.context)


def on_ray(
    args: argparse.Namespace, todo: Sequence[tuple[Item, str]], write: Callable[[Item, str, dict[str, Any]], None]
) -> None:
    """Run ``todo`` on a Ray cluster's workers, each taking the next item when it is free."""
    from benchmarks import cluster

    ray = cluster._ray()
    cluster._connect(ray, args.ray or None)
    try:
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        actor = ray.remote(num_cpus=1)(Worker)
        idle = [
            actor.remote(args.backend, args.model, args.base_url, args.context) for _ in range(min(cpus, len(todo)))
        ]
        queue = deque(todo)
        pending: dict[Any, tuple[Item, str, Any]] = {}
        while queue or pending:
            while queue and idle:
                (item, column), worker = queue.popleft(), idle.pop()
                pending[worker.run.remote(item.category, item.id, column, args.max_steps)] = (item, column, worker)
            [ready], _ = ray.wait(list(pending), num_returns=1)
            item, column, worker = pending.pop(ready)
            idle.append(worker)
            write(item, column, ray.get(ready))
    finally:
        ray.shutdown()


def run(args: argparse.Namespace, items: Sequence[Item], columns: Sequence[str]) -> None:
    """Run every item in every column, appending each record as it ends."""
    bfcl_meta = {"version": BFCL_WHEEL.version, "sha256": BFCL_WHEEL.sha256}
    meta = {"machine": machine(), "bfcl": bfcl_meta, "model_info": model_info(args.model), "backend": args.backend}
    done = {c: done_ids(args.out, args.model, c) if args.resume else set() for c in columns}
    todo = [(item, c) for item in items for c in columns if item.id not in done[c]]
    skipped = len(items) * len(columns) - len(todo)
    if skipped:
        print(f"--resume: {skipped} item runs already recorded, {len(todo)} to go", file=sys.stderr)
    if not todo:
        return
    progress = Progress(len(todo))
    lock = threading.Lock()

    def write(item: Item, column: str, record: dict[str, Any]) -> None:
        record = {"id": item.id, "category": item.category, "index": item.index, "column": column,
                  "model": args.model, "max_steps": args.max_steps, "context": args.context,
                  "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                  **record, **meta}  # fmt: skip
        path = records_file(args.out, args.model, column, args.shard)
        with lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
            progress.step(column, bool(record["valid"]))

    if args.ray is not None:
        on_ray(args, todo, write)
        return
    brain = make_brain(args.backend, args.model, args.base_url, args.context, args.threads)
    forget = getattr(brain, "forget_prompt", None)
    if args.cold and not callable(forget):
        brain.close()
        raise SystemExit(f"--cold: the {args.backend} backend keeps no prompt in this process to forget; "
                         "it is for the embedded backend (llamacpp)")  # fmt: skip
    if args.concurrency > 1 and brain.capabilities.exclusive:
        brain.close()
        why = "holds one model and one context, so it answers one request at a time"
        raise SystemExit(f"--concurrency {args.concurrency}: {args.model} on {args.backend} {why}; use a server "
                         "backend (ollama, openai), or --ray")  # fmt: skip

    def one(job: tuple[Item, str]) -> None:
        item, column = job
        if args.cold and callable(forget):
            forget()
        transcript = transcript_file(args.transcripts, args.model, column, item.id) if args.transcripts else None
        write(item, column, run_item(brain, item, column, max_steps=args.max_steps, context=args.context,
                                     transcript=transcript))  # fmt: skip

    try:
        if args.concurrency > 1:
            with ThreadPoolExecutor(max_workers=args.concurrency, thread_name_prefix="bfcl") as pool:
                list(pool.map(one, todo))
        else:
            for job in todo:
                one(job)
    finally:
        with contextlib.suppress(Exception):
            brain.close()


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bfcl", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--category", action="append", help="a category (repeatable, or a comma list)")
    parser.add_argument("--sample", choices=["tune", "screen", "report", "quick"],
                        help="a fixed sample (see the split above)")
    parser.add_argument("--quick", action="store_true", help="--sample quick: 5 items each of 3 tune categories")
    parser.add_argument("--ids", help="only these: indices, ranges or BFCL ids, e.g. 100-119 or live_multiple_3-2-0")
    parser.add_argument("--limit", type=int, help="at most N items per category")
    parser.add_argument("--shard", help="K/N: every N-th item, from the K-th")
    parser.add_argument("--columns", default=DEFAULT_COLUMNS,
                        help=f"comma list of raw, native, plain, default (default {DEFAULT_COLUMNS})")  # fmt: skip
    parser.add_argument("--policies", action="append", help="one more column: plain, default or NAME,NAME")
    parser.add_argument("--backend", choices=["llamacpp", "ollama", "openai"], default="llamacpp")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--base-url", help="the server, for --backend ollama or openai")
    parser.add_argument("--context", type=int, default=CONTEXT, help=f"llamacpp context window (default {CONTEXT})")
    parser.add_argument("--threads", type=int, help="llamacpp CPU threads (default: all cores; 1 keeps a run steady "
                        "beside other work, where two threads wait on each other)")
    parser.add_argument("--max-steps", type=int, default=6, help="loop steps per item (per turn for multi-turn)")
    parser.add_argument("--concurrency", type=int, default=1, help="items in flight at once against a server")
    parser.add_argument("--cold", action="store_true",
                        help="the embedded backend forgets its main prompt before each item's run, so the "
                             "columns' seconds compare (else a step finds the last one's prompt cached)")  # fmt: skip
    parser.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                        help="spread the items over a Ray cluster's workers (a local Ray without ADDRESS)")  # fmt: skip
    parser.add_argument("--resume", action="store_true", help="skip items that already have a record")
    parser.add_argument("--transcripts", type=Path, metavar="DIR",
                        help="also write each loop run's transcript (a multi-turn entry's conversation log) to "
                             "DIR/<model>/<column>/<id>.jsonl, for reading what the model did")  # fmt: skip
    parser.add_argument("--out", type=Path, default=RECORDS, help="folder for the records (default measurements/bfcl)")
    parser.add_argument("--merge", action="store_true", help="only rebuild measurements/bfcl.json from the records")
    args = parser.parse_args(argv)
    if args.quick:
        args.sample = "quick"
    if args.cold and args.ray is not None:
        parser.error("--cold compares columns in one process; a Ray worker keeps its own model: drop --ray")
    if args.transcripts and args.ray is not None:
        parser.error("--transcripts writes files on this machine; a Ray worker may run on another: drop --ray")
    return args


def transcript_file(folder: Path, model: str, column: str, item_id: str) -> Path:
    """Where ``--transcripts`` puts an item's transcript: ``folder/<model>/<column>/<id>.jsonl`` (a
    column's commas become ``+``)."""
    return folder / slug(model) / column.replace(",", "+") / f"{item_id}.jsonl"


def columns_of(args: argparse.Namespace) -> list[str]:
    """The columns: ``--columns`` (raw, native, plain, default), then each ``--policies`` list as one
    column of its own (a policy list has commas, so it has its own flag)."""
    simple = [c for c in args.columns.split(",") if c] if args.columns else []
    return list(dict.fromkeys([*simple, *(args.policies or [])]))


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    if args.merge:
        print(f"wrote {merge(args.out)}")
        return
    bfcl_data.load(say=lambda line: print(line, file=sys.stderr))
    items = plan(args)
    columns = columns_of(args)
    print(f"bfcl: {len(items)} items x {len(columns)} columns ({', '.join(columns)}) on {args.model}", file=sys.stderr)
    run(args, items, columns)
    wanted = {i.id for i in items}
    mine = [r for r in latest(read_records(args.out / slug(args.model)))
            if r["id"] in wanted and r["column"] in columns and r["model"] == args.model]  # fmt: skip
    print(table(mine, columns))
    print(f"wrote {merge(args.out)}")


if __name__ == "__main__":
    main()
