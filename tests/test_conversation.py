"""Conversations (issue 33): requests one after another over the same stateful tools, the history
cut with markers, saved and resumed, batched calls; on the scripted brain."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from helpers import answer_step, lean_answer, tool_step
from shapeloop import (
    Conversation,
    Message,
    Request,
    ScriptedBrain,
    StopReason,
    Tool,
    ToolCall,
    Turn,
    prompts,
    tool,
)
from shapeloop.conversation import DEFAULT_HISTORY_CHARS

BIG = "x" * 3120


class Folders:
    """A tiny file system with a current folder: state the tools share across requests."""

    def __init__(self) -> None:
        self.cwd = "/"
        self.files = {"/": ["docs"], "/docs": ["notes.txt", "big.txt"]}

    def tools(self) -> list[Tool]:
        @tool
        def cd(folder: str) -> str:
            """Change the current folder."""
            path = folder if folder.startswith("/") else "/" + folder.strip("/")
            if path not in self.files:
                raise ValueError(f"cd: no such folder: {folder}")
            self.cwd = path
            return f"now in {path}"

        @tool
        def ls() -> str:
            """List the files of the current folder."""
            return " ".join(self.files[self.cwd])

        @tool
        def cat(name: str) -> str:
            """Print a file of the current folder."""
            return BIG if name == "big.txt" else f"the contents of {self.cwd}/{name}"

        return [cd, ls, cat]


def batch(*calls: tuple[str, dict[str, str]]) -> str:
    return json.dumps({"reason": "both", "action": "calls", "calls": [{"tool": t, "args": a} for t, a in calls]})


def contents(messages: Sequence[Message]) -> str:
    return "\n".join(m["content"] for m in messages)


def test_requests_run_one_after_another_over_the_same_tool_state() -> None:
    folders = Folders()
    brain = ScriptedBrain(
        [tool_step("cd", folder="docs"), answer_step("in docs"), tool_step("ls"), answer_step("notes.txt, big.txt")]
    )
    talk = Conversation(brain, folders.tools(), policies=(), max_steps=4)
    first = talk.ask("Go to the docs folder.")
    second = talk.ask("What files are here?")
    assert isinstance(first, Turn) and first.ok and first.answer == "in docs"
    assert first.calls == (ToolCall(tool="cd", args={"folder": "docs"}),)
    assert second.stop is StopReason.ANSWERED and second.answer == "notes.txt, big.txt"
    assert folders.cwd == "/docs" and len(talk.turns) == 2
    # the second request's model read the first request, its call and result, then the new one
    asked = brain.asked[2].messages
    assert "Go to the docs folder." in contents(asked) and "now in /docs" in contents(asked)
    assert asked[-1]["content"].endswith("What files are here?")
    assert "notes.txt big.txt" in contents(brain.asked[3].messages)


def test_old_tool_results_are_cut_with_a_marker_naming_the_call_and_size() -> None:
    folders = Folders()
    folders.cwd = "/docs"
    brain = ScriptedBrain([tool_step("cat", name="big.txt"), answer_step("many x"), answer_step("yes")])
    talk = Conversation(brain, folders.tools(), policies=(), max_history_chars=1500)
    talk.ask("What is in big.txt?")
    turn = talk.ask("Was it all x?")
    seen = contents(brain.asked[2].messages)
    assert BIG not in seen
    (marker,) = turn.cuts
    assert marker.startswith('[result of cat({"name": "big.txt"}) cut: 3 ')
    assert marker.endswith(" characters, to keep the conversation within its window]")
    assert marker in seen and "What is in big.txt?" in seen  # the request and its answer stay
    assert [e["type"] for e in talk.transcript.entries].count("cut") == 1


def test_under_budget_nothing_is_cut() -> None:
    folders = Folders()
    folders.cwd = "/docs"
    brain = ScriptedBrain([tool_step("cat", name="big.txt"), answer_step("many x"), answer_step("yes")])
    talk = Conversation(brain, folders.tools(), policies=())
    talk.ask("What is in big.txt?")
    assert talk.max_history_chars == DEFAULT_HISTORY_CHARS
    assert talk.ask("Was it all x?").cuts == () and BIG in contents(brain.asked[2].messages)


def test_a_tight_budget_folds_then_drops_old_requests_and_says_so_every_time() -> None:
    brain = ScriptedBrain([tool_step("ls"), answer_step("a" * 200), answer_step("b" * 200), answer_step("c")])
    talk = Conversation(brain, Folders().tools(), policies=(), max_history_chars=500)
    talk.ask("First: list the files.")
    talk.ask("Second request.")
    third = talk.ask("Third request.")
    seen = contents(brain.asked[3].messages[1:])  # after the system prompt
    assert any(m.startswith("[an earlier request cut, ") and "First: list the files." in m for m in third.cuts)
    assert seen.startswith("[an earlier request cut, ")  # where the dropped request was
    assert "Second request." in seen and "b" * 200 in seen
    assert seen.count("Next task:") == 2 and "Result of ls" not in seen  # the second request and the third
    for marker in third.cuts:
        assert marker.endswith("to keep the conversation within its window]")


def test_a_finished_request_stays_in_the_history_as_its_results_and_its_answer_in_words() -> None:
    brain = ScriptedBrain([tool_step("cd", folder="docs"), answer_step("We are in docs."), answer_step("ok")])
    talk = Conversation(brain, Folders().tools(), policies=(), max_history_chars=5000)
    talk.ask("Go to docs.")
    talk.ask("Where are we?")
    first = talk.history[:4]
    # the answer as words, not as a step the next request could copy; the result without the
    # instruction that was for its own request's next step
    assert first[-1] == {"role": "assistant", "content": "We are in docs."}
    assert first[2]["role"] == "user" and first[2]["content"].startswith("Result of cd(")
    assert "action" not in first[2]["content"] and "answer" not in first[2]["content"]
    asked = contents(brain.asked[2].messages[1:])  # after the system prompt, which shows both shapes
    assert '"action": "answer"' not in asked and "We are in docs." in asked
    # the log keeps what the model read then
    logged = [e["content"] for e in talk.transcript.entries if e["type"] == "message" and e["role"] == "assistant"]
    assert '"answer": "We are in docs."' in logged[1]


def test_settling_leaves_a_message_that_is_not_a_result_whole() -> None:
    objection = "Too short.\n\n" + prompts._NEXT + " KEEP-THIS"  # the instruction, in an objection
    seen: list[str] = []

    def accept(answer: str) -> bool | str:
        seen.append(answer)
        return True if len(seen) > 1 else objection

    brain = ScriptedBrain([tool_step("ls"), answer_step("first"), answer_step("second")])
    talk = Conversation(brain, Folders().tools(), policies=(), accept_answer=accept, max_history_chars=50000)
    talk.ask("List.")
    assert any(m["role"] == "user" and "KEEP-THIS" in m["content"] for m in talk.history)


def test_a_batch_request_is_settled_the_same_way() -> None:
    calls = json.dumps({"calls": [{"name": "cd", "arguments": {"folder": "docs"}}]})
    brain = ScriptedBrain([calls, json.dumps({"answer": "In docs."}), json.dumps({"answer": "ok"})])
    talk = Conversation(brain, Folders().tools(), policies=(), batch=True, max_history_chars=5000)
    talk.ask("Go to docs.")
    talk.ask("Where are we?")
    assert talk.history[1]["content"] == calls, "the calls stay as the model made them"
    assert talk.history[2]["content"].startswith("Results of 1 call") and "now in /docs" in talk.history[2]["content"]
    assert "The task:" not in talk.history[2]["content"] and '"answer"' not in talk.history[2]["content"]
    assert talk.history[3] == {"role": "assistant", "content": "In docs."}


def test_the_latest_request_is_folded_but_never_dropped() -> None:
    brain = ScriptedBrain([tool_step("ls"), answer_step("z" * 300), answer_step("ok")])
    talk = Conversation(brain, Folders().tools(), policies=(), max_history_chars=10)
    talk.ask("List the files.")
    turn = talk.ask("Again?")
    assert any("messages of this request before its last reply cut" in m for m in turn.cuts)
    first = brain.asked[2].messages
    assert "List the files." in contents(first) and "z" * 300 in contents(first)


def test_a_saved_conversation_resumes_with_its_history_turns_and_cuts(tmp_path: Path) -> None:
    folders = Folders()
    brain = ScriptedBrain(
        [tool_step("cd", folder="docs"), answer_step("in docs"), tool_step("cat", name="big.txt"), answer_step("x")]
    )
    talk = Conversation(brain, folders.tools(), policies=(), max_history_chars=2000)
    talk.ask("Go to docs.")
    talk.ask("Show big.txt.")
    path = tmp_path / "talk.jsonl"
    talk.save(path)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [e["type"] for e in lines].count("turn") == 2 and all(e.get("role") != "system" for e in lines)

    later = ScriptedBrain([answer_step("still docs")])
    again = Conversation.resume(path, later, folders.tools(), policies=(), max_history_chars=2000)
    assert again.history == talk.history
    assert [(t.request, t.answer, t.calls) for t in again.turns] == [(t.request, t.answer, t.calls) for t in talk.turns]
    assert again.turns[1].run.stop is StopReason.ANSWERED and again.turns[1].run.steps == 2
    turn = again.ask("Where are we?")
    cut = [m.split(")")[0] for m in turn.cuts]
    # cd's short result (its step instruction settled away) is shorter than a marker: it stays
    assert cut == ['[result of cat({"name": "big.txt"}']
    assert BIG not in contents(later.asked[0].messages) and "Go to docs." in contents(later.asked[0].messages)
    # the resumed log holds the saved one, then the new cut and request
    assert again.transcript.entries[: len(lines)] == lines


def test_a_conversation_streams_its_log_and_a_resume_appends_to_it(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    talk = Conversation(ScriptedBrain([answer_step("one")]), [], policies=(), transcript_path=path)
    talk.ask("First?")
    talk.close()
    written = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(written[0])["type"] == "request" and len(written) == len(talk.transcript)
    with Conversation.resume(path, ScriptedBrain([answer_step("two")]), [], policies=(), transcript_path=path) as again:
        again.ask("Second?")
    assert again.transcript._file is None  # the block closed the log
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [e["request"] for e in entries if e["type"] == "request"] == ["First?", "Second?"]
    users = [e["content"] for e in entries if e.get("role") == "user"]
    assert users == ["First?", "Next task: Second?"]
    # asked after the close, a request is kept in memory; saving onto the same file writes it whole
    again.brain = ScriptedBrain([answer_step("three")])
    again.ask("Third?")
    assert "Third?" not in path.read_text(encoding="utf-8")
    again.save(path)
    saved = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [e["request"] for e in saved if e["type"] == "request"] == ["First?", "Second?", "Third?"]


def test_batched_calls_work_in_a_conversation_and_their_results_are_cut_together() -> None:
    folders = Folders()
    folders.cwd = "/docs"
    brain = ScriptedBrain(
        [
            batch(("cat", {"name": "big.txt"}), ("cat", {"name": "notes.txt"})),
            answer_step("both read"),
            batch(("ls", {}), ("cd", {"folder": "/"})),
            answer_step("listed, then back to the top"),
        ]
    )
    talk = Conversation(brain, folders.tools(), policies=(), batch=True, max_history_chars=1500)
    first = talk.ask("Read big.txt and notes.txt.")
    second = talk.ask("List this folder, then go to the top.")
    assert first.ok and [c.tool for c in first.calls] == ["cat", "cat"]
    assert second.ok and [c.tool for c in second.calls] == ["ls", "cd"] and folders.cwd == "/"
    assert second.cuts[0].startswith('[results of 2 calls (cat({"name": "big.txt"}), cat({"name": "notes.txt"}))')
    assert '"calls"' in json.dumps(brain.asked[2].schema)  # the second request still offers batches


class CountingBrain(ScriptedBrain):
    """A scripted brain that counts tokens as a character in four."""

    def count_tokens(self, messages: Sequence[Message]) -> int:
        return sum(len(m["content"]) for m in messages) // 4


def test_a_token_budget_is_counted_by_the_brain() -> None:
    folders = Folders()
    folders.cwd = "/docs"
    brain = CountingBrain([tool_step("cat", name="big.txt"), answer_step("x"), answer_step("y")])
    talk = Conversation(brain, folders.tools(), policies=(), max_history_tokens=400)
    talk.ask("Read big.txt.")
    assert talk.ask("And?").cuts and brain.count_tokens(talk.history[:-3]) <= 400
    with pytest.raises(ValueError, match="count_tokens"):
        Conversation(ScriptedBrain([]), [], max_history_tokens=400)


def test_a_context_window_leaves_the_history_what_the_system_prompt_and_a_turn_do_not_take() -> None:
    from pydantic import BaseModel

    from shapeloop.agent import opening_prompt
    from shapeloop.conversation import DEFAULT_TURN_ROOM, MESSAGE_TOKENS, estimate_tokens

    class Listing(BaseModel):
        folder: str
        names: list[str]

    tools = Folders().tools()
    brain = CountingBrain([])

    def counted(**options: object) -> int:
        return brain.count_tokens([Message(role="system", content=opening_prompt(tools, **options))])

    talk = Conversation(brain, tools, policies=(), context_window=8192)
    assert talk.max_history_tokens == 8192 - counted() - DEFAULT_TURN_ROOM and talk.max_history_chars is None
    # the prompt as the run sends it: the caller's instructions, a typed answer's schema, the tools offered
    for options in ({"system": "x" * 4000}, {"output_type": Listing}, {"deny_tools": ["cd"]}):
        other = Conversation(brain, tools, policies=(), context_window=8192, **options)  # type: ignore[arg-type]
        assert other.max_history_tokens == 8192 - counted(**options) - DEFAULT_TURN_ROOM, options
        assert counted(**options) != counted(), options
    # native tool calls: the backend renders the tools' specs beside the prompt, so they take room too
    from shapeloop import Capabilities

    native_brain = CountingBrain([], capabilities=Capabilities(native_tools=True))
    native = Conversation(native_brain, tools, policies=(), context_window=8192, mode="native")
    specs = json.dumps([t.spec() for t in tools], ensure_ascii=False)
    assert native.max_history_tokens == 8192 - (len(opening_prompt(tools)) + 1 + len(specs)) // 4 - DEFAULT_TURN_ROOM
    assert native.max_history_tokens < talk.max_history_tokens - 100
    # a brain without native tool calls falls back to constrained steps: no specs are sent
    fallback = Conversation(brain, tools, policies=(), context_window=8192, mode="native")
    assert fallback.max_history_tokens == talk.max_history_tokens
    sent = CountingBrain([answer_step('{"folder": "/", "names": []}')])
    typed = Conversation(sent, tools, policies=(), context_window=8192, output_type=Listing)
    typed.ask("List the folder.")
    assert sent.asked[0].messages[0]["content"] == opening_prompt(tools, output_type=Listing)
    # a brain that cannot count: the prompt's tokens estimated, the history then measured the same way
    guessed = Conversation(ScriptedBrain([]), tools, policies=(), context_window=8192)
    taken = estimate_tokens(opening_prompt(tools)) + MESSAGE_TOKENS
    assert guessed.max_history_tokens == 8192 - taken - DEFAULT_TURN_ROOM
    assert guessed.max_history_chars is None
    for bad in ({"context_window": 0}, {"context_window": 4096, "turn_room": -1}, {"turn_room": 100}):
        with pytest.raises(ValueError, match=r"must be|give context_window"):
            Conversation(brain, tools, **bad)  # type: ignore[arg-type]


def test_a_window_the_system_prompt_nearly_fills_keeps_a_quarter_and_says_a_request_may_overflow() -> None:
    tools = Folders().tools()
    with pytest.warns(UserWarning, match=r"context_window=2048: the system prompt takes \d+ tokens.*may overflow"):
        small = Conversation(CountingBrain([]), tools, policies=(), context_window=2048, batch=False)
    assert small.max_history_tokens == 512  # a quarter of the window
    # a window the system prompt alone fills: no request could fit, so it is refused now, not at the model
    with pytest.raises(ValueError, match=r"context_window=300: the system prompt alone .* takes \d+ tokens"):
        Conversation(CountingBrain([]), tools, policies=(), context_window=300, batch=False)
    # the default step's prompt (the functions as JSON) is shorter: the same holds at a smaller window
    with pytest.warns(UserWarning, match=r"context_window=300: the system prompt takes \d+ tokens.*may overflow"):
        small = Conversation(CountingBrain([]), tools, policies=(), context_window=300)
    assert small.max_history_tokens == 75
    with pytest.raises(ValueError, match=r"context_window=150: the system prompt alone .* takes \d+ tokens"):
        Conversation(CountingBrain([]), tools, policies=(), context_window=150)


def test_options_are_run_agents_and_a_wrong_one_is_named() -> None:
    with pytest.raises(TypeError, match="max_stepz"):
        Conversation(ScriptedBrain([]), [], max_stepz=3)
    with pytest.raises(TypeError, match="history"):
        Conversation(ScriptedBrain([]), [], history=[])
    with pytest.raises(ValueError, match="only one"):
        Conversation(ScriptedBrain([]), [], max_history_chars=10, max_history_tokens=10)
    with pytest.raises(ValueError, match="only one"):
        Conversation(ScriptedBrain([]), [], max_history_tokens=10, context_window=4096)


def test_every_option_reaches_each_run() -> None:
    seen: list[Request] = []

    def brain(request: Request) -> str:
        seen.append(request)
        return tool_step("ls") if len(seen) % 2 else answer_step("done")

    talk = Conversation(ScriptedBrain(brain), Folders().tools(), policies=(), max_steps=1, deny_tools=["cd"])
    turn = talk.ask("List.")
    assert turn.stop is StopReason.MAX_STEPS
    assert all(name != "cd" for name, _ in seen[0].offered)


def test_a_resume_refuses_a_file_that_is_not_a_log(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"type": "request", "request": "a"}\nnot json\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        Conversation.resume(path, ScriptedBrain([]), [])


def test_shapeloop_chat_runs_a_conversation_and_shows_each_cut(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    (tmp_path / "big.txt").write_text("y" * 1500, encoding="utf-8")
    script = tmp_path / "script.json"
    steps = [tool_step("read_file", path="big.txt"), answer_step("all y"), answer_step("yes, all y")]
    script.write_text(json.dumps(steps), encoding="utf-8")
    log = tmp_path / "chat.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "shapeloop.cli", "chat", "--root", str(tmp_path), "--script", str(script),
         "--ctx", "1200", "--transcript", str(log)],
        input="What is in big.txt?\nAll of it?\n", capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["you> all y", "you> yes, all y", "you> "]  # input() prompts on stdout
    assert '[result of read_file({"path": "big.txt"}) cut: 1 ' in done.stderr  # --ctx 1200: a quarter, 900 characters
    again = Conversation.resume(log, ScriptedBrain([answer_step("still y")]), [], policies=())
    assert [t.answer for t in again.turns] == ["all y", "yes, all y"] and "y" * 1500 not in contents(again.history)


def test_policies_serve_each_request_the_state_line_as_the_tools_are_now() -> None:
    from shapeloop.policies import Policy, RunView, StepShape
    from shapeloop.policies.state import StateLine

    class Shortlist(Policy):
        """Offers, for each request, the tools the caller listed for it."""

        def __init__(self, offers: dict[str, frozenset[str]]) -> None:
            self.offers = offers

        def shape_step(self, view: RunView) -> StepShape | None:
            return StepShape(reason="the caller's shortlist", tools=self.offers[view.task])

    folders = Folders()
    seen: list[Request] = []
    replies = [tool_step("cd", folder="docs"), answer_step("in docs"), tool_step("ls"), answer_step("two files")]

    def brain(request: Request) -> str:
        seen.append(request)
        return replies.pop(0)

    state = StateLine(lambda: f"current folder: {folders.cwd}")
    offers = {"Go to docs.": frozenset({"cd", "ls"}), "List the files.": frozenset({"ls", "cat"})}
    talk = Conversation(ScriptedBrain(brain), folders.tools(), policies=[state, Shortlist(offers)])
    talk.ask("Go to docs.")
    turn = talk.ask("List the files.")
    assert [r.messages[-1]["content"].splitlines()[0] for r in seen] == [
        "current folder: /",
        "current folder: /docs",
        "current folder: /docs",
        "current folder: /docs",
    ]
    assert {name for name, _ in seen[0].offered} == {"cd", "ls"}  # shaped for each request anew
    assert {name for name, _ in seen[2].offered} == {"ls", "cat"}
    assert turn.ok and turn.run.policies == ("state-line", "shortlist")


def test_a_request_whose_run_raises_stays_in_the_log_and_the_history_with_its_calls(tmp_path: Path) -> None:
    """A brain that fails mid-request: the call it made has changed the tools' state, so the log and
    the next request's history say what it did, and the error still reaches the caller."""
    folders = Folders()
    path = tmp_path / "log.jsonl"
    brain = ScriptedBrain([tool_step("cd", folder="docs"), RuntimeError("out of memory"), answer_step("in /docs")])
    talk = Conversation(brain, folders.tools(), policies=(), transcript_path=path)
    with pytest.raises(RuntimeError, match="out of memory") as raised:
        talk.ask("Go to docs, then list it.")
    assert any(str(path) in note for note in raised.value.__notes__)
    assert folders.cwd == "/docs"
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    (error,) = [e for e in entries if e["type"] == "error"]
    assert error["calls"] == ['cd({"folder": "docs"})'] and "out of memory" in error["error"]
    talk.ask("Where are we?")  # the next request reads what the failed one did
    seen = contents(brain.asked[-1].messages)
    assert "Go to docs, then list it." in seen and 'calls it made: cd({"folder": "docs"})' in seen
    talk.close()
    again = Conversation.resume(path, ScriptedBrain([]), [], policies=())
    assert again.history == talk.history and [t.request for t in again.turns] == ["Where are we?"]


