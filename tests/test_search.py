"""search_files on real files: what it finds, how it counts, what it says it left out, and what it
never reads (outside the root, hidden files)."""

import os
from pathlib import Path

import pytest

from shapeloop import OutsideWorkspace, Tool, ToolFailure, Workspace, workspace_tools
from shapeloop.search import search


def tool(root: Path) -> Tool:
    return {t.name: t for t in workspace_tools(root)}["search_files"]


def test_each_line_that_holds_the_text_is_given_with_its_file_and_number_and_counted(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "app.log").write_text("INFO start\nERROR disk  full\ninfo retry\r\nERROR again\n")
    (tmp_path / "notes.txt").write_text("the error was fixed\n")
    find = tool(tmp_path)
    # case aside, and runs of spaces as one (shown as one)
    assert find(text="error") == (
        "log/app.log:2: ERROR disk full\nlog/app.log:4: ERROR again\nnotes.txt:1: the error was fixed\n"
        "[3 lines in 2 files hold 'error']"
    )
    assert find(text="info", path="log/app.log") == (
        "log/app.log:1: INFO start\nlog/app.log:3: info retry\n[2 lines in 'log/app.log' hold 'info']"
    )
    assert find(text="disk full", path="log").endswith("[1 line in 'log/app.log' holds 'disk full']")
    assert find(text="wolf", path="log") == "no line in 'log' holds 'wolf'"
    with pytest.raises(ToolFailure, match="give the text to look for"):
        find(text="  ")
    with pytest.raises(ToolFailure, match=r"there is no file or folder 'nope\.txt'"):
        find(text="x", path="nope.txt")


def test_a_phrase_no_line_holds_falls_back_to_the_lines_that_hold_one_of_its_words(tmp_path: Path) -> None:
    (tmp_path / "settings.ini").write_text("[server]\nport = 8080\nreport = daily\n")
    find = tool(tmp_path)
    # "report" holds "port", but not as a word
    assert find(text="server  port") == (
        "[no line in the workspace holds 'server port'; these hold one of its words ('server', 'port')]\n"
        "settings.ini:1: [server]\nsettings.ini:2: port = 8080\n"
        "[2 lines in 'settings.ini' hold one of those words]"
    )
    assert find(text="the port") == (
        "[no line in the workspace holds 'the port'; these hold 'port']\nsettings.ini:2: port = 8080\n"
        "[1 line in 'settings.ini' holds 'port']"
    )
    assert find(text="port = 8080").count("\n") == 1  # a phrase found is not spread out
    assert find(text="nothing here xyz") == (
        "no line in the workspace holds 'nothing here xyz', nor any of its words ('nothing', 'here', 'xyz')"
    )


def test_what_was_left_unsearched_is_said_with_the_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(5):
        (tmp_path / f"f{n}.txt").write_text(f"hit {n}\n")
    (tmp_path / "long.txt").write_text("hit\n" + "x\n" * 30 + "hit at the end\n")
    space = Workspace(tmp_path)
    many = search(space, "hit", max_shown=2, max_files=3, max_bytes=40)
    assert many.splitlines()[:2] == ["f0.txt:1: hit 0", "f1.txt:1: hit 1"]
    assert many.splitlines()[-1] == (
        "[3 lines in 3 files hold 'hit', the first 2 shown; not every file was searched (at most 3, in folders at "
        "most 64 deep): search a folder within to see the rest]"
    )
    assert search(space, "hit", "long.txt", max_bytes=40) == (
        "long.txt:1: hit\n[1 line in 'long.txt' holds 'hit'; only the first 40 bytes of 'long.txt' were searched]"
    )
    said = search(space, "end", "long.txt", max_bytes=40)
    assert said.endswith("; only the first 40 bytes of 'long.txt' were searched")


