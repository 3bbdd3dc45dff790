"""The tool type, building a tool from a typed function, and running a call safely.

A tool takes JSON arguments and returns text. Whatever goes wrong in a call (bad arguments, an
unknown name, an exception, a refusal) comes back as text the model can read: ``ERROR: ...`` or
``DENIED: ...``. The loop never dies of a tool.
"""

from __future__ import annotations

import contextvars
import enum
import functools
import inspect
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast, get_type_hints, overload

import jsonschema
import jsonschema.exceptions
from pydantic import ConfigDict, ValidationError, create_model

from shapeloop.errors import TimedOut, ToolFailure
from shapeloop.text import escape_surrogates

Approver = Callable[["ToolCall"], "bool | str"]
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Tool:
    """A tool the model may call.

    Args:
        name: what the model writes in ``tool``; may contain dots (``math.factorial``).
        description: what the tool does, shown to the model.
        parameters: JSON schema of the arguments object.
        fn: called as ``fn(**args)``; returns text (anything else is rendered as JSON or str).
        needs_approval: the tool acts on the world, so it runs only if the run's ``approve``
            says yes.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: Callable[..., Any] = field(repr=False)
    needs_approval: bool = False
    _validator: jsonschema.protocols.Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name or not self.name.strip():
            raise ValueError("a tool needs a non-empty name")
        schema = dict(self.parameters)
        validator_cls = jsonschema.validators.validator_for(schema)
        try:
            validator_cls.check_schema(schema)
        except jsonschema.exceptions.SchemaError as exc:
            raise ValueError(f"tool {self.name!r}: parameters is not a valid JSON schema: {exc.message}") from exc
        object.__setattr__(self, "_validator", validator_cls(schema))

    def __call__(self, **args: Any) -> Any:
        """Call the underlying function directly (no validation, no gate)."""
        return self.fn(**args)

    def argument_errors(self, args: Mapping[str, Any]) -> str | None:
        """The validator's message for the most relevant problem with ``args``, or None."""
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(dict(args)))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{where}: {error.message}" if where else error.message

    def spec(self) -> dict[str, Any]:
        """The tool in OpenAI's function format, as native tool APIs take it."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }

    def signature(self) -> str:
        """A one-line summary such as ``read_file(path: string, offset?: integer)``."""
        props = self.parameters.get("properties", {}) or {}
        required = set(self.parameters.get("required", []) or [])
        parts = [f"{name}{'' if name in required else '?'}: {_type_name(spec)}" for name, spec in props.items()]
        return f"{self.name}({', '.join(parts)})"


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, needs_approval: bool = False
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Build a :class:`Tool` from a typed function: ``@tool`` or ``@tool(needs_approval=True)``.

    The name comes from ``__name__``, the description from the docstring's first paragraph, the
    argument schema from the signature (pydantic builds it), and each argument's description from
    a Google-style ``Args:`` section. Arguments are converted to the annotated types before the call.
    """

    def build(func: Callable[..., Any]) -> Tool:
        schema, convert = _arguments_from_signature(func)
        summary, arg_docs = _parse_docstring(inspect.getdoc(func) or "")
        for arg, doc in arg_docs.items():
            if arg in schema.get("properties", {}):
                schema["properties"][arg].setdefault("description", doc)

        @functools.wraps(func)
        def call(**args: Any) -> Any:
            return func(**convert(args))

        return Tool(
            name=name or func.__name__,
            description=description or summary or func.__name__.replace("_", " "),
            parameters=schema,
            fn=call,
            needs_approval=needs_approval,
        )

    return build if fn is None else build(fn)


