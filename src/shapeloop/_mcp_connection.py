"""One MCP server's connection: its client, held by one task of a blocking portal's event loop, its
calls, its death and its restarts (see :func:`shapeloop.mcp.mcp_tools`)."""

from __future__ import annotations

import concurrent.futures
import os
import shlex
import tempfile
import threading
from collections.abc import Mapping
from contextlib import AsyncExitStack, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from shapeloop._mcp_results import describe_failure, render_result
from shapeloop.errors import ServerUnavailable, ToolFailure
from shapeloop.mcp_servers import HttpServer, ServerSpec, StdioServer
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


class Connection:
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
        self._life = 0  # which start the client is of: a failure of an earlier one is not this one's
        self._closed = False
        self._reviving = threading.Lock()  # one thread starts a dead server again; the others wait for it
        self._log_dir = log_dir
        self.log: TextIO | None = None
        self.log_path: str | None = None
        self._log_start = 0  # where this start's stderr begins in the log
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
            fd, self.log_path = tempfile.mkstemp(prefix=f"{safe_name(self.label)}-", suffix=".log", dir=self._log_dir)
            self.log = os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", buffering=1)
        if self.log is not None and self.log_path is not None and not self.log.closed:
            self.log.flush()
            self._log_start = os.path.getsize(self.log_path)
        ready: concurrent.futures.Future[list[mcp_types.Tool]] = concurrent.futures.Future()
        self._held = self._portal.start_task_soon(self._hold, ready, self._life)
        try:
            return ready.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            self._held.cancel()
            raise self._unavailable(f"it did not answer within {timeout:g} s (connect_timeout)") from None
        except Exception as exc:  # whatever stopped it goes into one message
            raise self._unavailable(describe_failure(exc, self.spec)) from exc

    async def _hold(self, ready: concurrent.futures.Future[list[mcp_types.Tool]], life: int) -> None:
        import anyio

        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(await self._client_for(stack))
                listed = await list_tools(client)
                self._client, self._stop = client, anyio.Event()
                ready.set_result(listed)
                await self._stop.wait()
        except Exception as exc:  # noqa: BLE001 - the server's end, told to the caller or the next call
            if not ready.done():
                ready.set_exception(exc)
            elif life == self._life:  # not a client that a restart has replaced
                self._mark_gone(describe_failure(exc, self.spec))
        finally:  # cancelled while it started (closed): the waiting caller hears it at once
            if not ready.done():
                ready.set_exception(RuntimeError("its tools were closed while it started"))

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

        if self._gone is not None and not self._revive():  # found dead before this call: it has not run
            raise ToolFailure(self._gone_text(name))
        life = self._life
        try:
            result = self._portal.call(self._call, name, dict(args))
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise self._timed_out(name) from exc
            if exc.code == mcp_types.CONNECTION_CLOSED:
                raise self._died_during(name, exc.message or "the connection closed", life) from exc
            if isinstance(self.spec, HttpServer) and exc.code == mcp_types.INVALID_REQUEST and "session" in str(
                exc.message
            ).lower():  # an HTTP 404 on the session: the server forgot it (restarted), a new session is needed
                raise self._died_during(name, f"its session ended ({exc.message})", life) from exc
            raise ToolFailure(f"{name} on MCP server {self.label!r}: {exc.message} (MCP error {exc.code})") from exc
        except TimeoutError as exc:
            raise self._timed_out(name) from exc
        except (RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            raise self._died_during(name, str(exc) or type(exc).__name__, life) from exc
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

    def _died_during(self, name: str, why: str, life: int) -> ToolFailure:
        """The failure of a call that found the server dead (in the call or since the last one: the SDK
        cannot tell): it is gone, or (with restarts left) started again, and the call is not made
        again here (it may have done part of its work). A failure of a client that another call has
        already replaced marks nothing."""
        said = f"MCP server {self.label!r} stopped: {why}{self._stderr_note()}"
        with self._reviving:
            if life == self._life:
                self._mark_gone(why)
        if not self._revive():
            return ToolFailure(self._gone_text(name))
        return ToolFailure(
            f"{said}. It was {self._again} (restart {self.restarted} of {self._restarts}); {name} did not finish "
            "and may have done part of its work: check before you call it again"
        )

    @property
    def _again(self) -> str:
        return "reached again" if isinstance(self.spec, HttpServer) else "started again"

    def _revive(self) -> bool:
        """Start a dead server again (reach it again, over HTTP) while restarts are left; True once it
        serves (or another call already started it again). A start that fails ends the restarts."""
        with self._reviving:
            if self._gone is None:
                return True
            if self._closed or self.restarted >= self._restarts:
                return False
            why, held = self._gone, self._held
            self._end(held)  # the old client's task ends before the new one starts
            if self.log is not None and not self.log.closed:
                self.log.write(f"[shapeloop: {self.label} stopped ({why}); starting it again]\n")
            self._life += 1
            self._client, self._stop = None, None
            try:
                if self._closed:
                    raise RuntimeError("its tools were closed")
                self.open(self._connect_timeout)
            except Exception:  # noqa: BLE001 - it could not start: named once, at length, by the next call
                if self._closed:  # closed while it started: nothing more to say
                    return False
                self._restarts = self.restarted
                with self._lock:
                    self._gone, self._told = f"{why}; it could not be {self._again}", False
                return False
            if self._closed:  # closed while it started: stop the new one too
                self._end(self._held)
                return False
            self.restarted += 1
            with self._lock:
                self._gone, self._told = None, False
            return True

    def _end(self, held: concurrent.futures.Future[None] | None, wait: float = _GRACE) -> None:
        """Stop a client's task, if it still runs (its stop set, or cancelled before it has one), and
        wait up to ``wait`` seconds for it."""
        if held is None or held.done():
            return
        if self._stop is not None and not self._stop.is_set():
            with suppress(Exception):
                self._portal.call(self._stop.set)
        else:
            held.cancel()
        with suppress(concurrent.futures.CancelledError, concurrent.futures.TimeoutError, Exception):
            held.result(timeout=wait)

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
        with open(self.log_path, "rb") as handle:  # only its end, and this start's: a server may write a great deal
            handle.seek(max(self._log_start, os.path.getsize(self.log_path) - _STDERR_TAIL))
            tail = handle.read().decode("utf-8", errors="replace")
        lines = tail.splitlines()[-_STDERR_LINES:]
        said = " | ".join(printable(line.strip())[:200] for line in lines if line.strip())
        return f"; its stderr ends: {said} (all of it in {self.log_path})" if said else ""

    def close(self) -> None:
        """Leave the client in the task that entered it, which stops a stdio server's process."""
        self._closed = True  # first: no restart begins after this
        self._end(self._held, wait=DEFAULT_CONNECT_TIMEOUT)
        self._client = None
        self._mark_gone("its tools were closed")
        with self._lock:
            self._told = True  # a call after close needs no account of a crash
        if self.log is not None and not self.log.closed:
            self.log.close()


async def list_tools(client: Client) -> list[mcp_types.Tool]:
    """Every tool the server lists, page by page."""
    listed: list[mcp_types.Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        listed += page.tools
        cursor = page.next_cursor
        if cursor is None:
            return listed


def safe_name(label: str) -> str:
    """A server's name as a file-name part and an identifier."""
    kept = "".join(c if c.isalnum() else "_" for c in label).strip("_")
    return kept[:40] or "server"
