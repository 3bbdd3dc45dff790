"""run_many: order, concurrency against a real loopback server, one run at a time on an exclusive brain,
failures kept as stops, and Ctrl-C stopping every run with its transcript."""

from __future__ import annotations

import itertools
import json
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from helpers import answer_step, tool_step
from overlap_server import OverlapServer, serving
from shapeloop import (
    BackendError,
    Capabilities,
    Request,
    RouterBrain,
    ScriptedBrain,
    StopReason,
    TestBrain,
    run_many,
    tool,
)
from shapeloop.backends.llamacpp import LlamaCppBrain
from shapeloop.backends.openai import OpenAIBrain


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def task_of(request: Request) -> str:
    """The task a request belongs to (the first user message names it)."""
    return next(m["content"] for m in request.messages if m["role"] == "user")


def test_results_come_back_in_job_order_whatever_order_the_runs_end_in() -> None:
    finished: list[int] = []
    gates = [threading.Event() for _ in range(3)]

    def brain(index: int) -> ScriptedBrain:
        def answer(request: Request) -> str:
            # job 2 ends first, then 1, then 0: each waits for the one after it
            if index < 2:
                gates[index + 1].wait(timeout=10)
            return answer_step(f"answer {index}")

        return ScriptedBrain(answer)

    def done(index: int, run: Any) -> None:
        finished.append(index)
        gates[index].set()

    jobs = [{"brain": brain(i), "tools": [lookup], "task": f"task {i}"} for i in range(3)]
    runs = run_many(jobs, concurrency=3, on_done=done)
    assert finished == [2, 1, 0]
    assert [run.answer for run in runs] == ["answer 0", "answer 1", "answer 2"]
    assert all(run.stop is StopReason.ANSWERED for run in runs)


@pytest.fixture
def overlap_server() -> Iterator[OverlapServer]:
    with serving(hold=4) as server:
        yield server


def test_jobs_on_a_server_backend_send_their_requests_at_once(overlap_server: OverlapServer) -> None:
    with OpenAIBrain("fake", base_url=overlap_server.url) as brain:
        assert not brain.capabilities.exclusive
        jobs = [{"brain": brain, "tools": [lookup], "task": f"Look up key {i}."} for i in range(4)]
        runs = run_many(jobs, concurrency=4)
    assert [run.stop for run in runs] == [StopReason.ANSWERED] * 4, [run.reason for run in runs]
    assert overlap_server.most_in_flight == 4


def test_with_concurrency_one_the_same_jobs_never_overlap(overlap_server: OverlapServer) -> None:
    overlap_server.barrier = threading.Barrier(1)  # nothing held: the count alone is measured
    with OpenAIBrain("fake", base_url=overlap_server.url) as brain:
        jobs = [{"brain": brain, "tools": [lookup], "task": f"Look up key {i}."} for i in range(3)]
        runs = run_many(jobs, concurrency=1)
    assert all(run.ok for run in runs) and overlap_server.most_in_flight == 1


@pytest.mark.parametrize("exclusive", [True, False])
def test_an_exclusive_brain_runs_one_job_at_a_time_even_when_jobs_share_it(exclusive: bool) -> None:
    asked: list[str] = []
    second_run_asked = threading.Event()

    def answer(request: Request) -> str:
        task = task_of(request)
        asked.append(task)
        if len(set(asked)) > 1:
            second_run_asked.set()
        if len(request.messages) <= 2:  # a run's first step: wait for another run to cut in
            # where runs overlap, one will (the wait ends then, however loaded the machine); where
            # they cannot, the wait gives one the time to, and runs out
            second_run_asked.wait(timeout=0.3 if exclusive else 30)
            return tool_step("lookup", key=task)
        return answer_step(f"done {task}")

    brain = ScriptedBrain(answer, capabilities=Capabilities(exclusive=exclusive))
    jobs = [{"brain": brain, "tools": [lookup], "task": f"task {i}"} for i in range(4)]
    runs = run_many(jobs, concurrency=4)
    assert all(run.ok for run in runs), [run.reason for run in runs]
    runs_in_ask_order = [task for task, _ in itertools.groupby(asked)]
    interleaved = len(runs_in_ask_order) > len(set(runs_in_ask_order))
    assert interleaved is not exclusive, asked  # the shared server brain does overlap: the check can see it


