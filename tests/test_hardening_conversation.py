"""Conversations and their logs under attack (issues 48 and 49): entries of the wrong shape, two
writers, a long chat's cost and window, torn non-ASCII lines, a full disk, a FIFO, paths no file
can have; on the scripted brain."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from helpers import answer_step, tool_step
from shapeloop import Conversation, Message, ScriptedBrain, TranscriptError, tool
from shapeloop.conversation import MESSAGE_TOKENS, estimate_tokens


@tool
def note(text: str) -> str:
    """Write a note and say what it holds."""
    return f"noted: {text} " + "details " * 30


def steps(seen: list[list[Message]] | None = None) -> Callable[[Sequence[Message], object], str]:
    """A brain function that calls ``note`` once for each request, then answers; ``seen`` gets the
    history each request's first step read (the messages between the system prompt and the request)."""

    def step(messages: Sequence[Message], schema: object) -> str:
        last = messages[-1]["content"]
        if last.startswith(("Result of ", "Results of ")):  # one call's, a batch's
            return answer_step("Noted it: " + "done " * 15)
        if seen is not None:
            seen.append(list(messages[1:-1]))
        return tool_step("note", text=last[-30:])

    return step


def chatty(seen: list[list[Message]] | None = None) -> ScriptedBrain:
    return ScriptedBrain(steps(seen))


def a_log(path: Path, requests: int = 4, **settings: Any) -> list[dict[str, Any]]:
    """A conversation's log at ``path``, with cuts, and its entries."""
    talk = Conversation(chatty(), [note], policies=(), max_history_chars=900, **settings)
    for number in range(requests):
        talk.ask(f"Request number {number}: note it.")
    talk.save(path)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def chars(messages: Sequence[Message]) -> int:
    return sum(len(m["content"]) for m in messages)


# issue 48 item 4: an entry of the wrong shape is refused at resume(), naming the line


@pytest.mark.parametrize(
    ("kind", "change", "said"),
    [
        ("cut", {"level": "1"}, "level"),
        ("cut", {"request": -1}, "request"),
        ("cut", {"requests": {"0": [{"role": "user", "content": 5}]}}, "content"),
        ("turn", {"stop": "finished"}, "stop"),
        ("turn", {"steps": "2"}, "steps"),
        ("turn", {"calls": [{"tool": "note"}]}, "args"),
        ("message", {"role": "robot"}, "role"),
        ("request", {"request": None}, "request"),
        ("error", {"calls": "note()"}, "calls"),
    ],
)
def test_an_entry_of_the_wrong_shape_is_refused_at_resume_naming_its_line_and_field(
    tmp_path: Path, kind: str, change: dict[str, Any], said: str
) -> None:
    path = tmp_path / "log.jsonl"
    entries = a_log(path)
    if kind == "error":  # a request whose run raised leaves an error entry
        entries.insert(2, {"type": "error", "request": "x", "error": "RuntimeError()", "calls": []})
    number = next(n for n, entry in enumerate(entries, start=1) if entry["type"] == kind)
    entries[number - 1] = {**entries[number - 1], **change}
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"log\.jsonl, line {number}: a '{kind}' entry .*\b{said}\b") as raised:
        Conversation.resume(path, chatty(), [note], policies=())
    assert "fix or remove the line" in str(raised.value)


@pytest.mark.parametrize("cut", [{"request": 99, "requests": {}}, {"request": 0, "requests": {"99": []}}])
def test_a_cut_of_a_request_the_log_has_not_opened_is_refused_naming_its_line(
    tmp_path: Path, cut: dict[str, Any]
) -> None:
    path = tmp_path / "log.jsonl"
    entries = [*a_log(path, requests=1), {"type": "cut", "level": 1, "markers": [], **cut}]
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries), encoding="utf-8")
    said = rf"line {len(entries)}: a 'cut' entry .*\(it cuts a request past the 1 the log has opened so far\)"
    with pytest.raises(ValueError, match=said):
        Conversation.resume(path, chatty(), [note], policies=())


def test_an_entry_of_a_type_a_log_does_not_hold_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    entries = a_log(path, requests=1)
    path.write_text("".join(json.dumps(e) + "\n" for e in [*entries, {"type": "note", "text": "hi"}]), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"line {len(entries) + 1}: a 'note' entry, which a conversation's log"):
        Conversation.resume(path, chatty(), [note], policies=())


