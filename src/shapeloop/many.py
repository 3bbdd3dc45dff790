"""Many runs at once: ``run_many`` runs ``run_agent`` jobs on a pool of threads, results in job order.

Threads rather than asyncio: a run waits on its server (a socket) or in llama.cpp's C code, both of
which release the GIL, so one synchronous core serves every backend and nothing is written twice.
A brain that declares itself ``exclusive`` (one model, one context: the embedded backend) is lent
to one run at a time, however many jobs share it; brains that talk to a server are asked at once.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any

from shapeloop.brain import Brain, Usage, as_brain
from shapeloop.events import Event, ModeChanged, ReplyReceived, RunStopped, Sink, StepBegan
from shapeloop.loop import run_agent
from shapeloop.run import AgentRun, Mode, StopReason, Transcript

Job = Mapping[str, Any]
"""One run: ``run_agent``'s keyword arguments (``brain``, ``tools``, ``task``, and any option)."""

_NEEDED = ("brain", "tools", "task")
_OPTIONS = frozenset(inspect.signature(run_agent).parameters)


def run_many(
    jobs: Iterable[Job],
    *,
    concurrency: int = 4,
    on_done: Callable[[int, AgentRun], None] | None = None,
) -> list[AgentRun]:
    """Run every job through :func:`~shapeloop.run_agent`, ``concurrency`` at a time.

    A job that raises becomes an :class:`~shapeloop.AgentRun` stopped as ``error`` (the exception
    in its ``reason``, the events so far in its transcript), so one bad job never loses the batch.
    Ctrl-C stops every run at its next event, each with its transcript and an ``interrupted``
    stop; jobs not started yet are returned as ``interrupted`` with no steps.

    Args:
        jobs: mappings of ``run_agent``'s keyword arguments; each needs ``brain``, ``tools`` and
            ``task``. Jobs may share a brain: an ``exclusive`` one (``Capabilities.exclusive``)
            runs one of them at a time, the others concurrently.
        concurrency: runs in flight at once (threads).
        on_done: called as ``on_done(index, run)`` when each job ends, one call at a time (a
            progress bar), from the thread that ran it.

    Returns:
        One run per job, in the jobs' order.

    Raises:
        ValueError: ``concurrency`` is below 1, or a job is not a mapping, lacks a required key or
            names an option ``run_agent`` does not take (checked before anything runs).
    """
    batch = _Batch(list(jobs), on_done)
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if not batch.jobs:
        return []
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="shapeloop-run")
    futures: list[Future[AgentRun]] = []
    try:
        for index in range(len(batch.jobs)):
            futures.append(pool.submit(batch.run, index))
        while wait(futures, timeout=0.5).not_done:
            pass  # short waits: Ctrl-C reaches this thread between them on every platform
    except KeyboardInterrupt:
        batch.cancel.set()  # each run stops at its next event; queued jobs do not start
    finally:
        pool.shutdown(wait=True)
    for future in futures:
        future.result()  # raises what the caller's on_done raised
    return [batch.results.get(index) or _not_started(job) for index, job in enumerate(batch.jobs)]


class _Batch:
    def __init__(self, jobs: list[Job], on_done: Callable[[int, AgentRun], None] | None) -> None:
        for index, job in enumerate(jobs):
            _check(index, job)
        self.jobs = jobs
        self.on_done = on_done
        self.cancel = threading.Event()
        self.results: dict[int, AgentRun] = {}
        self._done_lock = threading.Lock()
        # one lock per exclusive brain, keyed by identity (the jobs keep every brain alive)
        self._locks = {id(job["brain"]): threading.Lock() for job in jobs if _exclusive(job["brain"])}

    def run(self, index: int) -> AgentRun:
        job = self.jobs[index]
        with self._lent(job["brain"]):
            run = _not_started(job) if self.cancel.is_set() else self._run(index, job)
        self.results[index] = run
        if self.on_done is not None:
            with self._done_lock:
                self.on_done(index, run)
        return run

    @contextmanager
    def _lent(self, brain: object) -> Iterator[None]:
        lock = self._locks.get(id(brain))
        if lock is None:
            yield
            return
        with lock:
            yield

    def _run(self, index: int, job: Job) -> AgentRun:
        recorder = _Recorder(self.cancel)
        given = job.get("on_event")
        sinks: list[Sink] = [recorder]
        if given is not None:
            sinks += [given] if callable(given) else list(given)
        try:
            return run_agent(**{**job, "on_event": sinks})
        except Exception as exc:  # noqa: BLE001 - any failure of a job is that job's stop, not the batch's
            return _failed(job, index, exc, recorder.events)


class _Recorder:
    """Keeps a run's events (for the record of a run that raises) and stops it once the batch is cancelled."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self.events: list[Event] = []
        self._raised = False

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if self.cancel.is_set() and not self._raised:
            self._raised = True
            # the loop turns this into an `interrupted` stop with the transcript so far, as for Ctrl-C
            raise KeyboardInterrupt


def _check(index: int, job: object) -> None:
    if not isinstance(job, Mapping):
        raise ValueError(f"job {index} is a {type(job).__name__}; a job is a mapping of run_agent's keyword arguments")
    missing = [key for key in _NEEDED if key not in job]
    if missing:
        raise ValueError(f"job {index} lacks {', '.join(missing)}: every job needs brain, tools and task")
    unknown = sorted(set(job) - _OPTIONS)
    if unknown:
        raise ValueError(f"job {index} has {', '.join(unknown)}, which run_agent does not take")


def _exclusive(brain: Brain | Callable[..., Any]) -> bool:
    try:
        return as_brain(brain).capabilities.exclusive
    except TypeError:
        return False  # not a brain at all: its run fails, and says so, as a stop of its own


def _not_started(job: Job) -> AgentRun:
    reason = "interrupted by the user (Ctrl-C) before the run started"
    transcript = Transcript()
    stopped = RunStopped(step=0, stop=StopReason.INTERRUPTED, reason=reason)
    transcript.add_event(stopped)
    return AgentRun(stop=StopReason.INTERRUPTED, reason=reason, answer=None, steps=0, mode=_mode(job, ()),
                    usage=None, transcript=transcript, events=(stopped,))  # fmt: skip


def _failed(job: Job, index: int, exc: Exception, seen: Sequence[Event]) -> AgentRun:
    reason = f"job {index} raised {type(exc).__name__}: {exc}"
    step = max((e.step for e in seen), default=0)
    stopped = RunStopped(step=step, stop=StopReason.ERROR, reason=reason)
    events = (*seen, stopped)
    transcript = Transcript()
    for event in events:
        transcript.add_event(event)
    transcript.entries.append({"type": "error", "step": step, "error": repr(exc)})
    usages = [e.usage for e in seen if isinstance(e, ReplyReceived) and e.usage is not None]
    return AgentRun(stop=StopReason.ERROR, reason=reason, answer=None, steps=step, mode=_mode(job, seen),
                    usage=sum(usages, Usage()) if usages else None, transcript=transcript,
                    events=events)  # fmt: skip


def _mode(job: Job, seen: Sequence[Event]) -> Mode:
    """The mode the run was last in: from its events, else the one the job asked for."""
    for event in reversed(seen):
        if isinstance(event, (ModeChanged, StepBegan)):
            return event.mode
    try:
        return Mode(job.get("mode", Mode.CONSTRAINED))
    except ValueError:
        return Mode.CONSTRAINED
