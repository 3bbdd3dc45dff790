"""The workspace under attack, on real files: symlinks swapped by another process, hard links,
FIFOs, hidden paths, oversized appends, file names that are not UTF-8."""

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import answer_step, tool_step
from shapeloop import OutsideWorkspace, ScriptedBrain, ToolFailure, Workspace, run_agent, workspace_tools
from shapeloop.tools import Tool

SECRET = "top secret\n"


@pytest.fixture
def space(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "colour.txt").write_text("red\n")
    (outside / "secret.txt").write_text(SECRET)
    return root, outside


def tools(root: Path) -> dict[str, Tool]:
    return {t.name: t for t in workspace_tools(root, write=True)}


# The other process: for a bounded time, swap root/sub between a folder and a symlink to the outside
# folder, and root/file.txt between a file and a symlink to the outside secret.
SWAPPER = """
import os, sys, time
root, outside, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
os.chdir(root)
open("ready", "w").close()
end = time.monotonic() + seconds
while time.monotonic() < end:
    os.symlink(outside, "sub.link")
    os.rename("sub", "sub.real")
    os.rename("sub.link", "sub")
    os.rename("sub", "sub.link")
    os.rename("sub.real", "sub")
    os.unlink("sub.link")
    os.symlink(os.path.join(outside, "secret.txt"), "file.link")
    os.replace("file.link", "file.txt")
    with open("file.tmp", "w") as f:
        f.write("inside\\n")
    os.replace("file.tmp", "file.txt")
"""


def test_a_symlink_swapped_in_by_another_process_never_leads_out(space: tuple[Path, Path]) -> None:
    root, outside = space
    (root / "sub").mkdir()
    (root / "sub" / "note.txt").write_text("inside\n")
    (outside / "note.txt").write_text(SECRET)
    (root / "file.txt").write_text("inside\n")
    by_name = tools(root)
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(root), str(outside), "3"])
    try:
        deadline = time.monotonic() + 10
        while not (root / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        calls = 0
        while swapper.poll() is None:
            for path in ("sub/note.txt", "file.txt"):
                try:
                    text = by_name["read_file"](path=path)
                except ToolFailure:
                    continue
                assert SECRET not in text
            for path in ("sub/new.txt", "sub/note.txt", "file.txt"):
                with contextlib.suppress(ToolFailure):
                    by_name["append_note"](path=path, text="x")
            calls += 5
    finally:
        swapper.kill()
        swapper.wait()
    assert calls > 100  # the race was really run
    assert sorted(os.listdir(outside)) == ["note.txt", "secret.txt"]
    assert (outside / "secret.txt").read_text() == SECRET
    assert (outside / "note.txt").read_text() == SECRET


def test_a_hard_link_to_an_outside_file_is_neither_read_nor_written(space: tuple[Path, Path]) -> None:
    root, outside = space
    os.link(outside / "secret.txt", root / "linked.txt")
    by_name = tools(root)
    with pytest.raises(ToolFailure, match="hard links"):
        by_name["read_file"](path="linked.txt")
    with pytest.raises(ToolFailure, match="hard links"):
        by_name["append_note"](path="linked.txt", text="planted")
    assert (outside / "secret.txt").read_text() == SECRET


def test_a_fifo_neither_blocks_nor_is_opened_as_a_file(space: tuple[Path, Path]) -> None:
    root, _ = space
    os.mkfifo(root / "pipe")
    by_name = tools(root)
    # Without O_NONBLOCK both calls would block forever (no writer, no reader on the other end).
    with pytest.raises(ToolFailure, match="not a regular file"):
        by_name["read_file"](path="pipe")
    with pytest.raises(ToolFailure, match=r"cannot open|not a regular file"):
        by_name["append_note"](path="pipe", text="x")


@pytest.mark.parametrize("path", [".git/config", ".env", "notes/.hidden", "sub/../.git/hooks/pre-commit"])
def test_writes_to_hidden_paths_are_refused(space: tuple[Path, Path], path: str) -> None:
    root, _ = space
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "sub").mkdir()
    with pytest.raises(ToolFailure, match="hidden path"):
        tools(root)["append_note"](path=path, text="[core]\n\thooksPath = /tmp/evil")
    assert (root / ".git" / "config").read_text() == "[core]\n"
    assert not (root / ".env").exists() and not (root / "notes").exists()


