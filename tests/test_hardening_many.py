"""Issue 35, run_many's rows: every exclusive model a brain is made of serves one run at a time, and
one job's BaseException, a hung brain or Ctrl-C loses no finished run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from helpers import answer_step
from shapeloop import BaseBrain, Brain, Capabilities, Reply, Request, RouterBrain, ScriptedBrain, StopReason, run_many
from shapeloop.brain import FunctionBrain
from shapeloop.many import exclusive_models


class Counting(BaseBrain):
    """A brain that counts the threads inside its ``ask`` at once; it waits a little inside, for a
    second thread to come in where one can."""

    def __init__(self, *, capabilities: Capabilities | None = None) -> None:
        if capabilities is not None:
            self.capabilities = capabilities
        self.inside = 0
        self.peak = 0
        self._lock = threading.Lock()
        self._two = threading.Event()

    def ask(self, request: Request) -> Reply:
        with self._lock:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
            if self.inside > 1:
                self._two.set()
        self._two.wait(timeout=0.05)  # where another thread can come in, it does, and ends the wait
        with self._lock:
            self.inside -= 1
        return Reply(text=answer_step("ok"))


class Wrapper(BaseBrain):
    """A user's own wrapper (it could log or retry), declaring the brain it asks."""

    def __init__(self, inner: Brain, *, declare: bool = True) -> None:
        self.inner = inner
        self.declare = declare

    @property
    def members(self) -> Sequence[Brain]:
        return (self.inner,) if self.declare else ()

    def ask(self, request: Request) -> Reply:
        return self.inner.ask(request)


SERVER = Capabilities(exclusive=False)


def jobs_of(brains: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"brain": brain, "tools": [], "task": f"task {i}"} for i, brain in enumerate(brains)]


def test_a_shared_exclusive_brain_inside_per_job_routers_is_entered_by_one_thread_at_a_time() -> None:
    model = Counting()  # exclusive: the default
    runs = run_many(jobs_of([RouterBrain(model, Counting(capabilities=SERVER)) for _ in range(40)]), concurrency=8)
    assert [run.stop for run in runs] == [StopReason.ANSWERED] * 40, [run.reason for run in runs]
    assert model.peak == 1


def test_a_shared_exclusive_brain_inside_a_users_wrappers_is_entered_by_one_thread_at_a_time() -> None:
    model = Counting()
    runs = run_many(jobs_of([Wrapper(model) for _ in range(24)]), concurrency=8)
    assert all(run.ok for run in runs) and model.peak == 1
    # the same wrappers, not declaring what they ask: the check can see the overlap it prevents
    undeclared = Counting()
    run_many(jobs_of([Wrapper(undeclared, declare=False) for _ in range(24)]), concurrency=8)
    assert undeclared.peak > 1


def test_a_plain_basebrain_subclass_shared_by_16_jobs_is_exclusive_by_default() -> None:
    model = Counting()
    assert model.capabilities.exclusive
    runs = run_many(jobs_of([model] * 16), concurrency=16)
    assert all(run.ok for run in runs) and model.peak == 1


def test_a_brain_that_declares_a_server_is_asked_at_once() -> None:
    model = Counting(capabilities=SERVER)
    runs = run_many(jobs_of([model] * 8), concurrency=8)
    assert all(run.ok for run in runs) and model.peak > 1


def test_a_shared_function_brain_is_exclusive_unless_declared_otherwise() -> None:
    inside, peak, lock = [0], [0], threading.Lock()

    def fn(messages: list[Any], schema: Any) -> str:
        with lock:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        time.sleep(0.02)
        with lock:
            inside[0] -= 1
        return answer_step("ok")

    runs = run_many(jobs_of([fn] * 8), concurrency=8)
    assert all(run.ok for run in runs) and peak[0] == 1
    assert exclusive_models(ScriptedBrain(fn, capabilities=SERVER)) == []


