"""The command line: ``shapeloop run``, ``chat``, ``pull``, ``models`` and ``mcp list``. Thin: it parses,
calls the library, prints."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import stat
import sys
import urllib.parse
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, NoReturn

from shapeloop import __version__, backends, cli_mcp, models, policies
from shapeloop.agent import run_agent
from shapeloop.brain import Brain, ScriptedBrain
from shapeloop.errors import ShapeloopError, UsageError
from shapeloop.events import ConsoleSink
from shapeloop.limits import Limits, json_decoder
from shapeloop.output import typed_answer
from shapeloop.run import AgentRun, StopReason
from shapeloop.settings import RunSettings
from shapeloop.text import json_text, printable, to_json
from shapeloop.toolbox import Approver
from shapeloop.tools import Tool, ToolCall
from shapeloop.workspace import workspace_tools

EXIT_OK, EXIT_STOPPED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except _BadArguments as exc:
        print(f"shapeloop: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.command(args))
    except (ShapeloopError, FileNotFoundError, NotADirectoryError) as exc:
        print(f"shapeloop: error: {printable(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("shapeloop: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


class _BadArguments(Exception):
    """What argparse would print before exiting, raised instead so it makes one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        if message == "argument --policies: expected one argument":  # argparse took "-NAME" for an option
            message += ": a value that starts with '-' takes '=' (--policies=default,-NAME: the default less NAME)"
        raise _BadArguments(f"{message} (see `{self.prog} --help`)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="shapeloop", description="Small local models doing real work through tools.")
    parser.add_argument("--version", action="version", version=f"shapeloop {__version__}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run one task in a workspace and print the answer")
    run.add_argument("task", help="what to do, in words")
    _agent_options(run)
    run.add_argument("--json", action="store_true", help="print one JSON object for the whole run (for scripts)")
    run.add_argument(
        "--output-schema",
        metavar="FILE.json",
        help="a JSON schema the answer must match; the answer is printed as JSON",
    )
    run.set_defaults(command=_cmd_run)

    chat = commands.add_parser("chat", help="an interactive agent that keeps the conversation across tasks")
    _agent_options(chat)
    chat.set_defaults(command=_cmd_chat)

    pull = commands.add_parser("pull", help="fetch a catalogue model, verify its sha256 and cache it")
    pull.add_argument("name", choices=list(models.CATALOGUE), metavar="NAME", help=", ".join(models.CATALOGUE))
    pull.add_argument("--force", action="store_true", help="pull again even if it is cached")
    pull.set_defaults(command=_cmd_pull)

    listing = commands.add_parser("models", help="list the catalogue and what is pulled")
    listing.set_defaults(command=_cmd_models)

    served = commands.add_parser("mcp", help="look at an MCP server's tools")
    actions = served.add_subparsers(required=True, metavar="ACTION")
    listed = actions.add_parser("list", help="start an MCP server and print its tools with their annotations")
    listed.add_argument("server", help='the server: a command line ("mcp-server-time") or an http(s):// URL')
    listed.set_defaults(command=cli_mcp.cmd_list)
    return parser


def _agent_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", required=True, help="the workspace folder the tools may read")
    parser.add_argument(
        "--backend",
        choices=backends.names(),
        default="llamacpp",
        help="llamacpp: in-process, the default; ollama: an Ollama server; openai: any OpenAI-compatible "
        "server; instructor: instructor over an OpenAI-compatible server; or one an installed package "
        f"registers ({backends.ENTRY_POINT_GROUP!r} entry points)",
    )
    parser.add_argument(
        "--model",
        help=f"llamacpp: a catalogue name or .gguf path (default {models.DEFAULT_MODEL}, pulled on first use); "
        "other backends: the server's model name (required)",
    )
    parser.add_argument("--base-url", help="the server: Ollama's host, or the OpenAI-compatible API root (…/v1)")
    parser.add_argument(
        "--mode",
        choices=["constrained", "prose", "native"],
        default="constrained",
        help="how steps are asked for (default constrained; native uses the backend's own tool calls)",
    )
    parser.add_argument("--max-steps", type=int, default=12, help="steps before giving up (default 12)")
    parser.add_argument(
        "--policies",
        default="default",
        help="the help the loop gives the model: plain (none), default, or names joined by commas "
        f"({', '.join(policies.available())}; --policies=default,-NAME takes one out of the default)",
    )
    parser.add_argument("--ctx", type=int, default=8192, help="context window in tokens (default 8192)")
    gate = parser.add_mutually_exclusive_group()
    gate.add_argument("--approve", action="store_true", default=None, help="allow acting tools without asking")
    gate.add_argument("--no-approve", dest="approve", action="store_false", help="deny acting tools without asking")
    parser.add_argument("--write", action="store_true", help="also offer append_note (an acting tool)")
    parser.add_argument("--transcript", metavar="FILE", help="write the transcript here as JSON Lines")
    cli_mcp.add_options(parser)
    parser.add_argument("--script", metavar="FILE", help=argparse.SUPPRESS)  # JSON list of replies, for tests


def _cmd_run(args: argparse.Namespace) -> int:
    if _refused(_problems(args, task=args.task)):
        return EXIT_USAGE
    output_schema = _output_schema(args.output_schema)
    tools = workspace_tools(args.root, write=args.write)
    sink = None if args.json else ConsoleSink()
    with cli_mcp.served(args, tools) as served, closing(_load_brain(args)) as brain:
        tools = [*tools, *served]
        settings = _settings(args, tools, on_event=sink, output_type=output_schema)
        run = run_agent(brain, tools, args.task, settings=settings, transcript_path=args.transcript)
    if args.json:
        model = args.model or models.DEFAULT_MODEL
        record = {"backend": args.backend, "model": model, **run.to_dict()}
        try:
            print(to_json(record))
        except UnicodeEncodeError:  # standard output is not UTF-8: JSON's escapes say the same in ASCII
            print(json_text(record, ensure_ascii=True))
    elif run.ok:
        _print_answer(printable(run.answer or ""))
    return _exit_status(run)


def _print_answer(text: str) -> None:
    """Print an answer; one that standard output's encoding cannot hold is a usage error, not a traceback."""
    try:
        print(text)
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"the answer cannot be written to standard output in its encoding ({exc.encoding!r}): set "
            "PYTHONIOENCODING=utf-8, or use --json, which escapes it"
        ) from exc


