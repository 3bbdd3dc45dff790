"""Throughput against concurrency: tasks per minute and tokens per second at 1, 2, 4 and 8 runs at once.

    python -m benchmarks.scale                       # both: a loopback server and a local Ray
    python -m benchmarks.scale --only server         # or --only ray

Against a loopback ``python -m llama_cpp.server`` the runs go through ``run_many`` on the
OpenAI-compatible backend; on a local Ray each run has its own worker (an actor with the embedded
backend, the cores shared out between them). The same few fast tasks run at every level, after a
warm-up that is not timed. Writes measurements/scale.json and measurements/scale.png.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from benchmarks import cluster
from benchmarks.__main__ import choose
from benchmarks.common import MEASUREMENTS, model_info, write
from benchmarks.suite import AnyTask, tools_for
from benchmarks.tasks import WORKSPACE
from shapeloop import AgentRun, Brain, RunSettings, models, run_agent, run_many
from shapeloop.backends.openai import OpenAIBrain

MODEL = "qwen2.5-coder-0.5b"
LEVELS = (1, 2, 4, 8)
TASKS = 8  # per level: the first of the --quick slice
MAX_STEPS = 6
SETTINGS = RunSettings(max_steps=MAX_STEPS, approve=lambda call: True)  # every run's, at every level


def job(brain: Brain, task: AnyTask, root: Path) -> dict[str, Any]:
    """``run_agent``'s arguments for one task in its own copy of the workspace."""
    shutil.copytree(WORKSPACE, root)
    return {"brain": brain, "tools": tools_for(task, root), "task": task.prompt, "settings": SETTINGS}


def outcome(task: AnyTask, run: AgentRun, root: Path) -> dict[str, Any]:
    usage = run.usage
    return {"task": task.name, "success": bool(run.ok and task.check(run.answer or "", root)), "stop": run.stop.value,
            "steps": run.steps, "prompt_tokens": usage.prompt_tokens if usage else 0,
            "completion_tokens": usage.completion_tokens if usage else 0}  # fmt: skip


