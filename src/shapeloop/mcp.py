"""Tools from Model Context Protocol servers: ``with mcp_tools("mcp-server-time") as tools: run_agent(...)``.

:func:`mcp_tools` starts or reaches each server (a command over stdio, a URL over streamable HTTP,
or an SDK server object in process), lists its tools and returns them as shapeloop tools, so
argument validation, constrained decoding, approval, repeats, events and the transcript work as for
any tool. The SDK is asynchronous; one background event loop (an anyio blocking portal) serves every
server of one :class:`MCPTools`, and each server's client is entered and left in one task. The SDK
(the ``mcp`` extra) is imported where a server is reached, so this module imports without it.

Safety is the server's own word: a tool whose annotations do not say ``readOnlyHint: true`` needs
approval like any acting tool, and :meth:`MCPTool.approval_note` says what the server claims
(``destructiveHint``) for the person asked. A server's description is documentation the model
reads, cut to a bounded length; it is never an instruction to the loop.

Every failure of a call is a result the model reads (``ERROR: ...``): the server's error text, an
MCP error, a call past ``call_timeout``, a server that died (named once with the end of its stderr;
its tools then answer that it is gone, unless ``restarts`` lets it be started again). A server that
cannot start is one :class:`ServerUnavailable` before the run, naming the command, the end of its
stderr and the log file that holds all of it.

This module holds the servers of one :class:`MCPTools`; the rest lives beside it and every public
name is importable from here: one server's connection (its calls, death and restarts) in
``shapeloop._mcp_connection``, the server kinds and the ``mcpServers`` configuration in :mod:`shapeloop.mcp_servers`, a
listed tool made ours (:class:`MCPTool`, the schema normalised) in :mod:`shapeloop.mcp_schema`, a
result or a failure as text in ``shapeloop._mcp_results``, :class:`ServerUnavailable` in
:mod:`shapeloop.errors`.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shapeloop._mcp_connection import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, Connection, safe_name
from shapeloop._mcp_results import describe_failure as describe_failure
from shapeloop._mcp_results import render_result
from shapeloop.errors import ServerUnavailable, UsageError
from shapeloop.mcp_schema import MAX_DESCRIPTION_CHARS as MAX_DESCRIPTION_CHARS
from shapeloop.mcp_schema import MCPTool, hint_words, listed_tool, normalise_schema
from shapeloop.mcp_servers import HttpServer, LocalServer, ServerSpec, StdioServer, as_server, servers_from_config
from shapeloop.text import printable

if TYPE_CHECKING:
    from mcp import types as mcp_types


class MCPTools:
    """The tools of one or more MCP servers, and the servers' connections: close it (``with`` does)
    to stop them. Iterating gives the tools; see :func:`mcp_tools`."""

    def __init__(self, tools: list[MCPTool], connections: list[Connection], stack: ExitStack) -> None:
        self.tools = tools
        self._connections = connections
        self._stack = stack

    def __iter__(self) -> Iterator[MCPTool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    def __enter__(self) -> MCPTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def gone(self) -> dict[str, str]:
        """The servers that died, by name, with why."""
        return {c.label: c.gone for c in self._connections if c.gone is not None}

    @property
    def restarted(self) -> dict[str, int]:
        """The servers started again after they died, by name, with how many times."""
        return {c.label: c.restarted for c in self._connections if c.restarted}

    @property
    def logs(self) -> dict[str, str]:
        """The file that holds each stdio server's stderr, by server name."""
        return {c.label: c.log_path for c in self._connections if c.log_path is not None}

    def close(self) -> None:
        """Stop every server and the background loop; calls after this fail as ``ERROR: ...``."""
        self._stack.close()


def mcp_tools(
    *servers: ServerSpec | str | Any,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
    log_dir: str | os.PathLike[str] | None = None,
    restarts: int = 0,
) -> MCPTools:
    """Connect to MCP servers and return their tools, ready for ``run_agent`` or a ``Conversation``.

    Args:
        servers: each a command line (``"mcp-server-git --repository ."``), a URL (streamable HTTP),
            a :class:`StdioServer`, :class:`HttpServer` or :class:`LocalServer`, or an SDK server object.
        connect_timeout: seconds each server has to start and list its tools.
        call_timeout: seconds one call may take before it is ``ERROR: ... gave no result``.
        log_dir: the folder for the stdio servers' stderr logs (default: ``shapeloop-mcp`` in the
            system's temporary folder).
        restarts: how many times each server that dies is started again (within ``connect_timeout``)
            before its tools answer that it is gone. A call the server died in is not made again: it
            fails with a note that the server was started again and the call may have done part of
            its work, and the next call runs on the new server.

    Raises:
        ServerUnavailable: a server could not start or be reached (the others are stopped again).
        UsageError: no server, a timeout that is not positive, ``restarts`` below 0, or two tools of
            the same name (give one server a ``prefix``).
    """
    if not servers:
        raise UsageError("mcp_tools needs at least one server: a command line, a URL or a server object")
    for what, seconds in (("connect_timeout", connect_timeout), ("call_timeout", call_timeout)):
        if not seconds > 0:
            raise UsageError(f"{what} must be more than 0 seconds, not {seconds!r}")
    if not isinstance(restarts, int) or isinstance(restarts, bool) or restarts < 0:
        raise UsageError(f"restarts must be a whole number, 0 or more, not {restarts!r}")
    specs = [as_server(s) for s in servers]
    try:
        import anyio.from_thread
    except ImportError as exc:  # the SDK brings anyio; without it the extra is missing
        raise UsageError("shapeloop.mcp needs the 'mcp' extra: pip install 'shapeloop[mcp]'") from exc
    folder = Path(log_dir) if log_dir is not None else Path(tempfile.gettempdir()) / "shapeloop-mcp"
    stack = ExitStack()
    try:
        portal = stack.enter_context(anyio.from_thread.start_blocking_portal(name="shapeloop-mcp"))
        tools: dict[str, MCPTool] = {}
        connections = []
        for spec in specs:
            connection = Connection(spec, portal, call_timeout=call_timeout, log_dir=folder,
                                     connect_timeout=connect_timeout, restarts=restarts)  # fmt: skip
            stack.callback(connection.close)
            connections.append(connection)
            for remote in connection.open(connect_timeout):
                try:
                    made = _tool(remote, connection, spec.prefix)
                except ValueError as exc:  # one tool the loop cannot offer: the server's others still serve
                    warnings.warn(f"MCP server {connection.label!r}: tool {printable(remote.name[:60])!r} is left "
                                  f"out: {exc}", UserWarning, stacklevel=2)  # fmt: skip
                    continue
                if made.name in tools:
                    raise UsageError(
                        f"MCP servers {tools[made.name].server!r} and {connection.label!r} both have a tool named "
                        f"{made.name!r}: give one of them a prefix "
                        f"(StdioServer(..., prefix='{safe_name(spec.label)}_'))"
                    )
                tools[made.name] = made
                connection.tool_names.append(made.name)
    except BaseException:
        stack.close()
        raise
    return MCPTools(list(tools.values()), connections, stack)


def _tool(remote: mcp_types.Tool, connection: Connection, prefix: str) -> MCPTool:
    name = remote.name

    def call(**args: Any) -> str:
        return connection.call(name, args)

    return listed_tool(remote, call, server=connection.label, prefix=prefix)


__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "HttpServer",
    "LocalServer",
    "MCPTool",
    "MCPTools",
    "ServerSpec",
    "ServerUnavailable",
    "StdioServer",
    "as_server",
    "hint_words",
    "mcp_tools",
    "normalise_schema",
    "render_result",
    "servers_from_config",
]
