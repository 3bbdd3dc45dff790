"""The one protocol a model backend implements, its request, reply and usage types, and the scripted brain.

A brain answers one :class:`Request`: the conversation so far and what constrains the reply (a JSON
schema, native tools, or nothing). It returns a :class:`Reply` that says which constraint it really
applied, and it declares up front what it can do (:class:`Capabilities`), so the loop chooses a mode
without probing. Everything else (modes, retries of shape, repeats, tools) is the loop's.
"""

from __future__ import annotations

import enum
import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, Self, TypedDict, runtime_checkable

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


class Constraint(enum.StrEnum):
    """What constrained a reply."""

    SCHEMA = "schema"
    """The request's JSON schema, as given."""
    FLAT = "flat"
    """The five-field flat step schema, in place of the schema asked for."""
    TOOLS = "tools"
    """The backend's native tool-calling API."""
    NONE = "none"
    """Nothing: the reply is free text."""


class SchemaSupport(enum.StrEnum):
    """Which JSON schemas a backend can constrain a reply to."""

    FULL = "full"
    """Any JSON schema, the per-tool step schema included."""
    FLAT = "flat"
    """Only the flat five-field step."""
    NONE = "none"
    """None: every reply is free text, read as prose."""


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What a backend declares it can do; the loop chooses its mode from these.

    Attributes:
        schema: which schemas it constrains replies to.
        native_tools: it takes tools through a native tool-calling API.
        exclusive: it holds one model and one context (the embedded backend), so two runs must
            never ask it at once; ``run_many`` gives such a brain to one run at a time. The
            default: a brain that does not say otherwise (a user's :class:`BaseBrain` subclass, a
            function brain) may keep state, so it is not asked by two runs at once. A brain that
            talks to a server declares ``exclusive=False``: the server takes concurrent requests.
        logprobs: it scores text: ``continuation_logprobs(prefix, continuation)`` returns the
            log-probability of each token of the continuation (policies that read the model's own
            likelihoods need it, :class:`~shapeloop.policies.FitFloor`). It may also have
            ``continuations_logprobs(prefix, continuations)``, the same for several continuations
            of one prefix at once (the embedded backend evaluates the prefix once); a policy reads
            either through :class:`~shapeloop.policies.RunView`.
        calibration: values calibrated for the brain's model, by name (``("fit_floor", -0.68)``).
        margins: it honours a request's decision margin (:attr:`Request.call_margin`) where a
            constrained step chooses between calling and answering, from its own logits (the
            embedded backend with its fast engine), asks the request's :attr:`Request.confirm_answer`
            there, and says in :attr:`Reply.leaned` where the margin changed the choice.
        preset: names of the policies measured to help the brain's model (the catalogue's
            ``preset``; :func:`shapeloop.policies.resolve` names), which the default policies add
            (:class:`~shapeloop.policies.ModelPreset`).
    """

    schema: SchemaSupport = SchemaSupport.FULL
    native_tools: bool = False
    exclusive: bool = True
    logprobs: bool = False
    calibration: tuple[tuple[str, float], ...] = ()
    margins: bool = False
    preset: tuple[str, ...] = ()


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

    def to_dict(self) -> dict[str, int]:
        """The counts as plain data, the total included (the one shape used everywhere)."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True, kw_only=True)