def _output_schema(path: str | None) -> dict[str, Any] | None:
    """The JSON schema in ``--output-schema FILE``, checked before any model is loaded."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise UsageError(f"cannot read --output-schema {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"--output-schema {path} is not UTF-8 (byte 0x{exc.object[exc.start]:02x} at position {exc.start}): "
            "save it as UTF-8"
        ) from exc
    try:
        schema = json_decoder(Limits()).decode(text)
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"--output-schema {path} is not JSON: {exc}") from exc
    if not isinstance(schema, dict):
        raise UsageError(f"--output-schema {path} must hold a JSON schema (an object), not a {type(schema).__name__}")
    try:
        typed_answer(schema)
    except ValueError as exc:
        raise UsageError(f"--output-schema {path}: {' '.join(str(exc).split())}") from exc
    return schema


def _cmd_chat(args: argparse.Namespace) -> int:
    if _refused(_problems(args)):
        return EXIT_USAGE
    tools = workspace_tools(args.root, write=args.write)
    with cli_mcp.served(args, tools) as served, closing(_load_brain(args)) as brain:
        return _chat(args, brain, [*tools, *served])


def _chat(args: argparse.Namespace, brain: Brain, tools: list[Tool]) -> int:
    from shapeloop.conversation import Conversation, WindowTooSmall

    # the history gets what the window leaves after the system prompt (the tools) and a request's steps
    try:
        talk = Conversation(brain, tools, context_window=args.ctx, transcript_path=args.transcript,
                            settings=_settings(args, tools, on_event=ConsoleSink()))  # fmt: skip
    except WindowTooSmall as exc:
        raise UsageError(
            f"--ctx {exc.window}: the workspace tools' documentation alone takes {exc.taken} tokens of it, so no "
            "request fits: give the model's real window (a larger --ctx)"
        ) from exc
    model = args.model or models.DEFAULT_MODEL
    _say(f"shapeloop chat: {model} ({args.backend}) in {os.path.abspath(args.root)}. Type a task; Ctrl-D ends.")
    with closing(talk):
        while True:
            try:
                task = input("you> ").strip()
            except EOFError:
                print(file=sys.stderr)
                return EXIT_OK
            if task in ("exit", "quit"):
                return EXIT_OK
            if not task:
                continue
            turn = talk.ask(task)
            for marker in turn.cuts:
                _say(printable(marker))
            _print_answer(printable(turn.answer or "") if turn.ok else f"(no answer: {printable(turn.run.reason)})")


def _settings(args: argparse.Namespace, tools: Sequence[Tool], **fields: Any) -> RunSettings:
    """The run's settings the options of ``run`` and ``chat`` give, with ``fields`` beside them."""
    return RunSettings(max_steps=args.max_steps, mode=args.mode, approve=_approver(args.approve, tools),
                       policies=policies.resolve(args.policies), **fields)  # fmt: skip


