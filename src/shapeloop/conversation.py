"""A conversation: request after request over the same tools, each a run that continues the last.

A :class:`Conversation` holds what :func:`~shapeloop.run_agent` needs for every request (the brain,
the tools, the policies and every other option) and the history so far. The tools are the caller's
own objects, so their state (a current folder, an open ticket) carries from one request to the next.

The history is kept within a budget, in characters or in tokens (counted by the brain where it
counts them, else estimated by :func:`estimate_tokens`): given as such, or worked out from the
model's window (``context_window=``: what the window leaves after the system prompt, with the tools'
documentation, and room for the request's own steps). When it is over, the oldest parts are cut
mechanically, in three stages (the results, the steps, whole requests; :mod:`shapeloop.history`),
each leaving a marker that says what was cut, so nothing is dropped silently.

Its log (:attr:`Conversation.transcript`) is a :class:`~shapeloop.Transcript`: each request's own
messages and events as its run recorded them, a ``request`` and a ``turn`` entry around them (an
``error`` entry instead of the ``turn`` where its run raised), and a ``cut`` entry for each cut
(:mod:`shapeloop.conversation_log` declares them); :meth:`Conversation.save` writes it as JSON Lines
and :meth:`Conversation.resume` reads it back. With ``transcript_path=`` a request's entries are
appended when it ends, or when its run raises.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from shapeloop.agent import run_agent
from shapeloop.brain import Brain, Message
from shapeloop.conversation_log import (
    CutEntry,
    Entry,
    EventEntry,
    MessageEntry,
    RequestEntry,
    TurnEntry,
    log_lines,
    own_entries,
    read_entries,
    rebuilt_turn,
    same_file,
    turn_entry,
)
from shapeloop.errors import TranscriptError
from shapeloop.events import Event, ToolCalled
from shapeloop.history import DEFAULT_HISTORY_CHARS as DEFAULT_HISTORY_CHARS  # an `X as X` import: re-exported
from shapeloop.history import DEFAULT_TURN_ROOM as DEFAULT_TURN_ROOM
from shapeloop.history import History, HistoryBudget, crashed_request, interruption, settled, window_budget
from shapeloop.history import WindowTooSmall as WindowTooSmall
from shapeloop.run import AgentRun, StopReason, Transcript
from shapeloop.settings import RunSettings, settings_of
from shapeloop.tokens import MESSAGE_TOKENS as MESSAGE_TOKENS
from shapeloop.tokens import TokenCounter as TokenCounter
from shapeloop.tokens import estimate_tokens as estimate_tokens
from shapeloop.tools import Tool, ToolCall
from shapeloop.turn import Turn as Turn


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
            max_history_tokens = window_budget(brain, self.tools, self.settings, context_window, turn_room)
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
        self._history = History()
        self._own: list[dict[str, Any]] = []  # the entries of the request being replayed
        self._unwritten: TranscriptError | None = None  # why the log's file was given up, to raise

    @property
    def history(self) -> list[Message]:
        """The conversation as the next request's run reads it (cuts and their markers included)."""
        return self._history.messages

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
        cuts = self._fit()
        earlier = self.history
        seen: list[Event] = []
        try:
            run = run_agent(self.brain, self.tools, request, settings=self.settings, history=earlier,
                            on_event=(seen.append, *self.settings.sinks))  # fmt: skip
        except BaseException as exc:
            self._crashed(request, bool(earlier), seen, exc)
            raise
        messages = settled([m for m in run.messages if m["role"] != "system"][len(earlier) :])
        turn = Turn(request=request, run=run, calls=_calls(run), cuts=cuts)
        entries = [{"type": "request", "request": request}, *own_entries(run, len(earlier))]
        if run.stop is StopReason.INTERRUPTED:  # a call may have been cut short: the next request reads so
            note = interruption(run.reason)
            messages.append(note)
            entries.append({"type": "message", **note})
        self._history.add(messages)
        self.turns.append(turn)
        self._write(*entries, turn_entry(turn))
        if self._unwritten is not None:
            unwritten, self._unwritten = self._unwritten, None
            raise unwritten
        return turn

    def _crashed(self, request: str, continued: bool, seen: list[Event], exc: BaseException) -> None:
        """A request whose run raised: the request, its events and the error in the log; the request
        and what it did in the history (the tools' state has changed), as a user message."""
        calls = [str(event.call) for event in seen if isinstance(event, ToolCalled)]
        messages = [crashed_request(request, continued, calls, exc)]
        self._history.add(messages)
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
        if self._stream is not None and same_file(path, self._stream):
            return
        Transcript(entries=list(self.transcript.entries)).write(path)

    @property
    def options(self) -> dict[str, Any]:
        """Deprecated: :attr:`settings` holds the options every request runs with; this is them as a
        dict, as this attribute was, for one release."""
        warnings.warn("Conversation.options is deprecated and will be removed: read Conversation.settings "
                      "(a RunSettings)", DeprecationWarning, stacklevel=2)  # fmt: skip
        return {field.name: getattr(self.settings, field.name) for field in dataclasses.fields(self.settings)}

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
        if target is not None and not same_file(target, path) and os.path.exists(target) and os.path.getsize(target):
            raise ValueError(
                f"transcript_path={os.fspath(target)!r} already holds a log: give the file you resume from "
                f"({os.fspath(path)!r}), where the log goes on, or a new or empty file"
            )
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            conversation = cls(brain, tools, **settings)
        for warning in warned:
            warnings.warn_explicit(warning.message, warning.category, *_caller())
        # the log goes on in target: locked before the file is read, so no writer appends between the
        # reading and the going on (one writer at a time)
        stream = Transcript.streaming(target) if target is not None else None
        try:
            lines, last, torn = log_lines(path)
            conversation._replay_log(path, lines)
            if torn:
                warnings.warn(
                    f"{os.fspath(path)}: its last line is cut off (a write was interrupted?) and is left out",
                    UserWarning,
                    stacklevel=2,
                )
            if stream is not None and target is not None:
                conversation._go_on(path, target, stream, last, torn)
        except BaseException:
            if stream is not None:
                stream.close()
            raise
        return conversation

    def _go_on(
        self, path: str | os.PathLike[str], target: str | os.PathLike[str], stream: Transcript, last: bytes, torn: bool
    ) -> None:
        """A resumed log goes on in ``target`` (``stream``, locked): after what it holds, if it is the
        file resumed from."""
        entries = self.transcript.entries
        if last and same_file(target, path):  # the next entry starts a line: after the torn one, over it
            with open(path, "r+b") as handle:
                handle.seek(0, os.SEEK_END)
                if torn:
                    handle.truncate(handle.tell() - len(last))
                else:
                    handle.write(b"\n")
        self.transcript, self._stream = stream, target
        if same_file(target, path):
            self.transcript.entries.extend(entries)
        else:
            self._write(*entries)
            if self._unwritten is not None:
                raise self._unwritten

    def _replay_log(self, path: str | os.PathLike[str], lines: Sequence[str]) -> None:
        """Rebuild what the lines of the saved log at ``path`` record, one entry at a time."""
        for number, entry, shaped in read_entries(path, lines):
            try:
                self._replay(entry, shaped)
            except IndexError as exc:  # a cut of a request the log has not opened
                raise ValueError(
                    f"{os.fspath(path)}, line {number}: a {entry['type']!r} entry a conversation's log "
                    f"does not hold ({exc}): fix or remove the line"
                ) from exc

    def _replay(self, entry: dict[str, Any], shaped: Entry) -> None:
        """Rebuild what one entry of a saved log records (``entry`` as read, ``shaped`` as checked)."""
        history = self._history
        if isinstance(shaped, RequestEntry):
            history.add([])
            self._own = [entry]
        elif isinstance(shaped, CutEntry):
            changed = {int(index): [Message(role=m.role, content=m.content) for m in messages]
                       for index, messages in shaped.requests.items()}  # fmt: skip
            history.restore(changed, shaped.level, shaped.request)
        elif isinstance(shaped, MessageEntry) and history:
            history.add_to_latest(Message(role=shaped.role, content=shaped.content))
        elif isinstance(shaped, TurnEntry):
            self.turns.append(rebuilt_turn(shaped, self._own[1:]))
            if history:
                history.settle_latest()
        if isinstance(shaped, MessageEntry | EventEntry) and history:
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

    def _fit(self) -> tuple[str, ...]:
        """Cut the history to its budget (as the budget attributes are now set), each cut written to
        the log as it is made; the cuts' markers."""
        budget = HistoryBudget(brain=self.brain, tokens=self.max_history_tokens, chars=self.max_history_chars)
        markers: list[str] = []
        for cut in self._history.fit(budget):
            self._write(cut)
            markers += cut["markers"]
        return tuple(markers)


def _calls(run: AgentRun[Any]) -> tuple[ToolCall, ...]:
    return tuple(event.call for event in run.events if isinstance(event, ToolCalled))


def _caller() -> tuple[str, int]:
    """The file and line of the code that called :meth:`Conversation.resume`, for its warnings."""
    frame = inspect.stack(0)[2]
    return frame.filename, frame.lineno
