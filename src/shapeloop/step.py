"""The step a model answers with, and the JSON schemas that ask for it.

Every field is required. That is measured, not tidy: under constrained decoding a small model stops at
what the schema demands, and with ``tool`` and ``args`` optional granite4:350m answered
``{"reason": "...", "action": "tool"}``, an action with no verb.

A run may also take a typed answer (the answer variant's ``answer`` is then the caller's schema) and
batches (a :class:`Batch` step carries several independent calls at once).

A batch run's step is written as the tool-call JSON small models were trained on, and nothing else:
``{"calls": [{"name": ..., "arguments": {...}}, ...]}`` or ``{"answer": ...}``. Measured on BFCL's
tune categories with qwen2.5-coder-0.5b, the five-field shape with a ``reason`` first and an
``action`` made one call where a task asked for two, and abstained where a call was wanted
(``measurements/policies.json``). Both variants are still all required.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shapeloop.text import json_text

if TYPE_CHECKING:
    from shapeloop.tools import Tool

FIELDS = ("reason", "action", "tool", "args", "answer")
BATCH_FIELDS = ("reason", "action", "calls")
CALL_KEYS = ("name", "arguments")
"""The keys of one call in a batch step, as OpenAI's and Qwen's tool-call JSON write them."""
MAX_BATCH = 8
"""The most calls one batch step may carry (an unbounded list lets a looping model fill its token budget)."""
# Where a typed answer's ``$defs`` go; a tool's prefix is made of letters, digits and ``_``, so never this.
ANSWER_DEFS = "answer."


class Step(BaseModel):
    """One step of a run: think, then either call a tool or answer."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    reason: str
    action: Literal["tool", "answer"]
    tool: str
    args: dict[str, Any]
    answer: Any
    """Text; in a run with a typed answer (``output_type=``), any JSON value, which the run validates."""

    def to_json(self) -> str:
        """The step as compact JSON, fields in schema order."""
        return json_text(self.model_dump(), ensure_ascii=False)