def test_an_empty_request_is_refused_before_anything_is_cut() -> None:
    talk = Conversation(ScriptedBrain([answer_step("x" * 400)]), [], policies=(), max_history_chars=100)
    talk.ask("First?")
    before = list(talk.transcript.entries)
    with pytest.raises(ValueError, match="non-empty"):
        talk.ask("   ")
    assert talk.transcript.entries == before


def test_saving_onto_its_own_log_keeps_the_log_going(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    talk = Conversation(ScriptedBrain([answer_step("one"), answer_step("two")]), [], policies=(), transcript_path=path)
    talk.ask("First?")
    talk.save(path)
    talk.ask("Second?")
    talk.close()
    again = Conversation.resume(path, ScriptedBrain([]), [], policies=())
    assert [t.request for t in again.turns] == ["First?", "Second?"]


def test_a_resume_refuses_to_go_on_in_another_conversations_log(tmp_path: Path) -> None:
    one, other = tmp_path / "one.jsonl", tmp_path / "other.jsonl"
    for path in (one, other):
        talk = Conversation(ScriptedBrain([answer_step("a")]), [], policies=(), transcript_path=path)
        talk.ask(f"In {path.name}?")
        talk.close()
    with pytest.raises(ValueError, match="already holds a log"):
        Conversation.resume(one, ScriptedBrain([]), [], policies=(), transcript_path=other)
    fresh = tmp_path / "fresh.jsonl"
    again = Conversation.resume(one, ScriptedBrain([]), [], policies=(), transcript_path=fresh)
    again.close()
    assert fresh.read_text(encoding="utf-8") == one.read_text(encoding="utf-8")


def test_a_resume_refuses_a_runs_transcript_and_entries_a_log_does_not_hold(tmp_path: Path) -> None:
    from shapeloop import run_agent

    run_log = tmp_path / "run.jsonl"
    run_agent(ScriptedBrain([answer_step("a")]), [], "t", policies=(), transcript_path=run_log)
    with pytest.raises(ValueError, match="not a conversation's log"):
        Conversation.resume(run_log, ScriptedBrain([]), [])
    for bad in ('{"type": "cut", "request": 4, "level": 1, "requests": {"4": []}}', '{"type": "turn"}'):
        path = tmp_path / "bad.jsonl"
        path.write_text('{"type": "request", "request": "a"}\n' + bad + "\n", encoding="utf-8")
        with pytest.raises(ValueError, match="line 2"):
            Conversation.resume(path, ScriptedBrain([]), [])


def test_a_resume_leaves_out_a_last_line_a_crash_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    talk = Conversation(ScriptedBrain([answer_step("one"), answer_step("two")]), [], policies=(), transcript_path=path)
    talk.ask("First?")
    talk.ask("Second?")
    talk.close()
    text = path.read_text(encoding="utf-8")
    path.write_text(text[:-40], encoding="utf-8")  # killed while writing the last entry
    with pytest.warns(UserWarning, match="last line is cut off"):
        again = Conversation.resume(path, ScriptedBrain([]), [], policies=())
    assert [t.request for t in again.turns] == ["First?"]
    path.write_text(text[:-40] + "\n" + text[-40:], encoding="utf-8")  # a broken line inside is an error
    with pytest.raises(ValueError, match="not JSON"):
        Conversation.resume(path, ScriptedBrain([]), [])
    for last in ("12", "[" * 5000 + "]" * 5000):  # JSON, but not an entry; nested past what the parser follows
        path.write_text(text + last, encoding="utf-8")
        with pytest.raises(ValueError, match=rf"line {text.count(chr(10)) + 1}: not "):
            Conversation.resume(path, ScriptedBrain([]), [], policies=())


@pytest.mark.parametrize(
    "bad",
    [
        {"context_window": True},
        {"context_window": 8192.5},
        {"context_window": "8192"},
        {"max_history_chars": float("nan")},
        {"context_window": 8192, "turn_room": None},
    ],
)
def test_budgets_take_whole_numbers_and_say_which_is_wrong(bad: dict[str, object]) -> None:
    name = next(key for key, value in bad.items() if not isinstance(value, int) or isinstance(value, bool))
    with pytest.raises(TypeError, match=f"{name} takes a whole number"):
        Conversation(CountingBrain([]), [], **bad)  # type: ignore[arg-type]


def test_a_token_count_that_is_not_a_whole_number_is_refused_naming_the_brain() -> None:
    class Odd(ScriptedBrain):
        def count_tokens(self, messages: Sequence[Message]) -> int:
            return -5

    with pytest.raises(TypeError, match=r"Odd\.count_tokens returned -5"):
        Conversation(Odd([]), [], context_window=8192)


def test_opening_prompt_names_a_misspelled_option() -> None:
    from shapeloop.agent import opening_prompt

    with pytest.raises(TypeError, match="sytem"):
        opening_prompt([], sytem="Be brief.")
    assert "Be brief." in opening_prompt([], system="Be brief.", max_steps=3)


def test_a_resume_into_its_own_file_after_a_torn_line_writes_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    talk = Conversation(ScriptedBrain([answer_step("one"), answer_step("two")]), [], policies=(), transcript_path=path)
    talk.ask("First?")
    talk.ask("Second?")
    talk.close()
    path.write_text(path.read_text(encoding="utf-8")[:-40], encoding="utf-8")
    with pytest.warns(UserWarning, match="cut off"):
        again = Conversation.resume(path, ScriptedBrain([answer_step("three")]), [], policies=(), transcript_path=path)
    again.ask("Third?")
    again.close()
    final = Conversation.resume(path, ScriptedBrain([]), [], policies=())
    assert [t.request for t in final.turns] == ["First?", "Third?"]


def test_a_last_entry_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    talk = Conversation(ScriptedBrain([answer_step("one")]), [], policies=(), transcript_path=path)
    talk.ask("First?")
    talk.close()
    path.write_text(path.read_text(encoding="utf-8").rstrip("\n"), encoding="utf-8")  # an editor dropped it
    again = Conversation.resume(path, ScriptedBrain([answer_step("two")]), [], policies=(), transcript_path=path)
    again.ask("Second?")
    again.close()
    assert [t.request for t in Conversation.resume(path, ScriptedBrain([]), []).turns] == ["First?", "Second?"]


def test_save_after_a_resume_onto_the_file_it_streams_to_keeps_later_requests(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    talk = Conversation(ScriptedBrain([answer_step("one")]), [], policies=(), transcript_path=path)
    talk.ask("First?")
    talk.close()
    brain = ScriptedBrain([answer_step("two"), answer_step("three")])
    again = Conversation.resume(path, brain, [], policies=(), transcript_path=path)
    again.ask("Second?")
    again.save(path)
    again.ask("Third?")
    again.close()
    turns = Conversation.resume(path, ScriptedBrain([]), []).turns
    assert [t.request for t in turns] == ["First?", "Second?", "Third?"]


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ({"max_steps": 0}, "max_steps and stuck_limit must be at least 1"),
        ({"mode": "bogus"}, "mode must be one of constrained, prose, native, not 'bogus'"),
        ({"policies": ["fit-floor"]}, "Policy objects"),
    ],
)
def test_run_options_are_checked_when_the_conversation_is_made(option: dict[str, object], said: str) -> None:
    with pytest.raises((ValueError, TypeError), match=said):
        Conversation(ScriptedBrain([]), [], **option)