class Request:
    """One question to a brain.

    Attributes:
        messages: the conversation, oldest first.
        schema: a JSON schema the reply must satisfy (constrained decoding), or None.
        tools: tools offered through the backend's native API, in OpenAI's function format
            (``{"type": "function", "function": ...}``), or None. A request has a schema or
            tools, never both.
        repeats: how many times this run has started repeating itself so far; a routing brain
            escalates on it (the run's state travels in the request, so no brain keeps it).
        results: how many tool results the run has fed back so far (0 at a task's first step).
        task: the user's task as given, for a backend that judges whether any offered tool fits it.
        offered: the tools this step may call, as ``(name, description)``, for the same judgement.
        call_margin: where the step chooses between a call and an answer, call only if the best
            token that opens a call leads the best that opens an answer by more than this (logits);
            None: the model's own choice. Honoured by a brain that declares ``margins``.
        confirm_answer: with ``call_margin``, where the lean to calling is within it, the brain
            calls this with the lean (logits) at that token: a reason in words turns the step to an
            answer, ``""`` keeps the model's own choice. It costs only where the lean is weak (a
            policy scores the request there, :class:`~shapeloop.policies.Abstain`). None: the
            margin alone turns it.
    """

    messages: Sequence[Message]
    schema: Mapping[str, Any] | None = None
    tools: Sequence[Mapping[str, Any]] | None = None
    repeats: int = 0
    results: int = 0
    task: str | None = None
    offered: Sequence[tuple[str, str]] = ()
    call_margin: float | None = None
    confirm_answer: Callable[[float], str] | None = None

    def __post_init__(self) -> None:
        if self.schema is not None and self.tools is not None:
            raise ValueError("a request constrains its reply by a schema or by native tools, not both")

    @property
    def constraint(self) -> Constraint:
        """What the request asks to constrain the reply by."""
        if self.tools is not None:
            return Constraint.TOOLS
        return Constraint.NONE if self.schema is None else Constraint.SCHEMA


@dataclass(frozen=True, kw_only=True)
class Reply:
    """What a brain returns for one request.

    Attributes:
        text: the reply text, exactly as generated.
        usage: token counts, when the backend reports them.
        finish: why generation stopped.
        applied: the constraint the backend really applied (``FLAT`` where it put the flat step
            schema in place of the one asked for, ``NONE`` where it could not apply any); None
            when the backend does not say (a plain function).
        engine: which decoding path ran, when the backend has several (e.g. ``"llguidance"``).
        thinking: a thinking model's reasoning, kept apart so it is never read as the step.
        tool_calls: calls made through the backend's native tool API.
        leaned: where a request's decision margin changed what the model chose, what it changed,
            in words (``"answered: calling led by 0.42, not more than the margin 1.00"``); else "".
    """

    text: str
    usage: Usage | None = None
    finish: Finish = Finish.STOP
    applied: Constraint | None = None
    engine: str | None = None
    thinking: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    leaned: str = ""


@runtime_checkable
class Brain(Protocol):
    """A model backend: it declares its capabilities, answers a request, and closes.

    Subclass :class:`BaseBrain` to get ``close`` and the context manager for free; a plain
    function ``fn(messages, schema) -> str | Reply`` is also accepted wherever a brain is.
    """

    @property
    def capabilities(self) -> Capabilities:
        """What this backend can do."""
        ...

    def ask(self, request: Request) -> Reply:
        """Return the model's reply to ``request``.

        Raises:
            SchemaRefused: the backend cannot apply the request's constraint (the loop steps
                down: native, then constrained, then prose).
            BackendError: no reply could be had.
        """
        ...

    def close(self) -> None:
        """Release what the backend holds (connections, a loaded model)."""
        ...