def test_exclusive_models_walks_members_once_through_cycles_and_sharing() -> None:
    model = Counting()
    outer = Wrapper(Wrapper(model))
    router = RouterBrain(outer, model)
    found = exclusive_models(router)
    assert model in found and sum(item is model for item in found) == 1
    loop = Wrapper(model)
    loop.inner = loop  # a wrapper that names itself: walked once, not forever
    assert exclusive_models(loop) == [loop]


def test_one_jobs_system_exit_is_that_jobs_error_stop_and_the_other_19_finish() -> None:
    def brain(index: int) -> ScriptedBrain:
        return ScriptedBrain([SystemExit(3) if index == 7 else answer_step(f"answer {index}")])

    runs = run_many(jobs_of([brain(i) for i in range(20)]), concurrency=4)
    assert [run.answer for i, run in enumerate(runs) if i != 7] == [f"answer {i}" for i in range(20) if i != 7]
    failed = runs[7]
    assert failed.stop is StopReason.ERROR and failed.reason == "job 7 raised SystemExit: 3"
    kinds = [entry.get("kind") or entry["type"] for entry in failed.transcript]
    assert kinds[-2:] == ["stop", "error"] and "step" in kinds
    assert failed.transcript.entries[-1]["error"] == "SystemExit(3)"
    assert failed.transcript.events[-1]["stop"] == "error"
    assert json.dumps(failed.to_dict())


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of a test, so a brain that hangs lets its thread end."""
    event = threading.Event()
    yield event
    event.set()


def hung_then_ctrl_c(release: threading.Event, finished: threading.Barrier, *, twice: bool) -> ScriptedBrain:
    def hang(request: Request) -> str:
        finished.wait()  # the other jobs have ended
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        if twice:
            time.sleep(0.2)
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        release.wait()  # a brain that never returns, with no max_seconds
        return answer_step("too late")

    return ScriptedBrain(hang)


@pytest.mark.parametrize("twice", [False, True])
def test_after_ctrl_c_a_hung_brain_does_not_keep_run_many_from_returning_the_finished_runs(
    release: threading.Event, twice: bool
) -> None:
    finished = threading.Barrier(2, timeout=20)
    jobs = jobs_of([ScriptedBrain([answer_step(f"answer {i}")]) for i in range(3)])
    jobs.insert(0, {"brain": hung_then_ctrl_c(release, finished, twice=twice), "tools": [], "task": "hangs"})

    def done(index: int, run: Any) -> None:
        if index == 3:
            finished.wait()

    begun = time.monotonic()
    runs = run_many(jobs, concurrency=2, on_done=done, grace_seconds=30 if twice else 1.0)
    assert time.monotonic() - begun < 15
    assert [run.answer for run in runs[1:4]] == ["answer 0", "answer 1", "answer 2"]
    hung = runs[0]
    assert hung.stop is StopReason.INTERRUPTED and "did not reach its next event" in hung.reason
    assert hung.steps == 1 and [e["kind"] for e in hung.transcript.events][-1] == "stop"


def test_a_hung_worker_does_not_hold_the_process_at_exit(tmp_path: Any) -> None:
    script = textwrap.dedent(
        """
        import os, signal, threading, time
        from shapeloop import Request, ScriptedBrain, run_many

        def hang(request: Request):
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
            threading.Event().wait()

        runs = run_many([{"brain": ScriptedBrain(hang), "tools": [], "task": "t"}], grace_seconds=0.2)
        print(runs[0].stop.value)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "interrupted"


def test_a_function_brain_that_declares_a_server_is_asked_at_once() -> None:
    inside, peak, lock = [0], [0], threading.Lock()
    two = threading.Event()

    def fn(messages: list[Any], schema: Any) -> str:
        with lock:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
            if inside[0] > 1:
                two.set()
        two.wait(timeout=0.5)
        with lock:
            inside[0] -= 1
        return answer_step("ok")

    server = FunctionBrain(fn, capabilities=SERVER)
    runs = run_many(jobs_of([server] * 4), concurrency=4)
    assert all(run.ok for run in runs) and peak[0] > 1
    assert exclusive_models(server) == [] and exclusive_models(FunctionBrain(fn)) != []
