"""The suite at scale: its runs spread over threads against a server (``--concurrency N``) or over
the actors of a Ray cluster (``--ray [ADDRESS]``), with records exactly those a local run writes.

A Ray sweep is models x modes x tasks: each model gets its workers (Ray actors, one CPU each), each
worker loads the model once and takes the next task whenever it is free, and one progress bar counts
every worker's tasks. The records come back in the order a local run makes them, so the JSON that
``python -m benchmarks`` writes from them has the same schema. Ray is the optional extra
``shapeloop[cluster]``; without an address, a local Ray is started on this machine.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import shapeloop
from benchmarks import repeats, required
from benchmarks.common import make_brain
from benchmarks.fc_tasks import CALL_TASKS
from benchmarks.raw import run_raw, run_raw_suite
from benchmarks.suite import CONTEXT, AnyTask, Progress, run_suite, run_task
from benchmarks.tasks import TASKS, Task
from shapeloop import Brain, UsageError

Record = dict[str, Any]
SuiteRunner = Callable[..., list[Record]]
RawRunner = Callable[..., list[Record]]
BY_NAME: dict[str, AnyTask] = {t.name: t for t in [*TASKS, *CALL_TASKS]}


# ---- --concurrency N: one brain, many runs in flight against its server ----


def runners(concurrency: int) -> tuple[SuiteRunner, RawRunner]:
    """``run_suite`` and ``run_raw_suite``, or versions of them that keep ``concurrency`` runs in flight."""
    if concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1, got {concurrency}")
    if concurrency == 1:
        return run_suite, run_raw_suite
    return partial(suite_at_once, concurrency=concurrency), partial(raw_at_once, concurrency=concurrency)


def suite_at_once(brain: Brain, tasks: Sequence[AnyTask], *, mode: str, schema: str = "per_tool",
                  progress: Progress | None = None, concurrency: int, **options: Any) -> list[Record]:  # fmt: skip
    """``run_suite``'s records, in its order, with ``concurrency`` tasks in flight at once."""
    return _at_once(brain, [partial(run_task, brain, t, mode=mode, schema=schema, **options) for t in tasks],
                    concurrency, progress)  # fmt: skip


def raw_at_once(brain: Brain, tasks: Sequence[AnyTask], *, progress: Progress | None = None,
                concurrency: int) -> list[Record]:  # fmt: skip
    """``run_raw_suite``'s records, in its order, with ``concurrency`` requests in flight at once."""
    return _at_once(brain, [partial(run_raw, brain, t) for t in tasks], concurrency, progress)


def _at_once(
    brain: Brain, work: list[Callable[[], Record]], concurrency: int, progress: Progress | None
) -> list[Record]:
    if brain.capabilities.exclusive:
        raise UsageError(
            f"{type(brain).__name__} holds one model and one context, so it runs one task at a time: "
            "--concurrency needs a server (--backend openai or ollama with --base-url); to spread a sweep "
            "over processes or machines, use --ray"
        )
    out: list[Record | None] = [None] * len(work)
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bench") as pool:
        futures = {pool.submit(job): index for index, job in enumerate(work)}
        for future in as_completed(futures):  # the progress bar is only touched from this thread
            record = out[futures[future]] = future.result()
            if progress:
                progress.step(f"{record['task']} {'ok' if record['success'] else 'x'}")
    return [record for record in out if record is not None]


# ---- --ray [ADDRESS]: the sweep on a Ray cluster ----


@dataclass(frozen=True, kw_only=True)
class Sweep:
    """What ``python -m benchmarks`` would run locally, to spread over a cluster instead.

    Attributes:
        names: the models.
        backend: the backend each worker makes its brain on (and ``base_url``, its server).
        policies: the loop's policies spec (``shapeloop.policies.resolve``) every loop run takes.
        tasks: the suite's tasks (loop, constrained, and the raw baseline unless ``raw`` is off).
        flat_tasks: the tool tasks also run with the flat schema (with ``extras``).
        looping: the tasks the repeat measurement runs (with ``extras``).
        extras: also prose mode, the flat schema, required fields and repeats.
        raw: also the raw baseline.
        max_steps: steps per task in the loop.
        batch: the step shape: the calls step (True) or the five-field step.
        cpus: the CPUs of the local Ray started when no address is given (None: this machine's).
    """

    names: Sequence[str]
    backend: str
    base_url: str | None
    policies: str
    tasks: Sequence[AnyTask]
    flat_tasks: Sequence[Task]
    looping: Sequence[Task]
    extras: bool
    raw: bool
    max_steps: int = 8
    batch: bool = True
    cpus: int | None = None


@dataclass(frozen=True)
class _Item:
    index: int
    model: str
    method: str  # a method of the worker
    args: tuple[Any, ...]