class Call(BaseModel):
    """One call of a :class:`Batch`."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    tool: str
    args: dict[str, Any]


class Batch(BaseModel):
    """A step that makes several independent calls at once (a run with ``batch=True``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    reason: str
    action: Literal["calls"]
    calls: list[Call]

    def to_json(self) -> str:
        """The step as compact JSON, fields in schema order."""
        return json_text(self.model_dump(), ensure_ascii=False)


class LeanCall(BaseModel):
    """One call as a batch step writes it (``CALL_KEYS``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str
    arguments: dict[str, Any]


class LeanCalls(BaseModel):
    """A batch step's calls as the model writes them: ``{"calls": [...]}``, 1 to ``MAX_BATCH``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    calls: list[LeanCall] = Field(min_length=1, max_length=MAX_BATCH)


class LeanAnswer(BaseModel):
    """A batch step's answer as the model writes it: ``{"answer": ...}``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    answer: Any


def batch_json(calls: Iterable[Any]) -> str:
    """Calls (anything with ``tool`` and ``args``) as a batch step writes them: ``{"calls": [...]}``."""
    name, args = CALL_KEYS
    return json_text({"calls": [{name: c.tool, args: dict(c.args)} for c in calls]}, ensure_ascii=False)


def flat_schema(*, max_reason_chars: int | None = None) -> dict[str, Any]:
    """The five-field schema with no per-tool detail, for engines that cannot compile the tighter one."""
    return _object(
        {
            "reason": _reason(max_reason_chars),
            "action": {"type": "string", "enum": ["tool", "answer"]},
            "tool": {"type": "string"},
            "args": {"type": "object"},
            "answer": {"type": "string"},
        }
    )


def step_schema(
    tools: Iterable[Tool],
    *,
    max_reason_chars: int | None = None,
    answer_schema: Mapping[str, Any] | None = None,
    batch: bool = False,
) -> dict[str, Any]:
    """The per-run schema: one variant per tool, one for the answer, and one for a batch if asked.

    In a tool's variant ``tool`` is that tool's name, ``args`` is that tool's own argument schema
    and ``answer`` is ``""``; in the answer variant ``tool`` is ``""``, ``args`` is ``{}`` and
    ``answer`` is a non-empty string, or ``answer_schema``. ``reason`` comes first in every variant,
    so the model thinks before it commits. ``$defs`` of the tools' schemas (and of the answer's) are
    hoisted to the top, renamed per tool.

    Args:
        tools: the tools advertised to the model in this run.
        max_reason_chars: bound on the length of ``reason`` (stops a tiny model that repeats itself
            inside the string from eating the token budget).
        answer_schema: the JSON schema of a typed answer; objects in it that do not say otherwise
            are closed (``additionalProperties: false``), so decoding cannot wander into extra keys.
        batch: the step is ``{"calls": [...]}`` (1 to ``MAX_BATCH`` calls, each ``{"name",
            "arguments"}`` constrained by its tool's argument schema) or ``{"answer": ...}``; there
            is no ``reason`` (see the module's docstring).
    """
    tools = list(tools)
    variants: list[dict[str, Any]] = []
    defs: dict[str, Any] = {}
    arguments = {tool.name: _arguments(tool, into=defs) for tool in tools}
    # a batch run makes its calls as a list (one call is a list of one): offered a single call beside
    # the list, qwen2.5-coder-0.5b made one call where the task asked for several
    for name, args in {} if batch else arguments.items():
        variants.append(_object({
            "reason": _reason(max_reason_chars), "action": {"const": "tool"}, "tool": {"const": name},
            "args": args, "answer": {"const": ""},
        }))  # fmt: skip
    if batch and arguments:
        name_key, args_key = CALL_KEYS
        calls = [_object({name_key: {"const": name}, args_key: args}) for name, args in arguments.items()]
        variants.append(_batch_variant(calls))
    answer = {"type": "string", "minLength": 1}
    if answer_schema is not None:
        answer = _hoist_defs(_closed(answer_schema), prefix=ANSWER_DEFS, into=defs)
    variants.append(_object({"answer": answer}) if batch else _answer_variant(answer, max_reason_chars))
    schema: dict[str, Any] = variants[0] if len(variants) == 1 else {"anyOf": variants}
    if defs:
        schema = {**schema, "$defs": defs}
    return schema


def without_answer(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` less its answer variant: the step must call a tool. A schema with nothing but the
    answer (no tools) is returned as it is."""
    variants = [v for v in schema.get("anyOf", [schema]) if not _answers(v)]
    if not variants:
        return dict(schema)
    kept: dict[str, Any] = dict(variants[0]) if len(variants) == 1 else {"anyOf": variants}
    if "$defs" in schema:
        kept["$defs"] = schema["$defs"]
    return kept


MAX_HOLD = 1024
"""The most characters :func:`hold_for` holds an answer to (a grammar of thousands of repeats is
slow to build, and some llama.cpp builds refuse one)."""


def hold_for(cut_chars: int) -> int:
    """The characters a retry's answer is held to after a reply of ``cut_chars`` was cut off: the
    power of two at or below half of it, at most :data:`MAX_HOLD` (few sizes, so few grammars)."""
    half = max(1, cut_chars // 2)
    return min(MAX_HOLD, 1 << (half.bit_length() - 1))


def held_answer(schema: Mapping[str, Any], max_chars: int) -> dict[str, Any]:
    """``schema`` with every free-text ``answer`` held to at most ``max_chars`` characters (a bound of
    its own, if tighter, is kept). A typed answer (``output_type``: a string with a pattern, an enum,
    a format or a length of its own, or any other type) is left as it is, so the hold never makes
    an answer impossible. The loop asks this after a reply cut off at the length limit: a greedy
    model asked the same question writes the same runaway answer again, and the grammar, unlike the
    feedback, makes the retry end."""

    def variant(one: Any) -> Any:
        properties = one.get("properties") if isinstance(one, Mapping) else None
        if not isinstance(properties, Mapping):
            return one
        answer = properties.get("answer")
        if not isinstance(answer, Mapping) or not _free_text(answer):
            return one
        most = max(min(max_chars, answer.get("maxLength", max_chars)), answer.get("minLength", 0))
        return {**one, "properties": {**properties, "answer": {**answer, "maxLength": most}}}

    if isinstance(schema.get("anyOf"), list):
        return {**schema, "anyOf": [variant(v) for v in schema["anyOf"]]}
    return dict(variant(schema))


def _free_text(answer: Mapping[str, Any]) -> bool:
    """An untyped answer: a string with at most the loop's own bounds (``minLength`` 1, a hold)."""
    return (
        answer.get("type") == "string"
        and set(answer) <= {"type", "minLength", "maxLength"}
        and (answer.get("minLength", 1) <= 1)
    )


def fallback_schemas(schema: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Looser schemas for an engine that cannot compile ``schema``, strictest first.

    A plain run falls back to :func:`flat_schema`. A run with a typed answer or batches keeps them:
    first with every tool's arguments opened to any object, then also with the answer opened to any
    JSON value (the run still validates it, and says what is wrong).
    """
    variants = list(schema.get("anyOf", [schema]))
    answer = next((v for v in variants if _answers(v)), None)
    batched = any("calls" in (v.get("properties") or {}) for v in variants) or (answer is not None and _lean(answer))
    untyped = {"type": "string", "minLength": 1}  # the loop's own answer, held or not (held_answer)
    typed = (
        answer is not None and {k: v for k, v in answer["properties"]["answer"].items() if k != "maxLength"} != untyped
    )
    if answer is None or not (typed or batched):
        return [flat_schema()]
    if batched:
        loose = [_batch_variant([_object({key: {"type": "string" if key == CALL_KEYS[0] else "object"}
                                          for key in CALL_KEYS})])]  # fmt: skip
        opened_answer = _object({"answer": {}})
    else:
        loose = [_object({
            "reason": {"type": "string"}, "action": {"const": "tool"}, "tool": {"type": "string"},
            "args": {"type": "object"}, "answer": {"const": ""},
        })]  # fmt: skip
        opened_answer = _answer_variant({}, None)
    defs = {k: v for k, v in (schema.get("$defs") or {}).items() if k.startswith(ANSWER_DEFS)}
    kept = {"anyOf": [*loose, answer], **({"$defs": defs} if defs else {})}
    opened = {"anyOf": [*loose, opened_answer]}
    return [kept, opened] if typed else [kept]


def _lean(variant: Mapping[str, Any]) -> bool:
    """A batch step's answer variant: ``answer`` is its one field."""
    return list(variant.get("properties") or {}) == ["answer"]


def _answers(variant: Mapping[str, Any]) -> bool:
    properties = variant.get("properties") or {}
    return _lean(variant) or properties.get("action", {}).get("const") == "answer"


def _answer_variant(answer: dict[str, Any], max_reason_chars: int | None) -> dict[str, Any]:
    return _object({
        "reason": _reason(max_reason_chars), "action": {"const": "answer"}, "tool": {"const": ""},
        "args": {"type": "object", "properties": {}, "additionalProperties": False}, "answer": answer,
    })  # fmt: skip


def _batch_variant(calls: list[dict[str, Any]]) -> dict[str, Any]:
    items = {"anyOf": calls}  # one call too: a batch step's schema is one raw call's (benchmarks.bfcl_run)
    return _object({"calls": {"type": "array", "items": items, "minItems": 1, "maxItems": MAX_BATCH}})


def _arguments(tool: Tool, *, into: dict[str, Any]) -> dict[str, Any]:
    """A tool's argument schema with its ``$defs`` moved into ``into``; an object, closed unless it says."""
    args = _hoist_defs(tool.parameters, prefix=_def_prefix(tool.name), into=into)
    args.setdefault("type", "object")
    if args["type"] == "object" and "additionalProperties" not in args:
        args["additionalProperties"] = False
    return args


# What a led reason may go on with: any character JSON writes without an escape but a quote, a
# backslash or a control character (as both grammar engines read a class)
_REASON_TEXT = '[^\\x00-\\x1f"\\\\]'


def led(schema: Mapping[str, Any], lead: str) -> dict[str, Any]:
    """``schema`` with every variant's ``reason`` held to begin with ``lead`` (words and spaces), within
    its length bound (see :func:`bounded`): the model goes on from the lead. See the loop's forced
    answer."""
    if re.fullmatch(r"[A-Za-z ]+", lead) is None:
        raise ValueError(f"a reason's lead is words and spaces, not {lead!r}")

    def variant(one: Mapping[str, Any]) -> dict[str, Any]:
        properties = one.get("properties")
        if not isinstance(properties, Mapping) or not isinstance(properties.get("reason"), Mapping):
            return dict(one)
        reason = {**properties["reason"], "type": "string", "pattern": f"^{lead}{_REASON_TEXT}*$"}
        most = reason.get("maxLength")
        held = bounded(reason, most) if isinstance(most, int) else reason
        return {**one, "properties": {**properties, "reason": held}}

    if isinstance(schema.get("anyOf"), list):
        return {**schema, "anyOf": [variant(v) if isinstance(v, Mapping) else v for v in schema["anyOf"]]}
    return variant(schema)


def bounded(reason: Mapping[str, Any], max_chars: int) -> dict[str, Any]:
    """A reason's schema held to ``max_chars`` characters: ``maxLength`` (a bound of its own is kept),
    and for a led reason its pattern's repeat too, since llama.cpp's converter reads a ``pattern``
    without its ``maxLength``; a lead longer than the bound is dropped."""
    out = {**reason}
    out.setdefault("maxLength", max_chars)
    pattern = out.get("pattern")
    lead = re.fullmatch(rf"\^([A-Za-z ]+){re.escape(_REASON_TEXT)}(?:\*|\{{0,\d+\}})\$", pattern or "")
    if lead is not None:
        room = out["maxLength"] - len(lead[1])
        if room < 0:
            del out["pattern"]
        else:
            out["pattern"] = f"^{lead[1]}{_REASON_TEXT}{{0,{room}}}$"
    return out


def _reason(max_chars: int | None) -> dict[str, Any]:
    if max_chars is None:
        return {"type": "string"}
    return {"type": "string", "maxLength": max_chars}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _def_prefix(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name) + "__"


def _hoist_defs(parameters: Mapping[str, Any], *, prefix: str, into: dict[str, Any]) -> dict[str, Any]:
    """Copy a schema, moving its ``$defs`` into ``into`` under prefixed names."""
    args = copy.deepcopy(dict(parameters))
    local = args.pop("$defs", None) or args.pop("definitions", None) or {}
    renames = {name: prefix + name for name in local}

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                for old, new in renames.items():
                    if ref in (f"#/$defs/{old}", f"#/definitions/{old}"):
                        node = {**node, "$ref": f"#/$defs/{new}"}
            return {k: rewrite(v) for k, v in node.items()}
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    for old, body in local.items():
        into[renames[old]] = rewrite(body)
    return dict(rewrite(args))


def _closed(schema: Any, *, in_all_of: bool = False) -> Any:
    """A copy of a schema in which every object with ``properties`` and no word on extra keys forbids them.

    Not inside ``allOf``, where each part must stay open for the others' keys.
    """
    if not isinstance(schema, Mapping):
        return schema
    out = dict(schema)
    for key in ("properties", "patternProperties", "$defs", "definitions"):
        if isinstance(out.get(key), Mapping):
            out[key] = {name: _closed(sub) for name, sub in out[key].items()}
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(out.get(key), list):
            out[key] = [_closed(sub, in_all_of=key == "allOf") for sub in out[key]]
    for key in ("items", "additionalProperties", "not", "contains"):
        if isinstance(out.get(key), Mapping):
            out[key] = _closed(out[key])
    if "properties" in out and not in_all_of and "additionalProperties" not in out and "patternProperties" not in out:
        out["additionalProperties"] = False
    return out


def names_no_tool(step: Step | Batch, tools: Mapping[str, Tool]) -> str | None:
    """The shape error of a tool step that names no tool, or None."""
    if isinstance(step, Batch) or step.action != "tool" or step.tool.strip():
        return None
    offered = ", ".join(sorted(tools)) or "none"
    return f'the action is "tool" but "tool" names no tool (the tools are: {offered})'
