"""Issue 35, the workspace's rows: a failed write leaves no folders and says why, the depth of a path
is bounded, and a name that is not UTF-8 opens by the form the listing shows."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import answer_step, tool_step
from shapeloop import ScriptedBrain, StopReason, run_agent, workspace_tools
from shapeloop._confine import MAX_DEPTH, HiddenPath, IsAFolder, Root
from shapeloop.toolbox import Toolbox, ToolStatus
from shapeloop.tools import ToolCall


def folders(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir())


def box(root: Path) -> Toolbox:
    return Toolbox(workspace_tools(root, write=True), approve=lambda call: True)


def test_sixty_deep_appends_leave_no_folders_and_say_the_path_is_too_deep(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    deep = "/".join(["d"] * 100) + "/f.txt"
    replies = [tool_step("append_note", path=deep, text=f"x{i}") for i in range(60)] + [answer_step("could not")]
    run = run_agent(ScriptedBrain(replies), workspace_tools(tmp_path, write=True), "Note x.", approve=lambda c: True,
                    transcript_path=path, stuck_limit=100, max_steps=100)  # fmt: skip
    assert run.stop is StopReason.ANSWERED
    results = [json.loads(line) for line in path.read_text().splitlines()]
    texts = [e["text"] for e in results if e.get("kind") == "tool_result"]
    assert len(texts) == 60
    assert all(f"is too deep: a path here has at most {MAX_DEPTH} names" in text for text in texts)
    assert not any("symlink" in text for text in texts)
    assert folders(tmp_path) == []


def test_a_write_that_fails_after_making_folders_removes_them_and_gives_the_true_reason(tmp_path: Path) -> None:
    tools = box(tmp_path)
    result = tools.run(ToolCall(tool="append_note", args={"path": "a/b/c/" + "x" * 300, "text": "t"}))
    assert result.status is ToolStatus.ERROR and "File name too long" in result.text
    assert folders(tmp_path) == []
    (tmp_path / "a").mkdir()  # a folder that was there before stays
    tools.run(ToolCall(tool="append_note", args={"path": "a/b/" + "x" * 300, "text": "t"}))
    assert folders(tmp_path) == ["a"]


def test_a_path_as_deep_as_allowed_is_written(tmp_path: Path) -> None:
    path = "/".join(["d"] * (MAX_DEPTH - 1)) + "/f.txt"
    result = box(tmp_path).run(ToolCall(tool="append_note", args={"path": path, "text": "t"}))
    assert result.status is ToolStatus.OK, result.text
    assert (tmp_path / path).read_text() == "t\n"


def test_a_name_that_is_not_utf8_opens_by_the_name_the_listing_shows(tmp_path: Path) -> None:
    raw = os.fsencode(tmp_path)
    with open(raw + b"/caf\xe9.txt", "wb") as handle:
        handle.write(b"bonjour")
    os.mkdir(raw + b"/d\xff")
    tools = box(tmp_path)
    listing = tools.run(ToolCall(tool="list_files", args={})).text
    assert listing.splitlines() == ["caf\\xe9.txt", "d\\xff/"]
    read = tools.run(ToolCall(tool="read_file", args={"path": "caf\\xe9.txt"}))
    assert read.status is ToolStatus.OK and read.text == "bonjour"
    wrote = tools.run(ToolCall(tool="append_note", args={"path": "d\\xff/n.txt", "text": "hi"}))
    assert wrote.text == "appended 3 bytes to d\\xff/n.txt"
    with open(raw + b"/d\xff/n.txt", "rb") as handle:
        assert handle.read() == b"hi\n"
    appended = tools.run(ToolCall(tool="append_note", args={"path": "caf\\xe9.txt", "text": "!"}))
    assert appended.status is ToolStatus.OK
    assert sorted(os.listdir(raw)) == [b"caf\xe9.txt", b"d\xff"]  # the same file, not a new one
    with open(raw + b"/caf\xe9.txt", "rb") as handle:
        assert handle.read() == b"bonjour!\n"


def test_a_name_written_with_a_backslash_x_is_still_itself_where_it_exists(tmp_path: Path) -> None:
    (tmp_path / "caf\\xe9.txt").write_text("literal")
    with open(os.fsencode(tmp_path) + b"/caf\xe9.txt", "wb") as handle:
        handle.write(b"escaped")
    read = box(tmp_path).run(ToolCall(tool="read_file", args={"path": "caf\\xe9.txt"}))
    assert read.text == "literal"


def test_the_containment_layer_refuses_in_plain_words_and_the_file_tools_add_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    root = Root(tmp_path)
    fd, _ = root.open("docs", os.O_RDONLY)
    try:
        with pytest.raises(IsAFolder) as folder:
            root.regular(fd, "docs")
    finally:
        os.close(fd)
    with pytest.raises(IsAFolder) as writing:  # opened for writing, a folder is refused at the open
        root.open("docs", os.O_WRONLY | os.O_APPEND | os.O_CREAT, make_dirs=True, hidden=False)
    with pytest.raises(HiddenPath) as hidden:
        root.open(".git/config", os.O_WRONLY | os.O_CREAT, make_dirs=True, hidden=False)
    for refusal in (str(folder.value), str(writing.value), str(hidden.value)):  # no tool's name: Root serves any tool
        assert not any(name in refusal for name in ("list_files", "read_file", "append_note")), refusal
    assert not (tmp_path / ".git").exists()
    box = Toolbox(workspace_tools(tmp_path, write=True), approve=lambda call: True)
    read = box.run(ToolCall(tool="read_file", args={"path": "docs"}))
    assert read.status is ToolStatus.ERROR and "'docs' is a directory; use list_files to see inside it" in read.text
    wrote = box.run(ToolCall(tool="append_note", args={"path": "docs", "text": "x"}))
    assert "'docs' is a directory; name a file to append to" in wrote.text
    hid = box.run(ToolCall(tool="append_note", args={"path": ".git/config", "text": "x"}))
    assert "is a hidden path ('.git'); append_note does not write there" in hid.text
