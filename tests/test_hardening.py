"""Bad text, hung calls, lost transcripts and policy mistakes, with the scripted brain."""

import io
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from helpers import answer_step, tool_step
from shapeloop import (
    BaseBrain,
    ConsoleSink,
    JsonlSink,
    Reply,
    Request,
    ScriptedBrain,
    StopReason,
    Tool,
    TranscriptError,
    run_agent,
    tool,
)
from shapeloop.backends._common import parse_arguments
from shapeloop.text import escape_surrogates, printable, to_json


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return {"colour": "red"}.get(key, "unknown")


@tool
def weird(kind: str) -> object:
    """Return odd text."""
    return {"surrogate": "a\ud800b", "bytes": b"caf\xe9", "escaped": "caf\udce9"}[kind]


def entries(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# Text


def test_lone_surrogates_in_results_and_replies_are_escaped_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    brain = ScriptedBrain(
        [
            tool_step("weird", kind="surrogate"),
            tool_step("weird", kind="bytes"),
            tool_step("weird", kind="escaped"),
            answer_step("done \ud83d") + " ",
        ]
    )
    out = io.StringIO()
    run = run_agent(brain, [weird], "t\udcff", transcript_path=path, on_event=ConsoleSink(out, color=False))
    assert run.ok and run.answer == "done \\ud83d"
    results = [e["text"] for e in entries(path) if e.get("kind") == "tool_result"]
    assert results == ["a\\ud800b", "caf\\xe9", "caf\\xe9"]
    assert "t\\xff" in [e.get("content") for e in entries(path)]
    json.dumps(run.to_dict(), ensure_ascii=False).encode("utf-8")
    out.getvalue().encode("utf-8")
    for asked in brain.asked:
        for message in asked.messages:
            message["content"].encode("utf-8")


def test_escaping_helpers() -> None:
    assert escape_surrogates("caf\udce9 \ud800 ok é") == "caf\\xe9 \\ud800 ok é"
    assert json.loads(to_json({"k\ud800": "v\udce9"})) == {"k\ud800": "v\udce9"}
    to_json({"k\ud800": "v\udce9"}).encode("utf-8")
    assert printable("a\x1b]0;title\x07b\x1b[8mhidden\x9b\r\nc\td") == "a]0;titleb[8mhidden\nc\td"


def test_the_console_strips_control_characters_from_model_text() -> None:
    out = io.StringIO()
    reply = answer_step("\x1b]0;owned\x07\x1b[8mhidden")
    run_agent(ScriptedBrain([reply]), [], "t", on_event=ConsoleSink(out, color=False))
    assert "\x1b" not in out.getvalue() and "\x07" not in out.getvalue()
    assert "]0;owned[8mhidden" in out.getvalue()


# Parsing depth


@pytest.mark.parametrize("reply", ["[" * 5000, "{" * 5000, '{"a":' * 5000 + "1" + "}" * 5000])
def test_deeply_nested_replies_never_raise_recursion_error(reply: str) -> None:
    for mode in ("constrained", "prose"):
        run = run_agent(ScriptedBrain([reply, answer_step("ok")]), [], "t", mode=mode)  # type: ignore[arg-type]
        assert run.ok and run.answer == "ok"


def test_deeply_nested_native_arguments_are_kept_unparsed() -> None:
    raw = "[" * 100_000
    assert parse_arguments(raw) == {"_unparsed": raw}


# Transcript


def test_the_transcript_is_on_disk_before_the_run_ends(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    seen: list[list[dict[str, object]]] = []

    def brain(messages: list[dict[str, str]], schema: object) -> str:
        seen.append(entries(path))
        return tool_step("lookup", key="colour") if len(seen) == 1 else answer_step("red")

    run_agent(brain, [lookup], "t", transcript_path=path)
    assert [e.get("role") for e in seen[0]] == ["system", "user", None]  # and the step event
    assert any(e.get("kind") == "tool_result" for e in seen[1])


STREAMER = """
import sys, os, signal
from shapeloop import ScriptedBrain, run_agent, tool

@tool
def stall(x: str) -> str:
    "Stall."
    print("ready", flush=True)
    signal.pause()
    return x

brain = ScriptedBrain(['{"reason": "r", "action": "tool", "tool": "stall", "args": {"x": "y"}, "answer": ""}'])
run_agent(brain, [stall], "t", transcript_path=sys.argv[1], tool_timeout=None)
"""


def test_kill_9_loses_at_most_the_entry_in_flight(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with subprocess.Popen([sys.executable, "-c", STREAMER, str(path)], stdout=subprocess.PIPE, env=env) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        finally:
            child.send_signal(signal.SIGKILL)
    kinds = [e.get("kind") or e.get("role") for e in entries(path)]
    assert kinds == ["system", "user", "step", "reply", "assistant", "thought", "tool_call"]


def test_a_planted_symlink_is_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "run.jsonl").symlink_to(victim)
    brain = ScriptedBrain([answer_step("x")])
    with pytest.raises(TranscriptError, match="symlink"):
        run_agent(brain, [], "t", transcript_path=tmp_path / "run.jsonl")
    with pytest.raises(TranscriptError, match="symlink"):
        run_agent(brain, [], "t", on_event=JsonlSink(tmp_path / "run.jsonl"))
    assert victim.read_text() == "precious\n"
    assert brain.asked == []  # found before the model was asked anything


@pytest.mark.parametrize("where", ["folder", "missing/run.jsonl"])
def test_a_bad_transcript_path_is_found_before_the_run(tmp_path: Path, where: str) -> None:
    (tmp_path / "folder").mkdir()
    brain = ScriptedBrain([answer_step("x")])
    with pytest.raises(TranscriptError, match="cannot write a transcript"):
        run_agent(brain, [], "t", transcript_path=tmp_path / where)
    assert brain.asked == []


def test_runs_append_to_one_transcript(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    first = run_agent(ScriptedBrain([answer_step("one")]), [], "t1", transcript_path=path)
    run_agent(ScriptedBrain([answer_step("two")]), [], "t2", transcript_path=path, history=first.messages)
    answers = [e["text"] for e in entries(path) if e.get("kind") == "answer"]
    assert answers == ["one", "two"]


def test_write_replaces_atomically_through_a_private_temporary_file(tmp_path: Path) -> None:
    run = run_agent(ScriptedBrain([answer_step("x")]), [], "t")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "run.jsonl.tmp").symlink_to(victim)  # the old fixed temporary name
    run.transcript.write(tmp_path / "run.jsonl")
    assert victim.read_text() == "precious\n"
    assert entries(tmp_path / "run.jsonl") == run.transcript.entries
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl", "run.jsonl.tmp", "victim.txt"]


# Time


def test_a_hung_tool_times_out_and_the_run_goes_on() -> None:
    release = threading.Event()

    @tool
    def hang(x: str) -> str:
        """Never returns (until the test ends)."""
        release.wait(30)
        return "late"

    brain = ScriptedBrain([tool_step("hang", x="a"), answer_step("gave up on it")])
    try:
        run = run_agent(brain, [hang], "t", tool_timeout=0.2)
    finally:
        release.set()
    assert run.ok
    result = next(e for e in run.events if e.kind == "tool_result")
    assert result.text == "ERROR: hang timed out after 0.2 s (tool_timeout); it was abandoned"  # type: ignore[attr-defined]


def test_max_seconds_ends_a_hung_tool_and_then_the_run() -> None:
    release = threading.Event()

    @tool
    def hang(x: str) -> str:
        """Never returns (until the test ends)."""
        release.wait(30)
        return "late"

    brain = ScriptedBrain([tool_step("hang", x="a"), answer_step("never asked")])
    try:
        run = run_agent(brain, [hang], "t", max_seconds=0.3, tool_timeout=None)
    finally:
        release.set()
    assert run.stop is StopReason.BUDGET and "time budget" in run.reason
    result = next(e for e in run.events if e.kind == "tool_result")
    assert "timed out" in result.text and "max_seconds" in result.text  # type: ignore[attr-defined]
    assert len(brain.asked) == 1


def test_max_seconds_ends_a_model_call_that_does_not_return() -> None:
    release = threading.Event()

    def slow(messages: list[dict[str, str]], schema: object) -> str:
        release.wait(30)
        return answer_step("too late")

    try:
        run = run_agent(slow, [], "t", max_seconds=0.3)
    finally:
        release.set()
    assert run.stop is StopReason.BUDGET and "while the model was answering step 1" in run.reason


def test_an_interrupt_inside_a_tool_still_stops_the_run_as_interrupted() -> None:
    @tool
    def interrupted(x: str) -> str:
        """Raises Ctrl-C."""
        raise KeyboardInterrupt

    run = run_agent(ScriptedBrain([tool_step("interrupted", x="a")]), [interrupted], "t", tool_timeout=5)
    assert run.stop is StopReason.INTERRUPTED


def test_time_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="tool_timeout"):
        run_agent(ScriptedBrain([]), [], "t", tool_timeout=0)
    with pytest.raises(ValueError, match="max_seconds"):
        run_agent(ScriptedBrain([]), [], "t", max_seconds=-1)


# Policy


def test_deny_tools_fails_closed() -> None:
    with pytest.raises(TypeError, match=r"write deny_tools=\['lookup'\]"):
        run_agent(ScriptedBrain([]), [lookup], "t", deny_tools="lookup")
    with pytest.raises(ValueError, match=r"deny_tools names unknown tools \['lokup'\]"):
        run_agent(ScriptedBrain([]), [lookup], "t", deny_tools=["lokup"])
    with pytest.raises(TypeError, match="allow_tools takes a list"):
        run_agent(ScriptedBrain([]), [lookup], "t", allow_tools="lookup")


class NumberBrain(BaseBrain):
    def ask(self, request: Request) -> Reply:
        return 42  # type: ignore[return-value]


def test_a_brain_that_returns_no_text_raises_naming_it() -> None:
    with pytest.raises(TypeError, match="brain NumberBrain returned int"):
        run_agent(NumberBrain(), [], "t")

    def numbers(messages: object, schema: object) -> object:
        return None

    with pytest.raises(TypeError, match=r"numbers\(messages, schema\) returned a NoneType"):
        run_agent(numbers, [], "t")
    with pytest.raises(TypeError, match="ScriptedBrain returned bytes"):
        run_agent(ScriptedBrain([Reply(text=b"x")]), [], "t")  # type: ignore[arg-type]


def test_a_tool_is_still_a_plain_tool() -> None:
    assert isinstance(lookup, Tool)


def test_a_server_reply_nested_thousands_deep_is_a_backend_error() -> None:
    import httpx

    from shapeloop.backends.openai import OpenAIBrain

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="[" * 100_000)

    run = run_agent(OpenAIBrain("m", transport=httpx.MockTransport(handler)), [], "t")
    assert run.stop is StopReason.BACKEND_ERROR and "not a JSON object" in run.reason
