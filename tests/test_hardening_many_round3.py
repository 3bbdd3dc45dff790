"""Issue 49, the rows of run_many, append_note and the command line: an ``on_done`` hook or a brain's
``capabilities`` that raises is that job's error (every other result comes back), appends to one file
in a batch keep the model's order, and bad CLI inputs are one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import answer_step
from shapeloop import BaseBrain, Capabilities, Reply, Request, ScriptedBrain, StopReason, run_agent, run_many, tool
from shapeloop.workspace import workspace_tools


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def job(answer: str) -> dict[str, Any]:
    return {"brain": ScriptedBrain([answer_step(answer)]), "tools": [lookup], "task": f"say {answer}"}


# -- run_many --------------------------------------------------------------------------------------


def test_an_on_done_hook_that_raises_once_is_that_jobs_error_and_every_other_run_comes_back() -> None:
    called: list[int] = []

    def done(index: int, run: Any) -> None:
        called.append(index)
        if index == 1:
            raise RuntimeError("the progress bar broke")

    runs = run_many([job(f"answer {i}") for i in range(4)], concurrency=2, on_done=done)
    assert sorted(called) == [0, 1, 2, 3]  # called once a job, the failed one included
    assert [run.stop for run in runs] == [StopReason.ANSWERED, StopReason.ERROR, StopReason.ANSWERED,
                                          StopReason.ANSWERED]  # fmt: skip
    assert [runs[i].answer for i in (0, 2, 3)] == ["answer 0", "answer 2", "answer 3"]
    failed = runs[1]
    assert failed.reason == (
        "job 1's on_done raised RuntimeError: the progress bar broke; the run itself ended answered: "
        + failed.events[-1].reason  # type: ignore[attr-defined]
    )
    assert failed.answer is None and failed.output is None and not failed.ok
    assert failed.steps == 1 and failed.events  # what the run did is kept
    assert failed.transcript.entries[-1] == {"type": "error", "step": 1,
                                             "error": "RuntimeError('the progress bar broke')"}  # fmt: skip
    assert json.dumps(failed.to_dict())


def test_an_on_done_hook_that_raises_on_every_job_loses_none_of_them() -> None:
    def done(index: int, run: Any) -> None:
        raise SystemExit(f"hook {index}")

    runs = run_many([job(f"answer {i}") for i in range(3)], on_done=done)
    assert [run.stop for run in runs] == [StopReason.ERROR] * 3
    assert all(f"job {i}'s on_done raised SystemExit: hook {i}" in run.reason for i, run in enumerate(runs))


class Unreadable(BaseBrain):
    """A brain whose ``capabilities`` (or ``members``) property raises."""

    def __init__(self, broken: str) -> None:
        self.broken = broken
        self.asked = 0

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        if self.broken == "capabilities":
            raise RuntimeError("capabilities unavailable")
        return Capabilities()

    @property
    def members(self) -> tuple[BaseBrain, ...]:
        if self.broken == "members":
            raise LookupError("members unavailable")
        return ()

    def ask(self, request: Request) -> Reply:
        self.asked += 1
        return Reply(text=answer_step("never"))


@pytest.mark.parametrize(("broken", "words"), [("capabilities", "RuntimeError"), ("members", "LookupError")])
def test_a_brain_whose_capabilities_raise_is_that_jobs_error_not_an_aborted_batch(broken: str, words: str) -> None:
    bad = Unreadable(broken)
    jobs = [job("first"), {"brain": bad, "tools": [lookup], "task": "t"}, job("last"),
            {"brain": bad, "tools": [lookup], "task": "again"}]  # fmt: skip
    runs = run_many(jobs, concurrency=2)
    assert [run.stop for run in runs] == [StopReason.ANSWERED, StopReason.ERROR, StopReason.ANSWERED,
                                          StopReason.ERROR]  # fmt: skip
    assert runs[1].reason.startswith(f"job 1 raised {words} reading its brain's capabilities: ")
    assert runs[3].reason.startswith(f"job 3 raised {words} reading its brain's capabilities: ")
    assert runs[1].steps == 0 and bad.asked == 0
    assert runs[1].transcript.entries[-1]["type"] == "error"


# -- append_note in a batch ------------------------------------------------------------------------


def test_appends_to_one_file_in_a_batch_land_in_the_models_order(tmp_path: Path) -> None:
    tools = workspace_tools(tmp_path, write=True)
    spellings = ["notes.txt", "./notes.txt", str(tmp_path / "notes.txt"), "sub/../notes.txt"]
    (tmp_path / "sub").mkdir()
    expected: list[str] = []
    for batch in range(10):
        lines = [f"batch {batch} line {n}" for n in range(8)]
        expected += lines
        step = {"calls": [{"name": "append_note", "arguments": {"path": spellings[n % 4], "text": line}}
                          for n, line in enumerate(lines)]}  # fmt: skip
        brain = ScriptedBrain([json.dumps(step), answer_step("done")])
        run = run_agent(brain, tools, "write the lines", batch=True, approve=lambda call: True)
        assert run.ok, run.reason
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8").splitlines() == expected


def test_append_note_declares_its_lock_key() -> None:
    # the docs say acting tools that share a file take a lock key: the built-in one does
    (note,) = [t for t in workspace_tools(".", write=True) if t.name == "append_note"]
    assert note.lock({"path": "a.txt", "text": "x"}) == note.lock({"path": "b/c.txt", "text": "y"}) is not None


# -- the command line ------------------------------------------------------------------------------


def shapeloop(*args: str, cache: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "SHAPELOOP_CACHE": str(cache), "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})}
    return subprocess.run([sys.executable, "-m", "shapeloop.cli", *args], capture_output=True, text=True,
                          env=environ, timeout=60, errors="replace")  # fmt: skip


def one_error_line(done: subprocess.CompletedProcess[str], *words: str, after_run: bool = False) -> None:
    """Exit 2 and one error line on standard error (the last, after a run's progress lines)."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    line = lines[-1] if after_run else lines[0]
    assert len(lines) == 1 or after_run, done.stderr
    assert [one for one in lines if one.startswith("shapeloop: error: ")] == [line], done.stderr
    assert all(word in line for word in words), line


def test_an_output_schema_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_bytes(b'{"description": "caf\xe9", "type": "string"}')
    done = shapeloop("run", "t", "--root", str(tmp_path), "--output-schema", str(schema), cache=tmp_path)
    one_error_line(done, f"--output-schema {schema} is not UTF-8", "byte 0xe9 at position 20", "save it as UTF-8")


@pytest.mark.parametrize(
    ("backend", "url", "words"),
    [
        ("openai", "http://[::1/v1", "is not a URL"),
        ("openai", "http://127.0.0.1:99999/v1", "Port out of range"),
        ("openai", "::x::", "http://"),
        ("openai", "127.0.0.1:8000/v1", "http://"),
        ("instructor", "http://[::1/v1", "is not a URL"),
        ("ollama", "http://[::1", "is not a URL"),
        ("ollama", "localhost:99999", "Port out of range"),
        ("ollama", "::x::", "is not a URL"),
    ],
)
def test_a_malformed_base_url_is_one_line_before_any_model(tmp_path: Path, backend: str, url: str, words: str) -> None:
    done = shapeloop("run", "t", "--root", str(tmp_path), "--backend", backend, "--model", "m", "--base-url", url,
                     cache=tmp_path)  # fmt: skip
    one_error_line(done, f"--base-url {url!r}", words)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://api.example.com/v1/", "http://[::1]:8000/v1"])
def test_a_good_base_url_is_not_refused(url: str) -> None:
    from shapeloop.cli import _base_url_problem

    assert _base_url_problem(url, backend="openai") is None
    assert _base_url_problem(url, backend="ollama") is None
    assert _base_url_problem("localhost:11434", backend="ollama") is None  # Ollama takes a bare host


def test_an_answer_the_standard_output_cannot_encode_is_one_line_and_exit_two(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([answer_step("Straße → 東京")]))
    args = ("run", "t", "--root", str(tmp_path), "--script", str(script))
    done = shapeloop(*args, cache=tmp_path, env={"PYTHONIOENCODING": "ascii"})
    one_error_line(
        done, "cannot be written to standard output", "'ascii'", "PYTHONIOENCODING=utf-8", "--json", after_run=True
    )
    assert done.stdout == ""
    as_json = shapeloop(*args, "--json", cache=tmp_path, env={"PYTHONIOENCODING": "ascii"})
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["answer"] == "Straße → 東京"  # JSON escapes what the stream cannot hold


def test_policies_taking_one_out_is_written_with_an_equals_sign(tmp_path: Path) -> None:
    done = shapeloop("run", "t", "--root", str(tmp_path), "--policies", "-fit-floor", cache=tmp_path)
    one_error_line(done, "a value that starts with '-' takes '='", "--policies=default,-NAME")
    helped = shapeloop("run", "--help", cache=tmp_path)
    assert "--policies=default,-NAMEtakesoneout" in "".join(helped.stdout.split())  # however the help wraps


def test_one_policy_given_for_policies_says_what_to_write() -> None:
    from shapeloop.policies import LookupHint

    brain = ScriptedBrain([answer_step("x")])
    with pytest.raises(TypeError, match=r"not one: write policies=\[LookupHint\(...\)\], or policies=\[\*shapeloop"):
        run_agent(brain, [lookup], "t", policies=LookupHint())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="policies takes a sequence of Policy objects, not a int"):
        run_agent(brain, [lookup], "t", policies=3)  # type: ignore[arg-type]
    assert brain.asked == []
