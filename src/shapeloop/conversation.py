"""A conversation: request after request over the same tools, each a run that continues the last.

A :class:`Conversation` holds what :func:`~shapeloop.run_agent` needs for every request (the brain,
the tools, the policies and every other option) and the history so far. The tools are the caller's
own objects, so their state (a current folder, an open ticket) carries from one request to the next.

The history is kept within a budget, in characters or in tokens (counted by the brain where it
counts them, else estimated by :func:`estimate_tokens`): given as such, or worked out from the
model's window (``context_window=``: what the window leaves after the system prompt, with the tools'
documentation, and room for the request's own steps). When it is over, the oldest parts are cut
mechanically, in three stages, each leaving a marker that says what was cut, so nothing is dropped
silently:

1. the tool results of a request (``[result of read_file({"path": "a.txt"}) cut: 3 120 characters,
   to keep the conversation within its window]``), oldest request first;
2. the steps between a request and its answer, oldest request first;
3. whole requests, oldest first, named at the start of the next one; never the latest, so a latest
   request longer than the budget alone is kept, folded.

Its log (:attr:`Conversation.transcript`) is a :class:`~shapeloop.Transcript`: each request's own
messages and events as its run recorded them, a ``request`` and a ``turn`` entry around them (an
``error`` entry instead of the ``turn`` where its run raised), and a ``cut`` entry for each cut;
:meth:`Conversation.save` writes it as JSON Lines and :meth:`Conversation.resume` reads it back.
With ``transcript_path=`` a request's entries are appended when it ends, or when its run raises.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import inspect
import itertools
import json
import os
import re
import stat
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, StringConstraints, TypeAdapter, ValidationError

from shapeloop import prompts
from shapeloop.agent import opening_prompt, run_agent
from shapeloop.brain import Brain, Message, Role, Usage, as_brain
from shapeloop.errors import TranscriptError
from shapeloop.events import Event, ToolCalled
from shapeloop.extract import extract_step
from shapeloop.run import AgentRun, Mode, StopReason, Transcript
from shapeloop.settings import RunSettings, settings_of
from shapeloop.step import Batch, Step
from shapeloop.toolbox import Toolbox
from shapeloop.tools import Tool, ToolCall

DEFAULT_HISTORY_CHARS = 16_000
"""The history's budget in characters when none is given (about 4 000 tokens)."""
DEFAULT_TURN_ROOM = 2048
"""Tokens of the window a ``context_window`` budget keeps for a request's own steps (its calls,
results and replies)."""
MESSAGE_TOKENS = 5
"""Tokens a message's chat template adds to its content (``<|im_start|>user`` ... ``<|im_end|>``),
counted with :func:`estimate_tokens` for a brain that cannot count tokens."""
_PIECE = re.compile(r"[a-z]+|[ \t]+|\n+|.", re.S)  # how estimate_tokens reads a text

_WHY = "to keep the conversation within its window"
_DROP = "[an earlier request cut, "  # how the marker of a request cut whole begins
# The markers of requests cut whole, one request's and several requests' merged, read back to merge them.
_ONE_CUT = re.compile(rf"\[an earlier request cut, (\d+) messages: .*: ([\d ]+) characters, {_WHY}\]")
_MANY_CUT = re.compile(rf"\[(\d+) earlier requests cut, (\d+) messages: ([\d ]+) characters, {_WHY}\]")
_CALL_CHARS = 120  # how much of a call a marker shows
_WHOLE, _RESULTS_CUT, _FOLDED, _DROPPED = 0, 1, 2, 3  # how far a request's messages are cut


class WindowTooSmall(ValueError):
    """A ``context_window`` the system prompt alone fills, so that no request fits.

    Attributes:
        window: the window given, in tokens.
        taken: the tokens the system prompt takes (the tools' documentation and ``system``).
    """

    def __init__(self, window: int, taken: int) -> None:
        self.window, self.taken = window, taken
        super().__init__(
            f"context_window={window}: the system prompt alone (the tools' documentation and system) takes "
            f"{taken} tokens, so no request fits: give the model's real window, fewer tools (allow_tools=) "
            "or a shorter system prompt"
        )


@runtime_checkable
class TokenCounter(Protocol):
    """A brain that counts the tokens a prompt takes (the embedded backend does)."""

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Tokens the prompt for ``messages`` takes."""
        ...


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One request of a conversation and how its run went.

    Attributes:
        request: what the user asked.
        run: the run (for a resumed conversation's earlier requests, rebuilt from the log: its
            ``events`` are empty and its transcript holds that request's own entries).
        calls: the calls the run made, in order.
        cuts: the markers of what was cut from the history before this request was asked.
    """

    request: str
    run: AgentRun[Any]
    calls: tuple[ToolCall, ...] = ()
    cuts: tuple[str, ...] = ()

    @property
    def stop(self) -> StopReason:
        """Why the request's run ended."""
        return self.run.stop

    @property
    def answer(self) -> str | None:
        """The accepted answer, or None."""
        return self.run.answer

    @property
    def ok(self) -> bool:
        """The request was answered."""
        return self.run.ok


