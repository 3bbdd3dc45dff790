"""How the first call's accuracy falls as an MCP run offers more tools, with and without ``ToolCut``.

    python -m benchmarks.mcp_tools --model qwen2.5-coder-0.5b --counts 2,5,10,20,40
    python -m benchmarks.mcp_tools --quick          # 3 requests at 2 and 40 tools: a smoke check

Issue 47, item 5. The tools are those of real MCP servers (time, git, filesystem, fetch, memory,
sqlite), written out here as the servers list them (names, descriptions, input schemas as
``shapeloop.mcp`` normalises them), so no server is needed. Each request has one right tool and the
arguments that matter; at each count the request's tool is offered among distractors drawn with a
fixed seed from the other servers' tools, in a seeded order. One step is asked (``max_steps=1``): the
first call is right when it names the right tool with the right arguments (strings compared without
case; a value in a tuple is any of them). Each column runs the same offers: ``plain`` (the plain loop)
and ``tool-cut`` (``ToolCut(window=ctx)``); where the cut does not apply at a count (the
documentation fits), the request is the plain one, so its record is plain's, marked ``"cut":
false``, not run again. Writes ``measurements/mcp_tools/<model>.json`` with every
record (written after each one: ``--resume`` goes on from a stopped run), the documentation's
estimated tokens and the prompt's real tokens at each count.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from benchmarks.common import MEASUREMENTS, model_info, write
from shapeloop import Tool, backends, run_agent
from shapeloop.events import ReplyReceived, ToolCalled
from shapeloop.policies.tool_cut import ToolCut, documentation_tokens

S, I = {"type": "string"}, {"type": "integer"}  # noqa: E741 - the two types every schema here uses

# (server, name, description, properties, required): as the servers list them (2026.10.x releases)
SPECS: list[tuple[str, str, str, dict[str, Any], list[str]]] = [
    ("time", "get_current_time", "Get current time in a specific timezones", {"timezone": S}, ["timezone"]),
    ("time", "convert_time", "Convert time between timezones",
     {"source_timezone": S, "time": S, "target_timezone": S}, ["source_timezone", "time", "target_timezone"]),
    ("git", "git_status", "Shows the working tree status", {"repo_path": S}, ["repo_path"]),
    ("git", "git_diff_unstaged", "Shows changes in the working directory that are not yet staged",
     {"repo_path": S, "context_lines": I}, ["repo_path"]),
    ("git", "git_diff_staged", "Shows changes that are staged for commit", {"repo_path": S, "context_lines": I},
     ["repo_path"]),
    ("git", "git_diff", "Shows differences between branches or commits",
     {"repo_path": S, "target": S, "context_lines": I}, ["repo_path", "target"]),
    ("git", "git_commit", "Records changes to the repository", {"repo_path": S, "message": S},
     ["repo_path", "message"]),
    ("git", "git_add", "Adds file contents to the staging area",
     {"repo_path": S, "files": {"type": "array", "items": S}}, ["repo_path", "files"]),
    ("git", "git_reset", "Unstages all staged changes", {"repo_path": S}, ["repo_path"]),
    ("git", "git_log", "Shows the commit logs",
     {"repo_path": S, "max_count": I, "start_timestamp": S, "end_timestamp": S}, ["repo_path"]),
    ("git", "git_create_branch", "Creates a new branch from an optional base branch",
     {"repo_path": S, "branch_name": S, "base_branch": S}, ["repo_path", "branch_name"]),
    ("git", "git_checkout", "Switches branches", {"repo_path": S, "branch_name": S}, ["repo_path", "branch_name"]),
    ("git", "git_show", "Shows the contents of a commit, or of a file or directory given as <revision>:<path>",
     {"repo_path": S, "revision": S}, ["repo_path", "revision"]),
    ("git", "git_branch", "List Git branches",
     {"repo_path": S, "branch_type": S, "contains": S, "not_contains": S}, ["repo_path", "branch_type"]),
    ("filesystem", "read_text_file", "Read the complete contents of a file from the file system as text.",
     {"path": S, "head": I, "tail": I}, ["path"]),
    ("filesystem", "write_file", "Create a new file or completely overwrite an existing file with new content.",
     {"path": S, "content": S}, ["path", "content"]),
    ("filesystem", "create_directory", "Create a new directory or ensure a directory exists.", {"path": S}, ["path"]),
    ("filesystem", "list_directory", "Get a detailed listing of all files and directories in a specified path.",
     {"path": S}, ["path"]),
    ("filesystem", "directory_tree", "Get a recursive tree view of files and directories as a JSON structure.",
     {"path": S}, ["path"]),
    ("filesystem", "move_file", "Move or rename files and directories.", {"source": S, "destination": S},
     ["source", "destination"]),
    ("filesystem", "search_files", "Recursively search for files and directories matching a pattern.",
     {"path": S, "pattern": S}, ["path", "pattern"]),
    ("filesystem", "get_file_info", "Retrieve detailed metadata about a file or directory.", {"path": S}, ["path"]),
    ("filesystem", "list_allowed_directories", "Returns the list of directories that this server is allowed to "
     "access.", {}, []),
    ("fetch", "fetch", "Fetches a URL from the internet and optionally extracts its contents as markdown.",
     {"url": S, "max_length": I, "start_index": I, "raw": {"type": "boolean"}}, ["url"]),
    ("memory", "create_entities", "Create multiple new entities in the knowledge graph",
     {"entities": {"type": "array", "items": {"type": "object", "properties": {
         "name": S, "entityType": S, "observations": {"type": "array", "items": S}}}}}, ["entities"]),
    ("memory", "create_relations", "Create multiple new relations between entities in the knowledge graph",
     {"relations": {"type": "array", "items": {"type": "object", "properties": {
         "from": S, "to": S, "relationType": S}}}}, ["relations"]),
    ("memory", "add_observations", "Add new observations to existing entities in the knowledge graph",
     {"observations": {"type": "array", "items": {"type": "object", "properties": {
         "entityName": S, "contents": {"type": "array", "items": S}}}}}, ["observations"]),
    ("memory", "delete_entities", "Delete multiple entities and their associated relations from the knowledge "
     "graph", {"entityNames": {"type": "array", "items": S}}, ["entityNames"]),
    ("memory", "read_graph", "Read the entire knowledge graph", {}, []),
    ("memory", "search_nodes", "Search for nodes in the knowledge graph based on a query", {"query": S}, ["query"]),
    ("memory", "open_nodes", "Open specific nodes in the knowledge graph by their names",
     {"names": {"type": "array", "items": S}}, ["names"]),
    ("sqlite", "read_query", "Execute a SELECT query on the SQLite database", {"query": S}, ["query"]),
    ("sqlite", "write_query", "Execute an INSERT, UPDATE, or DELETE query on the SQLite database", {"query": S},
     ["query"]),
    ("sqlite", "create_table", "Create a new table in the SQLite database", {"query": S}, ["query"]),
    ("sqlite", "list_tables", "List all tables in the SQLite database", {}, []),
    ("sqlite", "describe_table", "Get the schema information for a specific table", {"table_name": S},
     ["table_name"]),
    ("github", "search_repositories", "Search for GitHub repositories", {"query": S, "page": I, "perPage": I},
     ["query"]),
    ("github", "create_issue", "Create a new issue in a GitHub repository",
     {"owner": S, "repo": S, "title": S, "body": S}, ["owner", "repo", "title"]),
    ("github", "list_issues", "List issues in a GitHub repository with filtering options",
     {"owner": S, "repo": S, "state": S}, ["owner", "repo"]),
    ("github", "get_file_contents", "Get the contents of a file or directory from a GitHub repository",
     {"owner": S, "repo": S, "path": S, "branch": S}, ["owner", "repo", "path"]),
]  # fmt: skip

# (request, the right tool, the arguments that must be given: a tuple is any of its values; None: any value)
REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("What time is it in Tokyo?", "get_current_time", {"timezone": "Asia/Tokyo"}),
    ("Convert 16:30 New York time to London time.", "convert_time",
     {"source_timezone": "America/New_York", "time": "16:30", "target_timezone": "Europe/London"}),
    ("Show me the last 3 commits of the repository at /srv/app.", "git_log", {"repo_path": "/srv/app", "max_count": 3}),
    ("What is the status of the git repository at /srv/app?", "git_status", {"repo_path": "/srv/app"}),
    ("Create a branch called feature-x in the repository at /srv/app.", "git_create_branch",
     {"repo_path": "/srv/app", "branch_name": "feature-x"}),
    ("Show the commit abc123 in the repository at /srv/app.", "git_show",
     {"repo_path": "/srv/app", "revision": "abc123"}),
    ("Read the file /data/notes.txt.", "read_text_file", {"path": "/data/notes.txt"}),
    ("List what is in the folder /data.", "list_directory", {"path": "/data"}),
    ("Rename /data/a.txt to /data/b.txt.", "move_file", {"source": "/data/a.txt", "destination": "/data/b.txt"}),
    ("Make a new directory /data/archive.", "create_directory", {"path": "/data/archive"}),
    ("Fetch https://example.org and tell me what it says.", "fetch", {"url": ("https://example.org",
                                                                            "https://example.org/")}),
    ("Which tables are in the database?", "list_tables", {}),
    ("Describe the columns of the orders table.", "describe_table", {"table_name": "orders"}),
    ("Search my memory for anything about Bob.", "search_nodes", {"query": "Bob"}),
    ("Open an issue titled 'Crash on start' in octo/widgets on GitHub.", "create_issue",
     {"owner": "octo", "repo": "widgets", "title": "Crash on start"}),
    ("Find GitHub repositories about llama.cpp.", "search_repositories", {"query": None}),
]  # fmt: skip
QUICK = [0, 6, 11]


def tools_of(names: list[str]) -> list[Tool]:
    """The named tools as ``shapeloop.mcp`` would make them: closed schemas; each answers ``ok``."""
    by_name = {spec[1]: spec for spec in SPECS}
    made = []
    for name in names:
        _, _, description, properties, required = by_name[name]
        schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
        made.append(Tool(name=name, description=description, parameters=schema, fn=lambda **args: "ok"))
    return made


def offer(index: int, count: int, seed: int) -> list[str]:
    """The request's tool among ``count - 1`` others, drawn and ordered with a fixed seed; tools of the
    same server as the right one come first (they are the ones it is mistaken for)."""
    right = REQUESTS[index][1]
    draw = random.Random(f"{seed}-{index}")
    server = next(spec[0] for spec in SPECS if spec[1] == right)
    near = [spec[1] for spec in SPECS if spec[0] == server and spec[1] != right]
    far = [spec[1] for spec in SPECS if spec[0] != server]
    draw.shuffle(near)
    draw.shuffle(far)
    chosen = [right, *(near + far)[: max(0, count - 1)]]
    draw.shuffle(chosen)
    return chosen


def judge(call: Any, right: str, wanted: dict[str, Any]) -> tuple[bool, bool]:
    """(right tool, right tool and arguments) of a first call, or of no call (None)."""
    if call is None or call.tool != right:
        return False, False
    for key, value in wanted.items():
        given = call.args.get(key)
        options = value if isinstance(value, tuple) else (value,)
        if given is None or (value is not None and str(given).casefold() not in {str(o).casefold() for o in options}):
            return True, False
    return True, True


def run_one(brain: Any, index: int, count: int, column: str, ctx: int, seed: int) -> dict[str, Any]:
    request, right, wanted = REQUESTS[index]
    names = offer(index, count, seed)
    tools = tools_of(names)
    chosen = (ToolCut(window=ctx),) if column == "tool-cut" else ()
    start = time.monotonic()
    run = run_agent(brain, tools, request, max_steps=1, policies=chosen)
    calls = [e.call for e in run.events if isinstance(e, ToolCalled)]
    replies = [e for e in run.events if isinstance(e, ReplyReceived)]
    tool_right, args_right = judge(calls[0] if calls else None, right, wanted)
    return {
        "request": index, "count": count, "column": column, "right": right, "offered": names,
        "doc_tokens": documentation_tokens(tools),
        "prompt_tokens": replies[0].usage.prompt_tokens if replies and replies[0].usage else None,
        "call": None if not calls else {"tool": calls[0].tool, "args": dict(calls[0].args)},
        "tool_right": tool_right, "args_right": args_right, "seconds": round(time.monotonic() - start, 2),
        "cut": column == "tool-cut" and cuts(index, count, ctx, seed),
    }  # fmt: skip


def cuts(index: int, count: int, ctx: int, seed: int) -> bool:
    """Whether ``ToolCut(window=ctx)`` shapes this offer's steps at all."""
    policy = ToolCut(window=ctx).for_run(REQUESTS[index][0], tools_of(offer(index, count, seed)))
    return policy._ranker is not None