def test_a_window_budget_for_a_brain_that_cannot_count_is_estimated_so_chinese_is_not_three_times_over() -> None:
    from shapeloop.agent import opening_prompt
    from shapeloop.conversation import MESSAGE_TOKENS, estimate_tokens

    assert estimate_tokens("") == 0 and estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2
    assert estimate_tokens("the cat") == 2 and estimate_tokens("a  b\n\nc") == 5  # a space joins the word after it
    assert estimate_tokens("Grüße") == 5 and estimate_tokens("2026-12-04") == 10  # capitals, letters, digits
    assert estimate_tokens("北京天气") == 4 and estimate_tokens("🎉") == 2  # beyond the BMP: two
    report = "请把报告里的数字加起来并告诉我结果。" * 20  # 360 characters: about 250 tokens for Qwen's tokenizer
    assert estimate_tokens(report) == len(report)

    @tool
    def read(name: str) -> str:
        """Read a report."""
        return report

    steps = [tool_step("read", name="a"), answer_step("好"), tool_step("read", name="b"), answer_step("好")]
    brain = ScriptedBrain(steps)
    # a window that leaves the history 400 tokens: one request's result fits, two do not
    window = estimate_tokens(opening_prompt([read])) + MESSAGE_TOKENS + 400 + 400
    talk = Conversation(brain, [read], policies=(), context_window=window, turn_room=400)
    assert talk.max_history_tokens == 400 and talk.max_history_chars is None
    assert not talk.ask("读报告 a").cuts
    second = talk.ask("再读报告 b")
    # the first result is cut; at three characters a token (1 200 for 400 tokens) both results would have stayed
    assert second.cuts and second.cuts[0].startswith('[result of read({"name": "a"}) cut: ')
    earlier = brain.asked[2].messages[1:-1]  # what the second request's first step read before the request
    assert earlier and sum(estimate_tokens(m["content"]) + MESSAGE_TOKENS for m in earlier) <= 400