def _cmd_pull(args: argparse.Namespace) -> int:
    models.pull(args.name, progress=_say, force=args.force)
    return EXIT_OK


def _cmd_models(args: argparse.Namespace) -> int:
    print(f"cache: {models.cache_dir()}  (set ${models.CACHE_ENV} to move it)")
    for entry in models.CATALOGUE.values():
        mark = "pulled" if models.is_pulled(entry.name) else "-"
        default = " (default)" if entry.name == models.DEFAULT_MODEL else ""
        # the policies its default run adds (--policies plain leaves them out)
        preset = f"; preset: {', '.join(entry.preset)}" if entry.preset else ""
        print(f"  {entry.name:<20} {entry.size / 1e6:>6.0f} MB  {mark:<7} {entry.title}{default}{preset}")
    return EXIT_OK


def _problems(args: argparse.Namespace, *, task: str | None = None) -> list[str]:
    """Every bad input, one sentence each, found before a model is loaded or pulled."""
    problems = []
    if task is not None and not task.strip():
        problems.append('the task is empty: say what to do, e.g. shapeloop run "Read notes.txt" --root .')
    if not args.root:
        problems.append("--root is empty: name the workspace folder, e.g. --root .")
    elif not os.path.isdir(args.root):
        problems.append(f"workspace root {args.root!r} is not a directory: create it or pass another --root")
    if args.max_steps < 1:
        problems.append(f"--max-steps must be 1 or more, not {args.max_steps}")
    try:
        policies.resolve(args.policies)
    except ValueError as exc:
        problems.append(f"--policies: {exc}")
    if args.ctx < 256:
        problems.append(f"--ctx must be at least 256 tokens, not {args.ctx}")
    if args.script and not os.path.isfile(args.script):
        problems.append(f"--script {args.script!r} is not a file")
    if getattr(args, "output_schema", None) is not None:
        try:
            _output_schema(args.output_schema)
        except UsageError as exc:
            problems.append(str(exc))
    if args.transcript is not None:
        problems += _transcript_problems(args.transcript)
    problems += cli_mcp.problems(args)
    if not problems and not args.script:  # the backend once the inputs are right: one line per bad input
        problems += _backend_problems(args)
    return [" ".join(printable(p).split()) for p in problems]


def _transcript_problems(path: str) -> list[str]:
    """Why ``--transcript`` cannot be written, found without creating it (the command may still
    exit before the run): what :func:`~shapeloop.jsonl.open_jsonl` would refuse."""
    why = None
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            why = f"its folder {folder!r} does not exist"
        elif not os.access(folder, os.W_OK):
            why = f"its folder {folder!r} is not writable"
    except OSError as exc:
        why = exc.strerror or str(exc)
    else:
        if stat.S_ISLNK(info.st_mode):
            why = "it is a symlink"
        elif stat.S_ISDIR(info.st_mode):
            why = "it is a directory"
        elif not stat.S_ISREG(info.st_mode):
            why = "it is not a regular file"
        elif not os.access(path, os.W_OK):
            why = "it is not writable"
    if why is None:
        return []
    return [f"cannot write a transcript to {path!r}: {why}; name a file in a folder you can write"]