class BaseBrain:
    """A base for backends: override :meth:`ask` and, where it differs, :attr:`capabilities`.

    It closes nothing by default and works as a context manager (``with MyBrain() as brain:``).
    A brain that asks other brains (a router, a wrapper that retries or logs) names them in
    :attr:`members`, so ``run_many`` lends each exclusive model inside it to one run at a time.
    """

    capabilities: Capabilities = Capabilities()

    @property
    def members(self) -> Sequence[Brain]:
        """The brains this one asks in its turn; none for a brain that holds its own model.

        ``run_many`` locks the exclusive brains a brain is made of (by identity, through any
        depth of members), not the wrapper: two wrappers around one embedded model share its lock.
        """
        return ()

    def ask(self, request: Request) -> Reply:
        """Return the model's reply to ``request``."""
        raise NotImplementedError(f"{type(self).__name__} must implement ask(request)")

    def close(self) -> None:
        """Release what the backend holds; nothing by default."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


BrainFunction = Callable[..., "str | Reply"]
"""A brain function: ``fn(messages, schema) -> str | Reply``, or ``fn(request: Request) -> str | Reply``."""
Scripted = str | Reply | BaseException

CONTRACT = "fn(messages, schema) -> str"
"""The one contract of a brain function, as error messages name it."""


class ScriptedBrain(BaseBrain):
    """A brain for tests: replays a list of replies, or calls a brain function.

    ``ScriptedBrain(["...", "..."])`` returns the strings in order; an item may also be a
    :class:`Reply` (to script usage, a length stop or native calls) or an exception to raise.
    ``ScriptedBrain(fn)`` takes a brain function as :class:`FunctionBrain` does: ``fn(messages,
    schema)``, or ``fn(request)`` for the whole request (told apart by the signature: one parameter,
    named ``request`` or annotated ``Request``). The messages are plain ``{"role": ..., "content": ...}`` dicts.

    Args:
        script: the replies, or the function.
        capabilities: what the brain declares (by default: any schema, no native tools).
        refuse_schema: raise :class:`SchemaRefused` whenever a schema is asked for, like a
            backend whose server or model turns the schema down at run time.

    Attributes:
        asked: every request so far, with copies of its messages.

    Raises:
        TypeError: a function that cannot be called as a brain function, or a script item that is
            not a str, a Reply or an exception; one line that names the contract.
    """

    def __init__(
        self,
        script: Iterable[Scripted] | BrainFunction,
        *,
        capabilities: Capabilities | None = None,
        refuse_schema: bool = False,
    ) -> None:
        self._fn = _request_function(script) if callable(script) else None
        self._replies: list[Scripted] = [] if callable(script) else list(script)
        for index, item in enumerate(self._replies):
            if not isinstance(item, str | Reply | BaseException):
                raise TypeError(
                    f"ScriptedBrain: item {index} of the script is a {type(item).__name__}; a script holds "
                    "str, Reply or exception items (or pass a brain function, " + CONTRACT + ")"
                )
        self.capabilities = capabilities or Capabilities()
        self.refuse_schema = refuse_schema
        self.asked: list[Request] = []

    def ask(self, request: Request) -> Reply:
        """Return the next scripted reply."""
        request = replace(request, messages=copy_messages(request.messages))
        if request.schema is not None and self.refuse_schema:
            raise SchemaRefused("this scripted brain refuses schemas", backend="scripted")
        self.asked.append(request)
        item = self._fn(request) if self._fn is not None else self._next()
        if isinstance(item, BaseException):
            raise item
        reply = item if isinstance(item, Reply) else Reply(text=item)
        return reply if reply.applied is not None else replace(reply, applied=request.constraint)

    def _next(self) -> Scripted:
        if not self._replies:
            raise BackendError(
                f"the scripted brain ran out of replies after {len(self.asked) - 1}",
                backend="scripted",
            )
        return self._replies.pop(0)


def copy_messages(messages: Sequence[Message]) -> list[Message]:
    """The messages as plain dicts, so a later change to the run's list cannot alter a record."""
    return [Message(role=m["role"], content=m["content"]) for m in messages]