def _arguments_from_signature(
    func: Callable[..., Any],
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], dict[str, Any]]]:
    hints = get_type_hints(func)
    fields: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(
                f"tool {func.__name__!r}: parameter {param.name!r} must be a plain or keyword "
                "argument, so the model can name it"
            )
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints.get(param.name, Any), default)
    model = create_model(f"{func.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    schema = _drop_titles(model.model_json_schema())

    def convert(args: dict[str, Any]) -> dict[str, Any]:
        try:
            parsed = model.model_validate(args)
        except ValidationError as exc:
            raise ToolFailure(f"invalid arguments: {exc.errors()[0]['msg']}") from exc
        return {key: getattr(parsed, key) for key in args if key in fields}

    return schema, convert


def _drop_titles(node: Any) -> Any:
    if isinstance(node, dict):
        # A property named "title" maps to a schema (a dict); only the string annotations go.
        return {k: _drop_titles(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [_drop_titles(v) for v in node]
    return node


_ARG_LINE = re.compile(r"^\s{2,}(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and ``{argument: description}`` from a Google-style ``Args:`` section."""
    summary = doc.split("\n\n", 1)[0].strip().replace("\n", " ")
    args: dict[str, str] = {}
    in_args = False
    current = ""
    for line in doc.splitlines():
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args and line and not line[0].isspace():
            break
        if in_args and (match := _ARG_LINE.match(line)):
            current = match.group(1)
            args[current] = match.group(2).strip()
        elif in_args and current and line.strip():
            args[current] += " " + line.strip()
    return summary, args


def _type_name(spec: Mapping[str, Any]) -> str:
    if "enum" in spec:
        return " | ".join(json.dumps(v) for v in spec["enum"])
    kind = spec.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array" and isinstance(spec.get("items"), Mapping):
        return f"array of {_type_name(spec['items'])}"
    if kind:
        return str(kind)
    if "anyOf" in spec:
        return " | ".join(_type_name(s) for s in spec["anyOf"] if isinstance(s, Mapping))
    return "any"


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """A tool name and its arguments, as the model asked for them."""

    tool: str
    args: Mapping[str, Any]

    @property
    def key(self) -> str:
        """Canonical identity: the name plus the arguments as sorted, compact JSON."""
        return json.dumps([self.tool, self.args], sort_keys=True, separators=(",", ":"), default=str)

    def __str__(self) -> str:
        return f"{self.tool}({json.dumps(self.args, sort_keys=True, ensure_ascii=False, default=str)})"


class ToolStatus(enum.StrEnum):
    """How a tool call went. ``REPEAT`` is an identical call with an identical result."""

    OK = "ok"
    ERROR = "error"
    DENIED = "denied"
    REPEAT = "repeat"


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """The outcome of one call.

    Attributes:
        call: the call.
        status: ``ok``, ``error`` or ``denied``.
        text: what the model sees: the result, cut to the run's limit, or ``ERROR: ...`` /
            ``DENIED: ...``.
        chars: length of the full result before it was cut.
        truncated: the result was cut to the run's ``max_result_chars``.
    """

    call: ToolCall
    status: ToolStatus
    text: str
    chars: int
    truncated: bool = False


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters, with a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[truncated: {len(text) - limit} of {len(text)} characters cut]"


class Toolbox:
    """The tools of one run, with the run's policy: allow and deny lists, approval, truncation and
    a time limit per call.

    Deny wins over allow; a tool that is not permitted is neither advertised nor run. A call that
    runs past ``timeout`` seconds ends as ``ERROR: ... timed out``; its thread cannot be killed, so
    the tool runs on in the background and what it returns is dropped.
    """

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] | None = None,
        approve: Approver | None = None,
        max_result_chars: int = 4000,
        timeout: float | None = None,
    ) -> None:
        self._all: dict[str, Tool] = {}
        for item in tools:
            if not isinstance(item, Tool):
                raise TypeError(f"expected a shapeloop Tool, got {item!r}: decorate the function with @tool")
            if item.name in self._all:
                raise ValueError(f"two tools are named {item.name!r}; tool names must be unique")
            self._all[item.name] = item
        allowed = set(self._all) if allow is None else self._names(allow, "allow_tools")
        denied = self._names(deny or (), "deny_tools")
        self.tools: dict[str, Tool] = {n: t for n, t in self._all.items() if n in allowed and n not in denied}
        self._approve = approve
        self._limit = max_result_chars
        self._timeout = timeout
        if max_result_chars < 1:
            raise ValueError("max_result_chars must be at least 1")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"tool_timeout must be more than 0 seconds (or None for no limit), not {timeout!r}")

    def _names(self, names: Iterable[str], what: str) -> set[str]:
        """A list of tool names, checked: a bare string or an unknown name is a mistake, never ignored."""
        if isinstance(names, str):
            raise TypeError(f"{what} takes a list of tool names, not the string {names!r}: write {what}=[{names!r}]")
        chosen = set(names)
        unknown = chosen - set(self._all)
        if unknown:
            raise ValueError(f"{what} names unknown tools {sorted(unknown)}; the tools are {sorted(self._all)}")
        return chosen

    def run(self, call: ToolCall, *, seconds_left: float | None = None) -> ToolResult:
        """Run a call: check it, gate it, call the tool, and render what came back.

        Args:
            call: the call.
            seconds_left: what is left of the run's time budget, if it has one; the call is
                limited to the smaller of this and the toolbox's ``timeout``.
        """
        status, text = self._outcome(call, seconds_left)
        text = escape_surrogates(text)
        return ToolResult(
            call=call,
            status=status,
            text=truncate(text, self._limit),
            chars=len(text),
            truncated=len(text) > self._limit,
        )

    def _outcome(self, call: ToolCall, seconds_left: float | None) -> tuple[ToolStatus, str]:
        chosen = self.tools.get(call.tool)
        if chosen is None:
            return self._not_available(call.tool)
        problem = chosen.argument_errors(call.args)
        if problem is not None:
            return ToolStatus.ERROR, f"ERROR: invalid arguments for {chosen.signature()}: {problem}"
        if chosen.needs_approval:
            verdict = self._approve(call) if self._approve is not None else "no approver was given for this run"
            if verdict is not True:
                why = verdict if isinstance(verdict, str) and verdict else "the user said no"
                return (
                    ToolStatus.DENIED,
                    f"DENIED: {call.tool} was not approved ({why}). "
                    "Do not retry it; answer without it or use another tool.",
                )
        limits = ((self._timeout, "tool_timeout"), (seconds_left, "the run's max_seconds"))
        seconds, which = min(((s, w) for s, w in limits if s is not None), default=(None, ""))
        try:
            return ToolStatus.OK, render(call_within(seconds, functools.partial(chosen.fn, **call.args)))
        except TimedOut:
            return ToolStatus.ERROR, f"ERROR: {call.tool} timed out after {seconds:g} s ({which}); it was abandoned"
        except ToolFailure as exc:
            return ToolStatus.ERROR, f"ERROR: {exc}"
        except Exception as exc:  # noqa: BLE001 - a failing tool is feedback, not a crash
            return ToolStatus.ERROR, f"ERROR: {type(exc).__name__}: {exc}"

    def _not_available(self, name: str) -> tuple[ToolStatus, str]:
        offered = ", ".join(sorted(self.tools)) or "none"
        if name in self._all:
            return (
                ToolStatus.DENIED,
                f"DENIED: tool {name!r} is not permitted in this run. Available tools: {offered}.",
            )
        if not name:
            return (
                ToolStatus.ERROR,
                f'ERROR: the step has action "tool" but names no tool. Available tools: {offered}.',
            )
        return ToolStatus.ERROR, f"ERROR: there is no tool named {name!r}. Available tools: {offered}."


def call_within(seconds: float | None, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, in a worker thread when ``seconds`` is given, waiting at most that long.

    A Python thread cannot be killed: on :class:`TimedOut` the call runs on in the background (a
    daemon thread, so it does not keep the process alive) and what it returns is dropped. An
    exception ``fn`` raises, ``KeyboardInterrupt`` included, is raised here.
    """
    if seconds is None:
        return fn(*args)
    outcome: list[tuple[bool, Any]] = []

    def work() -> None:
        try:
            outcome.append((True, fn(*args)))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, which raises it
            outcome.append((False, exc))

    worker = threading.Thread(target=contextvars.copy_context().run, args=(work,), daemon=True, name="shapeloop-call")
    worker.start()
    worker.join(max(0.0, seconds))
    if not outcome:
        raise TimedOut(f"no result after {seconds:g} s")
    done, value = outcome[0]
    if done:
        return cast(T, value)
    raise value


def render(value: Any) -> str:
    """A tool's return value as text."""
    if isinstance(value, str):
        return value
    if value is None:
        return "(no output)"
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