def plan(sweep: Sweep) -> list[_Item]:
    """Every piece of work, in the order a local run does it (so its records come back in that order)."""
    items: list[tuple[str, str, tuple[Any, ...]]] = []
    for name in sweep.names:
        passes = [("constrained", "per_tool", sweep.tasks)]
        if sweep.extras:
            passes += [("prose", "per_tool", sweep.tasks), ("constrained", "flat", sweep.flat_tasks)]
        items += [
            (name, "loop", (t.name, mode, schema, sweep.max_steps, sweep.policies, sweep.batch))
            for mode, schema, chosen in passes
            for t in chosen
        ]
        if sweep.raw:
            items += [(name, "raw", (t.name,)) for t in sweep.tasks]
        if sweep.extras:
            items += [(name, "required", ([t.name for t in sweep.flat_tasks],)),
                      (name, "repeats", ([t.name for t in sweep.looping],))]  # fmt: skip
    return [_Item(index, name, method, args) for index, (name, method, args) in enumerate(items)]


class Worker:
    """One worker of the sweep: it loads its model once and runs whatever piece of work it is given.

    Ray runs an actor's calls one at a time, so even the embedded backend's one context is never
    shared between two runs.
    """

    def __init__(self, backend: str, model: str, base_url: str | None, threads: int) -> None:
        self.brain = make_brain(backend, model, base_url, CONTEXT, threads)

    def loop(self, task: str, mode: str, schema: str, max_steps: int, policies: str, batch: bool = True) -> Record:
        return run_task(self.brain, BY_NAME[task], mode=mode, schema=schema, max_steps=max_steps, policies=policies,
                        batch=batch)  # fmt: skip

    def raw(self, task: str) -> Record:
        return run_raw(self.brain, BY_NAME[task])

    def required(self, tasks: Sequence[str]) -> Record:
        return required.measure(self.brain, [_workspace_task(t) for t in tasks])

    def repeats(self, tasks: Sequence[str]) -> Record:
        return repeats.measure(self.brain, [_workspace_task(t) for t in tasks])


def _workspace_task(name: str) -> Task:
    task = BY_NAME[name]
    assert isinstance(task, Task), name
    return task


def sweep(address: str | None, chosen: Sweep, progress: Progress | None = None,
          *, repeat_steps: int = 0) -> tuple[list[Record], dict[str, list[Record]]]:  # fmt: skip
    """Run the sweep on a Ray cluster; return the records and the extra results, as a local run has them.

    Args:
        address: a running cluster (``ray://host:10001``, ``auto``), or None to start a local Ray on
            this machine with its cores.
        chosen: what to run.
        progress: one bar across every worker; each task is a step, and a repeats measurement is
            ``repeat_steps`` of them (as in a local run).
    """
    ray = _ray()
    _connect(ray, address, chosen.cpus)
    try:
        items = plan(chosen)
        out = _schedule(ray, chosen, items, progress, repeat_steps)
    finally:
        ray.shutdown()
    records: list[Record] = []
    results: dict[str, list[Record]] = {"required": [], "repeats": []}
    for item in items:
        if item.method in results:
            results[item.method].append({"model": item.model, **out[item.index]})
        else:
            records.append({"model": item.model, **out[item.index]})
    return records, results


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise UsageError("--ray needs Ray: pip install 'shapeloop[cluster]'") from exc
    return ray


def _connect(ray: Any, address: str | None, cpus: int | None = None) -> None:
    """Join the cluster at ``address``, or start a local Ray with ``cpus`` CPUs (None: this machine's)."""
    here = Path(__file__).resolve().parent
    # the code travels with the job, so workers on other machines run what this checkout has
    runtime_env = {"py_modules": [str(here), str(Path(shapeloop.__file__).resolve().parent)]}
    if address is None:
        ray.init(
            num_cpus=cpus or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False, runtime_env=runtime_env
        )
    else:
        ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)


def _schedule(ray: Any, chosen: Sweep, items: list[_Item], progress: Progress | None,
              repeat_steps: int) -> dict[int, Record]:  # fmt: skip
    """Hand each model's work to that model's workers as they come free; retire a model's workers when
    its work is done, so the next model's can take their CPUs."""
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    per_model = max(1, cpus // len(chosen.names))
    actor = ray.remote(num_cpus=1)(Worker)
    queues = {name: deque(i for i in items if i.model == name) for name in chosen.names}
    idle = {name: [actor.remote(chosen.backend, name, chosen.base_url, 1) for _ in range(per_model)]
            for name in chosen.names}  # fmt: skip
    pending: dict[Any, tuple[_Item, Any]] = {}
    out: dict[int, Record] = {}

    def feed() -> None:
        for name, queue in queues.items():
            while queue and idle[name]:
                item, worker = queue.popleft(), idle[name].pop()
                pending[getattr(worker, item.method).remote(*item.args)] = (item, worker)
            if not queue and idle[name] and not any(i.model == name for i, _ in pending.values()):
                for worker in idle[name]:
                    ray.kill(worker)
                idle[name] = []

    feed()
    while pending:
        [ready], _ = ray.wait(list(pending), num_returns=1)
        item, worker = pending.pop(ready)
        out[item.index] = ray.get(ready)
        idle[item.model].append(worker)
        feed()
        if progress is not None:
            _step(progress, item, out[item.index], repeat_steps)
    return out


def _step(progress: Progress, item: _Item, record: Record, repeat_steps: int) -> None:
    if item.method == "repeats":
        for _ in range(repeat_steps):
            progress.step("repeats")
    elif item.method != "required":
        progress.step(f"{record['task']} {'ok' if record['success'] else 'x'}")