def test_tool_names_given_as_a_generator_serve_every_request() -> None:
    folders = Folders()
    brain = ScriptedBrain([answer_step("a"), answer_step("b")])
    talk = Conversation(
        brain, folders.tools(), policies=(), context_window=8192, allow_tools=(n for n in ["ls"]), batch=False
    )
    talk.ask("One?")
    talk.ask("Two?")
    prompts = [request.messages[0]["content"] for request in brain.asked]
    assert len(prompts) == 2 and all("ls(): " in p and "cat(" not in p for p in prompts), prompts
    # the default step documents the functions as JSON
    brain = ScriptedBrain([lean_answer("a"), lean_answer("b")])
    talk = Conversation(brain, folders.tools(), policies=(), context_window=8192, allow_tools=(n for n in ["ls"]))
    assert [talk.ask(q).run.answer for q in ("One?", "Two?")] == ["a", "b"]
    prompts = [request.messages[0]["content"] for request in brain.asked]
    assert len(prompts) == 2 and all('"name": "ls"' in p and '"name": "cat"' not in p for p in prompts), prompts


def test_policies_given_as_a_generator_serve_every_request_and_a_name_is_refused_saying_what_to_do() -> None:
    from shapeloop.policies import StateLine

    brain = ScriptedBrain([answer_step("a"), answer_step("b")])
    talk = Conversation(brain, Folders().tools(), policies=(p for p in [StateLine(lambda: "here")]))
    assert [talk.ask(q).run.policies for q in ("One?", "Two?")] == [("state-line",)] * 2
    with pytest.raises(TypeError, match=r"resolve\('default'\)"):
        Conversation(ScriptedBrain([]), [], policies="default")


