"""The bounds of a run on what comes from outside, and the checks that hold schemas and values to them.

A reply, a schema and a call's arguments are read before anything is done with them, and each is
bounded first: integers of any length (Python refuses to print one of more than 4 300 digits),
NaN and Infinity (not JSON: a strict reader refuses a transcript that holds them), nesting, sizes,
and ``$ref`` that dangle or recurse without end. The bounds are a run's arguments
(:class:`Limits`), never module constants, so two runs in one process may differ.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import referencing.exceptions
import referencing.jsonschema
from jsonschema.exceptions import ValidationError
from referencing import Registry, Specification
from referencing._core import Resolver  # the type of Registry.resolver_with_root, not re-exported
from referencing.jsonschema import DRAFT202012

from shapeloop.pattern import PatternRefused, compiled

_LOG2_10 = math.log2(10)


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What a run accepts from the model and from the caller.

    Attributes:
        max_schema_chars: the longest schema (``output_type``'s, a tool's parameters) as JSON text.
        max_schema_depth: the deepest nesting of a schema's objects and lists.
        max_argument_chars: the most characters of text and numbers in one call's arguments (and in
            a typed answer); a longer call is refused before its tool runs.
        max_integer_digits: the longest integer a reply may hold.
        max_depth: the deepest nesting of a call's arguments or an answer.
        pattern_seconds: the time one ``pattern`` check may take (the engine never backtracks,
            so only a huge text against a large pattern comes near it).
    """

    max_schema_chars: int = 200_000
    max_schema_depth: int = 64
    max_argument_chars: int = 100_000
    max_integer_digits: int = 1_000
    max_depth: int = 64
    pattern_seconds: float = 0.5

    def __post_init__(self) -> None:
        for name in ("max_schema_chars", "max_schema_depth", "max_argument_chars", "max_integer_digits", "max_depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"Limits.{name} must be at least 1, not {getattr(self, name)!r}")
        if not self.pattern_seconds > 0:
            raise ValueError(f"Limits.pattern_seconds must be more than 0, not {self.pattern_seconds!r}")


class NotJson(ValueError):
    """A number the JSON text holds that a strict reader refuses (NaN, Infinity, 1e999) or that is too long."""


@functools.lru_cache(maxsize=16)
def json_decoder(limits: Limits) -> json.JSONDecoder:
    """A JSON reader that refuses NaN, Infinity, numbers that overflow to them, and integers longer
    than ``limits.max_integer_digits`` (raising :class:`NotJson`, a ``ValueError``); control
    characters inside strings are let through, as small models write them."""
    most = limits.max_integer_digits

    def integer(text: str) -> int:
        digits = len(text) - text.startswith("-")
        if digits > most:
            raise NotJson(f"an integer longer than {most} digits: write it as a string, or a shorter number")
        return int(text)

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise NotJson(f"{text[:40]} is too large for a number")
        return value

    def constant(text: str) -> Any:
        raise NotJson(f"{text} is not JSON: write a number, or null")

    return json.JSONDecoder(strict=False, parse_int=integer, parse_float=number, parse_constant=constant)


def value_problem(value: Any, limits: Limits, *, what: str = "the arguments") -> str | None:
    """Why ``value`` (arguments or an answer, as plain data) is out of bounds, or None.

    Walks the value without recursion: a NaN or Infinity, an integer longer than
    ``max_integer_digits``, nesting deeper than ``max_depth``, more than ``max_argument_chars`` in all.
    """
    total = 0
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, path = stack.pop()
        where = f"{path}: " if path else ""
        if depth > limits.max_depth:
            return f"{where}{what} nest deeper than {limits.max_depth} levels"
        if isinstance(item, float) and not math.isfinite(item):
            shown = "NaN" if math.isnan(item) else ("Infinity" if item > 0 else "-Infinity")
            return f"{where}{shown} is not a JSON number: write a finite number"
        if isinstance(item, int) and not isinstance(item, bool):
            digits = _digits(item)
            if digits > limits.max_integer_digits:
                return f"{where}an integer of {digits} digits; the most is {limits.max_integer_digits}"
            total += digits
        elif isinstance(item, str):
            total += len(item)
        elif isinstance(item, Mapping):
            total += sum(len(str(key)) for key in item)
            stack += [(sub, depth + 1, _join(path, key)) for key, sub in item.items()]
        elif isinstance(item, list | tuple):
            stack += [(sub, depth + 1, _join(path, index)) for index, sub in enumerate(item)]
        if total > limits.max_argument_chars:
            return f"{what} are over {limits.max_argument_chars} characters long: pass less (a path, a part of a text)"
    return None


def _digits(number: int) -> int:
    """How many decimal digits ``number`` has, without printing it (which fails past 4 300 digits)."""
    bits = abs(number).bit_length()
    if bits < 10_000:
        return len(str(abs(number)))
    return int(bits / _LOG2_10) + 1  # within one digit: enough to refuse it by


def _join(path: str, key: object) -> str:
    return f"{path}/{key}" if path else str(key)


def schema_problem(schema: Mapping[str, Any], limits: Limits) -> str | None:
    """Why a schema cannot be used, in one line (the path first), or None.

    Refused: a schema longer than ``max_schema_chars`` or nested deeper than ``max_schema_depth``;
    one that is not a valid JSON schema of its draft; then, walked the way jsonschema applies it
    (every subschema that ``referencing`` finds, every ``$ref`` resolved by ``referencing``, ``$id``
    rebasing included): a ``$ref`` that does not resolve, or that names anything but one of the
    schema's own definitions as ``#/$defs/NAME`` (or ``#/definitions/NAME``), since a schema is
    embedded in the step's schema, where no other reference survives; ``$dynamicRef`` and
    ``$recursiveRef``; a ``$ref`` cycle that applies a schema to the very value it is applied to
    (validating it never ends); a ``pattern`` or ``patternProperties`` key that
    :mod:`shapeloop.pattern` cannot run.
    """
    too_long = f"it is over {limits.max_schema_chars} characters as JSON (Limits.max_schema_chars)"
    nodes = _walk(schema, limits.max_schema_depth, limits.max_schema_chars // 2)  # each node takes 2 or more
    if nodes is None:
        return too_long
    if isinstance(nodes, str):
        return nodes
    try:
        text = json.dumps(schema, default=_plain)
    except (ValueError, TypeError, RecursionError) as exc:
        return f"it is not plain JSON ({exc})"
    if len(text) > limits.max_schema_chars:
        return too_long
    return _applied_problem(text, limits.max_schema_depth)


def _plain(value: Any) -> Any:
    """A mapping that is not a dict (a ``MappingProxyType``) as a dict; anything else as its text."""
    return dict(value) if isinstance(value, Mapping) else str(value)


@functools.lru_cache(maxsize=64)
def _applied_problem(text: str, max_depth: int) -> str | None:
    """:func:`schema_problem` past the bounds, on the schema as JSON text: a run's toolbox checks the
    same schemas again at every request of a conversation, so the verdict is kept."""
    schema = json.loads(text)
    nodes = _walk(schema, max_depth, len(text))
    assert isinstance(nodes, list), "the bounds were checked on the schema this text was written from"
    cls = jsonschema.validators.validator_for(schema)
    if cls is jsonschema.Draft3Validator:  # referencing does not find draft 3's subschemas in type, disallow, extends
        return "draft 3 schemas are not supported: write it in draft 2020-12 (or 7, 6, 4)"
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "(root)"
        return f"it is not a valid JSON schema: {where}: {exc.message}"
    except RecursionError:
        return "it nests too deeply for its check to finish: nest it less"
    return _Applied(schema, cls, {id(node): path for path, node in reversed(nodes)}).problem()


def _walk(schema: Mapping[str, Any], most: int, nodes: int) -> list[tuple[str, Mapping[str, Any]]] | str | None:
    """Every mapping in the schema with its path; why the schema is too deep; None past ``nodes`` nodes."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    stack: list[tuple[Any, str, int]] = [(schema, "", 0)]
    while stack:
        nodes -= 1
        if nodes < 0:
            return None
        item, path, depth = stack.pop()
        if depth > most:
            return f"it nests deeper than {most} levels (Limits.max_schema_depth)"
        if isinstance(item, Mapping):
            found.append((path, item))
            stack += [(sub, _join(path, key), depth + 1) for key, sub in item.items()]
        elif isinstance(item, list):
            stack += [(sub, _join(path, index), depth + 1) for index, sub in enumerate(item)]
    return found


class _Applied:
    """A schema walked as jsonschema applies it: ``referencing`` says which values are subschemas
    and what each ``$ref`` means; jsonschema itself says which subschemas apply to the same value
    (:func:`_same_value`). No list of keywords is kept here."""

    def __init__(self, schema: Mapping[str, Any], cls: type[Any], paths: Mapping[int, str]) -> None:
        self.schema = schema
        self.cls = cls
        self.spec = referencing.jsonschema.specification_with(cls.ID_OF(cls.META_SCHEMA), default=DRAFT202012)
        self.paths = paths
        self.nodes: dict[int, Mapping[str, Any]] = {}
        self.refs: dict[int, int] = {}  # a node with a $ref -> the node it resolves to
        self.defs = {
            id(body): f"#/{key}/{name}"
            for key in ("$defs", "definitions")
            if isinstance(schema.get(key), Mapping)
            for name, body in schema[key].items()
        }

    def problem(self) -> str | None:
        root = self.spec.create_resource(self.schema)
        stack: list[tuple[Any, Resolver[Any], str | None]] = [(self.schema, Registry().resolver_with_root(root), None)]
        while stack:
            node, resolver, rebased = stack.pop()
            if not isinstance(node, Mapping) or id(node) in self.nodes:
                continue  # a boolean schema, or one reached twice (the same object used twice)
            self.nodes[id(node)] = node
            own = self.spec.id_of(node)
            if own is not None and node is not self.schema:
                rebased = own
            resolver = resolver.in_subresource(self.spec.create_resource(node))
            problem = _node_problem(node) or self._reference(node, resolver, rebased)
            if problem is not None:
                return f"{self.paths.get(id(node)) or '(root)'}: {problem}"
            stack += [(sub, resolver, rebased) for sub in self.spec.subresources_of(node)]
        return self._endless()

    def _reference(self, node: Mapping[str, Any], resolver: Resolver[Any], rebased: str | None) -> str | None:
        """Why the node's ``$ref`` cannot be used, or None (and the reference is kept)."""
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return None
        if ref == "#":
            return (
                "$ref '#' points at the schema itself (recursion from its root, which does not survive being "
                "embedded in the step's schema): put the part that recurses in $defs and name it #/$defs/NAME"
            )
        under = f" (under $id {rebased!r}, which it is resolved against)" if rebased is not None else ""
        try:
            target = resolver.lookup(ref).contents
        except referencing.exceptions.Unresolvable:
            named = "no such definition" if ref.startswith(("#/$defs/", "#/definitions/")) else "not a definition"
            return f"$ref {ref!r} dangles ({named}){under}: a $ref names one of the schema's own $defs, as #/$defs/NAME"
        name = self.defs.get(id(target))
        if name is None or name != ref:
            path = self.paths.get(id(target))
            meant = name or (f"#/{path}" if path is not None else "a value that is not a schema")
            return (
                f"$ref {ref!r}{under} resolves to {meant}, not to one of the schema's own $defs named as "
                "#/$defs/NAME: a schema is embedded in the step's schema, where no other reference survives"
            )
        self.refs[id(node)] = id(target)
        return None

    def _endless(self) -> str | None:
        """A ``$ref`` cycle that applies a schema to the very value it is applied to, or None.

        Every such cycle passes through a ``$ref``, so only what a ``$ref`` target applies to its own
        value is followed; one depth-first walk (white, grey on the trail, black done) finds a cycle."""
        edges: dict[int, list[int]] = {}
        todo = list(self.refs.values())
        while todo:
            node = todo.pop()
            if node not in edges:
                children, ref = _same_value(self.nodes[node], self.spec, self.cls)
                edges[node] = [*children, *([self.refs[node]] if ref and node in self.refs else [])]
                todo += edges[node]
        done: set[int] = set()
        for start in edges:
            trail, stack = [start], [iter(edges[start])]
            while stack and start not in done:
                nxt = next(stack[-1], None)
                if nxt is None:
                    stack.pop()
                    done.add(trail.pop())
                elif nxt in trail:
                    return self._cycle([*trail[trail.index(nxt) :], nxt])
                elif nxt not in done:
                    trail.append(nxt)
                    stack.append(iter(edges[nxt]))
        return None

    def _cycle(self, cycle: list[int]) -> str:
        steps = [(here, there) for here, there in itertools.pairwise(cycle) if self.refs.get(here) == there]
        named = [self.defs.get(there, "#/" + self.paths.get(there, "?")) for _, there in steps]
        first = named.index(min(named)) + 1  # the same cycle reads the same, wherever the walk came in
        named, steps = named[first:] + named[:first], steps[first:] + steps[:first]
        chain = " -> ".join([named[-1], *named])
        sites = ", ".join(self.paths.get(here) or "(root)" for here, _ in steps)
        return (
            f"$ref recurses without end ({chain}) through the $ref at {sites}: the schema applies itself to the same "
            "value forever; make each turn of the recursion go into a property or an item"
        )


def _node_problem(node: Mapping[str, Any]) -> str | None:
    for word in ("$dynamicRef", "$recursiveRef"):
        if word in node:
            return f"{word} is not supported: use $ref to #/$defs/NAME"
    patterns = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
    if isinstance(node.get("patternProperties"), Mapping):
        patterns += list(node["patternProperties"])
        if _mentions(node, "unevaluatedProperties"):
            return "patternProperties with unevaluatedProperties is not supported"
    for source in patterns:
        try:
            compiled(source)
        except PatternRefused as exc:
            return f"pattern {exc}"
    return None


def _mentions(node: Mapping[str, Any], word: str) -> bool:
    return word in json.dumps(node, default=str)


_PROBE = "$shapeloop-probe"  # a keyword of the probing validator only
_PROBE_REF = "urn:shapeloop:probe"


@dataclass(frozen=True, eq=False)
class _Mark:
    """A subschema stood in for while probing: it notes when it is applied to ``subject`` itself."""

    index: int
    fail: bool
    subject: Any
    hits: set[int]


def _same_value(node: Mapping[str, Any], spec: Specification[Any], cls: Any) -> tuple[list[int], bool]:
    """The subschemas of ``node`` that jsonschema applies to the very value ``node`` is applied to,
    and whether it applies its ``$ref`` so.

    Asked of jsonschema itself: each subschema (and the ``$ref``'s target) is replaced by a mark
    that notes the value it is applied to, and ``node`` is validated against a few values (an
    object with every key the node names, a list, a string, a number, null), once with marks that
    pass and once with marks that fail (``if``/``then``/``else``, ``not``, ``anyOf``). A mark that
    sees the value itself is applied in place."""
    subs = [sub for sub in spec.subresources_of(node) if isinstance(sub, Mapping)]
    keys = {key: None for value in node.values() if isinstance(value, Mapping) for key in value}
    hits: set[int] = set()
    probe = _probing_class(cls)
    subjects: tuple[Any, ...] = (keys, [], "", 0, None)
    for subject in subjects:
        for fail in (False, True):
            marks = {id(sub): {_PROBE: _Mark(index, fail, subject, hits)} for index, sub in enumerate(subs)}
            stand_in = _stood_in(node, marks)
            registry: Registry[Any] = Registry()
            if "$ref" in node:
                stand_in["$ref"] = _PROBE_REF
                target = spec.create_resource({_PROBE: _Mark(-1, fail, subject, hits)})
                registry = registry.with_resource(_PROBE_REF, target)
            list(probe(stand_in, registry=registry).iter_errors(subject))
    return [id(sub) for index, sub in enumerate(subs) if index in hits], -1 in hits


def _stood_in(node: Mapping[str, Any], marks: Mapping[int, Any]) -> dict[str, Any]:
    """A copy of ``node`` with each subschema in ``marks`` (by identity) replaced by its mark; a
    subschema is a keyword's value, an item of its list or a value of its object."""

    def swap(value: Any) -> Any:
        if id(value) in marks:
            return marks[id(value)]
        if isinstance(value, list):
            return [marks.get(id(item), item) for item in value]
        if isinstance(value, Mapping):
            return {key: marks.get(id(item), item) for key, item in value.items()}
        return value

    return {key: swap(value) for key, value in node.items()}


@functools.lru_cache(maxsize=16)
def _probing_class(cls: Any) -> type[Any]:
    def probe(validator: Any, mark: _Mark, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if instance is mark.subject:
            mark.hits.add(mark.index)
        if mark.fail:
            yield ValidationError("the probe fails here")

    extended: type[Any] = jsonschema.validators.extend(cls, {_PROBE: probe})  # type: ignore[no-untyped-call]
    return extended
