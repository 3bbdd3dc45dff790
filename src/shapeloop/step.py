"""The step a model answers with, and the JSON schemas that ask for it.

Every field is required. That is measured, not tidy: under constrained decoding a small model stops at
what the schema demands, and with ``tool`` and ``args`` optional granite4:350m answered
``{"reason": "...", "action": "tool"}``, an action with no verb.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from shapeloop.tools import Tool

FIELDS = ("reason", "action", "tool", "args", "answer")


class Step(BaseModel):
    """One step of a run: think, then either call a tool or answer."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    reason: str
    action: Literal["tool", "answer"]
    tool: str
    args: dict[str, Any]
    answer: str

    def to_json(self) -> str:
        """The step as compact JSON, fields in schema order."""
        return json.dumps(self.model_dump(), ensure_ascii=False)


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


def step_schema(tools: Iterable[Tool], *, max_reason_chars: int | None = None) -> dict[str, Any]:
    """The per-run schema: one variant per tool, and one for the answer.

    In a tool's variant ``tool`` is that tool's name, ``args`` is that tool's own argument schema
    and ``answer`` is ``""``; in the answer variant ``tool`` is ``""``, ``args`` is ``{}`` and
    ``answer`` is a non-empty string. ``reason`` comes first in every variant, so the model thinks
    before it commits. ``$defs`` of the tools' schemas are hoisted to the top, renamed per tool.

    Args:
        tools: the tools advertised to the model in this run.
        max_reason_chars: bound on the length of ``reason`` (stops a tiny model that repeats itself
            inside the string from eating the token budget).
    """
    variants: list[dict[str, Any]] = []
    defs: dict[str, Any] = {}
    for tool in tools:
        args = _hoist_defs(tool.parameters, prefix=_def_prefix(tool.name), into=defs)
        variants.append(
            _object(
                {
                    "reason": _reason(max_reason_chars),
                    "action": {"const": "tool"},
                    "tool": {"const": tool.name},
                    "args": args,
                    "answer": {"const": ""},
                }
            )
        )
    variants.append(
        _object(
            {
                "reason": _reason(max_reason_chars),
                "action": {"const": "answer"},
                "tool": {"const": ""},
                "args": {"type": "object", "properties": {}, "additionalProperties": False},
                "answer": {"type": "string", "minLength": 1},
            }
        )
    )
    schema: dict[str, Any] = variants[0] if len(variants) == 1 else {"anyOf": variants}
    if defs:
        schema = {**schema, "$defs": defs}
    return schema


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
    """Copy a tool's argument schema, moving its ``$defs`` into ``into`` under prefixed names."""
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
    args = rewrite(args)
    args.setdefault("type", "object")
    if args["type"] == "object" and "additionalProperties" not in args:
        args["additionalProperties"] = False
    return dict(args)
