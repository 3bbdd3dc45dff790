"""A schema walked the way jsonschema applies it, for what would crash a run that used it.

:func:`~shapeloop.limits.schema_problem` holds a schema to the run's bounds first (size, depth),
then asks :func:`applied_problem`. No list of keywords is kept here: ``referencing`` says which
values are subschemas and what each ``$ref`` means (``$id`` rebasing included), and jsonschema
itself says which subschemas it applies to the very value their parent is applied to
(:func:`_same_value`), which is what a cycle that never ends needs.
"""

from __future__ import annotations

import functools
import itertools
import json
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


@functools.lru_cache(maxsize=64)
def applied_problem(text: str) -> str | None:
    """Why the schema written as JSON ``text`` (within the run's bounds) cannot be used, in one line
    with its path first, or None; see :func:`~shapeloop.limits.schema_problem` for what is refused.
    A run's toolbox checks the same schemas again at every request of a conversation, so the
    verdict is kept."""
    schema = json.loads(text)
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
    try:
        return _Applied(schema, cls, _paths(schema)).problem()
    except ValueError as exc:  # urljoin's, on an $id or $ref that is not a URI reference
        return f"an $id or $ref is not a URI reference ({exc}): write $ref as #/$defs/NAME"


def _paths(schema: Any) -> dict[int, str]:
    """The path of every mapping in ``schema`` (by identity), as ``properties/a``; the first one
    found where one object sits at two places."""
    paths: dict[int, str] = {}
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, Mapping):
            paths.setdefault(id(item), path)
            stack += [(sub, f"{path}/{key}" if path else str(key)) for key, sub in item.items()]
        elif isinstance(item, list):
            stack += [(sub, f"{path}/{index}" if path else str(index)) for index, sub in enumerate(item)]
    return paths


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
        except (referencing.exceptions.Unresolvable, ValueError):  # ValueError: not a URI reference
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


@dataclass(frozen=True, kw_only=True, eq=False)
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
            marks = {
                id(sub): {_PROBE: _Mark(index=index, fail=fail, subject=subject, hits=hits)}
                for index, sub in enumerate(subs)
            }
            stand_in = _stood_in(node, marks)
            registry: Registry[Any] = Registry()
            if "$ref" in node:
                stand_in["$ref"] = _PROBE_REF
                target = spec.create_resource({_PROBE: _Mark(index=-1, fail=fail, subject=subject, hits=hits)})
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