def test_each_dropped_request_is_named_by_its_own_marker_and_earlier_markers_are_kept() -> None:
    brain = ScriptedBrain([answer_step("a" * 50), answer_step("b" * 50), answer_step("c" * 50), answer_step("d")])
    talk = Conversation(brain, [], policies=(), max_history_chars=150)
    for request in ("first request alpha", "second request beta", "third request gamma", "fourth request delta"):
        talk.ask(request)
    markers = [m for turn in talk.turns for m in turn.cuts if m.startswith("[an earlier request cut, ")]
    assert [m.count("an earlier request cut") for m in markers] == [1] * len(markers), markers
    named = " ".join(markers)
    assert "first request alpha" in named and "second request beta" in named, markers
    # over budget, the history keeps them as one marker that counts them (issue 49: markers stay within it)
    assert talk.history[0]["content"].startswith("[2 earlier requests cut, 4 messages: 149 characters, ")


def test_a_request_stopped_by_ctrl_c_returns_its_turn_and_the_history_says_it_stopped(tmp_path: Path) -> None:
    @tool
    def deploy(target: str) -> str:
        """Deploy to a target."""
        raise KeyboardInterrupt

    brain = ScriptedBrain([tool_step("deploy", target="prod"), answer_step("ok")])
    with Conversation(brain, [deploy], policies=(), transcript_path=tmp_path / "log.jsonl") as talk:
        turn = talk.ask("Deploy to prod.")
    assert turn.run.stop is StopReason.INTERRUPTED
    last = talk.history[-1]
    assert last["role"] == "user" and last["content"].startswith("[this request was stopped before it answered: ")
    resumed = Conversation.resume(tmp_path / "log.jsonl", ScriptedBrain([]), [deploy], policies=())
    assert resumed.history == talk.history


def test_saving_into_a_missing_folder_or_onto_a_folder_names_the_path_given(tmp_path: Path) -> None:
    from shapeloop.errors import TranscriptError

    talk = Conversation(ScriptedBrain([answer_step("a")]), [], policies=())
    talk.ask("One?")
    for target, why in ((tmp_path / "missing" / "log.jsonl", "its folder does not exist"), (tmp_path, "a directory")):
        with pytest.raises(TranscriptError, match=why) as raised:
            talk.save(target)
        assert str(target) in str(raised.value)
    (tmp_path / "latin1.jsonl").write_bytes(b'{"type": "request", "request": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=r"latin1\.jsonl: not a conversation's log \(not UTF-8"):
        Conversation.resume(tmp_path / "latin1.jsonl", ScriptedBrain([]), [], policies=())
