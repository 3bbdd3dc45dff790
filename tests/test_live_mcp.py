"""Live tests: real MCP servers from PyPI (mcp-server-time, mcp-server-git) over stdio, an SDK server
over streamable HTTP on loopback, a server killed in the middle of a run, and the embedded 0.5B model
answering through both servers.

CI installs the servers into their own environment (``.venv-mcp``) and points ``SHAPELOOP_MCP_BIN``
at its ``bin``; without it the servers are looked for on ``PATH``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import zoneinfo
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="LIVE TEST SKIPPED: the mcp extra is not installed (pip install 'shapeloop[mcp]')")

from helpers import need_model
from shapeloop import ScriptedBrain, StopReason, run_agent
from shapeloop.events import ToolCalled, ToolReturned
from shapeloop.mcp import HttpServer, ServerUnavailable, StdioServer, mcp_tools
from shapeloop.policies import resolve
from shapeloop.toolbox import Toolbox, ToolStatus
from shapeloop.tools import ToolCall

pytestmark = pytest.mark.live
_INSTALL = (
    "python3 -m venv .venv-mcp && .venv-mcp/bin/pip install mcp-server-time mcp-server-git && "
    "export SHAPELOOP_MCP_BIN=$PWD/.venv-mcp/bin"
)


def _binary(name: str) -> str:
    """The server's executable, or a loud skip saying how to install it."""
    folder = os.environ.get("SHAPELOOP_MCP_BIN")
    found = shutil.which(name, path=folder) if folder else None
    found = found or shutil.which(name)
    if found is None:
        pytest.skip(f"LIVE TEST SKIPPED: {name} is not installed ({_INSTALL})")
    return found


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with two commits; the last changes greeting.txt."""
    if shutil.which("git") is None:
        pytest.skip("LIVE TEST SKIPPED: git is not installed")
    path = tmp_path / "repo"
    path.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.org"}  # fmt: skip

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (path / "greeting.txt").write_text("Hello, world\n")
    (path / "notes.md").write_text("# Notes\n")
    git("add", ".")
    git("commit", "-q", "-m", "First version")
    (path / "greeting.txt").write_text("Hello, Tokyo\n")
    git("commit", "-q", "-am", "Greet Tokyo instead of the world")
    return path


def test_time_server_over_stdio() -> None:
    with mcp_tools(StdioServer(command=_binary("mcp-server-time"), args=("--local-timezone", "UTC"))) as tools:
        by_name = {t.name: t for t in tools}
        assert set(by_name) == {"get_current_time", "convert_time"}
        assert all(t.read_only and not t.needs_approval for t in tools)
        box = Toolbox(tools)
        result = box.run(ToolCall(tool="get_current_time", args={"timezone": "Asia/Tokyo"}))
        assert result.status is ToolStatus.OK
        said = json.loads(result.text)
        assert said["timezone"] == "Asia/Tokyo"
        tokyo = datetime.now(zoneinfo.ZoneInfo("Asia/Tokyo"))
        assert abs((datetime.fromisoformat(said["datetime"]) - tokyo).total_seconds()) < 120
        wrong = box.run(ToolCall(tool="get_current_time", args={"timezone": "Mars/Olympus"}))
        assert wrong.status is ToolStatus.ERROR and "Mars/Olympus" in wrong.text, wrong.text
        assert box.run(ToolCall(tool="get_current_time", args={})).text.startswith("ERROR: invalid arguments")


def test_git_server_over_stdio_on_a_temporary_repository(repo: Path) -> None:
    with mcp_tools(StdioServer(command=_binary("mcp-server-git"), args=("--repository", str(repo)))) as tools:
        by_name = {t.name: t for t in tools}
        assert by_name["git_log"].read_only and not by_name["git_log"].needs_approval
        assert by_name["git_reset"].needs_approval and "DESTROY" in by_name["git_reset"].approval_note()
        assert by_name["git_commit"].needs_approval
        box = Toolbox(tools)
        log = box.run(ToolCall(tool="git_log", args={"repo_path": str(repo), "max_count": 1}))
        assert log.status is ToolStatus.OK and "Greet Tokyo instead of the world" in log.text
        shown = box.run(ToolCall(tool="git_show", args={"repo_path": str(repo), "revision": "HEAD"}))
        assert "-Hello, world" in shown.text and "+Hello, Tokyo" in shown.text
        refused = box.run(ToolCall(tool="git_reset", args={"repo_path": str(repo)}))
        assert refused.status is ToolStatus.DENIED


_HTTP_SERVER = """
import sys
from mcp.server import MCPServer
server = MCPServer("web")

@server.tool(description="Shout a word back.")
def shout(word: str) -> str:
    return word.upper() + "!"