class FunctionBrain(BaseBrain):
    """A brain function as a :class:`Brain`: ``fn(messages, schema) -> str | Reply``.

    ``messages`` is the conversation as plain ``{"role": ..., "content": ...}`` dicts and ``schema``
    the JSON schema the reply must satisfy (None in prose mode). A function of one parameter named
    ``request`` or annotated :class:`Request` (``fn(request)``) gets the whole request instead. This is
    the one contract wherever shapeloop takes a function for a brain (``run_agent``, ``run_many``,
    :class:`ScriptedBrain`). It takes any schema and no native tools; its replies do not say what
    was applied, so the loop checks that a constrained reply is a JSON object.

    A bare function is exclusive (``run_many`` gives it to one run at a time, by the function's
    identity); a function that talks to a server says otherwise:
    ``FunctionBrain(fn, capabilities=Capabilities(exclusive=False))``.

    Raises:
        TypeError: at once, for a function that cannot be called so (``fn(messages)``); at its
            reply, for a reply that is not a str or a :class:`Reply`. One line names the contract.
    """

    def __init__(self, fn: BrainFunction, *, capabilities: Capabilities | None = None) -> None:
        self.fn = fn
        self._call = _request_function(fn)
        if capabilities is not None:
            self.capabilities = capabilities

    def ask(self, request: Request) -> Reply:
        """Call the function with the messages and the schema (or the request)."""
        out = self._call(request)
        return out if isinstance(out, Reply) else checked_reply(self, Reply(text=out))


def _request_function(fn: Callable[..., Any]) -> Callable[[Request], Any]:
    """``fn`` as a function of the request, its replies checked; refused in one line where its
    signature fits neither form of a brain function."""
    try:
        signature: inspect.Signature | None = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature is taken at its word
        signature = None
    shown = f"{_fn_name(fn)}({', '.join(signature.parameters) if signature else '...'})"

    def checked(out: object) -> Any:
        if not isinstance(out, str | Reply | BaseException):
            raise TypeError(f"brain function {shown} returned a {type(out).__name__}: a brain function is {CONTRACT}")
        return out

    if signature is not None and _takes_request(signature):
        return lambda request: checked(fn(request))
    if signature is not None and not _binds(signature, 2):
        raise TypeError(
            f"brain function {shown} cannot be called with (messages, schema): a brain function is {CONTRACT} "
            "(or fn(request) -> str for the whole shapeloop.Request), or pass a shapeloop.BaseBrain"
        )
    return lambda request: checked(fn(copy_messages(request.messages), request.schema))


def _takes_request(signature: inspect.Signature) -> bool:
    """One parameter, named ``request`` or annotated :class:`Request`: the request form."""
    first = next(iter(signature.parameters.values()), None)
    if first is None or not _binds(signature, 1) or _binds(signature, 2):
        return False
    names = ("Request", "shapeloop.Request", "shapeloop.brain.Request")
    return first.name == "request" or first.annotation is Request or first.annotation in names


def _binds(signature: inspect.Signature, count: int) -> bool:
    try:
        signature.bind(*([None] * count))
    except TypeError:
        return False
    return True


def _fn_name(fn: object) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


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
    return reply if text is reply.text else replace(reply, text=text)


def _name(brain: object) -> str:
    inner = brain.fn if isinstance(brain, FunctionBrain) else brain
    return getattr(inner, "__qualname__", None) or type(inner).__qualname__


def as_brain(brain: Brain | Callable[..., Any]) -> Brain:
    """Return ``brain`` if it is a :class:`Brain`; wrap a brain function (:class:`FunctionBrain`) otherwise.

    Raises:
        TypeError: before any request, for an object that is neither, or a function whose
            signature fits no brain function; one line that names the contract.
    """
    if isinstance(brain, Brain):
        return brain
    if hasattr(brain, "ask"):
        raise TypeError(
            f"{type(brain).__name__} has ask() but is not a Brain: a brain declares capabilities, takes "
            "ask(request) and has close(); subclass shapeloop.BaseBrain"
        )
    if callable(brain):
        return FunctionBrain(brain)
    raise TypeError(f"a brain is a shapeloop.BaseBrain or a function {CONTRACT}; got a {type(brain).__name__}")


def ignored_schema(reply: Reply) -> str | None:
    """Why a reply to a constrained request shows the schema was not applied, or None."""
    if reply.applied is Constraint.NONE:
        return "the backend did not apply the schema"
    try:
        is_object = isinstance(json.loads(reply.text), dict)
    except (ValueError, RecursionError):  # RecursionError: a reply of thousands of "["
        is_object = False
    return None if is_object else "the backend ignored the schema: the reply was not a JSON object"