def test_a_symlink_to_a_hidden_path_is_refused_for_writes(space: tuple[Path, Path]) -> None:
    root, _ = space
    (root / ".git").mkdir()
    (root / "config").symlink_to(".git/config")
    with pytest.raises(ToolFailure, match="hidden path"):
        tools(root)["append_note"](path="config", text="x")
    assert not (root / ".git" / "config").exists()


def test_one_append_is_capped(space: tuple[Path, Path]) -> None:
    root, _ = space
    append = {t.name: t for t in workspace_tools(root, write=True, max_append_chars=10)}["append_note"]
    with pytest.raises(ToolFailure, match="at most 10"):
        append(path="n.txt", text="x" * 11)
    assert not (root / "n.txt").exists()
    append(path="n.txt", text="x" * 10)
    assert (root / "n.txt").read_text() == "x" * 10 + "\n"


def test_symlinks_inside_the_root_are_resolved_by_hand(space: tuple[Path, Path]) -> None:
    root, _outside = space
    (root / "a").mkdir()
    (root / "a" / "up").symlink_to("..")
    (root / "a" / "abs").symlink_to(root / "colour.txt")
    (root / "a" / "loop").symlink_to("loop")
    (root / "a" / "out").symlink_to("up/../../outside/secret.txt")
    space_ = Workspace(root)
    assert space_.resolve("a/up/colour.txt") == "colour.txt"
    assert space_.read_text("a/abs") == "red\n"
    with pytest.raises(ToolFailure, match="too many symlinks"):
        space_.read_text("a/loop")
    with pytest.raises(OutsideWorkspace):
        space_.read_text("a/out")


def test_messages_never_show_the_hosts_path(space: tuple[Path, Path]) -> None:
    root, outside = space
    (root / "link").symlink_to(outside / "secret.txt")
    by_name = tools(root)
    seen = []
    for call in [
        lambda: by_name["read_file"](path="link"),
        lambda: by_name["read_file"](path="missing/file.txt"),
        lambda: by_name["read_file"](path="../x"),
        lambda: by_name["append_note"](path="colour.txt/x", text="x"),
        lambda: by_name["list_files"](path="colour.txt/x"),
    ]:
        with pytest.raises(ToolFailure) as info:
            call()
        seen.append(str(info.value))
    seen.append(by_name["append_note"](path="new/n.txt", text="x"))
    seen.append(by_name["list_files"](path="colour.txt"))  # a file listed shows its text, not where it is
    for message in seen:
        assert str(root.parent) not in message, message


def test_file_names_that_are_not_utf8_are_listed_escaped_and_the_run_survives(
    space: tuple[Path, Path], tmp_path: Path
) -> None:
    root, _ = space
    with open(os.path.join(os.fsencode(root), b"caf\xe9.txt"), "wb") as handle:
        handle.write(b"caf\xe9\n")
    listing = tools(root)["list_files"]()
    assert "caf\\xe9.txt" in listing
    transcript = tmp_path / "run.jsonl"
    brain = ScriptedBrain([tool_step("list_files"), answer_step("listed")])
    run = run_agent(brain, workspace_tools(root), "list", transcript_path=transcript)
    assert run.ok
    lines = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    results = [e["text"] for e in lines if e.get("kind") == "tool_result"]
    assert "caf\\xe9.txt" in results[0]
    json.dumps(run.to_dict(), ensure_ascii=False).encode("utf-8")