def test_a_log_as_written_resumes_and_goes_on(tmp_path: Path) -> None:
    """The model of an entry takes everything the writer writes: a resumed log asks on as the first did."""
    path = tmp_path / "log.jsonl"
    a_log(path, requests=6)
    again = Conversation.resume(path, chatty(), [note], policies=(), max_history_chars=900)
    assert len(again.turns) == 6 and again.ask("One more: note it.").ok


# issue 48 item 5: two writers on one transcript


def test_a_second_writer_on_a_transcript_is_refused_until_the_first_closes(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    first = Conversation(chatty(), [note], policies=(), transcript_path=path)
    first.ask("First: note it.")
    with pytest.raises(TranscriptError, match=r"log\.jsonl': another conversation or run is writing it") as raised:
        Conversation(chatty(), [note], policies=(), transcript_path=path)
    assert "close that one first" in str(raised.value)
    written = path.read_bytes()
    # a conversation resumed into the file while the first is open: refused, the file left as it was
    with pytest.raises(TranscriptError, match="another conversation or run is writing it"):
        Conversation.resume(path, chatty(), [note], policies=(), transcript_path=path)
    assert path.read_bytes() == written
    assert len(Conversation.resume(path, chatty(), [note], policies=()).turns) == 1  # reading it is fine
    first.close()
    with Conversation.resume(path, chatty(), [note], policies=(), transcript_path=path) as again:
        again.ask("Second: note it.")
    assert [t.request for t in Conversation.resume(path, chatty(), [note]).turns] == [
        "First: note it.",
        "Second: note it.",
    ]


def test_the_lock_of_a_writer_that_dies_is_released(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    holder = (
        "import sys, time\n"
        "from shapeloop import Conversation, ScriptedBrain\n"
        f"talk = Conversation(ScriptedBrain([]), [], transcript_path={str(path)!r})\n"
        "print('open', flush=True)\n"
        "time.sleep(60)\n"
    )
    with subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "open"
            with pytest.raises(TranscriptError, match="another conversation or run is writing it"):
                Conversation(chatty(), [note], transcript_path=path)  # another process holds it
        finally:
            child.send_signal(signal.SIGKILL)  # a crash: no close, no exit handler
            child.wait(timeout=30)
    with Conversation(chatty(), [note], policies=(), transcript_path=path) as talk:
        assert talk.ask("After the crash: note it.").ok


def test_a_run_streaming_to_a_conversations_log_is_refused(tmp_path: Path) -> None:
    from shapeloop import run_agent

    path = tmp_path / "log.jsonl"
    with (
        Conversation(chatty(), [note], policies=(), transcript_path=path),
        pytest.raises(TranscriptError, match="another conversation or run is writing it"),
    ):
        run_agent(chatty(), [note], "note it", policies=(), transcript_path=path)


# issue 48 item 6: the cost of an ask follows the history kept, not the requests ever asked


class Counting(ScriptedBrain):
    """A brain that counts tokens (a character in four) and how many messages it was asked to count."""

    counted = 0

    def count_tokens(self, messages: Sequence[Message]) -> int:
        self.counted += len(messages)
        return sum(len(m["content"]) for m in messages) // 4 + MESSAGE_TOKENS * len(messages)


def test_an_asks_work_follows_the_history_kept_not_the_requests_asked() -> None:
    brain = Counting(steps())
    talk = Conversation(brain, [note], policies=(), max_history_tokens=300)
    work: list[int] = []
    for number in range(200):
        before = brain.counted
        talk.ask(f"Request {number}: note it.")
        work.append(brain.counted - before)
    early, late = sorted(work[20:40])[10], sorted(work[180:200])[10]
    assert late <= 2 * early, (early, late)


# issue 49 item 3: a long conversation stays within its window, markers included


@pytest.mark.parametrize(
    ("budget", "requests"),
    [({"max_history_chars": 2000}, 60), ({"context_window": 2048, "turn_room": 512}, 120)],
)
def test_a_long_conversations_history_stays_within_its_budget_at_every_request(
    budget: dict[str, int], requests: int
) -> None:
    seen: list[list[Message]] = []
    talk = Conversation(chatty(seen), [note], policies=(), **budget)
    for number in range(requests):
        talk.ask(f"Request number {number}: note it.")
    if talk.max_history_tokens is not None:
        sizes = [sum(estimate_tokens(m["content"]) + MESSAGE_TOKENS for m in history) for history in seen]
        limit = talk.max_history_tokens
    else:
        sizes, limit = [chars(history) for history in seen], talk.max_history_chars or 0
    assert len(sizes) == requests and max(sizes) <= limit, (max(sizes), limit)
    # what was cut is still said: one marker counts the requests cut whole so far
    first = talk.history[0]["content"].split("\n")[0]
    assert first.startswith("[") and " earlier requests cut, " in first and first.endswith("within its window]")
    assert int(first[1:].split(" ")[0]) >= requests // 2


# issue 49 item 4: a last line torn inside a multi-byte character


def test_a_last_line_torn_inside_a_multibyte_character_is_left_out_with_the_warning(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    brain = ScriptedBrain([answer_step("un café"), answer_step("北京的天气")])
    with Conversation(brain, [], policies=(), transcript_path=path) as talk:
        talk.ask("Premier ?")
        talk.ask("天气怎么样？")
    data = path.read_bytes()
    cut = data.rindex("北京".encode()) + 1  # inside the first character's three bytes
    path.write_bytes(data[:cut])
    with pytest.warns(UserWarning, match="last line is cut off"):
        again = Conversation.resume(path, ScriptedBrain([answer_step("encore")]), [], policies=(), transcript_path=path)
    assert [t.request for t in again.turns] == ["Premier ?"]
    again.ask("Encore ?")
    again.close()
    assert [t.request for t in Conversation.resume(path, ScriptedBrain([]), []).turns] == ["Premier ?", "Encore ?"]
    path.write_bytes(data[:cut] + b"\n")  # the same bytes inside the log, not at its end: not UTF-8
    with pytest.raises(ValueError, match=rf"log\.jsonl: not a conversation's log \(not UTF-8 text: .* byte {cut - 1}"):
        Conversation.resume(path, ScriptedBrain([]), [])


# issue 49 item 5: a full disk while a conversation streams its log


# The disk fills for real: the child process may not grow a file past ``room`` bytes (RLIMIT_FSIZE,
# SIGXFSZ ignored, so the write fails with EFBIG as a full disk fails with ENOSPC), until it lifts the
# limit itself ("space freed"). Nothing in shapeloop is patched.
FULL_DISK = """
import json, resource, sys
from shapeloop import Conversation, ScriptedBrain, TranscriptError, tool

@tool
def note(text: str) -> str:
    \"\"\"Write a note.\"\"\"
    return "noted: " + text + " details" * 30

def step(messages, schema):
    if messages[-1]["content"].startswith(("Result of ", "Results of ")):
        return json.dumps({"answer": "Noted it: " + "done " * 15})
    return json.dumps({"calls": [{"name": "note", "arguments": {"text": messages[-1]["content"][-30:]}}]})

path, case = sys.argv[1], sys.argv[2]
out = {}
if case == "ask":
    talk = Conversation(ScriptedBrain(step), [note], policies=(), transcript_path=path)
    try:
        talk.ask("First: note it.")
    except TranscriptError as exc:
        out["error"] = str(exc)
    out["requests"] = [t.request for t in talk.turns]
    out["ok"] = [t.ok for t in talk.turns]
    out["history"] = [talk.history[0]["content"], talk.history[-1]["role"]]
    talk.ask("Second: note it.")
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    talk.save(path)
    again = Conversation.resume(path, ScriptedBrain(step), [note], policies=())
    out["resumed"] = [t.request for t in again.turns]
    out["same_history"] = again.history == talk.history
else:
    talk = Conversation(ScriptedBrain([RuntimeError("out of memory")]), [], policies=(), transcript_path=path)
    try:
        talk.ask("First?")
    except RuntimeError as exc:
        out["error"] = str(exc)
        out["notes"] = getattr(exc, "__notes__", [])
    out["history"] = [talk.history[0]["content"]]
print(json.dumps(out))
"""


def on_a_full_disk(tmp_path: Path, case: str, room: int) -> dict[str, Any]:
    """What ``FULL_DISK`` prints, run in a child whose files cannot grow past ``room`` bytes."""
    resource = pytest.importorskip("resource", reason="no RLIMIT_FSIZE on this system")

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (room, resource.RLIM_INFINITY))

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", FULL_DISK, str(tmp_path / "log.jsonl"), case], preexec_fn=limit,
                          capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_a_full_disk_keeps_the_request_in_the_history_and_says_the_log_could_not_be_written(tmp_path: Path) -> None:
    out = on_a_full_disk(tmp_path, "ask", room=600)
    unwritten = r"cannot write the conversation's log to '.*log\.jsonl': File too large"
    assert re.search(unwritten, out["error"]), out["error"]
    assert "kept in memory" in out["error"] and "save(" in out["error"]
    assert out["requests"] == ["First: note it."] and out["ok"] == [True]
    assert out["history"] == ["First: note it.", "assistant"]
    assert out["resumed"] == ["First: note it.", "Second: note it."] and out["same_history"]


def test_a_full_disk_when_a_run_raised_keeps_the_error_and_says_so(tmp_path: Path) -> None:
    out = on_a_full_disk(tmp_path, "raised", room=10)
    assert out["error"] == "out of memory"
    assert any("cannot write the conversation's log" in line for line in out["notes"])
    assert "First?" in out["history"][0]


# issue 49 item 8: resume refuses what is not a regular file, without blocking


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_resume_refuses_a_fifo_naming_it_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def resume() -> None:
        try:
            Conversation.resume(fifo, ScriptedBrain([]), [])
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            outcome.append(exc)

    thread = threading.Thread(target=resume, daemon=True)
    thread.start()
    thread.join(timeout=10)
    if thread.is_alive():  # blocked in open(): a writer lets it go, so the test ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout=10)
        pytest.fail("Conversation.resume blocked on a FIFO")
    (error,) = outcome
    assert isinstance(error, ValueError), error
    assert str(error).startswith(f"{fifo}: not a conversation's log (it is a FIFO, not a regular file)")


def test_resume_refuses_a_directory_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"not a conversation's log \(it is a directory, not a regular file\)"):
        Conversation.resume(tmp_path, ScriptedBrain([]), [])


# issue 49 item 10: save() to a path no file can have


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("", "the path is empty"),
        ("folder/", "it ends with a slash"),
        ("n" * 300 + ".jsonl", "its name is too long"),
        ("log\0.jsonl", "it holds a NUL character"),
    ],
)
def test_save_to_a_path_no_file_can_have_raises_the_transcript_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    talk = Conversation(ScriptedBrain([answer_step("a")]), [], policies=())
    talk.ask("One?")
    with pytest.raises(TranscriptError, match=f"cannot write a transcript to .*: {said}") as raised:
        talk.save(where)
    assert str(raised.value).endswith("name a file in a folder you can write")
    assert os.listdir(tmp_path) == []  # no temporary file left
    with pytest.raises(TranscriptError, match=said):
        Conversation(ScriptedBrain([]), [], transcript_path=where)


def test_saving_over_a_log_another_conversation_is_writing_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with Conversation(chatty(), [note], policies=(), transcript_path=path) as first:
        first.ask("First: note it.")
        written = path.read_bytes()
        other = Conversation(chatty(), [note], policies=())
        other.ask("Other: note it.")
        with pytest.raises(TranscriptError, match="another conversation or run is writing it"):
            other.save(path)
        assert path.read_bytes() == written  # the first one's log is untouched, and still its file
        first.ask("Second: note it.")
    other.save(path)  # closed: the file is free
    assert [t.request for t in Conversation.resume(path, chatty(), [note]).turns] == ["Other: note it."]


def test_a_resume_that_fails_lets_go_of_the_file_it_was_to_go_on_in(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"type": "cut", "request": 0, "level": "1"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="not a conversation's log"):
        Conversation.resume(path, chatty(), [note], transcript_path=path)
    path.unlink()
    with Conversation(chatty(), [note], policies=(), transcript_path=path) as talk:  # not locked by the failed one
        talk.ask("First: note it.")
