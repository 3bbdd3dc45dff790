"""The history a conversation keeps: each request's messages as the next run reads them, within a
budget, cut mechanically where it is over.

The budget is in characters or in tokens (counted by the brain where it counts them, else estimated
by :func:`~shapeloop.estimate_tokens`): given as such, or worked out from the model's window
(:func:`window_budget`: what the window leaves after the system prompt, with the tools'
documentation, and room for the request's own steps). When it is over, the oldest parts are cut in
three stages, each leaving a marker that says what was cut, so nothing is dropped silently:

1. the tool results of a request (``[result of read_file({"path": "a.txt"}) cut: 3 120 characters,
   to keep the conversation within its window]``), oldest request first;
2. the steps between a request and its answer, oldest request first;
3. whole requests, oldest first, named at the start of the next one; never the latest, so a latest
   request longer than the budget alone is kept, folded.
"""

from __future__ import annotations

import itertools
import json
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from shapeloop import prompts
from shapeloop.agent import opening_prompt
from shapeloop.brain import Brain, Message, as_brain
from shapeloop.extract import extract_step
from shapeloop.run import Mode
from shapeloop.settings import RunSettings
from shapeloop.step import Batch, Step
from shapeloop.tokens import TokenCounter, counted, prompt_tokens
from shapeloop.toolbox import Toolbox
from shapeloop.tools import Tool, ToolCall

DEFAULT_HISTORY_CHARS = 16_000
"""The history's budget in characters when none is given (about 4 000 tokens)."""
DEFAULT_TURN_ROOM = 2048
"""Tokens of the window a ``context_window`` budget keeps for a request's own steps (its calls,
results and replies)."""

_WHY = "to keep the conversation within its window"
_DROP = "[an earlier request cut, "  # how the marker of a request cut whole begins
# The markers of requests cut whole, one request's and several requests' merged, read back to merge them.
_ONE_CUT = re.compile(rf"\[an earlier request cut, (\d+) messages: .*: ([\d ]+) characters, {_WHY}\]")
_MANY_CUT = re.compile(rf"\[(\d+) earlier requests cut, (\d+) messages: ([\d ]+) characters, {_WHY}\]")
_CALL_CHARS = 120  # how much of a call a marker shows
_WHOLE, _RESULTS_CUT, _FOLDED, _DROPPED = 0, 1, 2, 3  # how far a request's messages are cut (a log's cut level)


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


@dataclass(frozen=True, kw_only=True)
class HistoryBudget:
    """What a history is kept within: ``tokens`` (counted by a brain that counts them, else
    estimated) where given, else ``chars``."""

    brain: Brain | Callable[..., Any]
    tokens: int | None
    chars: int | None


