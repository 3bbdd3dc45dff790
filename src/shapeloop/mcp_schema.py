"""An MCP server's declaration of a tool as a shapeloop tool: its input schema normalised the way the
loop needs it, its description bounded, its annotations kept for the approval gate (:class:`MCPTool`).
No I/O: it reads what the server listed, and the SDK's types only annotate it (the module imports without it)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shapeloop.text import printable
from shapeloop.tools import Tool, drop_titles

if TYPE_CHECKING:
    from mcp import types as mcp_types

MAX_DESCRIPTION_CHARS = 1000  # of a server's tool description that the model reads
MAX_SCHEMA_TEXT_CHARS = 300  # of each description or title inside its input schema
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")  # the names MCP allows a tool
_MAX_DEPTH = 64  # schema levels normalised; deeper ones are left as given (the toolbox refuses them)


@dataclass(frozen=True, kw_only=True)
class MCPTool(Tool):
    """A tool of an MCP server.

    Attributes:
        server: the server's name in messages.
        remote_name: the tool's name on the server (``name`` may carry the server's prefix).
        annotations: the server's hints, as the protocol spells them (``readOnlyHint``,
            ``destructiveHint``, ``idempotentHint``, ``openWorldHint``, ``title``); those not given
            are left out.
    """

    server: str = ""
    remote_name: str = ""
    annotations: Mapping[str, Any] = field(default_factory=dict)

    def approval_note(self) -> str:
        """What the server says about the tool, for the person asked to approve a call."""
        if self.annotations.get("readOnlyHint") is True:
            return f"server {self.server!r} says it only reads"
        if self.annotations.get("destructiveHint") is True:
            return f"server {self.server!r} says it may DESTROY or overwrite data"
        if self.annotations.get("destructiveHint") is False:
            return f"server {self.server!r} says it changes things but destroys nothing"
        return f"server {self.server!r} does not say what it changes"


def hint_words(tool: MCPTool) -> str:
    """The server's annotations of a tool in words (``read-only, idempotent``), or what their absence means."""
    hints = tool.annotations
    named = (("readOnlyHint", "read-only"), ("destructiveHint", "destructive"), ("idempotentHint", "idempotent"),
             ("openWorldHint", "open world"))  # fmt: skip
    words = [word for key, word in named if hints.get(key)]
    if hints.get("readOnlyHint") is False and not hints.get("destructiveHint"):
        words.insert(0, "acts")
    if not words:
        words = ["no annotations"]
    return ", ".join(words) + ("" if tool.read_only else "; needs approval")


def listed_tool(remote: mcp_types.Tool, call: Callable[..., str], *, server: str, prefix: str = "") -> MCPTool:
    """The shapeloop tool for a tool a server listed: named ``prefix`` + its name, calling ``call``
    with the arguments; it needs approval unless the server says ``readOnlyHint: true``."""
    hints = remote.annotations
    annotations: dict[str, Any] = {}
    if hints is not None:
        for key, value in (("title", hints.title), ("readOnlyHint", hints.read_only_hint),
                           ("destructiveHint", hints.destructive_hint), ("idempotentHint", hints.idempotent_hint),
                           ("openWorldHint", hints.open_world_hint)):  # fmt: skip
            if value is not None:
                annotations[key] = value
    read_only = annotations.get("readOnlyHint") is True
    if not TOOL_NAME.fullmatch(remote.name):
        raise ValueError(f"its name {printable(remote.name[:60])!r} is not an MCP tool name (letters, digits, _ . -)")
    description = _bounded(remote.description or remote.title or remote.name, MAX_DESCRIPTION_CHARS)
    return MCPTool(name=prefix + remote.name, description=description,
                   parameters=normalise_schema(remote.input_schema), fn=call, needs_approval=not read_only,
                   read_only=read_only, server=server, remote_name=remote.name, annotations=annotations)  # fmt: skip


def normalise_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An MCP tool's input schema as the loop needs it: an object at the root; every object that
    lists its properties closed (``additionalProperties: false``) unless it says otherwise; an
    optional property typed ``anyOf: [T, null]`` (or ``type: [T, "null"]``) with ``default: null``
    made plain ``T`` (leaving it out means null); no ``title`` annotations."""
    out: dict[str, Any] = drop_titles(copy.deepcopy(dict(schema)))
    out["type"] = "object"
    out.setdefault("properties", {})
    _close(out, 0)
    return out


def _bounded(text: str, most: int) -> str:
    """A server's text as the model may read it: printable, on one line, at most ``most`` characters."""
    flat = " ".join(printable(text).split())
    return flat if len(flat) <= most else flat[: most - 3] + "..."


def _close(node: dict[str, Any], depth: int, *, in_all_of: bool = False) -> None:
    if depth > _MAX_DEPTH:
        return
    for key in ("description", "title"):  # the server's words inside the schema: bounded like its description
        if isinstance(node.get(key), str):
            node[key] = _bounded(node[key], MAX_SCHEMA_TEXT_CHARS)
    properties = node.get("properties")
    if isinstance(properties, dict):
        if not in_all_of and "additionalProperties" not in node and "patternProperties" not in node:
            node["additionalProperties"] = False
        listed = node.get("required")
        required = listed if isinstance(listed, list) else []
        for key, spec in list(properties.items()):
            if isinstance(spec, dict) and key not in required:
                properties[key] = _without_null(spec)
    for key, value in node.items():
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
            children = [v for v in value.values() if isinstance(v, dict)]
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            children = [v for v in value if isinstance(v, dict)]
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            children = [value]
        else:
            continue
        for child in children:
            _close(child, depth + 1, in_all_of=in_all_of or key == "allOf")


def _without_null(spec: dict[str, Any]) -> dict[str, Any]:
    """An optional property's schema without the null it may be (its absence says null)."""
    kind = spec.get("type")
    if isinstance(kind, list) and "null" in kind and len(kind) > 1:
        rest = [k for k in kind if k != "null"]
        spec = {**spec, "type": rest[0] if len(rest) == 1 else rest}
    else:
        branches = spec.get("anyOf")
        if not isinstance(branches, list) or {"type": "null"} not in branches:
            return spec
        kept = [b for b in branches if b != {"type": "null"}]
        if not kept:
            return spec
        outer = {k: v for k, v in spec.items() if k != "anyOf"}
        spec = {**outer, **kept[0]} if len(kept) == 1 and isinstance(kept[0], dict) else {**outer, "anyOf": kept}
    if "default" in spec and spec["default"] is None:
        spec = {k: v for k, v in spec.items() if k != "default"}
    return spec


__all__ = ["MAX_DESCRIPTION_CHARS", "MCPTool", "hint_words", "listed_tool", "normalise_schema"]