def level(concurrency: int, seconds: float, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    completion = sum(r["completion_tokens"] for r in rows)
    total = completion + sum(r["prompt_tokens"] for r in rows)
    return {"concurrency": concurrency, "tasks": len(rows), "seconds": round(seconds, 2),
            "tasks_per_minute": round(60 * len(rows) / seconds, 2),
            "completion_tokens_per_second": round(completion / seconds, 2),
            "total_tokens_per_second": round(total / seconds, 2),
            "steps": sum(r["steps"] for r in rows), "succeeded": sum(r["success"] for r in rows),
            "runs": list(rows)}  # fmt: skip


# ---- a loopback llama_cpp.server, through run_many ----


@contextlib.contextmanager
def llama_server(model: str, threads: int) -> Iterator[str]:
    """``python -m llama_cpp.server`` on loopback; yields its ``/v1`` URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(models.cached_path(model)),
               "--model_alias", model, "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
               "--n_threads", str(threads), "--n_threads_batch", str(threads)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"llama_cpp.server did not start: {' '.join(command)}")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def measure_server(tasks: Sequence[AnyTask], threads: int) -> list[dict[str, Any]]:
    out = []
    with llama_server(MODEL, threads) as url, OpenAIBrain(MODEL, base_url=url) as brain:
        with tempfile.TemporaryDirectory() as tmp:  # warm-up: load, first prompt
            run_many([job(brain, tasks[0], Path(tmp) / "ws")], concurrency=1)
        for concurrency in LEVELS:
            with tempfile.TemporaryDirectory() as tmp:
                roots = [Path(tmp) / f"ws{i}" for i in range(len(tasks))]
                jobs = [job(brain, task, root) for task, root in zip(tasks, roots, strict=True)]
                started = time.perf_counter()
                runs = run_many(jobs, concurrency=concurrency)
                seconds = time.perf_counter() - started
                rows = [outcome(t, r, root) for t, r, root in zip(tasks, runs, roots, strict=True)]
            out.append(level(concurrency, seconds, rows))
            print(f"server  x{concurrency}: {out[-1]['tasks_per_minute']} tasks/min", file=sys.stderr)
    return out


# ---- a local Ray: one embedded worker per run in flight ----


class ScaleWorker:
    """A Ray actor: the embedded backend with its share of the cores, loaded once."""

    def __init__(self, model: str, threads: int) -> None:
        from shapeloop.backends.llamacpp import LlamaCppBrain

        self.brain = LlamaCppBrain(model, n_ctx=4096, n_threads=threads)

    def ready(self) -> bool:
        return True

    def run(self, task_name: str) -> dict[str, Any]:
        task = cluster.BY_NAME[task_name]
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "ws"
            return outcome(task, run_agent(**job(self.brain, task, root)), root)


def measure_ray(tasks: Sequence[AnyTask], cpus: int) -> list[dict[str, Any]]:
    ray = cluster._ray()
    cluster._connect(ray, None, cpus)
    out = []
    try:
        for concurrency in LEVELS:
            share = cpus / concurrency  # fractional CPUs: every worker is placed, the cores are shared
            actor = ray.remote(num_cpus=share)(ScaleWorker)
            workers = [actor.remote(MODEL, max(1, cpus // concurrency)) for _ in range(concurrency)]
            ray.get([w.ready.remote() for w in workers])  # every worker has loaded its model
            started = time.perf_counter()
            refs = [workers[i % concurrency].run.remote(t.name) for i, t in enumerate(tasks)]
            rows = ray.get(refs)
            seconds = time.perf_counter() - started
            for worker in workers:
                ray.kill(worker)
            out.append(level(concurrency, seconds, rows))
            print(f"ray     x{concurrency}: {out[-1]['tasks_per_minute']} tasks/min", file=sys.stderr)
    finally:
        ray.shutdown()
    return out


def chart(results: dict[str, list[dict[str, Any]]], folder: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    for name, levels in results.items():
        xs = [lv["concurrency"] for lv in levels]
        left.plot(xs, [lv["tasks_per_minute"] for lv in levels], marker="o", label=name)
        right.plot(xs, [lv["completion_tokens_per_second"] for lv in levels], marker="o", label=name)
    for ax, label in ((left, "tasks per minute"), (right, "generated tokens per second")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(LEVELS), [str(c) for c in LEVELS])
        ax.set_xlabel("runs at once")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.suptitle(f"Throughput against concurrency ({MODEL}, {os.cpu_count()} cores)")
    fig.tight_layout()
    fig.savefig(folder / "scale.png", dpi=100)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--only", choices=["server", "ray"], help="measure one of the two")
    parser.add_argument("--tasks", type=int, default=TASKS, help=f"tasks per level (default {TASKS})")
    parser.add_argument("--out", type=Path, default=MEASUREMENTS, help="folder for the results (default measurements/)")
    args = parser.parse_args(argv)
    cpus = os.cpu_count() or 1
    tasks = choose(True, "all")[: args.tasks]
    results: dict[str, list[dict[str, Any]]] = {}
    earlier = args.out / "scale.json"
    if args.only and earlier.exists():
        # one part measured again: the other part's earlier results stay in the file
        results = {name: levels for name, levels in json.loads(earlier.read_text())["results"].items()}
    settings = {"levels": list(LEVELS), "tasks": [t.name for t in tasks], "max_steps": MAX_STEPS,
                "server": "python -m llama_cpp.server (no parallel slots: one model behind a lock)",
                "server_threads": cpus, "ray_cpus": cpus}  # fmt: skip
    for name, wanted, measure in (("llama_cpp.server", "server", measure_server), ("ray", "ray", measure_ray)):
        if args.only in (None, wanted):
            results[name] = measure(tasks, cpus)
            # written after each part, so a stopped run keeps what it measured
            write("scale", {"benchmark": "scale", "models": [model_info(MODEL)], "settings": settings,
                            "results": results}, args.out)  # fmt: skip
            chart(results, args.out)
    print(f"wrote {args.out}/scale.json", file=sys.stderr)


if __name__ == "__main__":
    main()
