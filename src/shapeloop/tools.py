"""The tool type, building a tool from a typed function, and argument validation.

A tool takes JSON arguments and returns text; the run's policy for calling one (allow, deny,
approval, truncation, batches) is :mod:`shapeloop.toolbox`'s.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from typing import Any, get_type_hints, overload

import jsonschema
import jsonschema.exceptions
from pydantic import ConfigDict, TypeAdapter, ValidationError, create_model
from pydantic.errors import PydanticInvalidForJsonSchema, PydanticSchemaGenerationError

from shapeloop.deprecation import warn_no_effect
from shapeloop.errors import ToolFailure
from shapeloop.limits import Limits, value_problem
from shapeloop.pattern import bounded_validator, pattern_budget
from shapeloop.text import json_text

LockKey = str | Callable[[Mapping[str, Any]], "str | None"]


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
        lock_key: calls of one batch that share a lock key run one after another, in the order the
            model wrote them; the rest run concurrently. A string (every call of this tool, and of
            any tool with the same key) or a function of the arguments (``lambda args:
            args["path"]``: calls on one file); None runs concurrently.
        read_only: the tool only reads: calling it changes nothing (MCP's ``readOnlyHint``). Policies
            that look at the state before acting call only such tools on their own.
        optional_when_named: deprecated, no effect (a warning says so); it will be removed.
        choices: deprecated, no effect (a warning says so); it will be removed.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: Callable[..., Any] = field(repr=False)
    needs_approval: bool = False
    lock_key: LockKey | None = field(default=None, repr=False)
    read_only: bool = False
    optional_when_named: InitVar[bool | None] = None
    choices: InitVar[Callable[[str], Mapping[str, Sequence[str]]] | None] = None
    # a validator per pattern time bound (a run's Limits.pattern_seconds); its patterns never backtrack
    _validators: dict[float, jsonschema.protocols.Validator] = field(init=False, repr=False, compare=False)

    def __post_init__(self, optional_when_named: bool | None, choices: Any) -> None:
        warn_no_effect(_NO_EFFECT, stacklevel=3, optional_when_named=optional_when_named, choices=choices)
        if not self.name or not self.name.strip():
            raise ValueError("a tool needs a non-empty name")
        schema = dict(self.parameters)
        validator_cls = jsonschema.validators.validator_for(schema)
        try:
            validator_cls.check_schema(schema)
        except jsonschema.exceptions.SchemaError as exc:
            raise ValueError(f"tool {self.name!r}: parameters is not a valid JSON schema: {exc.message}") from exc
        object.__setattr__(self, "_validators", {})

    def __call__(self, **args: Any) -> Any:
        """Call the underlying function directly (no validation, no gate)."""
        return self.fn(**args)

    def argument_errors(
        self, args: Mapping[str, Any], *, limits: Limits | None = None, until: float | None = None
    ) -> str | None:
        """The most relevant problem with ``args``, or None: first what is out of ``limits`` (NaN,
        Infinity, a huge integer, deep nesting, too many characters), then the validator's message.

        All of the call's ``pattern`` checks share ``limits.pattern_seconds``, and end by ``until``
        (a ``time.monotonic()`` value: the end of the call's time) where that comes first."""
        limits = limits or Limits()
        problem = value_problem(dict(args), limits)
        if problem is not None:
            return problem
        validator = self._validators.get(limits.pattern_seconds)
        if validator is None:
            validator = bounded_validator(self.parameters, limits.pattern_seconds)
            self._validators[limits.pattern_seconds] = validator
        with pattern_budget(limits.pattern_seconds, until=until):
            error = jsonschema.exceptions.best_match(validator.iter_errors(dict(args)))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{where}: {error.message}" if where else error.message

    def lock(self, args: Mapping[str, Any]) -> str | None:
        """The lock key of a call with ``args``, or None."""
        return self.lock_key(args) if callable(self.lock_key) else self.lock_key

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
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool = False,
    lock_key: LockKey | None = None,
    read_only: bool = False,
    optional_when_named: bool | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool = False,
    lock_key: LockKey | None = None,
    read_only: bool = False,
    optional_when_named: bool | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Build a :class:`Tool` from a typed function: ``@tool`` or ``@tool(needs_approval=True, lock_key="disk")``.

    The name comes from ``__name__``, the description from the docstring's first paragraph, the
    argument schema from the signature (pydantic builds it), and each argument's description from
    a Google-style ``Args:`` section. Arguments are converted to the annotated types before the call.
    """

    warn_no_effect(_NO_EFFECT, stacklevel=2, optional_when_named=optional_when_named)

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
            lock_key=lock_key,
            read_only=read_only,
        )

    return build if fn is None else build(fn)


_NO_EFFECT = (
    "the help it gave went with the loop's grounding; a policy (shapeloop.policies) can shape what a step offers"
)


def _arguments_from_signature(
    func: Callable[..., Any],
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], dict[str, Any]]]:
    try:
        hints = get_type_hints(func)
    except NameError as exc:
        raise TypeError(f"tool {func.__name__!r}: an annotation names what Python cannot find ({exc}){_TYPES}") from exc
    fields: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(
                f"tool {func.__name__!r}: parameter {param.name!r} must be a plain or keyword "
                "argument, so the model can name it"
            )
        default = ... if param.default is param.empty else param.default
        annotation = hints.get(param.name, Any)
        try:
            TypeAdapter(annotation).json_schema()
        except (PydanticSchemaGenerationError, PydanticInvalidForJsonSchema) as exc:
            shown = getattr(annotation, "__name__", annotation)
            raise TypeError(
                f"tool {func.__name__!r}: parameter {param.name!r} is a {shown}, which has no JSON schema{_TYPES}"
            ) from exc
        fields[param.name] = (annotation, default)
    model = create_model(f"{func.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    schema = drop_titles(model.model_json_schema())

    def convert(args: dict[str, Any]) -> dict[str, Any]:
        try:
            parsed = model.model_validate(args)
        except ValidationError as exc:
            raise ToolFailure(f"invalid arguments: {exc.errors()[0]['msg']}") from exc
        return {key: getattr(parsed, key) for key in args if key in fields}

    return schema, convert


_TYPES = (
    ": a tool's arguments come as JSON, so annotate each with str, int, float, bool, a list or dict of them,"
    " a Literal, an Enum, a pydantic model, a dataclass or a TypedDict"
)


def drop_titles(node: Any) -> Any:
    """A schema without pydantic's ``title`` annotations, which only lengthen what the model reads."""
    if isinstance(node, dict):
        # A property named "title" maps to a schema (a dict); only the string annotations go.
        return {k: drop_titles(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [drop_titles(v) for v in node]
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
        return json_text([self.tool, self.args], sort_keys=True, separators=(",", ":"))

    def __str__(self) -> str:
        return f"{self.tool}({json_text(self.args, sort_keys=True, ensure_ascii=False)})"
