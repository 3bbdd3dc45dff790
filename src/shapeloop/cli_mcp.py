"""The command line's MCP options (``--mcp``, ``--mcp-http``, ``--mcp-config``, ``--mcp-restarts``) and
``shapeloop mcp list``: the servers read from the options, checked before anything starts, and
started around a run."""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from shapeloop.errors import UsageError
from shapeloop.limits import Limits, json_decoder
from shapeloop.text import printable
from shapeloop.tools import Tool


def add_options(parser: argparse.ArgumentParser) -> None:
    """The MCP options of ``run`` and ``chat``."""
    parser.add_argument(
        "--mcp",
        action="append",
        metavar="COMMAND",
        help='also offer the tools of the MCP server this command line starts ("mcp-server-time"; repeatable)',
    )
    parser.add_argument(
        "--mcp-http", action="append", metavar="URL", help="also offer the tools of the MCP server at this URL"
    )
    parser.add_argument(
        "--mcp-config", metavar="FILE", help='the MCP servers of a JSON file in Claude Desktop\'s "mcpServers" format'
    )
    parser.add_argument(
        "--mcp-restarts", type=int, default=0, metavar="N",
        help="start an MCP server that dies again, up to N times (default 0: its tools then say it is gone)",
    )  # fmt: skip


def specs(args: argparse.Namespace) -> list[Any]:
    """The MCP servers ``--mcp``, ``--mcp-http`` and ``--mcp-config`` name, read without starting any.

    Raises:
        UsageError: a command line that does not split, a URL without http(s)://, a configuration
            that cannot be read or is not of the ``mcpServers`` shape.
    """
    from shapeloop import mcp

    named: list[Any] = []
    for line in args.mcp or ():
        try:
            named.append(mcp.StdioServer.parse(line))
        except ValueError as exc:
            raise UsageError(f"--mcp {line!r}: {exc}") from exc
    for url in args.mcp_http or ():
        if not url.strip().lower().startswith(("http://", "https://")):
            raise UsageError(f"--mcp-http {url!r} is not a URL: write it as http://127.0.0.1:8000/mcp")
        named.append(mcp.HttpServer(url=url.strip()))
    if args.mcp_config is not None:
        try:
            with open(args.mcp_config, encoding="utf-8") as handle:
                config = json_decoder(Limits()).decode(handle.read())
        except OSError as exc:
            raise UsageError(f"cannot read --mcp-config {args.mcp_config}: {exc.strerror or exc}") from exc
        except (ValueError, RecursionError) as exc:  # not UTF-8 or not JSON
            raise UsageError(f"--mcp-config {args.mcp_config} is not JSON: {exc}") from exc
        try:
            named += mcp.servers_from_config(config)
        except ValueError as exc:
            raise UsageError(f"--mcp-config {args.mcp_config}: {exc}") from exc
    return named


def problems(args: argparse.Namespace) -> list[str]:
    """Why the MCP options cannot work, found before any server starts or model loads."""
    if not _named(args):
        return []
    if importlib.util.find_spec("mcp") is None:
        return ["--mcp, --mcp-http and --mcp-config need the 'mcp' extra: pip install 'shapeloop[mcp]'"]
    if args.mcp_restarts < 0:
        return [f"--mcp-restarts must be 0 or more, not {args.mcp_restarts}"]
    try:
        specs(args)
    except UsageError as exc:
        return [str(exc)]
    return []


@contextmanager
def served(args: argparse.Namespace, tools: Sequence[Tool]) -> Iterator[list[Tool]]:
    """The tools of the MCP servers the options name, started before the model loads and stopped after."""
    if not _named(args):
        yield []
        return
    from shapeloop.mcp import mcp_tools

    taken = {t.name for t in tools}
    with mcp_tools(*specs(args), restarts=args.mcp_restarts) as found:
        for made in found:
            if made.name in taken:
                raise UsageError(
                    f"MCP server {made.server!r} has a tool named {made.name!r}, as the workspace has: give the server "
                    'a prefix in an --mcp-config file ("prefix": "mcp_")'
                )
        yield list(found)


def approval_notes(tools: Sequence[Tool]) -> dict[str, str]:
    """What each MCP server claims of its tools, by tool name, for the approval question."""
    if importlib.util.find_spec("mcp") is None:
        return {}
    from shapeloop.mcp import MCPTool

    return {t.name: t.approval_note() for t in tools if isinstance(t, MCPTool)}


def cmd_list(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("mcp") is None:
        raise UsageError("shapeloop mcp needs the 'mcp' extra: pip install 'shapeloop[mcp]'")
    from shapeloop import mcp

    try:
        spec = mcp.as_server(args.server)
    except ValueError as exc:
        raise UsageError(f"{args.server!r}: {exc}") from exc
    with mcp.mcp_tools(spec) as found:
        print(f"{printable(spec.label)}: {len(found)} tool{'' if len(found) == 1 else 's'}")
        for made in found:
            print(f"  {printable(made.signature())}  [{mcp.hint_words(made)}]")
            print(f"      {printable(made.description)}")
    return 0


def _named(args: argparse.Namespace) -> bool:
    """Whether the options name any MCP server."""
    return bool(args.mcp or args.mcp_http or args.mcp_config is not None)
