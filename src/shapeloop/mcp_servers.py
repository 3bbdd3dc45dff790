"""Which MCP servers to reach: a command over stdio, a URL over streamable HTTP, or an SDK server in
this process; read from shorthand (a command line or a URL) or from a configuration in the
``mcpServers`` format that Claude Desktop and others keep. Plain data: nothing here starts a server
(:func:`shapeloop.mcp.mcp_tools` does)."""

from __future__ import annotations

import os
import shlex
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class StdioServer:
    """A server started as a command that speaks MCP on its stdin and stdout.

    Args:
        command: the program (``mcp-server-time``, ``uvx``), found on ``PATH``.
        args: its arguments.
        env: environment variables for it; the SDK passes only a few of ours (``HOME``, ``PATH``).
        cwd: the folder it runs in.
        name: the server's name in messages (default: the command's file name).
        prefix: put before each of its tool names (``git_``), to tell apart tools that two servers
            both name.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | os.PathLike[str] | None = None
    name: str | None = None
    prefix: str = ""

    @classmethod
    def parse(cls, line: str, **options: Any) -> StdioServer:
        """A server from one command line, split as a shell would (``"uvx mcp-server-git --repository ."``).

        Raises:
            ValueError: an empty line, or quotes that do not close.
        """
        words = shlex.split(line)
        if not words:
            raise ValueError("the MCP server command is empty: give the program to run, e.g. 'mcp-server-time'")
        return cls(command=words[0], args=tuple(words[1:]), **options)

    @property
    def label(self) -> str:
        """The name messages give the server."""
        return self.name or os.path.basename(self.command) or self.command


@dataclass(frozen=True, kw_only=True)
class HttpServer:
    """A server reached over streamable HTTP at ``url``, with ``headers`` on every request
    (``{"Authorization": "Bearer ..."}``); ``name`` and ``prefix`` as for :class:`StdioServer`."""

    url: str
    headers: Mapping[str, str] | None = None
    name: str | None = None
    prefix: str = ""

    @property
    def label(self) -> str:
        """The name messages give the server."""
        return self.name or urllib.parse.urlsplit(self.url).netloc or self.url


@dataclass(frozen=True, kw_only=True)
class LocalServer:
    """An SDK server object (``mcp.server.MCPServer`` or a low-level ``Server``) run in this process:
    for tests and for tools written with the SDK."""

    server: Any
    name: str | None = None
    prefix: str = ""

    @property
    def label(self) -> str:
        """The name messages give the server."""
        return self.name or str(getattr(self.server, "name", "") or "in-process")


ServerSpec = StdioServer | HttpServer | LocalServer


def as_server(value: ServerSpec | str | Any) -> ServerSpec:
    """A server from shorthand: a URL (``http://``, ``https://``), a command line, or an SDK server object."""
    if isinstance(value, StdioServer | HttpServer | LocalServer):
        return value
    if isinstance(value, str):
        if value.strip().lower().startswith(("http://", "https://")):
            return HttpServer(url=value.strip())
        return StdioServer.parse(value)
    from mcp.server import MCPServer, Server

    if isinstance(value, MCPServer | Server):
        return LocalServer(server=value)
    raise TypeError(f"an MCP server is a command line, a URL, a StdioServer, HttpServer or LocalServer, not {value!r}")


def servers_from_config(config: Mapping[str, Any]) -> list[StdioServer | HttpServer]:
    """The servers of a configuration in the format Claude Desktop and others keep
    (``{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"], "env": {...}}}}``): a
    server has a ``command`` (with ``args``, ``env``, ``cwd``) or a ``url`` (with ``headers``); ours
    may also set a ``prefix``; one with ``"disabled": true`` is left out. The key is the server's name.

    Raises:
        ValueError: a configuration of another shape; the message names the server and the key.
    """
    entries = config.get("mcpServers") if isinstance(config, Mapping) else None
    if not isinstance(entries, Mapping):
        raise ValueError('an MCP configuration is an object with "mcpServers": {"NAME": {"command": ...}}')
    servers: list[StdioServer | HttpServer] = []
    for name, entry in entries.items():
        where = f"mcpServers.{name}"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where} must be an object with a command or a url")
        if entry.get("disabled") is True:
            continue
        prefix = _strings(entry, "prefix", where) or ""
        if isinstance(entry.get("url"), str) and "command" not in entry:
            servers.append(HttpServer(url=entry["url"], headers=_mapping(entry, "headers", where), name=name,
                                      prefix=str(prefix)))  # fmt: skip
            continue
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ValueError(f'{where} needs a "command" (a program to run) or a "url"')
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError(f"{where}.args must be a list of strings")
        servers.append(StdioServer(command=command, args=tuple(args), env=_mapping(entry, "env", where),
                                   cwd=_strings(entry, "cwd", where), name=name, prefix=str(prefix)))  # fmt: skip
    return servers


def _strings(entry: Mapping[str, Any], key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}.{key} must be a string")
    return value


def _mapping(entry: Mapping[str, Any], key: str, where: str) -> dict[str, str] | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"{where}.{key} must be an object of strings")
    return {str(k): v for k, v in value.items()}


__all__ = ["HttpServer", "LocalServer", "ServerSpec", "StdioServer", "as_server", "servers_from_config"]
