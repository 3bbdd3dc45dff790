"""A conversation's log: the entries it holds, declared, and reading a saved log back for
:meth:`Conversation.resume <shapeloop.Conversation.resume>`.

The log (:attr:`Conversation.transcript <shapeloop.Conversation.transcript>`) holds each request's
own messages and events as its run recorded them, a ``request`` and a ``turn`` entry around them (an
``error`` entry instead of the ``turn`` where its run raised), and a ``cut`` entry for each cut. A
log read back is checked line by line against these shapes, and a line of any other shape is
refused, named, before it is replayed; a last line cut off by an interrupted write is told apart.
"""

from __future__ import annotations

import codecs
import errno
import json
import os
import stat
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, StringConstraints, TypeAdapter, ValidationError

from shapeloop.brain import Role, Usage
from shapeloop.run import AgentRun, Mode, StopReason, Transcript
from shapeloop.tools import ToolCall
from shapeloop.turn import Turn


# The entries of a conversation's log, as the writer writes them (``turn_entry``, the cuts of
# ``shapeloop.history``, ``Conversation.ask`` and a run's messages and events): a reader refuses any
# other shape at its line, before it replays anything. Fields a log of an earlier version lacks have
# their defaults.
class _Shape(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True)


class _Said(_Shape):
    role: Role
    content: str


class RequestEntry(_Shape):
    type: Literal["request"]
    request: str


class MessageEntry(_Said):
    type: Literal["message"]


class EventEntry(_Shape):
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


class TurnEntry(_Shape):
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


class ErrorEntry(_Shape):
    type: Literal["error"]
    request: str
    error: str
    calls: list[str] = []


class CutEntry(_Shape):
    type: Literal["cut"]
    level: Literal[0, 1, 2, 3]  # how far the history cut the request: whole to cut whole
    request: NonNegativeInt
    markers: list[str] = []
    requests: dict[Annotated[str, StringConstraints(pattern=r"^[0-9]{1,9}$")], list[_Said]]


Entry = Annotated[
    RequestEntry | MessageEntry | EventEntry | TurnEntry | ErrorEntry | CutEntry, Field(discriminator="type")
]
_ENTRY: TypeAdapter[Entry] = TypeAdapter(Entry)
_KINDS = ("request", "message", "event", "turn", "error", "cut")


def turn_entry(turn: Turn) -> dict[str, Any]:
    """The ``turn`` entry that closes a request's entries in the log (:func:`rebuilt_turn` reads it)."""
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


def rebuilt_turn(entry: TurnEntry, own: list[dict[str, Any]]) -> Turn:
    """The turn a ``turn`` entry records, its run's transcript the request's ``own`` entries."""
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


def own_entries(run: AgentRun[Any], earlier: int) -> list[dict[str, Any]]:
    """A request's run's entries as the log keeps them: without the system prompt and the
    ``earlier`` messages of history that open every run's transcript."""
    entries: list[dict[str, Any]] = []
    skip = earlier + 1
    for entry in run.transcript.entries:
        if entry["type"] == "message" and skip > 0:
            skip -= 1
        elif entry["type"] != "message" or entry["role"] != "system":
            entries.append(entry)
    return entries


def read_entries(path: str | os.PathLike[str], lines: Sequence[str]) -> Iterator[tuple[int, dict[str, Any], Entry]]:
    """Each entry of ``lines`` (of the log at ``path``), one at a time, with its line number: as read,
    and as the model of its kind. Blank lines are passed over.

    Raises:
        ValueError: a line that is not JSON or not an entry of a conversation's log, naming it, or a
            log that does not open with a request (a run's transcript).
    """
    opened = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        entry = _entry(line, path, number)
        if not opened and entry["type"] != "request":
            raise ValueError(
                f"{os.fspath(path)}: not a conversation's log (it opens with a {entry['type']!r} entry, "
                "not a request); a run's transcript continues with run_agent(history=...)"
            )
        opened = True
        yield number, entry, _shaped(entry, path, number)


def log_lines(path: str | os.PathLike[str]) -> tuple[list[str], bytes, bool]:
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


def same_file(one: str | os.PathLike[str], other: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file (both existing), else whether they are one path."""
    try:
        return os.path.samefile(one, other)
    except OSError:
        return os.path.abspath(one) == os.path.abspath(other)


def _entry(line: str, path: str | os.PathLike[str], number: int) -> dict[str, Any]:
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{os.fspath(path)}, line {number}: not JSON ({exc}); is it a conversation's log?") from exc
    if not isinstance(entry, dict) or "type" not in entry:
        raise ValueError(f"{os.fspath(path)}, line {number}: not an entry of a conversation's log (no 'type')")
    return entry


def _shaped(entry: dict[str, Any], path: str | os.PathLike[str], number: int) -> Entry:
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


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