def reuse(records: list[dict[str, Any]], index: int, count: int, column: str, ctx: int, seed: int) -> dict | None:
    """Plain's record for a ``tool-cut`` offer the cut leaves alone (the same request), else None."""
    if column != "tool-cut" or cuts(index, count, ctx, seed):
        return None
    plain = next((r for r in records if (r["request"], r["count"], r["column"]) == (index, count, "plain")), None)
    return None if plain is None else {**plain, "column": "tool-cut", "cut": False}


def summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for column in dict.fromkeys(r["column"] for r in records):
        for count in sorted({r["count"] for r in records}):
            here = [r for r in records if r["column"] == column and r["count"] == count]
            if not here:  # a partial run (written after each record) has not reached it yet
                continue
            prompts = [r["prompt_tokens"] for r in here if r["prompt_tokens"] is not None]
            rows.append({
                "column": column, "count": count, "requests": len(here),
                "tool_right": sum(r["tool_right"] for r in here), "args_right": sum(r["args_right"] for r in here),
                "doc_tokens": max(r["doc_tokens"] for r in here),
                "prompt_tokens_max": max(prompts) if prompts else None,
            })  # fmt: skip
    return rows


def earlier(path: Path, ctx: int, seed: int, backend: str = "llamacpp") -> list[dict[str, Any]]:
    """The records of an earlier run written to ``path`` on the same backend with the same window and
    seed; none otherwise."""
    if not path.is_file():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    same = (data.get("ctx"), data.get("seed"), data.get("backend", "llamacpp")) == (ctx, seed, backend)
    return list(data.get("records") or []) if same else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--backend", default="llamacpp")
    parser.add_argument("--base-url")
    parser.add_argument("--counts", default="2,5,10,20,40", help="tools offered, comma-separated (at most 40)")
    parser.add_argument("--columns", default="plain,tool-cut")
    parser.add_argument("--ctx", type=int, default=4096, help="the model's window, and ToolCut's")
    parser.add_argument("--seed", type=int, default=47)
    parser.add_argument("--threads", type=int, help="llamacpp CPU threads (default: all cores; 1 beside other work)")
    parser.add_argument("--quick", action="store_true", help="3 requests at 2 and 40 tools (the cut applies at 40)")
    parser.add_argument("--out", type=Path, default=MEASUREMENTS / "mcp_tools")
    parser.add_argument("--resume", action="store_true", help="keep the records already written (same --ctx and "
                        "--seed) and run only what is missing")  # fmt: skip
    args = parser.parse_args(argv)
    counts = [2, len(SPECS)] if args.quick else [int(c) for c in args.counts.split(",")]
    if any(not 1 <= c <= len(SPECS) for c in counts):
        parser.error(f"--counts: each count is 1 to {len(SPECS)}")
    columns = args.columns.split(",")
    if set(columns) - {"plain", "tool-cut"}:
        parser.error("--columns: plain, tool-cut")
    indexes = QUICK if args.quick else list(range(len(REQUESTS)))
    context = args.ctx if args.backend == "llamacpp" else None
    threads = {"n_threads": args.threads} if args.threads and args.backend == "llamacpp" else {}
    name = f"{args.model.replace('/', '_').replace(':', '_')}{'-quick' if args.quick else ''}"
    records = earlier(args.out / f"{name}.json", args.ctx, args.seed, args.backend) if args.resume else []
    done = {(r["request"], r["count"], r["column"]) for r in records}

    def save() -> Path:  # after every record: a stopped run keeps what it measured (--resume goes on from it)
        shown = sorted({r["count"] for r in records})
        return write(name, {"benchmark": "mcp_tools", "model": model_info(args.model), "backend": args.backend,
                            "ctx": args.ctx, "seed": args.seed, "counts": shown, "columns": columns,
                            "summary": summary(records), "records": records}, folder=args.out)  # fmt: skip

    brain = backends.create(args.backend, args.model, base_url=args.base_url, context=context, **threads)
    with closing(brain):
        for count in counts:
            for column in columns:
                for index in indexes:
                    if (index, count, column) in done:
                        continue
                    record = reuse(records, index, count, column, args.ctx, args.seed)
                    record = record or run_one(brain, index, count, column, args.ctx, args.seed)
                    records.append(record)
                    save()
                    print(f"{count:>3} {column:<8} {record['right']:<20} {record['call']}", file=sys.stderr, flush=True)
    for row in summary(records):
        print(f"{row['column']:<8} {row['count']:>3} tools: tool {row['tool_right']}/{row['requests']}, "
              f"args {row['args_right']}/{row['requests']}, docs ~{row['doc_tokens']} tokens")  # fmt: skip
    print(f"wrote {save()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