def test_the_embedded_backend_declares_itself_exclusive_and_a_router_over_it_inherits_that() -> None:
    assert LlamaCppBrain.capabilities.exclusive
    assert RouterBrain(LlamaCppBrain.__new__(LlamaCppBrain), TestBrain()).capabilities.exclusive
    server = Capabilities(exclusive=False)
    pair = RouterBrain(ScriptedBrain([], capabilities=server), ScriptedBrain([], capabilities=server))
    assert not pair.capabilities.exclusive


def test_a_failing_job_is_a_run_with_a_stop_and_the_others_finish() -> None:
    def refuse(text: str) -> bool:
        raise RuntimeError("the acceptor broke")

    def broken(request: Request) -> str:
        raise KeyError("an untranslated library error")

    jobs: list[dict[str, Any]] = [
        {"brain": ScriptedBrain([answer_step("fine")]), "tools": [lookup], "task": "ok"},
        {"brain": ScriptedBrain(broken), "tools": [lookup], "task": "brain raises"},
        {"brain": ScriptedBrain([answer_step("x")]), "tools": [lookup], "task": "acceptor raises",
         "accept_answer": refuse},
        {"brain": ScriptedBrain([BackendError("server down", backend="x")]), "tools": [lookup], "task": "down"},
        {"brain": "not a brain", "tools": [lookup], "task": "bad brain"},
    ]  # fmt: skip
    runs = run_many(jobs, concurrency=2)
    assert [run.stop for run in runs] == [StopReason.ANSWERED, StopReason.ERROR, StopReason.ERROR,
                                          StopReason.BACKEND_ERROR, StopReason.ERROR]  # fmt: skip
    assert runs[0].answer == "fine"
    assert "job 1 raised KeyError" in runs[1].reason and "untranslated" in runs[1].reason
    assert "job 2 raised RuntimeError: the acceptor broke" in runs[2].reason
    assert runs[2].steps == 1 and any(e["kind"] == "reply" for e in runs[2].transcript.events)
    assert runs[2].transcript.entries[-1]["type"] == "error"
    assert "server down" in runs[3].reason
    assert "job 4 raised TypeError" in runs[4].reason and runs[4].steps == 0
    assert json.dumps(runs[2].to_dict())  # a failed run is as serialisable as any other


@pytest.mark.parametrize(
    ("job", "message"),
    [
        ({"brain": TestBrain(), "tools": []}, "job 1 lacks task"),
        ({"brain": TestBrain(), "tools": [], "task": "t", "max_step": 3}, "job 1 has max_step"),
        ("run this", "job 1 is a str"),
    ],
)
def test_a_malformed_job_is_refused_before_any_job_runs(job: Any, message: str) -> None:
    first = ScriptedBrain([answer_step("x")])
    with pytest.raises(ValueError, match=message):
        run_many([{"brain": first, "tools": [], "task": "t"}, job])
    assert first.asked == []
    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        run_many([{"brain": first, "tools": [], "task": "t"}], concurrency=0)


def test_ctrl_c_stops_every_run_with_its_transcript_and_queued_jobs_do_not_start() -> None:
    started = threading.Barrier(2, timeout=10)
    interrupted = threading.Event()

    def looping(first: bool) -> ScriptedBrain:
        count = itertools.count()

        def answer(request: Request) -> str:
            n = next(count)
            if n == 0:
                started.wait()  # both runs are under way
                if first and not interrupted.is_set():
                    interrupted.set()
                    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)  # Ctrl-C
            time.sleep(0.02)  # a model step takes a while; the loop notices the stop at its next event
            return tool_step("lookup", key=f"k{n}")  # a new key each step: never a repeat

        return ScriptedBrain(answer)

    # the runs have steps to spare (100 s of them), so the Ctrl-C lands while they run even on a busy
    # machine; each stops at its next event after it, long before that
    jobs = [{"brain": looping(i == 0), "tools": [lookup], "task": f"task {i}", "max_steps": 5000} for i in range(2)]
    jobs += [{"brain": ScriptedBrain([answer_step("never")]), "tools": [lookup], "task": f"queued {i}"}
             for i in range(2)]  # fmt: skip
    runs = run_many(jobs, concurrency=2)
    assert [run.stop for run in runs] == [StopReason.INTERRUPTED] * 4, [run.reason for run in runs]
    for run in runs[:2]:
        assert 1 <= run.steps < 5000 and "Ctrl-C" in run.reason
        assert any(e["kind"] == "reply" for e in run.transcript.events) and run.transcript.messages
    for run in runs[2:]:
        assert run.steps == 0 and "before the run started" in run.reason
    assert all(job["brain"].asked == [] for job in jobs[2:])