class History:
    """A conversation's requests, each as the next run reads it, cut as far as a budget asks.

    Each request is a list of messages and how far it is cut; :meth:`fit` cuts them and yields each
    cut as the ``cut`` entry of the conversation's log.
    """

    def __init__(self) -> None:
        self._requests: list[list[Message]] = []  # each request's messages, as the next run reads them
        self._levels: list[int] = []
        self._sizes: dict[int, int] = {}  # each request's size in the budget's unit, once measured
        self._first = 0  # the requests before it are cut whole

    @property
    def messages(self) -> list[Message]:
        """The history as the next request's run reads it (cuts and their markers included)."""
        return [message for request in self._requests[self._first :] for message in request]

    def __len__(self) -> int:
        """The requests the history holds, those cut whole included."""
        return len(self._requests)

    def add(self, messages: list[Message]) -> None:
        """A request's messages, whole, after the others."""
        self._requests.append(messages)
        self._levels.append(_WHOLE)

    def add_to_latest(self, message: Message) -> None:
        """One more message of the latest request (read back from a log)."""
        self._put(-1, [*self._requests[-1], message])

    def settle_latest(self) -> None:
        """The latest request, finished, kept as :func:`settled` keeps it (read back from a log)."""
        self._put(-1, settled(self._requests[-1]))

    def restore(self, changed: dict[int, list[Message]], level: int, index: int) -> None:
        """A cut read back from a log: requests ``changed`` are now as given, request ``index`` cut to ``level``.

        Raises:
            IndexError: a cut of a request the history does not hold yet.
        """
        opened = len(self._requests)
        if max([index, *changed]) >= opened:
            raise IndexError(f"it cuts a request past the {opened} the log has opened so far")
        for number, messages in changed.items():
            self._put(number, messages)
        self._levels[index] = level

    def fit(self, budget: HistoryBudget) -> Iterator[dict[str, Any]]:
        """Cut the history, stage by stage and oldest request first, until it is within budget: the
        results, the steps, then whole requests. Before a request is cut whole, the markers of the
        requests cut before it are merged into one, and so at the end, so that markers do not pile
        up past the budget. The work follows the requests kept: those cut whole are not visited.

        Yields:
            each cut's log entry as it is made (its ``markers`` say what was cut); the next cut waits
            for the caller, who logs it first.
        """
        while (
            self._first < len(self._requests) - 1
            and self._levels[self._first] >= _DROPPED
            and not self._requests[self._first]
        ):
            self._first += 1
        for level, cut in ((_RESULTS_CUT, cut_results), (_FOLDED, fold)):
            for index in range(self._first, len(self._requests)):
                if self._levels[index] >= level:
                    continue
                if not self._over(budget):
                    return
                kept, said = cut(self._requests[index])
                yield self._apply({index: kept}, level, index, said)
        for index in range(self._first, len(self._requests)):
            if not self._over(budget):
                break
            if self._levels[index] >= _DROPPED:
                continue
            yield from self._merge(index)
            if self._over(budget) and index < len(self._requests) - 1:  # never the latest
                changed, said = self._drop(index)
                yield self._apply(changed, _DROPPED, index, said)

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

    def _merge(self, index: int) -> list[dict[str, Any]]:
        """The markers of requests cut whole that open request ``index``, two or more, made one that
        counts them (the log keeps each); the cut's log entry, or none."""
        messages = self._requests[index]
        carried, rest = _markers_before(messages[0]["content"]) if messages else ([], "")
        if len(carried) < 2:
            return []
        requests, count, chars = (sum(column) for column in zip(*map(_cut_counts, carried), strict=True))
        marker = f"[{requests} earlier requests cut, {count} messages: {_count(chars)} characters, {_WHY}]"
        first = Message(role=messages[0]["role"], content=f"{marker}\n{rest}")
        return [self._apply({index: [first, *messages[1:]]}, self._levels[index], index, [marker])]

    def _apply(self, changed: dict[int, list[Message]], level: int, index: int, markers: list[str]) -> dict[str, Any]:
        """Make a cut; its log entry."""
        for number, messages in changed.items():
            self._put(number, messages)
        self._levels[index] = level
        plain = {str(number): [dict(m) for m in messages] for number, messages in changed.items()}
        return {"type": "cut", "level": level, "request": index, "markers": markers, "requests": plain}

    def _put(self, index: int, messages: list[Message]) -> None:
        """Request ``index``'s messages are now ``messages`` (its size to be measured again)."""
        self._requests[index] = messages
        self._sizes.pop(index % len(self._requests), None)

    def _over(self, budget: HistoryBudget) -> bool:
        """Whether the history is over its budget: counted by a brain that counts tokens, else summed
        over the requests kept, each measured once."""
        if budget.tokens is not None and isinstance(budget.brain, TokenCounter):
            history = self.messages
            return bool(history) and counted(budget.brain, history) > budget.tokens
        limit = budget.tokens if budget.tokens is not None else budget.chars or 0
        return sum(self._size(index, budget) for index in range(self._first, len(self._requests))) > limit

    def _size(self, index: int, budget: HistoryBudget) -> int:
        """Request ``index``'s messages in the budget's unit: estimated tokens, or characters."""
        size = self._sizes.get(index)
        if size is None:
            messages = self._requests[index]
            tokens = budget.tokens is not None
            size = prompt_tokens(budget.brain, messages) if tokens else sum(len(m["content"]) for m in messages)
            self._sizes[index] = size
        return size


def window_budget(
    brain: Brain | Callable[..., Any], tools: Sequence[Tool], settings: RunSettings[Any], window: int, room: int
) -> int:
    """The history's tokens in ``window``: less the system prompt every request's run opens with
    (counted by the brain, or estimated by :func:`~shapeloop.estimate_tokens`) and ``room``, at least
    a quarter of it. In ``mode="native"``, with a brain that takes native tool calls, the backend
    renders the offered tools' specs as well, so they are counted too. Its warning names the code
    that made the conversation (two calls up).

    Raises:
        WindowTooSmall: a window the system prompt alone fills.
    """
    prompt = opening_prompt(tools, settings=settings)
    if settings.mode == Mode.NATIVE and as_brain(brain).capabilities.native_tools:
        offered = Toolbox(tools, allow=settings.allow_tools, deny=settings.deny_tools,
                          limits=settings.limits).tools.values()  # fmt: skip
        prompt += "\n" + json.dumps([t.spec() for t in offered], ensure_ascii=False)
    taken = prompt_tokens(brain, [Message(role="system", content=prompt)])
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


def settled(messages: list[Message]) -> list[Message]:
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


def crashed_request(request: str, continued: bool, calls: Sequence[str], exc: BaseException) -> Message:
    """A request whose run raised, as the history keeps it: the request (``continued``: after
    others), then a note of the calls it made and the error, since the tools' state has changed."""
    done = f"calls it made: {_clip('; '.join(calls), _CALL_CHARS * 4)}" if calls else "it made no call"
    note = f"[this request's run stopped with an error before it answered ({_clip(repr(exc), 200)}); {done}]"
    return Message(role="user", content=f"{prompts.task_message(request, continued=continued)}\n{note}")


def interruption(reason: str) -> Message:
    """The note after a request stopped before it answered (Ctrl-C): a call it made may not have finished."""
    return Message(role="user", content=f"[this request was stopped before it answered: {reason}]")


def cut_results(messages: list[Message]) -> tuple[list[Message], list[str]]:
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


def fold(messages: list[Message]) -> tuple[list[Message], list[str]]:
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


def _count(number: int) -> str:
    return f"{number:,}".replace(",", " ")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
