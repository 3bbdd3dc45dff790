"""Many runs at once: ``run_many`` runs ``run_agent`` jobs on a pool of threads, results in job order.

Threads rather than asyncio: a run waits on its server (a socket) or in llama.cpp's C code, both of
which release the GIL, so one synchronous core serves every backend and nothing is written twice.
Every exclusive model a job's brain is made of (the brain itself and, through ``members``, every
brain it asks: a router's, a user's wrapper's) is lent to one run at a time, however many jobs
share it; brains that talk to a server are asked at once. The workers are daemon threads: a brain
that never returns cannot keep ``run_many`` (after Ctrl-C) or the process (at exit) waiting.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

from shapeloop.agent import run_agent
from shapeloop.brain import BaseBrain, Brain, Usage, as_brain
from shapeloop.events import Event, ModeChanged, ReplyReceived, RunStopped, StepBegan
from shapeloop.run import AgentRun, Mode, StopReason, Transcript
from shapeloop.settings import RunSettings, settings_of

Job = Mapping[str, Any]
"""One run: ``run_agent``'s keyword arguments (``brain``, ``tools``, ``task``, ``settings`` and any
field of :class:`~shapeloop.RunSettings`)."""

_NEEDED = ("brain", "tools", "task")
# what run_agent takes besides the settings' fields (its **options)
_OWN = frozenset(name for name, p in inspect.signature(run_agent).parameters.items() if p.kind is not p.VAR_KEYWORD)
_POLL = 0.1  # seconds between looks at the cancel flag while waiting: Ctrl-C reaches the main thread between them


def run_many(
    jobs: Iterable[Job],
    *,
    concurrency: int = 4,
    on_done: Callable[[int, AgentRun], None] | None = None,
    grace_seconds: float = 5.0,
) -> list[AgentRun]:
    """Run every job through :func:`~shapeloop.run_agent`, ``concurrency`` at a time.

    A job that raises (anything, ``SystemExit`` included; its brain's ``capabilities`` or
    ``members`` too, read before anything runs) becomes an :class:`~shapeloop.AgentRun` stopped as
    ``error`` (the exception in its ``reason``, the events so far in its transcript), so one bad job
    never loses the batch. Ctrl-C stops every run at its next event, each with its
    transcript and an ``interrupted`` stop; jobs not started yet are returned as ``interrupted``
    with no steps. A run still inside its brain or a tool ``grace_seconds`` after Ctrl-C (or at
    a second Ctrl-C) is returned as ``interrupted`` with its events so far, and left behind.

    Args:
        jobs: mappings of ``run_agent``'s keyword arguments; each needs ``brain``, ``tools`` and
            ``task``, and may give ``settings`` (one :class:`~shapeloop.RunSettings` may serve every
            job) and fields of it in place of its own. Each job's settings are made (and checked)
            before anything runs. Jobs may share a brain: each exclusive model in it
            (``Capabilities.exclusive``, found through :attr:`~shapeloop.BaseBrain.members`) serves
            one run at a time.
        concurrency: runs in flight at once (threads).
        on_done: called as ``on_done(index, run)`` when each job ends, one call at a time (a
            progress bar), from the thread that ran it. If it raises, that job comes back stopped as
            ``error`` (the hook's exception and how the run itself ended in its ``reason``); the
            other jobs are not touched.
        grace_seconds: after Ctrl-C, how long the runs in flight may take to reach their next event.

    Returns:
        One run per job, in the jobs' order.

    Raises:
        ValueError: ``concurrency`` is below 1, ``grace_seconds`` below 0, or a job is not a mapping,
            lacks a required key, names an option ``run_agent`` does not take, or has settings
            :class:`~shapeloop.RunSettings` refuses (checked before anything runs, the job named).
    """
    batch = _Batch(list(jobs), on_done)
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if not grace_seconds >= 0:
        raise ValueError(f"grace_seconds must be 0 or more, got {grace_seconds!r}")
    if not batch.jobs:
        return []
    try:
        for n in range(min(concurrency, len(batch.jobs))):
            threading.Thread(target=batch.work, name=f"shapeloop-run-{n}", daemon=True).start()
        batch.wait(deadline=None)
    except KeyboardInterrupt:
        batch.cancel.set()  # each run stops at its next event; queued jobs do not start
        with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: return what is there now
            batch.wait(deadline=time.monotonic() + grace_seconds)
    return batch.collect()


class _Batch:
    def __init__(self, jobs: list[Job], on_done: Callable[[int, AgentRun], None] | None) -> None:
        self.jobs = [_made(index, job) for index, job in enumerate(jobs)]
        self.on_done = on_done
        self.cancel = threading.Event()
        self.results: dict[int, AgentRun] = {}
        self.recorders: dict[int, _Recorder] = {}
        self._next = iter(range(len(jobs)))
        self._next_lock = threading.Lock()
        self._done_lock = threading.Lock()
        self._collected = False
        self._locks = _Locks(job["brain"] for job in self.jobs)
        self._left = len(jobs)  # jobs not taken by a worker yet
        self._in_flight = 0  # jobs taken and not ended
        self._changed = threading.Event()  # a job was taken or ended

    def work(self) -> None:
        """A worker: take the next job until none is left or the batch is cancelled."""
        while True:
            with self._next_lock:
                index = None if self.cancel.is_set() else next(self._next, None)
                if index is None:
                    return
                self._left -= 1
                self._in_flight += 1
            try:
                self.run(index)
            finally:
                with self._next_lock:
                    self._in_flight -= 1
                self._changed.set()

    def wait(self, *, deadline: float | None) -> None:
        """Wait until no job runs and none will start (or until the deadline), in short waits, so
        Ctrl-C reaches this thread between them. Not ``Thread.join``: a KeyboardInterrupt inside it
        can leave a running thread marked as ended."""
        while True:
            self._changed.clear()
            with self._next_lock:
                if self._in_flight == 0 and (self._left == 0 or self.cancel.is_set()):
                    return
            if deadline is not None and time.monotonic() >= deadline:
                return
            self._changed.wait(_POLL)

    def run(self, index: int) -> None:
        job = self.jobs[index]
        unread = self._locks.unread.get(id(job["brain"]))
        if unread is not None:  # which models it holds is unknown, so it cannot be lent safely
            run = _failed(job, index, unread, (), doing="reading its brain's capabilities")
        else:
            with self._locks.lent(job["brain"], self.cancel) as lent:
                run = self._run(index, job) if lent and not self.cancel.is_set() else _not_started(job)
        with self._done_lock:
            if self._collected:
                return  # run_many has returned (this run outlived Ctrl-C's grace): nobody is listening
            if self.on_done is not None:
                try:
                    self.on_done(index, run)
                except BaseException as exc:  # noqa: BLE001 - the caller's hook failing is this job's error
                    run = _hook_failed(run, index, exc)
            self.results[index] = run

    def _run(self, index: int, job: Job) -> AgentRun:
        recorder = self.recorders[index] = _Recorder(self.cancel)
        settings: RunSettings[Any] = job["settings"]
        try:
            return run_agent(**{**job, "settings": settings.replace(on_event=(recorder, *settings.sinks))})
        except BaseException as exc:  # noqa: BLE001 - any failure of a job (SystemExit too) is that job's stop
            return _failed(job, index, exc, recorder.snapshot())

    def collect(self) -> list[AgentRun]:
        """One run per job, in order: what ended, and the rest as interrupted."""
        with self._done_lock:
            self._collected = True
            results = dict(self.results)
        runs = []
        for index, job in enumerate(self.jobs):
            recorder = self.recorders.get(index)
            if index in results:
                runs.append(results[index])
            elif recorder is not None:
                runs.append(_abandoned(job, recorder.snapshot()))
            else:
                runs.append(_not_started(job))
        return runs


class _Locks:
    """One lock for each exclusive model the jobs' brains are made of, keyed by the model's identity;
    ``unread`` holds what a brain raised when its ``capabilities`` or ``members`` were read."""

    def __init__(self, brains: Iterable[object]) -> None:
        self._held: dict[int, tuple[object, threading.Lock]] = {}  # the object is kept so its id stays its own
        self._of: dict[int, list[threading.Lock]] = {}
        self.unread: dict[int, BaseException] = {}
        order = itertools.count()
        rank: dict[int, int] = {}
        for brain in brains:
            if id(brain) in self._of or id(brain) in self.unread:
                continue
            try:
                models = exclusive_models(brain)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 - a user's brain failing is its jobs' error
                self.unread[id(brain)] = exc
                continue
            for model in models:
                if id(model) not in self._held:
                    self._held[id(model)] = (model, threading.Lock())
                    rank[id(model)] = next(order)
            # taken in one global order, so two jobs that need the same two models cannot deadlock
            self._of[id(brain)] = [self._held[id(m)][1] for m in sorted(models, key=lambda m: rank[id(m)])]

    @contextmanager
    def lent(self, brain: object, cancel: threading.Event) -> Iterator[bool]:
        """Hold every lock ``brain`` needs; yields False when the batch was cancelled while waiting."""
        with ExitStack() as stack:
            for lock in self._of.get(id(brain), ()):
                while not lock.acquire(timeout=_POLL):
                    if cancel.is_set():
                        yield False
                        return
                stack.callback(lock.release)
            yield True


def exclusive_models(brain: Brain | Callable[..., Any] | object) -> list[object]:
    """The objects in ``brain`` that must serve one run at a time: ``brain`` itself and every brain it
    names in :attr:`~shapeloop.BaseBrain.members` (at any depth) that declares itself exclusive.

    A plain function is its own model: exclusive, as :class:`~shapeloop.brain.FunctionBrain` declares
    by default. Each object is named once; a cycle of members is walked once.
    """
    found: dict[int, object] = {}
    seen: set[int] = set()
    pending: list[object] = [brain]
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if _exclusive(item):
            found[id(item)] = item
        if isinstance(item, BaseBrain):
            pending.extend(reversed(list(item.members)))
    return list(found.values())


def _exclusive(brain: object) -> bool:
    try:
        return as_brain(brain).capabilities.exclusive  # type: ignore[arg-type]
    except TypeError:
        return False  # not a brain at all: its run fails, and says so, as a stop of its own


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

    def snapshot(self) -> tuple[Event, ...]:
        """The events so far (the run's thread may still be adding to them)."""
        return tuple(self.events)


def _made(index: int, job: object) -> Job:
    """The job with its settings made: its ``settings`` (or the defaults) with its own options in place.

    Raises:
        ValueError: what :func:`run_many` refuses before anything runs, the job named.
    """
    if not isinstance(job, Mapping):
        raise ValueError(f"job {index} is a {type(job).__name__}; a job is a mapping of run_agent's keyword arguments")
    missing = [key for key in _NEEDED if key not in job]
    if missing:
        raise ValueError(f"job {index} lacks {', '.join(missing)}: every job needs brain, tools and task")
    unknown = sorted(set(job) - _OWN - RunSettings.fields())
    if unknown:
        raise ValueError(f"job {index} has {', '.join(unknown)}, which run_agent does not take")
    own = {key: value for key, value in job.items() if key in _OWN and key != "settings"}
    options = {key: value for key, value in job.items() if key not in _OWN}
    if own.get("output_type") is not None:  # run_agent names it apart only for type checkers
        options["output_type"] = own.pop("output_type")
    try:
        settings = settings_of(job.get("settings"), options, who=f"job {index}")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"job {index}: {exc}") from exc
    return {**own, "settings": settings}


def _not_started(job: Job) -> AgentRun:
    return _stopped(job, (), StopReason.INTERRUPTED, "interrupted by the user (Ctrl-C) before the run started")


def _abandoned(job: Job, seen: Sequence[Event]) -> AgentRun:
    step = max((e.step for e in seen), default=0)
    reason = (
        f"interrupted by the user (Ctrl-C) during step {step}; the run did not reach its next event in time "
        "(its brain or a tool did not return) and was left behind"
    )
    return _stopped(job, seen, StopReason.INTERRUPTED, reason)


def _failed(job: Job, index: int, exc: BaseException, seen: Sequence[Event], *, doing: str = "") -> AgentRun:
    reason = f"job {index} raised {type(exc).__name__}{f' {doing}' if doing else ''}: {exc}"
    return _stopped(job, seen, StopReason.ERROR, reason, error=repr(exc))


def _hook_failed(run: AgentRun, index: int, exc: BaseException) -> AgentRun:
    """``run`` as the error it became when ``on_done`` raised on it: its events and transcript kept,
    with the hook's exception as a last ``error`` entry, and how the run itself ended in the reason."""
    reason = (
        f"job {index}'s on_done raised {type(exc).__name__}: {exc}; the run itself ended {run.stop.value}: {run.reason}"
    )
    transcript = Transcript(entries=list(run.transcript.entries))
    transcript.add({"type": "error", "step": run.steps, "error": repr(exc)})
    return dataclasses.replace(run, stop=StopReason.ERROR, reason=reason, answer=None, output=None,
                               transcript=transcript)  # fmt: skip


def _stopped(job: Job, seen: Sequence[Event], stop: StopReason, reason: str, *, error: str | None = None) -> AgentRun:
    """A run that ``run_agent`` did not return: its events so far, an ``error`` entry, and its stop."""
    step = max((e.step for e in seen), default=0)
    stopped = RunStopped(step=step, stop=stop, reason=reason)
    events = (*seen, stopped)
    transcript = Transcript()
    for event in events:
        transcript.add_event(event)
    if error is not None:
        transcript.add({"type": "error", "step": step, "error": error})
    usages = [e.usage for e in seen if isinstance(e, ReplyReceived) and e.usage is not None]
    return AgentRun(stop=stop, reason=reason, answer=None, steps=step, mode=_mode(job, seen),
                    usage=sum(usages, Usage()) if usages else None, transcript=transcript,
                    events=events)  # fmt: skip


def _mode(job: Job, seen: Sequence[Event]) -> Mode:
    """The mode the run was last in: from its events, else the one the job's settings ask for."""
    for event in reversed(seen):
        if isinstance(event, (ModeChanged, StepBegan)):
            return event.mode
    return Mode(job["settings"].mode)