class Conversation:
    """Requests one after another over the same tools, the history kept within a budget.

    ``Conversation(brain, tools, policies=..., batch=True, max_steps=8)`` takes every option of
    :func:`~shapeloop.run_agent` except ``task`` and ``history`` and applies it to each request;
    :meth:`ask` runs one request and returns its :class:`Turn`.

    Args:
        brain: the model, as :func:`~shapeloop.run_agent` takes it.
        tools: the tools; the same objects serve every request, so their state carries over.
        max_history_chars: the history's budget in characters (the default when no budget is given:
            :data:`DEFAULT_HISTORY_CHARS`).
        max_history_tokens: the budget in tokens instead, counted by the brain's ``count_tokens``.
        context_window: the model's window in tokens, instead of a budget: the history gets what the
            window leaves after the system prompt (the tools' documentation and ``system``) and
            ``turn_room``, at least a quarter of the window; in tokens, counted by the brain where it
            counts them, else estimated by :func:`estimate_tokens` (on the high side, in any
            script).
        turn_room: the tokens a ``context_window`` budget keeps for a request's own steps.
        transcript_path: a file the conversation's log is appended to after each request (JSON
            Lines, the format :meth:`resume` reads), instead of each run's own transcript.
        settings: the options of every request's run (:class:`~shapeloop.RunSettings`), held as
            :attr:`settings`; the defaults when None.
        **options: fields of :class:`~shapeloop.RunSettings`, each in place of ``settings``' own
            (``Conversation(brain, tools, policies=..., batch=True, max_steps=8)``).

    Raises:
        TypeError: an option :class:`~shapeloop.RunSettings` has no field for (``task`` and
            ``history`` included: the conversation gives those), a budget that is not a whole
            number, or a brain whose ``count_tokens`` does not return one.
        ValueError: a budget or window below 1, more than one of them, or a token budget for a
            brain that cannot count.
        WindowTooSmall: a ``context_window`` the system prompt alone fills (a ``ValueError``).
    """

    def __init__(
        self,
        brain: Brain | Callable[..., Any],
        tools: Iterable[Tool],
        *,
        max_history_chars: int | None = None,
        max_history_tokens: int | None = None,
        context_window: int | None = None,
        turn_room: int = DEFAULT_TURN_ROOM,
        transcript_path: str | os.PathLike[str] | None = None,
        settings: RunSettings[Any] | None = None,
        **options: Any,
    ) -> None:
        # checked now, not at the first request; a generator of tools' names, policies or hooks is read once
        self.settings = settings_of(settings, options, who="Conversation")
        given = {"max_history_chars": max_history_chars, "max_history_tokens": max_history_tokens,
                 "context_window": context_window}  # fmt: skip
        for name, value in {**given, "turn_room": turn_room}.items():
            if (value is not None or name == "turn_room") and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"{name} takes a whole number, not {value!r}")
        if sum(value is not None for value in given.values()) > 1:
            raise ValueError("give only one of max_history_chars, max_history_tokens and context_window")
        for name, value in given.items():
            if value is not None and value < 1:
                raise ValueError(f"{name} must be 1 or more, not {value}")
        if turn_room < 0:
            raise ValueError(f"turn_room must be 0 or more, not {turn_room}")
        if turn_room != DEFAULT_TURN_ROOM and context_window is None:
            raise ValueError("turn_room applies to a budget worked out from context_window: give context_window too")
        self.tools = list(tools)
        if context_window is not None:
            max_history_tokens = _window_budget(brain, self.tools, self.settings, context_window, turn_room)
        elif max_history_tokens is not None and not isinstance(brain, TokenCounter):
            raise ValueError(
                f"max_history_tokens needs a brain that counts tokens (count_tokens); {type(brain).__name__} "
                "does not: give max_history_chars, or context_window (a budget then estimated in tokens)"
            )
        self.brain = brain
        self.max_history_tokens = max_history_tokens
        none_given = max_history_chars is None and max_history_tokens is None
        self.max_history_chars = DEFAULT_HISTORY_CHARS if none_given else max_history_chars
        self.turns: list[Turn] = []
        self.transcript = Transcript() if transcript_path is None else Transcript.streaming(transcript_path)
        self._stream = transcript_path
        self._requests: list[list[Message]] = []  # each request's messages, as the next run reads them
        self._levels: list[int] = []
        self._sizes: dict[int, int] = {}  # each request's size in the budget's unit, once measured
        self._first = 0  # the requests before it are cut whole
        self._own: list[dict[str, Any]] = []  # the entries of the request being replayed
        self._unwritten: TranscriptError | None = None  # why the log's file was given up, to raise

    @property
    def history(self) -> list[Message]:
        """The conversation as the next request's run reads it (cuts and their markers included)."""
        return [message for request in self._requests[self._first :] for message in request]

    def ask(self, request: str) -> Turn:
        """Run one request, continuing the conversation; cut the history first where it is over budget.

        A run that raises (a brain's error) still leaves the request in the log and in the history,
        with the calls it made and the error, so nothing it did is lost; the error is raised. Ctrl-C
        during a request ends it as a turn that stopped ``interrupted`` (no error is raised: a chat
        goes on to the next request); the history then says so after its last message, since a call
        it made may not have finished. A log file that cannot be written (a full disk) leaves the
        request in the history, the turns and :attr:`transcript`, stops writing the file, and raises
        :class:`~shapeloop.TranscriptError` saying so.

        Raises:
            TypeError: a request that is not a string.
            ValueError: an empty request (nothing is cut or recorded).
            TranscriptError: ``transcript_path`` could not be written; the request is kept in memory.
        """
        if not isinstance(request, str):
            raise TypeError(f"a request is a string, not {type(request).__name__}")
        if not request.strip():
            raise ValueError("a request must be a non-empty string")
        cuts = tuple(self._fit())
        earlier = self.history
        seen: list[Event] = []
        try:
            run = run_agent(self.brain, self.tools, request, settings=self.settings, history=earlier,
                            on_event=(seen.append, *self.settings.sinks))  # fmt: skip
        except BaseException as exc:
            self._crashed(request, bool(earlier), seen, exc)
            raise
        messages = _settled([m for m in run.messages if m["role"] != "system"][len(earlier) :])
        turn = Turn(request=request, run=run, calls=_calls(run), cuts=cuts)
        entries: list[dict[str, Any]] = [{"type": "request", "request": request}]
        skip = len(earlier) + 1  # the system prompt and the history open every run's transcript
        for entry in run.transcript.entries:
            if entry["type"] == "message" and skip > 0:
                skip -= 1
            elif entry["type"] != "message" or entry["role"] != "system":
                entries.append(entry)
        if run.stop is StopReason.INTERRUPTED:  # a call may have been cut short: the next request reads so
            note = Message(role="user", content=f"[this request was stopped before it answered: {run.reason}]")
            messages.append(note)
            entries.append({"type": "message", **note})
        self._requests.append(messages)
        self._levels.append(_WHOLE)
        self.turns.append(turn)
        self._write(*entries, _turn_entry(turn))
        if self._unwritten is not None:
            unwritten, self._unwritten = self._unwritten, None
            raise unwritten
        return turn

    def _crashed(self, request: str, continued: bool, seen: list[Event], exc: BaseException) -> None:
        """A request whose run raised: the request, its events and the error in the log; the request
        and what it did in the history (the tools' state has changed), as a user message."""
        calls = [str(event.call) for event in seen if isinstance(event, ToolCalled)]
        done = f"calls it made: {_clip('; '.join(calls), _CALL_CHARS * 4)}" if calls else "it made no call"
        note = f"[this request's run stopped with an error before it answered ({_clip(repr(exc), 200)}); {done}]"
        messages = [Message(role="user", content=f"{prompts.task_message(request, continued=continued)}\n{note}")]
        self._requests.append(messages)
        self._levels.append(_WHOLE)
        events = [{"type": "event", **event.to_dict()} for event in seen]
        said = [{"type": "message", **message} for message in messages]
        error = {"type": "error", "request": request, "error": repr(exc), "calls": calls}
        self._write({"type": "request", "request": request}, *events, *said, error)
        where = f" and in {os.fspath(self._stream)}" if self._stream is not None else ""
        exc.add_note(f"shapeloop: the conversation keeps this request, its calls and the error in its log{where}")
        if self._unwritten is not None:
            exc.add_note(f"shapeloop: {self._unwritten}")
            self._unwritten = None

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the conversation's log as JSON Lines (atomically), for :meth:`resume`. Saving onto
        the conversation's own ``transcript_path`` leaves it as it is: it holds every entry already.

        Raises:
            TranscriptError: a path no file can have (empty, ending in a slash, a name too long, a
                NUL), a directory, or a folder that is missing, cannot be written or is full.
        """
        if self._stream is not None and _same_file(path, self._stream):
            return
        Transcript(entries=list(self.transcript.entries)).write(path)

    def close(self) -> None:
        """Stop appending to ``transcript_path``. Requests asked after it are kept in
        :attr:`transcript` only; :meth:`save` writes the whole log again."""
        self.transcript.close()
        self._stream = None

    def __enter__(self) -> Conversation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """``with Conversation(...) as talk:`` closes the log when the block ends (the brain stays
        open: it is the caller's)."""
        self.close()

    @classmethod
    def resume(
        cls, path: str | os.PathLike[str], brain: Brain | Callable[..., Any], tools: Iterable[Tool], **settings: Any
    ) -> Conversation:
        """A conversation continued from a saved log: its history, cuts and earlier turns restored.

        ``settings`` are the constructor's keyword arguments (budgets and run options); the tools
        are the caller's, in whatever state they are now.

        A last line cut off in the middle (a write interrupted by a crash, in an ASCII character or
        inside a multi-byte one) is skipped, with a warning. ``transcript_path=`` goes on writing the
        log, holding its lock as a new conversation does: in the file resumed from, or in a new or
        empty one.

        Raises:
            ValueError: a path that is not a regular file (a FIFO, a directory), a line of the file
                that is not an entry of a conversation's log (each entry is checked against the shape
                the conversation writes, and the line named), a file that is not a conversation's log
                (a run's transcript, text that is not UTF-8), or a ``transcript_path`` that already
                holds another log.
            TranscriptError: a ``transcript_path`` that cannot be written, or that another
                conversation or run is writing.
        """
        target = settings.pop("transcript_path", None)
        if target is not None and not _same_file(target, path) and os.path.exists(target) and os.path.getsize(target):
            raise ValueError(
                f"transcript_path={os.fspath(target)!r} already holds a log: give the file you resume from "
                f"({os.fspath(path)!r}), where the log goes on, or a new or empty file"
            )
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            conversation = cls(brain, tools, **settings)
        for warning in warned:
            warnings.warn_explicit(warning.message, warning.category, *_caller())
        lines, last, torn = _log_lines(path)
        for number, line in enumerate(lines, start=1):
            if line.strip():
                entry = _entry(line, path, number)
                if not conversation.transcript.entries and entry["type"] != "request":
                    raise ValueError(
                        f"{os.fspath(path)}: not a conversation's log (it opens with a {entry['type']!r} entry, "
                        "not a request); a run's transcript continues with run_agent(history=...)"
                    )
                shaped = _shaped(entry, path, number)
                try:
                    conversation._replay(entry, shaped)
                except IndexError as exc:  # a cut of a request the log has not opened
                    raise ValueError(
                        f"{os.fspath(path)}, line {number}: a {entry['type']!r} entry a conversation's log "
                        f"does not hold ({exc}): fix or remove the line"
                    ) from exc
        if torn:
            warnings.warn(
                f"{os.fspath(path)}: its last line is cut off (a write was interrupted?) and is left out",
                UserWarning,
                stacklevel=2,
            )
        if target is not None:
            conversation._go_on(path, target, last, torn)
        return conversation

    def _go_on(self, path: str | os.PathLike[str], target: str | os.PathLike[str], last: bytes, torn: bool) -> None:
        """A resumed log goes on in ``target``: after what it holds, if it is the file resumed from."""
        entries = self.transcript.entries
        stream = Transcript.streaming(target)  # locked before the file is touched: one writer at a time
        if last and _same_file(target, path):  # the next entry starts a line: after the torn one, over it
            with open(path, "r+b") as handle:
                handle.seek(0, os.SEEK_END)
                if torn:
                    handle.truncate(handle.tell() - len(last))
                else:
                    handle.write(b"\n")
        self.transcript, self._stream = stream, target
        if _same_file(target, path):
            self.transcript.entries.extend(entries)
        else:
            self._write(*entries)
            if self._unwritten is not None:
                raise self._unwritten

    def _replay(self, entry: dict[str, Any], shaped: _Entry) -> None:
        """Rebuild what one entry of a saved log records (``entry`` as read, ``shaped`` as checked)."""
        if isinstance(shaped, _RequestEntry):
            self._requests.append([])
            self._levels.append(_WHOLE)
            self._own = [entry]
        elif isinstance(shaped, _CutEntry):
            opened = len(self._requests)
            if max([shaped.request, *map(int, shaped.requests)]) >= opened:
                raise IndexError(f"it cuts a request past the {opened} the log has opened so far")
            for index, messages in shaped.requests.items():
                self._put(int(index), [Message(role=m.role, content=m.content) for m in messages])
            self._levels[shaped.request] = shaped.level
        elif isinstance(shaped, _MessageEntry) and self._requests:
            self._put(-1, [*self._requests[-1], Message(role=shaped.role, content=shaped.content)])
        elif isinstance(shaped, _TurnEntry):
            self.turns.append(_rebuilt_turn(shaped, self._own[1:]))
            if self._requests:
                self._put(-1, _settled(self._requests[-1]))
        if isinstance(shaped, _MessageEntry | _EventEntry) and self._requests:
            self._own.append(entry)
        self.transcript.add(entry)

    def _write(self, *entries: dict[str, Any]) -> None:
        """Add ``entries`` to the log. Where the file cannot take one (a full disk), every entry is still
        kept in :attr:`transcript`, the file is given up (it ends before them, perhaps with a line cut
        off), and the error a user reads waits in ``_unwritten`` for the request to end."""
        for number, entry in enumerate(entries):
            try:
                self.transcript.add(entry)  # kept in memory before it is written
            except OSError as exc:
                self.transcript.entries.extend(entries[number + 1 :])
                with contextlib.suppress(OSError):  # the close flushes what did not fit, and fails again
                    self.transcript.close()
                shown, self._stream = os.fspath(self._stream or ""), None
                self._unwritten = TranscriptError(
                    f"cannot write the conversation's log to {shown!r}: {exc.strerror or exc}; this request is kept "
                    "in memory (history, turns and transcript) but the file ends before it, and nothing more is "
                    "written there: free some space, then save(path) to write the whole log"
                )
                self._unwritten.__cause__ = exc
                return

    def _put(self, index: int, messages: list[Message]) -> None:
        """Request ``index``'s messages are now ``messages`` (its size to be measured again)."""
        self._requests[index] = messages
        self._sizes.pop(index % len(self._requests), None)

    def _fit(self) -> list[str]:
        """Cut the history, stage by stage and oldest request first, until it is within budget: the
        results, the steps, then whole requests. Before a request is cut whole, the markers of the
        requests cut before it are merged into one, and so at the end, so that markers do not pile
        up past the budget. The work follows the requests kept: those cut whole are not visited."""
        while (
            self._first < len(self._requests) - 1
            and self._levels[self._first] >= _DROPPED
            and not self._requests[self._first]
        ):
            self._first += 1
        markers: list[str] = []
        for level, cut in ((_RESULTS_CUT, _cut_results), (_FOLDED, _fold)):
            for index in range(self._first, len(self._requests)):
                if self._levels[index] >= level:
                    continue
                if not self._over():
                    return markers
                kept, said = cut(self._requests[index])
                markers += said
                self._apply({index: kept}, level, index, said)
        for index in range(self._first, len(self._requests)):
            if not self._over():
                break
            if self._levels[index] >= _DROPPED:
                continue
            markers += self._merge(index)
            if self._over() and index < len(self._requests) - 1:  # never the latest
                changed, said = self._drop(index)
                markers += said
                self._apply(changed, _DROPPED, index, said)
        return markers

    def _drop(self, index: int) -> tuple[dict[int, list[Message]], list[str]]:
        """Request ``index`` cut whole; the marker goes before the next request that is left."""
        dropped = self._requests[index]
        carried, own = _markers_before(dropped[0]["content"]) if dropped else ([], "")
        chars = len(own) + sum(len(m["content"]) for m in dropped[1:])
        marker = f"{_DROP}{len(dropped)} messages: {_clip(own, _CALL_CHARS)!r}: {_count(chars)} characters, {_WHY}]"
        later = next(i for i in range(index + 1, len(self._requests)) if self._levels[i] < _DROPPED)
        first, *rest = self._requests[later]
        moved = Message(role=first["role"], content="\n".join([*carried, marker, first["content"]]))
        return {index: [], later: [moved, *rest]}, [marker]

    def _merge(self, index: int) -> list[str]:
        """The markers of requests cut whole that open request ``index``, two or more, made one that
        counts them (the log keeps each); its marker, or none."""
        messages = self._requests[index]
        carried, rest = _markers_before(messages[0]["content"]) if messages else ([], "")
        if len(carried) < 2:
            return []
        requests, count, chars = (sum(column) for column in zip(*map(_cut_counts, carried), strict=True))
        marker = f"[{requests} earlier requests cut, {count} messages: {_count(chars)} characters, {_WHY}]"
        first = Message(role=messages[0]["role"], content=f"{marker}\n{rest}")
        self._apply({index: [first, *messages[1:]]}, self._levels[index], index, [marker])
        return [marker]

    def _apply(self, changed: dict[int, list[Message]], level: int, index: int, markers: list[str]) -> None:
        for number, messages in changed.items():
            self._put(number, messages)
        self._levels[index] = level
        plain = {str(number): [dict(m) for m in messages] for number, messages in changed.items()}
        self._write({"type": "cut", "level": level, "request": index, "markers": markers, "requests": plain})

    def _over(self) -> bool:
        """Whether the history is over its budget: counted by a brain that counts tokens, else summed
        over the requests kept, each measured once."""
        if self.max_history_tokens is not None and isinstance(self.brain, TokenCounter):
            history = self.history
            return bool(history) and _counted(self.brain, history) > self.max_history_tokens
        budget = self.max_history_tokens if self.max_history_tokens is not None else self.max_history_chars or 0
        return sum(self._size(index) for index in range(self._first, len(self._requests))) > budget

    def _size(self, index: int) -> int:
        """Request ``index``'s messages in the budget's unit: estimated tokens, or characters."""
        size = self._sizes.get(index)
        if size is None:
            messages = self._requests[index]
            tokens = self.max_history_tokens is not None
            size = _tokens(self.brain, messages) if tokens else sum(len(m["content"]) for m in messages)
            self._sizes[index] = size
        return size


def _window_budget(
    brain: Brain | Callable[..., Any], tools: Sequence[Tool], settings: RunSettings[Any], window: int, room: int
) -> int:
    """The history's tokens in ``window``: less the system prompt every request's run opens with
    (counted by the brain, or estimated by :func:`estimate_tokens`) and ``room``, at least a quarter
    of it. In ``mode="native"``, with a brain that takes native tool calls, the backend renders the
    offered tools' specs as well, so they are counted too."""
    prompt = opening_prompt(tools, settings=settings)
    if settings.mode == Mode.NATIVE and as_brain(brain).capabilities.native_tools:
        offered = Toolbox(tools, allow=settings.allow_tools, deny=settings.deny_tools,
                          limits=settings.limits).tools.values()  # fmt: skip
        prompt += "\n" + json.dumps([t.spec() for t in offered], ensure_ascii=False)
    taken = _tokens(brain, [Message(role="system", content=prompt)])
    if taken >= window:
        raise WindowTooSmall(window, taken)
    left = window - taken - room
    kept = max(1, window // 4)
    if left < kept:
        warnings.warn(
            f"context_window={window}: the system prompt takes {taken} tokens and a request's room {room}, "
            f"leaving {max(left, 0)} for the history; it is kept to a quarter of the window ({kept}), "
            "so a request may overflow: give a larger window, fewer tools or a smaller turn_room",
            UserWarning,
            stacklevel=3,
        )
    return max(kept, left)


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` takes, estimated without a tokenizer, on the high side: a run of lowercase
    ASCII letters four letters a token, a digit, a capital, a punctuation mark or a line break one
    each, a space none (a run of them one), any other character one (two beyond the Basic
    Multilingual Plane: emoji). What a ``context_window`` budget is counted in for a brain that
    cannot count tokens. Against Qwen2.5's tokenizer, text of each kind estimated over its real
    count: English 1.5 times, Python 1.6, German 1.4, Chinese 1.7, Russian 2.3, JSON with numbers
    1.1, logs of timestamps and addresses 1.0, UUIDs 1.0, base64 1.1, digits 1.0, emoji 1.4."""
    count = 0
    for piece in _PIECE.findall(text):
        first = piece[0]
        if "a" <= first <= "z":
            count += -(-len(piece) // 4)
        elif first in " \t":
            count += len(piece) > 1
        elif first.isascii():
            count += 1
        else:
            count += 2 if ord(first) > 0xFFFF else 1
    return count


def _tokens(brain: Brain | Callable[..., Any], messages: Sequence[Message]) -> int:
    """``messages``' tokens: counted by the brain where it counts them, else estimated."""
    if isinstance(brain, TokenCounter):
        return _counted(brain, messages)
    return sum(estimate_tokens(m["content"]) + MESSAGE_TOKENS for m in messages)


def _counted(brain: TokenCounter, messages: Sequence[Message]) -> int:
    """The brain's count of ``messages``' tokens, refused unless it is a whole number, 0 or more."""
    count = brain.count_tokens(messages)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise TypeError(
            f"{type(brain).__name__}.count_tokens returned {count!r}: it must return a whole number, 0 or more"
        )
    return count


def _markers_before(text: str) -> tuple[list[str], str]:
    """The markers of requests cut before this one, which open its first message, and the rest."""
    lines = text.split("\n")
    count = next((i for i, line in enumerate(lines) if not _ONE_CUT.fullmatch(line) and not _MANY_CUT.fullmatch(line)),
                 len(lines))  # fmt: skip
    return lines[:count], "\n".join(lines[count:])


def _cut_counts(marker: str) -> tuple[int, int, int]:
    """The requests, messages and characters a marker of requests cut whole counts."""
    one = _ONE_CUT.fullmatch(marker)
    if one is not None:
        return 1, int(one[1]), int(one[2].replace(" ", ""))
    many = _MANY_CUT.fullmatch(marker)
    assert many is not None, marker  # _markers_before takes no other line
    return int(many[1]), int(many[2]), int(many[3].replace(" ", ""))


def _settled(messages: list[Message]) -> list[Message]:
    """A finished request's messages as the history keeps them: each result without the step
    instruction that followed it, and a closing answer step as the answer's own words. Measured on
    BFCL's multi-turn tune entries: with every earlier request ending in ``{"answer": ...}``,
    qwen2.5-coder-0.5b answered a new request without a call, often with an earlier answer word for
    word; the log keeps the messages as they were."""
    kept = [Message(role=m["role"], content=prompts.settled(m["content"])) if m["role"] == "user" and i else m
            for i, m in enumerate(messages)]  # fmt: skip
    if len(kept) > 1 and kept[-1]["role"] == "assistant":
        step = extract_step(kept[-1]["content"], batch=True).step
        if isinstance(step, Step) and step.action == "answer":
            words = step.answer if isinstance(step.answer, str) else json.dumps(step.answer, ensure_ascii=False)
            kept[-1] = Message(role="assistant", content=words)
    return kept


def _cut_results(messages: list[Message]) -> tuple[list[Message], list[str]]:
    """Every message fed back to the model after the request (results, objections) replaced by a marker."""
    kept: list[Message] = messages[:1]
    markers: list[str] = []
    for before, message in itertools.pairwise(messages):
        marker = f"[{_what(before)} cut: {_count(len(message['content']))} characters, {_WHY}]"
        if message["role"] != "user" or len(message["content"]) <= len(marker):
            kept.append(message)
            continue
        kept.append(Message(role="user", content=marker))
        markers.append(marker)
    return kept, markers


def _fold(messages: list[Message]) -> tuple[list[Message], list[str]]:
    """The request and its last reply, the steps between them replaced by a marker on the request."""
    last = next((m for m in reversed(messages[1:]) if m["role"] == "assistant"), None)
    between = messages[1:-1] if last is messages[-1] else messages[1:]
    if not between:
        return messages, []
    chars = sum(len(m["content"]) for m in between)
    marker = f"[{len(between)} messages of this request before its last reply cut: {_count(chars)} characters, {_WHY}]"
    task = Message(role=messages[0]["role"], content=f"{messages[0]['content']}\n{marker}")
    return [task] + ([] if last is None else [last]), [marker]


def _what(before: Message) -> str:
    """What a message fed back after ``before`` (the model's step) holds, by the step it answers."""
    step = extract_step(before["content"], batch=True).step if before["role"] == "assistant" else None
    if isinstance(step, Batch):
        calls = ", ".join(str(ToolCall(tool=c.tool, args=c.args)) for c in step.calls)
        return f"results of {len(step.calls)} calls ({_clip(calls, _CALL_CHARS * 2)})"
    if step is not None and step.action == "tool":
        return f"result of {_clip(str(ToolCall(tool=step.tool, args=step.args)), _CALL_CHARS)}"
    if step is not None:
        return "reply to an answer"
    return "message"


def _calls(run: AgentRun[Any]) -> tuple[ToolCall, ...]:
    return tuple(event.call for event in run.events if isinstance(event, ToolCalled))


def _turn_entry(turn: Turn) -> dict[str, Any]:
    run = turn.run
    return {
        "type": "turn",
        "request": turn.request,
        "stop": run.stop.value,
        "reason": run.reason,
        "answer": run.answer,
        "steps": run.steps,
        "mode": run.mode.value,
        "usage": None if run.usage is None else run.usage.to_dict(),
        "policies": list(run.policies),
        "interventions": dict(run.interventions),
        "calls": [{"tool": call.tool, "args": dict(call.args)} for call in turn.calls],
        "cuts": list(turn.cuts),
    }


# The entries of a conversation's log, as the writer writes them (``_turn_entry``, ``_apply``, ``ask``,
# ``_crashed`` and a run's messages and events): :meth:`Conversation.resume` refuses any other shape at
# its line, before it replays anything. Fields a log of an earlier version lacks have their defaults.
class _Shape(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True)


class _Said(_Shape):
    role: Role
    content: str


class _RequestEntry(_Shape):
    type: Literal["request"]
    request: str


class _MessageEntry(_Said):
    type: Literal["message"]


class _EventEntry(_Shape):
    model_config = ConfigDict(strict=True, frozen=True, extra="allow")  # each event kind has its fields
    type: Literal["event"]
    kind: str


class _SavedCall(_Shape):
    tool: str
    args: dict[str, Any]


class _SavedUsage(_Shape):
    prompt_tokens: NonNegativeInt = 0
    completion_tokens: NonNegativeInt = 0
    cached_tokens: NonNegativeInt = 0
    total_tokens: NonNegativeInt = 0


class _TurnEntry(_Shape):
    type: Literal["turn"]
    request: str
    stop: StopReason = Field(strict=False)  # written as its value
    reason: str
    answer: str | None
    steps: NonNegativeInt
    mode: Mode = Field(strict=False)
    usage: _SavedUsage | None = None
    policies: list[str] = []
    interventions: dict[str, NonNegativeInt] = {}
    calls: list[_SavedCall] = []
    cuts: list[str] = []


class _ErrorEntry(_Shape):
    type: Literal["error"]
    request: str
    error: str
    calls: list[str] = []


class _CutEntry(_Shape):
    type: Literal["cut"]
    level: Literal[0, 1, 2, 3]  # _WHOLE to _DROPPED
    request: NonNegativeInt
    markers: list[str] = []
    requests: dict[Annotated[str, StringConstraints(pattern=r"^[0-9]{1,9}$")], list[_Said]]


_Entry = Annotated[
    _RequestEntry | _MessageEntry | _EventEntry | _TurnEntry | _ErrorEntry | _CutEntry, Field(discriminator="type")
]
_ENTRY: TypeAdapter[_Entry] = TypeAdapter(_Entry)
_KINDS = ("request", "message", "event", "turn", "error", "cut")


def _shaped(entry: dict[str, Any], path: str | os.PathLike[str], number: int) -> _Entry:
    """``entry`` as the model of its kind, or an error naming the line and what is wrong with it."""
    kind = entry["type"]
    if kind not in _KINDS:
        raise ValueError(
            f"{os.fspath(path)}, line {number}: a {_clip(repr(kind), 60)} entry, which a conversation's log does "
            f"not hold (it holds {', '.join(_KINDS)}): fix or remove the line"
        )
    try:
        return _ENTRY.validate_python(entry)
    except ValidationError as exc:
        wrong = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'][1:])}: {error['msg']} "
            f"(it holds {_clip(repr(error['input']), 60)})"
            for error in exc.errors()[:3]
        )
        raise ValueError(
            f"{os.fspath(path)}, line {number}: a {kind!r} entry a conversation's log does not hold ({wrong}): "
            "the log was changed after Conversation wrote it; fix or remove the line"
        ) from exc


def _rebuilt_turn(entry: _TurnEntry, own: list[dict[str, Any]]) -> Turn:
    usage = entry.usage
    run: AgentRun[Any] = AgentRun(
        stop=entry.stop,
        reason=entry.reason,
        answer=entry.answer,
        output=entry.answer,
        steps=entry.steps,
        mode=entry.mode,
        usage=None if usage is None else Usage(**usage.model_dump(exclude={"total_tokens"})),
        transcript=Transcript(entries=own),
        policies=tuple(entry.policies),
        interventions=dict(entry.interventions),
    )
    calls = tuple(ToolCall(tool=c.tool, args=c.args) for c in entry.calls)
    return Turn(request=entry.request, run=run, calls=calls, cuts=tuple(entry.cuts))


def _whole_line(line: str) -> bool:
    """Whether a line is JSON at all: a write cut short leaves an object unclosed, never valid JSON
    (a line that is JSON but not an entry is a wrong entry, not a torn one)."""
    try:
        json.loads(line)
    except ValueError:
        return False
    except RecursionError:  # nested deeper than the parser follows: whole, but no entry
        pass
    return True


def _log_lines(path: str | os.PathLike[str]) -> tuple[list[str], bytes, bool]:
    """The whole lines of the log at ``path``; its last line's bytes, where no newline ends the file;
    and whether that line was cut off by an interrupted write (it is then not among the lines). A
    write cut off inside a multi-byte character is cut off as one inside an ASCII one is.

    Raises:
        ValueError: text that is not UTF-8 before the last line, or a path that is not a regular file.
    """
    data = _read_regular(path)
    body, newline, last = data.rpartition(b"\n")  # a file written whole ends with a newline
    start = len(body) + len(newline)
    try:
        lines = body.decode("utf-8").split("\n")
        tail = codecs.getincrementaldecoder("utf-8")().decode(last)  # all but an unfinished character
    except UnicodeDecodeError as exc:
        at = exc.start + (start if exc.object == last and body != last else 0)
        raise ValueError(
            f"{os.fspath(path)}: not a conversation's log (not UTF-8 text: {exc.reason} at byte {at})"
        ) from exc
    torn = len(tail.encode("utf-8")) < len(last) or (bool(tail.strip()) and not _whole_line(tail))
    if tail.strip() and not torn:
        lines.append(tail)
    return lines, last, torn


def _read_regular(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the file at ``path``, refused, without blocking, unless it is a regular file
    (a FIFO would wait for a writer forever)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # a missing or unreadable file says so itself
            raise
        mode = stat.S_IFSOCK  # a socket cannot be opened
    else:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            with open(fd, "rb") as handle:
                return handle.read()
        os.close(fd)
    kind = {stat.S_IFIFO: "a FIFO", stat.S_IFDIR: "a directory", stat.S_IFSOCK: "a socket"}.get(
        stat.S_IFMT(mode), "a device"
    )
    raise ValueError(
        f"{os.fspath(path)}: not a conversation's log (it is {kind}, not a regular file): give the file that "
        "save() or transcript_path= wrote"
    )


def _entry(line: str, path: str | os.PathLike[str], number: int) -> dict[str, Any]:
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{os.fspath(path)}, line {number}: not JSON ({exc}); is it a conversation's log?") from exc
    if not isinstance(entry, dict) or "type" not in entry:
        raise ValueError(f"{os.fspath(path)}, line {number}: not an entry of a conversation's log (no 'type')")
    return entry


def _same_file(one: str | os.PathLike[str], other: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file (both existing), else whether they are one path."""
    try:
        return os.path.samefile(one, other)
    except OSError:
        return os.path.abspath(one) == os.path.abspath(other)


def _caller() -> tuple[str, int]:
    """The file and line of the code that called :meth:`Conversation.resume`, for its warnings."""
    frame = inspect.stack(0)[2]
    return frame.filename, frame.lineno


def _count(number: int) -> str:
    return f"{number:,}".replace(",", " ")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