server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
"""


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """An SDK server on streamable HTTP on a free loopback port; its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = tmp_path / "web.py"
    script.write_text(_HTTP_SERVER)
    log = (tmp_path / "web.log").open("w")
    process = subprocess.Popen([sys.executable, str(script), str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail(f"the HTTP server never listened: {(tmp_path / 'web.log').read_text()}")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
        log.close()


def test_a_server_over_streamable_http_on_loopback(http_server: str) -> None:
    with mcp_tools(HttpServer(url=http_server, headers={"X-Shapeloop-Test": "1"})) as tools:
        (shout,) = tools
        assert shout.name == "shout" and shout.needs_approval  # no annotations: it may act
        result = Toolbox(tools, approve=lambda call: True).run(ToolCall(tool="shout", args={"word": "hi"}))
        assert result.text == "HI!"


def test_a_server_killed_in_the_middle_of_a_run(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    # the shell writes its pid, then becomes the server (exec): that pid is the server's
    command = f'echo $$ > "{pid_file}"; exec "{_binary("mcp-server-time")}" --local-timezone UTC'
    step = {"reason": "r", "action": "tool", "tool": "get_current_time", "args": {"timezone": "Asia/Tokyo"},
            "answer": ""}  # fmt: skip
    replies = iter([json.dumps(step), "KILL", json.dumps(step), json.dumps(step)])

    def brain(messages: Any, schema: Any) -> str:
        reply = next(replies, None)
        if reply == "KILL":
            os.kill(int(pid_file.read_text()), 9)
            time.sleep(0.5)
            reply = json.dumps({**step, "args": {"timezone": "Europe/Paris"}})
        return reply or json.dumps({"reason": "r", "action": "answer", "tool": "", "args": {}, "answer": "unknown"})

    transcript = tmp_path / "run.jsonl"
    with mcp_tools(StdioServer(command="sh", args=("-c", command), name="time")) as tools:
        run = run_agent(ScriptedBrain(brain), tools, "What time is it in Tokyo?", transcript_path=transcript,
                        policies=())  # fmt: skip
    assert run.stop is StopReason.ANSWERED, run.reason
    texts = [(e.status, e.text) for e in run.events if isinstance(e, ToolReturned)]
    assert texts[0][0] is ToolStatus.OK and "Asia/Tokyo" in texts[0][1]
    assert texts[1][0] is ToolStatus.ERROR and texts[1][1].startswith("ERROR: MCP server 'time' stopped")
    assert texts[2][1].startswith("ERROR: MCP server 'time' is gone")
    lines = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert sum(1 for entry in lines if entry.get("kind") == "tool_result") == 4
    assert lines[-1].get("kind") == "stop"


def test_a_command_that_does_not_exist(tmp_path: Path) -> None:
    replies = tmp_path / "replies.json"
    replies.write_text('["{}"]')
    with pytest.raises(ServerUnavailable, match="there is no command 'mcp-server-that-is-not-there'"):
        mcp_tools("mcp-server-that-is-not-there")
    done = subprocess.run(
        [sys.executable, "-m", "shapeloop.cli", "run", "What time is it?", "--root", str(tmp_path),
         "--mcp", "mcp-server-that-is-not-there", "--script", str(replies)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "could not start: there is no command" in done.stderr


@pytest.fixture(scope="module")
def qwen():  # type: ignore[no-untyped-def]
    need_model("qwen2.5-coder-0.5b")
    from shapeloop.backends.llamacpp import LlamaCppBrain

    return LlamaCppBrain("qwen2.5-coder-0.5b", n_ctx=8192)


@pytest.mark.parametrize("policies", [None, "abstain"])
def test_the_model_tells_the_time_in_tokyo_through_the_time_server(qwen, policies: str | None) -> None:  # type: ignore[no-untyped-def]
    """The default, and ``abstain``: the 0.5B model leans to calling here by less than its margin (0.38
    on 2026-12-06, where the lean alone answered with a made-up time), so the time tool's fit decides."""

    def accept(answer: str) -> bool | str:
        now = datetime.now(zoneinfo.ZoneInfo("Asia/Tokyo"))
        hours = {f"{now.hour:02d}:", f"{(now.hour + 1) % 24:02d}:", f"{now.hour}:"}
        if any(hour in answer for hour in hours):
            return True
        return "Give the time in Tokyo as HH:MM, from what get_current_time returned for Asia/Tokyo."

    with mcp_tools(StdioServer(command=_binary("mcp-server-time"), args=("--local-timezone", "UTC"))) as tools:
        run = run_agent(qwen, tools, "What time is it in Tokyo?", accept_answer=accept, max_steps=6,
                        policies=resolve(policies))  # fmt: skip
    assert run.stop is StopReason.ANSWERED, run.reason
    calls = [e.call for e in run.events if isinstance(e, ToolCalled)]
    assert any(c.tool == "get_current_time" and c.args.get("timezone") == "Asia/Tokyo" for c in calls), calls


def test_the_model_says_what_changed_in_the_last_commit_through_the_git_server(qwen, repo: Path) -> None:  # type: ignore[no-untyped-def]
    def accept(answer: str) -> bool | str:
        if "greeting" in answer.lower() or "tokyo" in answer.lower():
            return True
        return "Say which file the last commit changed and how: git_show with revision HEAD shows it."

    server = StdioServer(command=_binary("mcp-server-git"), args=("--repository", str(repo)))
    with mcp_tools(server) as tools:
        run = run_agent(qwen, tools, "What changed in the last commit?", accept_answer=accept, max_steps=8,
                        system=f"The git repository is at {repo} (repo_path).")  # fmt: skip
    calls = [e.call for e in run.events if isinstance(e, ToolCalled)]
    assert any(c.tool in ("git_show", "git_log", "git_diff") for c in calls), calls
    assert [e for e in run.events if isinstance(e, ToolReturned) and e.call.tool.startswith("git_")]
    if run.stop is not StopReason.ANSWERED:
        # Seen on 2026-12-06 (0.5B and 1.5B alike): git_diff with target HEAD, an empty diff of the working
        # tree, then a made-up file; given only git_show, the right call made again and again.
        pytest.xfail(f"the 0.5B model did not answer through mcp-server-git: {run.reason} (calls: {calls})")