def test_a_long_line_is_shown_around_what_it_holds(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text("x" * 5000 + " NEEDLE " + "y" * 5000 + "\n")
    shown = tool(tmp_path)(text="needle").splitlines()[0]
    assert "NEEDLE" in shown and shown.startswith("wide.txt:1: ...") and len(shown) < 230


def test_lines_are_counted_as_grep_counts_them(tmp_path: Path) -> None:
    (tmp_path / "ff.txt").write_bytes(b"one\x0ctwo NEEDLE\nthree\n")  # a form feed does not end a line
    assert tool(tmp_path)(text="needle").startswith("ff.txt:1: ")


def test_a_file_named_alone_that_cannot_be_read_is_an_error_not_an_empty_search(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"NEEDLE\x00\x01")
    (tmp_path / "a.txt").write_text("no\n")
    with pytest.raises(ToolFailure, match="binary"):
        tool(tmp_path)(text="needle", path="blob.bin")
    # in a folder, a binary file is passed over, and the result says so
    assert tool(tmp_path)(text="needle") == (
        "no line in the workspace holds 'needle'; 1 file that could not be read as text passed over"
    )


def test_long_texts_are_not_repeated_whole(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("no\n")
    assert len(tool(tmp_path)(text="word " * 20_000)) < 1000


def test_nothing_outside_the_root_or_hidden_is_searched(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    (root / "out.txt").symlink_to(outside / "secret.txt")  # a symlink out: refused, so not searched
    (root / "linked").symlink_to(outside)  # a folder out: not walked
    (root / ".env").write_text("top secret\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("top secret\n")
    (root / "envlink").symlink_to(".env")  # a visible name for a hidden file
    (root / "cfg").symlink_to(".git/config")
    (root / "notes\n.env").write_text("harmless\n")  # a name that reads like two lines of a listing
    (root / "blob.bin").write_bytes(b"top secret\x00\x01")
    os.link(outside / "secret.txt", root / "hard.txt")  # a hard link to an outside file: refused
    find = tool(root)
    # blob.bin and hard.txt are passed over and counted; the rest are not the search's to see
    assert find(text="secret") == (
        "no line in the workspace holds 'secret'; 2 files that could not be read as text passed over"
    )
    with pytest.raises(OutsideWorkspace):
        find(text="secret", path="../outside")
    with pytest.raises(OutsideWorkspace):
        find(text="secret", path="out.txt")


def test_a_file_reached_twice_is_searched_once(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    (tmp_path / "alias.txt").symlink_to("a.txt")
    assert tool(tmp_path)(text="hello") == "a.txt:1: hello\n[1 line in 'a.txt' holds 'hello']"


def test_odd_file_names_are_searched_by_their_real_names(tmp_path: Path) -> None:
    for name in ("[draft].txt", "(empty) notes.txt", "x:12: fake.txt"):
        (tmp_path / name).write_text("NEEDLE\n")
    (tmp_path / os.fsdecode(b"caf\xe9.txt")).write_text("NEEDLE\n")
    found = tool(tmp_path)(text="needle")
    assert found.endswith("[4 lines in 4 files hold 'needle']"), found
    assert "caf\\xe9.txt:1: NEEDLE" in found


def test_a_tree_deeper_than_the_walk_goes_is_searched_to_that_depth_and_says_so(tmp_path: Path) -> None:
    """os.fwalk recurses once per folder: a tree a thousand folders deep raised RecursionError."""
    (tmp_path / "top.txt").write_text("needle\n")
    deep = tmp_path.joinpath(*["d"] * 70)
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("needle\n")
    (tmp_path.joinpath(*["d"] * 10) / "middle.txt").write_text("needle\n")
    found = tool(tmp_path)(text="needle")
    assert found.splitlines()[-1] == (
        "[2 lines in 2 files hold 'needle'; not every file was searched (at most 1000, in folders at most 64 deep): "
        "search a folder within to see the rest]"
    )
    assert "bottom.txt" not in found


def test_a_long_line_cut_at_its_end_has_no_trailing_mark(tmp_path: Path) -> None:
    (tmp_path / "end.txt").write_text("x" * 5000 + " NEEDLE\n")
    shown = tool(tmp_path)(text="needle").splitlines()[0]
    assert shown.startswith("end.txt:1: ...") and shown.endswith("NEEDLE")
