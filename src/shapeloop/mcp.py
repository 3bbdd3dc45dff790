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

This module holds the connections; the rest lives beside it and every public name is importable
from here: the server kinds and the ``mcpServers`` configuration in :mod:`shapeloop.mcp_servers`, a
listed tool made ours (:class:`MCPTool`, the schema normalised) in :mod:`shapeloop.mcp_schema`, a
result or a failure as text in ``shapeloop._mcp_results``, :class:`ServerUnavailable` in
:mod:`shapeloop.errors`.
"""

from __future__ import annotations

import concurrent.futures
import os
import shlex
import tempfile
import threading
import warnings
from collections.abc import Iterator, Mapping
from contextlib import AsyncExitStack, ExitStack, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from shapeloop._mcp_results import describe_failure, render_result
from shapeloop.errors import ServerUnavailable, ToolFailure, UsageError
from shapeloop.mcp_schema import MAX_DESCRIPTION_CHARS as MAX_DESCRIPTION_CHARS
from shapeloop.mcp_schema import MCPTool, hint_words, listed_tool, normalise_schema
from shapeloop.mcp_servers import HttpServer, LocalServer, ServerSpec, StdioServer, as_server, servers_from_config
from shapeloop.text import printable

if TYPE_CHECKING:
    import anyio
    import anyio.from_thread
    from mcp import Client
    from mcp import types as mcp_types

DEFAULT_CONNECT_TIMEOUT = 30.0
"""Seconds a server has to start and answer the handshake and the tool listing."""
DEFAULT_CALL_TIMEOUT = 50.0  # below a run's tool_timeout (60 s), so the server's own words come back first
"""Seconds one call may take; the server stays usable after a call that runs past it."""
_STDERR_LINES = 5  # of a server's stderr quoted in an error
_STDERR_TAIL = 8192  # bytes at the end of its log that they are taken from
_GRACE = 5.0  # seconds past call_timeout before the client itself is given up on


class _Connection:
    """One server: its client, held by one task of the portal's loop, and its calls."""

    def __init__(self, spec: ServerSpec, portal: anyio.from_thread.BlockingPortal, *, call_timeout: float,
                 log_dir: Path, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 restarts: int = 0) -> None:  # fmt: skip
        self.spec = spec
        self.label = spec.label
        self._portal = portal
        self._call_timeout = call_timeout
        self._connect_timeout = connect_timeout
        self._restarts = restarts
        self.restarted = 0  # times the server was started again after it died
        self._closed = False
        self._reviving = threading.Lock()  # one thread starts a dead server again; the others wait for it
        self._log_dir = log_dir
        self.log: TextIO | None = None
        self.log_path: str | None = None
        self._client: Client | None = None
        self._stop: anyio.Event | None = None
        self._held: concurrent.futures.Future[None] | None = None
        self._lock = threading.Lock()
        self._gone: str | None = None  # why the server is gone, once it is
        self._told = False  # whether a call has said so at length
        self.tool_names: list[str] = []

    def open(self, timeout: float) -> list[mcp_types.Tool]:
        """Start or reach the server and list its tools, within ``timeout`` seconds."""
        if isinstance(self.spec, StdioServer) and self.log is None:  # a restart writes on in the same log
            self._log_dir.mkdir(parents=True, exist_ok=True)
            fd, self.log_path = tempfile.mkstemp(prefix=f"{_safe(self.label)}-", suffix=".log", dir=self._log_dir)
            self.log = os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", buffering=1)
        ready: concurrent.futures.Future[list[mcp_types.Tool]] = concurrent.futures.Future()
        self._held = self._portal.start_task_soon(self._hold, ready, self.restarted)
        try:
            return ready.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            self._held.cancel()
            raise self._unavailable(f"it did not answer within {timeout:g} s (connect_timeout)") from None
        except Exception as exc:  # whatever stopped it goes into one message
            raise self._unavailable(describe_failure(exc, self.spec)) from exc

    async def _hold(self, ready: concurrent.futures.Future[list[mcp_types.Tool]], start: int) -> None:
        import anyio

        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(await self._client_for(stack))
                listed = await _list_tools(client)
                self._client, self._stop = client, anyio.Event()
                ready.set_result(listed)
                await self._stop.wait()
        except Exception as exc:  # noqa: BLE001 - the server's end, told to the caller or the next call
            if not ready.done():
                ready.set_exception(exc)
            elif start == self.restarted:  # not a client that a restart has replaced
                self._mark_gone(describe_failure(exc, self.spec))

    async def _client_for(self, stack: AsyncExitStack) -> Client:
        from mcp import Client, StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client  # the SDK's client, with its MCP timeouts

        spec = self.spec
        if isinstance(spec, StdioServer):
            assert self.log is not None, "a stdio server's log is opened before it starts"
            cwd = None if spec.cwd is None else os.fspath(spec.cwd)
            params = StdioServerParameters(command=spec.command, args=list(spec.args), env=dict(spec.env or {}) or None,
                                           cwd=cwd)  # fmt: skip
            return Client(stdio_client(params, errlog=self.log), mode="legacy")
        if isinstance(spec, HttpServer):
            http = await stack.enter_async_context(create_mcp_http_client(headers=dict(spec.headers or {})))
            return Client(streamable_http_client(spec.url, http_client=http), mode="legacy")
        return Client(spec.server, mode="legacy")

    def call(self, name: str, args: Mapping[str, Any]) -> str:
        """Call a tool; every failure is a :class:`ToolFailure` whose text the model reads."""
        import anyio
        from mcp import MCPError
        from mcp import types as mcp_types

        if self._gone is not None and not self._revive():  # died between calls: this call has not run
            raise ToolFailure(self._gone_text(name))
        try:
            result = self._portal.call(self._call, name, dict(args))
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise self._timed_out(name) from exc
            if exc.code == mcp_types.CONNECTION_CLOSED:
                raise self._died_during(name, exc.message or "the connection closed") from exc
            raise ToolFailure(f"{name} on MCP server {self.label!r}: {exc.message} (MCP error {exc.code})") from exc
        except TimeoutError as exc:
            raise self._timed_out(name) from exc
        except (RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            raise self._died_during(name, str(exc) or type(exc).__name__) from exc
        text = render_result(result)
        if result.is_error:
            raise ToolFailure(f"{name} on MCP server {self.label!r} failed: {text}")
        return text

    async def _call(self, name: str, args: dict[str, Any]) -> mcp_types.CallToolResult:
        import anyio

        client = self._client
        if client is None or self._stop is None or self._stop.is_set():
            raise RuntimeError("the connection is closed")
        with anyio.fail_after(self._call_timeout + _GRACE):
            return await client.call_tool(name, args, read_timeout_seconds=self._call_timeout)

    def _timed_out(self, name: str) -> ToolFailure:
        return ToolFailure(
            f"{name} on MCP server {self.label!r} gave no result within {self._call_timeout:g} s (call_timeout); "
            "the server is still there: try another way or answer without it"
        )

    def _mark_gone(self, why: str) -> None:
        with self._lock:
            self._gone = self._gone or why

    def _died_during(self, name: str, why: str) -> ToolFailure:
        """The failure of a call that found the server dead (in the call or since the last one: the SDK
        cannot tell): it is gone, or (with restarts left) started again, and the call is not made
        again here (it may have done part of its work)."""
        self._mark_gone(why)
        said = f"MCP server {self.label!r} stopped: {self._gone}{self._stderr_note()}"
        if not self._revive():
            return ToolFailure(self._gone_text(name))
        return ToolFailure(f"{said}. It was started again (restart {self.restarted} of {self._restarts}); {name} did "
                           "not finish and may have done part of its work: check before you call it again")  # fmt: skip

    def _revive(self) -> bool:
        """Start a dead server again while restarts are left; True once it serves (or another thread
        already started it again)."""
        with self._reviving:
            if self._gone is None:
                return True
            if self._closed or self.restarted >= self._restarts:
                return False
            self.restarted += 1
            why, held = self._gone, self._held
            if held is not None and not held.done():  # the old client's task ends before the new one starts
                if self._stop is not None:
                    self._portal.call(self._stop.set)
                with suppress(concurrent.futures.CancelledError, concurrent.futures.TimeoutError, Exception):
                    held.result(timeout=_GRACE)
            if self.log is not None and not self.log.closed:
                self.log.write(f"[shapeloop: {self.label} stopped ({why}); started again, {self.restarted} of "
                               f"{self._restarts}]\n")  # fmt: skip
            self._client, self._stop = None, None
            try:
                self.open(self._connect_timeout)
            except ServerUnavailable as exc:  # one that cannot start is not tried again
                self._restarts = self.restarted
                with self._lock:
                    self._gone, self._told = f"{why}; started again, it failed: {exc}", False
                return False
            with self._lock:
                self._gone, self._told = None, False
            return True

    def _gone_text(self, name: str) -> str:
        """What a call of a dead server's tool reads: the first names the server, why it stopped and
        the end of its stderr; the later ones only that it is gone."""
        with self._lock:
            first, self._told = not self._told, True
        if not first:
            return f"MCP server {self.label!r} is gone ({self._gone}); {name} cannot be called: answer without it"
        names = ", ".join(self.tool_names) or "none"
        return (f"MCP server {self.label!r} stopped: {self._gone}{self._stderr_note()}. Its tools ({names}) are gone "
                "for the rest of this run: answer without them or use another tool")  # fmt: skip

    @property
    def gone(self) -> str | None:
        """Why the server is gone, or None while it serves."""
        return self._gone

    def _unavailable(self, why: str) -> ServerUnavailable:
        what = shlex.join([self.spec.command, *self.spec.args]) if isinstance(self.spec, StdioServer) else (
            self.spec.url if isinstance(self.spec, HttpServer) else "the in-process server")  # fmt: skip
        return ServerUnavailable(f"MCP server {self.label!r} ({what}) could not start: {why}{self._stderr_note()}",
                                 server=self.label, log_path=self.log_path)  # fmt: skip

    def _stderr_note(self) -> str:
        if self.log is None or self.log_path is None:
            return ""
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as handle:  # only its end: a server may write a great deal
            handle.seek(max(0, os.path.getsize(self.log_path) - _STDERR_TAIL))
            tail = handle.read().decode("utf-8", errors="replace")
        lines = tail.splitlines()[-_STDERR_LINES:]
        said = " | ".join(printable(line.strip())[:200] for line in lines if line.strip())
        return f"; its stderr ends: {said} (all of it in {self.log_path})" if said else ""

    def close(self) -> None:
        """Leave the client in the task that entered it, which stops a stdio server's process."""
        held = self._held
        if held is not None and not held.done():
            stop = self._stop
            if stop is None:
                held.cancel()
            else:
                self._portal.call(stop.set)
            with suppress(concurrent.futures.CancelledError, concurrent.futures.TimeoutError):
                held.result(timeout=DEFAULT_CONNECT_TIMEOUT)
        self._client = None
        self._closed = True
        self._mark_gone("its tools were closed")
        with self._lock:
            self._told = True  # a call after close needs no account of a crash
        if self.log is not None and not self.log.closed:
            self.log.close()


class MCPTools:
    """The tools of one or more MCP servers, and the servers' connections: close it (``with`` does)
    to stop them. Iterating gives the tools; see :func:`mcp_tools`."""

    def __init__(self, tools: list[MCPTool], connections: list[_Connection], stack: ExitStack) -> None:
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
            connection = _Connection(spec, portal, call_timeout=call_timeout, log_dir=folder,
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
                        f"{made.name!r}: give one of them a prefix (StdioServer(..., prefix='{_safe(spec.label)}_'))"
                    )
                tools[made.name] = made
                connection.tool_names.append(made.name)
    except BaseException:
        stack.close()
        raise
    return MCPTools(list(tools.values()), connections, stack)


def _tool(remote: mcp_types.Tool, connection: _Connection, prefix: str) -> MCPTool:
    name = remote.name

    def call(**args: Any) -> str:
        return connection.call(name, args)

    return listed_tool(remote, call, server=connection.label, prefix=prefix)


async def _list_tools(client: Client) -> list[mcp_types.Tool]:
    """Every tool the server lists, page by page."""
    listed: list[mcp_types.Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        listed += page.tools
        cursor = page.next_cursor
        if cursor is None:
            return listed


def _safe(label: str) -> str:
    """A server's name as a file-name part and an identifier."""
    kept = "".join(c if c.isalnum() else "_" for c in label).strip("_")
    return kept[:40] or "server"


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
