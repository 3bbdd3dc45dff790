"""What the MCP SDK hands back, as text: a call's result (text, images, resources, structured
content) as the model reads it, and the innermost errors of the SDK's nested exception groups as
the reason a server could not start or went away."""

from __future__ import annotations

import asyncio
import json
import os
from typing import TYPE_CHECKING

from shapeloop.mcp_servers import ServerSpec, StdioServer

if TYPE_CHECKING:
    from mcp import types as mcp_types


def render_result(result: mcp_types.CallToolResult) -> str:
    """A call's result as text: its text blocks; images, audio and resources as a short note each;
    the structured content as JSON where no text came with it."""
    from mcp import types as mcp_types

    parts = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            kind = "an image" if isinstance(block, mcp_types.ImageContent) else "audio"
            parts.append(f"[{kind} ({block.mime_type}, {_size(len(block.data) * 3 // 4)}) that is not shown here]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[a link to the resource {block.uri}" + (f" ({block.name})]" if block.name else "]"))
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[the resource {resource.uri} ({resource.mime_type or 'binary'}), not shown here]")
    text = "\n".join(parts)
    if not text.strip() and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return text if text.strip() else "(no output)"


def _size(count: int) -> str:
    return f"{count} bytes" if count < 1024 else f"{count / 1024:.0f} KB"


def describe_failure(exc: BaseException, spec: ServerSpec) -> str:
    """What stopped a server, from the innermost errors of the SDK's (nested) exception groups."""
    from mcp import MCPError

    leaves: list[BaseException] = []
    pending = [exc]
    while pending and len(leaves) < 8:
        item = pending.pop(0)
        if isinstance(item, BaseExceptionGroup):
            pending += list(item.exceptions)
        elif not isinstance(item, asyncio.CancelledError):  # the portal runs asyncio
            leaves.append(item)
    first = leaves[0] if leaves else exc
    if isinstance(first, FileNotFoundError) and isinstance(spec, StdioServer):
        if spec.cwd is not None and first.filename is not None and os.fspath(first.filename) == os.fspath(spec.cwd):
            return f"its folder (cwd) {os.fspath(spec.cwd)!r} does not exist"
        return f"there is no command {spec.command!r}: install it, or give its full path"
    if isinstance(first, MCPError):
        return f"{first.message} (MCP error {first.code}; is it an MCP server, started with the right arguments?)"
    return f"{type(first).__name__}: {first}" if str(first) else type(first).__name__


__all__ = ["describe_failure", "render_result"]
