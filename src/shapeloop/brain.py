"""The one protocol a model backend implements, its reply and usage types, and the scripted brain.

A brain answers one question: given the conversation so far and a JSON schema (or None for prose),
what does the model say? Everything else (modes, retries of shape, repeats, tools) is the loop's.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from shapeloop.errors import BackendError, SchemaRefused
from shapeloop.text import escape_surrogates
from shapeloop.tools import ToolCall

Role = Literal["system", "user", "assistant"]


class Message(TypedDict):
    """One turn of the conversation, as chat APIs take it."""

    role: Role
    content: str


class Finish(enum.StrEnum):
    """Why generation stopped."""

    STOP = "stop"
    """The model ended its turn."""
    LENGTH = "length"
    """The reply hit the token limit and was cut off."""


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Token counts for one reply, or totals for a run.

    Attributes:
        prompt_tokens: tokens of prompt the request covered (evaluated plus reused).
        completion_tokens: tokens generated.
        cached_tokens: prompt tokens reused from a cache rather than evaluated again.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def evaluated_tokens(self) -> int:
        """Prompt tokens the backend had to evaluate (not found in its cache)."""
        return self.prompt_tokens - self.cached_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
        )


@dataclass(frozen=True, kw_only=True)
class Reply:
    """What a brain returns for one question.

    Attributes:
        text: the reply text, exactly as generated.
        usage: token counts, when the backend reports them.
        finish: why generation stopped.
        engine: which decoding path ran, when the backend has several (e.g. ``"llguidance"``).
        thinking: a thinking model's reasoning, kept apart so it is never read as the step.
        tool_calls: calls made through the backend's native tool API (native mode only).
    """

    text: str
    usage: Usage | None = None
    finish: Finish = Finish.STOP
    engine: str | None = None
    thinking: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


@runtime_checkable
class Brain(Protocol):
    """Anything that can answer a conversation, optionally constrained to a JSON schema."""

    def ask(self, messages: Sequence[Message], schema: Mapping[str, Any] | None) -> Reply:
        """Return the model's reply.

        Args:
            messages: the conversation, oldest first.
            schema: a JSON schema the reply must satisfy (constrained decoding), or None to let
                the model answer in prose.

        Raises:
            SchemaRefused: the backend cannot constrain to ``schema``.
            BackendError: no reply could be had.
        """
        ...


@runtime_checkable
class NativeBrain(Brain, Protocol):
    """A brain whose backend also has a native tool-calling API (Ollama ``tools=``, OpenAI ``tools``)."""

    def ask_native(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> Reply:
        """Return the reply, with any calls in ``Reply.tool_calls``.

        Args:
            messages: the conversation, oldest first.
            tools: the tools in OpenAI's function format (``{"type": "function", "function": ...}``).

        Raises:
            SchemaRefused: the backend or model does not take native tools.
            BackendError: no reply could be had.
        """
        ...


BrainFunction = Callable[[list[Message]], "str | Reply"]
Scripted = str | Reply | BaseException


@dataclass(frozen=True, kw_only=True)
class Asked:
    """One question a :class:`ScriptedBrain` was asked."""

    messages: list[Message]
    schema: Mapping[str, Any] | None
    tools: Sequence[Mapping[str, Any]] | None = None


class ScriptedBrain:
    """A brain for tests: replays a list of replies, or calls a function of the messages.

    ``ScriptedBrain(["...", "..."])`` returns the strings in order; an item may also be a
    :class:`Reply` (to script usage or a length stop) or an exception to raise.
    ``ScriptedBrain(fn)`` calls ``fn(messages)`` with the messages as a list of
    ``{"role": ..., "content": ...}`` dicts and returns what it returns.

    Args:
        script: the replies, or the function.
        refuse_schema: raise :class:`SchemaRefused` whenever a schema is passed, like a backend
            that cannot constrain decoding.
        native: take native tool calls (``ask_native``); script them as ``Reply(tool_calls=...)``.
            Without it ``ask_native`` refuses, like a backend with no tool API.

    Attributes:
        asked: every question asked so far, with its messages and schema.
    """

    def __init__(
        self, script: Iterable[Scripted] | BrainFunction, *, refuse_schema: bool = False, native: bool = False
    ) -> None:
        self._fn: BrainFunction | None = script if callable(script) else None
        self._replies: list[Scripted] = [] if callable(script) else list(script)
        self.refuse_schema = refuse_schema
        self.native = native
        self.asked: list[Asked] = []

    def ask(self, messages: Sequence[Message], schema: Mapping[str, Any] | None) -> Reply:
        """Return the next scripted reply."""
        copied = _copy(messages)
        if schema is not None and self.refuse_schema:
            raise SchemaRefused("this scripted brain refuses schemas", backend="scripted")
        self.asked.append(Asked(messages=copied, schema=schema))
        return self._reply(copied)

    def ask_native(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> Reply:
        """Return the next scripted reply, as a backend with native tool calls would."""
        copied = _copy(messages)
        if not self.native:
            raise SchemaRefused("this scripted brain has no native tool calls", backend="scripted")
        self.asked.append(Asked(messages=copied, schema=None, tools=list(tools)))
        return self._reply(copied)

    def _reply(self, messages: list[Message]) -> Reply:
        item = self._next(messages)
        if isinstance(item, BaseException):
            raise item
        return item if isinstance(item, Reply) else Reply(text=item)

    def _next(self, messages: list[Message]) -> Scripted:
        if self._fn is not None:
            return self._fn(messages)
        if not self._replies:
            raise BackendError(
                f"the scripted brain ran out of replies after {len(self.asked) - 1}",
                backend="scripted",
            )
        return self._replies.pop(0)


def _copy(messages: Sequence[Message]) -> list[Message]:
    """The messages as plain dicts, so a later change to the run's list cannot alter the record."""
    return [Message(role=m["role"], content=m["content"]) for m in messages]


class _CallableBrain:
    """Adapts a plain function ``fn(messages, schema) -> str | Reply`` to :class:`Brain`."""

    def __init__(self, fn: Callable[[list[Message], Mapping[str, Any] | None], str | Reply]) -> None:
        self._fn = fn

    def ask(self, messages: Sequence[Message], schema: Mapping[str, Any] | None) -> Reply:
        out = self._fn(list(messages), schema)
        return out if isinstance(out, Reply) else checked_reply(self, Reply(text=out))


def checked_reply(brain: object, reply: object) -> Reply:
    """``reply`` if it is a :class:`Reply` with text, its lone surrogates escaped; a brain that
    returns anything else is a programming error, raised naming the brain."""
    if not isinstance(reply, Reply) or not isinstance(reply.text, str):
        got = type(reply.text if isinstance(reply, Reply) else reply).__name__
        raise TypeError(
            f"brain {_name(brain)} returned {got} where a Reply with text (a str) was due: "
            "its ask() must return Reply(text=...), or a plain function a str"
        )
    text = escape_surrogates(reply.text)
    return reply if text is reply.text else dataclasses.replace(reply, text=text)


def _name(brain: object) -> str:
    inner = brain._fn if isinstance(brain, _CallableBrain) else brain
    return getattr(inner, "__qualname__", None) or type(inner).__qualname__


def as_brain(brain: Any) -> Brain:
    """Return ``brain`` if it has ``ask``; wrap a plain ``fn(messages, schema)`` otherwise."""
    if hasattr(brain, "ask"):
        return brain  # type: ignore[no-any-return]
    if callable(brain):
        return _CallableBrain(brain)
    raise TypeError(f"a brain needs an ask(messages, schema) method or must be callable; got {type(brain).__name__}")