def _backend_problems(args: argparse.Namespace) -> list[str]:
    """What a built-in backend lacks: its extra, a model it can use, or a base URL it cannot."""
    if args.backend not in backends.BUILTIN:
        return []  # a package's backend checks its own inputs when it is made
    problems = []
    module, extra = _EXTRAS.get(args.backend, (None, None))
    if module is not None and importlib.util.find_spec(module) is None:
        problems.append(
            f"--backend {args.backend} needs the {extra!r} extra: pip install 'shapeloop[{extra}]'"
            + (" (with the README's build flags)" if extra == "local" else "")
        )
    if args.backend != "llamacpp":
        if not args.model:
            problems.append(f"the {args.backend} backend needs a model (--model): the name of a model the server has")
        url_problem = None if args.base_url is None else _base_url_problem(args.base_url, backend=args.backend)
        return problems + ([url_problem] if url_problem else [])
    if args.base_url is not None:
        problems.append("the llamacpp backend runs in this process and takes no base URL: drop --base-url")
    model = args.model or models.DEFAULT_MODEL
    if model not in models.CATALOGUE:
        try:
            if not os.path.isfile(model):
                models.lookup(model)
            models.check_gguf(Path(model))
        except ShapeloopError as exc:
            problems.append(str(exc))
    return problems


def _base_url_problem(url: str, *, backend: str) -> str | None:
    """Why ``--base-url`` names no server, or None: it does not parse, its port is out of range, or it
    lacks http(s):// or a host (Ollama alone takes a bare ``HOST:PORT``)."""
    shown = f"--base-url {url!r}"
    example = "http://127.0.0.1:11434" if backend == "ollama" else "http://127.0.0.1:8000/v1"
    written = f"http://{url}" if backend == "ollama" and "://" not in url else url
    try:
        parts = urllib.parse.urlsplit(written)
        parts.port  # noqa: B018 - reading it checks it: a port that is not a number from 0 to 65535 raises
    except ValueError as exc:
        return f"{shown} is not a URL ({exc}): write it as {example}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{shown} needs http:// or https:// and a host, as in {example}"
    return None


# backend: (the module it imports, the extra that installs it)
_EXTRAS = {
    "llamacpp": ("llama_cpp", "local"),
    "ollama": ("ollama", "ollama"),
    "instructor": ("instructor", "instructor"),
}


def _refused(problems: list[str]) -> bool:
    for problem in problems:
        print(f"shapeloop: error: {problem}", file=sys.stderr)
    return bool(problems)


def _load_brain(args: argparse.Namespace) -> Brain:
    if args.script:
        with open(args.script, encoding="utf-8") as handle:
            replies: list[Any] = json.load(handle)
        return ScriptedBrain([r if isinstance(r, str) else json.dumps(r) for r in replies])
    return backends.create(args.backend, args.model, base_url=args.base_url, context=args.ctx, progress=_say)


def _approver(choice: bool | None, tools: Sequence[Tool] = ()) -> Approver:
    """``--approve``: yes; ``--no-approve``: no; neither: ask on a terminal, deny without one. The
    question says what an MCP server claims of its tool (``destructiveHint``)."""
    if choice is True:
        return lambda call: True
    if choice is False:
        return lambda call: "denied by --no-approve"
    if not sys.stdin.isatty():
        return lambda call: "no terminal to ask for approval; rerun with --approve to allow it"
    notes = cli_mcp.approval_notes(tools)
    return lambda call: _ask_terminal(call, notes.get(call.tool))


def _ask_terminal(call: ToolCall, note: str | None = None) -> bool | str:
    said = f" ({printable(note)})" if note else ""
    try:
        answer = input(f"Allow {printable(str(call))}{said}? [y/N] ").strip().lower()
    except EOFError:
        answer = ""
    return True if answer in ("y", "yes") else "the user said no"


def _exit_status(run: AgentRun) -> int:
    if run.ok:
        return EXIT_OK
    print(f"shapeloop: {run.stop.value}: {printable(run.reason)}", file=sys.stderr)
    return EXIT_INTERRUPTED if run.stop is StopReason.INTERRUPTED else EXIT_STOPPED


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
