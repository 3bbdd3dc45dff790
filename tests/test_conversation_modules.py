"""The conversation split by responsibility (issue: conversation.py past 900 lines): the history and
its cuts (``shapeloop.history``), token counting (``shapeloop.tokens``), the log's entries and reading
(``shapeloop.conversation_log``) and the turn (``shapeloop.turn``); every name still imported from
``shapeloop.conversation`` is the same object, and the behaviour is the conversation's own."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

import shapeloop
from helpers import call_step, lean_answer
from shapeloop import Conversation, ScriptedBrain, tool


@pytest.fixture
def no_gc() -> Iterator[None]:
    """Only reference counting frees objects: what a reference cycle holds stays held."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@tool
def note(text: str) -> str:
    """Write a note and say what it holds."""
    return f"noted: {text} " + "details " * 35


def chat(requests: int) -> ScriptedBrain:
    """A brain for ``requests`` requests: each calls ``note`` once, then answers."""
    steps = [(call_step("note", text=str(number)), lean_answer(f"noted {number}")) for number in range(requests)]
    return ScriptedBrain([step for pair in steps for step in pair])


def test_the_names_imported_from_the_conversation_module_are_those_of_their_new_homes() -> None:
    from shapeloop import conversation, history, tokens, turn

    assert conversation.Turn is turn.Turn is shapeloop.Turn
    assert conversation.WindowTooSmall is history.WindowTooSmall is shapeloop.WindowTooSmall
    assert conversation.estimate_tokens is tokens.estimate_tokens is shapeloop.estimate_tokens
    assert conversation.TokenCounter is tokens.TokenCounter
    assert (conversation.DEFAULT_HISTORY_CHARS, conversation.DEFAULT_TURN_ROOM) == (16_000, 2048)
    assert conversation.MESSAGE_TOKENS == tokens.MESSAGE_TOKENS == 5


def test_the_cut_entries_of_the_log_hold_exactly_the_markers_the_turns_report() -> None:
    talk = Conversation(chat(12), [note], policies=(), max_history_chars=900)
    for number in range(12):
        talk.ask(f"Request {number}: note it.")
    logged = [marker for entry in talk.transcript.entries if entry["type"] == "cut" for marker in entry["markers"]]
    reported = [marker for turn in talk.turns for marker in turn.cuts]
    assert logged == reported
    assert any(marker.startswith("[an earlier request cut") for marker in reported)  # each request cut whole
    assert any(" earlier requests cut, " in marker for marker in reported)  # and their markers merged
    assert any(entry["level"] == 3 for entry in talk.transcript.entries if entry["type"] == "cut")  # cut whole


def test_a_conversation_dropped_unclosed_lets_go_of_its_log_at_once(tmp_path: Path, no_gc: None) -> None:
    # its parts hold no reference back to it (a cycle would keep the file and its lock until a collection)
    path = tmp_path / "talk.jsonl"
    with pytest.warns(ResourceWarning, match="unclosed file"):  # Python's word that the file closed here
        Conversation(chat(1), [note], policies=(), transcript_path=path).ask("Note it.")
    again = Conversation.resume(path, chat(1), [note], policies=(), transcript_path=path)
    assert again.ask("Once more.").ok and len(again.turns) == 2
    again.close()
