import os
from pathlib import Path

import pytest

from shapeloop import OutsideWorkspace, ToolFailure, Workspace, workspace_tools


@pytest.fixture
def space(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "colour.txt").write_text("red\n")
    (root / "sub").mkdir()
    (root / "sub" / "deep.txt").write_text("deep\n")
    (outside / "secret.txt").write_text("top secret\n")
    return root, outside


def tools_by_name(root: Path, write: bool = False, **options: int) -> dict[str, object]:
    return {t.name: t for t in workspace_tools(root, write=write, **options)}


def test_read_and_list(space: tuple[Path, Path]) -> None:
    root, _ = space
    tools = tools_by_name(root)
    assert set(tools) == {"read_file", "list_files", "search_files"}
    assert tools["read_file"](path="colour.txt") == "red\n"  # type: ignore[operator]
    assert tools["list_files"]() == "colour.txt\nsub/\nsub/deep.txt"  # type: ignore[operator]
    assert tools["list_files"](path="sub") == "sub/deep.txt"  # type: ignore[operator]


@pytest.mark.parametrize(
    "path", ["../outside/secret.txt", "sub/../../outside/secret.txt", "/etc/passwd", "colour.txt\x00.png"]
)
def test_paths_that_leave_the_root_are_refused(space: tuple[Path, Path], path: str) -> None:
    root, _ = space
    with pytest.raises(OutsideWorkspace):
        Workspace(root).resolve(path)


def test_a_refused_path_says_no_tool_reaches_it_or_the_path_inside_it_meant(space: tuple[Path, Path]) -> None:
    root, outside = space
    (root / "link.txt").symlink_to(outside / "secret.txt")
    space_ = Workspace(root)
    for path in ("../outside/secret.txt", "/etc/passwd", "/nowhere/colour.txt", "link.txt"):
        with pytest.raises(OutsideWorkspace) as refused:
            space_.resolve(path)
        assert str(refused.value).endswith(": no tool here can reach it, so tell the user it cannot be done"), path
    # an absolute path whose relative twin is in the workspace, or whose folder is (a new file): the
    # model meant that one; "/" is the root; never a hidden name
    for path in ("/.env", "/sub/.hidden.txt"):
        with pytest.raises(OutsideWorkspace) as refused:
            space_.resolve(path)
        assert "did you mean" not in str(refused.value), path
    cases = (("/colour.txt", "colour.txt"), ("/sub/deep.txt", "sub/deep.txt"), ("/sub", "sub"),
             ("/sub/new.txt", "sub/new.txt"), ("/", "."))  # fmt: skip
    for path, meant in cases:
        with pytest.raises(OutsideWorkspace) as refused:
            space_.resolve(path)
        assert str(refused.value) == (
            f"{path!r} is outside the workspace; paths are relative to the workspace root: did you mean {meant!r}?"
        )


def test_absolute_path_inside_the_root_is_fine(space: tuple[Path, Path]) -> None:
    root, _ = space
    assert Workspace(root).resolve(str(root / "colour.txt")) == "colour.txt"
    assert Workspace(root).resolve(str(root / "sub" / ".." / "sub" / "deep.txt")) == "sub/deep.txt"


def test_symlinks_inside_the_root_that_point_out_are_refused(space: tuple[Path, Path]) -> None:
    root, outside = space
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    (root / "inner.txt").symlink_to(root / "colour.txt")
    tools = tools_by_name(root, write=True)
    for path in ["link.txt", "linkdir/secret.txt", "linkdir"]:
        with pytest.raises(OutsideWorkspace):
            tools["read_file"](path=path)  # type: ignore[operator]
    assert tools["read_file"](path="inner.txt") == "red\n"  # type: ignore[operator]
    with pytest.raises(OutsideWorkspace):
        tools["append_note"](path="linkdir/new.txt", text="escape")  # type: ignore[operator]
    with pytest.raises(OutsideWorkspace):
        tools["append_note"](path="link.txt", text="escape")  # type: ignore[operator]
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "top secret\n"


def test_a_dangling_symlink_pointing_out_cannot_be_created_through(space: tuple[Path, Path]) -> None:
    root, outside = space
    (root / "trap.txt").symlink_to(outside / "created.txt")
    with pytest.raises(OutsideWorkspace):
        tools_by_name(root, write=True)["append_note"](path="trap.txt", text="escape")  # type: ignore[operator]
    assert not (outside / "created.txt").exists()


def test_append_note_really_appends_and_creates(space: tuple[Path, Path]) -> None:
    root, _ = space
    append = tools_by_name(root, write=True)["append_note"]
    assert append.needs_approval  # type: ignore[attr-defined]
    append(path="notes.txt", text="first")  # type: ignore[operator]
    assert append(path="notes.txt", text="second\n") == "appended 7 bytes to notes.txt"  # type: ignore[operator]
    assert (root / "notes.txt").read_text() == "first\nsecond\n"
    append(path="new/dir/n.txt", text="x")  # type: ignore[operator]
    assert (root / "new" / "dir" / "n.txt").read_text() == "x\n"
    with pytest.raises(ToolFailure, match="directory"):
        append(path="sub", text="x")  # type: ignore[operator]


def test_large_files_are_read_in_part_with_a_note(space: tuple[Path, Path]) -> None:
    root, _ = space
    (root / "big.txt").write_text("".join(f"line {i}\n" for i in range(2000)))
    read = tools_by_name(root)["read_file"]
    first = read(path="big.txt")  # type: ignore[operator]
    assert first.startswith("line 0\n") and len(first) < 3200
    assert first.endswith("\n[read in part: bytes 0 to 3000 of 18890; read_file with offset=3000 reads on]")
    rest = read(path="big.txt", offset=17000)  # type: ignore[operator]
    assert rest.endswith("line 1999\n\n[read in part: bytes 17000 to 18890 of 18890; this is the end]")
    middle = read(path="big.txt", offset=7, length=7)  # type: ignore[operator]
    assert middle.startswith("line 1\n\n[read in part: bytes 7 to 14 of 18890")
    with pytest.raises(ToolFailure, match="past the end"):
        read(path="big.txt", offset=18890)  # type: ignore[operator]


def test_parts_never_split_a_character(space: tuple[Path, Path]) -> None:
    root, _ = space
    (root / "euro.txt").write_text("€" * 10)  # three bytes each
    space_ = Workspace(root)
    first = space_.read_text("euro.txt", length=4)
    assert first.startswith("€\n[read in part: bytes 0 to 3 of 30")
    assert space_.read_text("euro.txt", offset=4, length=4).startswith("€\n[read in part: bytes 6 to 9 of 30")
    assert space_.read_text("euro.txt", length=1).startswith("€\n")


def test_binary_and_missing_files_get_clear_messages(space: tuple[Path, Path]) -> None:
    root, _ = space
    (root / "blob.bin").write_bytes(b"\x89PNG\x00\x01\x02" * 100)
    (root / "latin.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    read = tools_by_name(root)["read_file"]
    with pytest.raises(ToolFailure, match="binary file"):
        read(path="blob.bin")  # type: ignore[operator]
    assert read(path="latin.txt") == "caf\\xe9 cr\\xe8me\n[bytes that are not UTF-8 are shown as \\xNN]"  # type: ignore[operator]
    with pytest.raises(ToolFailure, match=r"there is no file 'nope.txt'; the workspace has: blob.bin, colour.txt"):
        read(path="nope.txt")  # type: ignore[operator]
    with pytest.raises(ToolFailure, match="is a directory"):
        read(path="sub")  # type: ignore[operator]


def test_a_missing_path_names_what_to_try_instead(space: tuple[Path, Path]) -> None:
    """The error after a wrong path carries the next call: the file of that name, or the files there are."""
    root, _ = space
    (root / ".secret.txt").write_text("hidden")
    tools = tools_by_name(root)
    read, listing = tools["read_file"], tools["list_files"]
    with pytest.raises(ToolFailure, match=r"there is no file 'deap.md'; did you mean 'sub/deep.txt'\?"):
        read(path="deap.md")  # type: ignore[operator]
    with pytest.raises(ToolFailure, match=r"there is no folder 'subs'; did you mean 'sub/deep.txt'\?"):
        read(path="subs/Deap.TEXT")  # type: ignore[operator]
    listed = r"there is no folder 'notes'; the workspace has: colour\.txt, sub/deep\.txt$"
    with pytest.raises(ToolFailure, match=listed):
        listing(path="notes")  # type: ignore[operator]
    # a file is not a folder: listing it shows its text, as read_file would, and says after the text
    # how many lines it has (a note before it was carried into answers in the text's place; "not a
    # folder" was taken to mean the file has no lines)
    shown = listing(path="colour.txt")  # type: ignore[operator]
    text = read(path="colour.txt")  # type: ignore[operator]
    assert shown == text + "\n['colour.txt' is a file of 1 line: above is its text, as read_file gives it]"
    assert (root / "colour.txt").read_text() in shown
    with pytest.raises(ToolFailure, match=r"'colour\.txt/x' is not a directory"):
        listing(path="colour.txt/x")  # type: ignore[operator]
    (root / "empty").mkdir()
    with pytest.raises(ToolFailure, match="the workspace has no files"):
        tools_by_name(root / "empty")["read_file"](path="x.txt")  # type: ignore[operator]


def test_listing_a_file_counts_its_lines_only_when_it_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / "todo.txt").write_text("buy milk\ncall Ada\nfix the bike")  # no newline at the end
    (tmp_path / "long.txt").write_text("line\n" * 20)
    (tmp_path / "blank.txt").write_text("a\n\nb\n")
    listing = tools_by_name(tmp_path, max_read_chars=50)["list_files"]
    shown = listing(path="todo.txt")  # type: ignore[operator]
    assert shown.endswith("fix the bike\n['todo.txt' is a file of 3 lines: above is its text, as read_file gives it]")
    assert "is a file of 3 lines" in listing(path="blank.txt")  # type: ignore[operator]
    # lines end at "\n" only, as search_files and grep count them
    (tmp_path / "odd.txt").write_bytes(b"one\x0ctwo\rthree\nfour\n")
    assert "is a file of 2 lines" in listing(path="odd.txt")  # type: ignore[operator]
    # read in part: a count of the lines shown would be wrong for the file, so none is given
    part = listing(path="long.txt")  # type: ignore[operator]
    assert "read in part: bytes 0 to 50 of 100" in part
    assert part.endswith("['long.txt' is a file, not a folder: above is its text, as read_file gives it]")
    assert "lines" not in part


def test_search_files_can_be_left_out(tmp_path: Path) -> None:
    assert "search_files" not in {t.name for t in workspace_tools(tmp_path, search=False)}


def test_missing_root_is_an_error_that_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a directory"):
        workspace_tools(tmp_path / "nope")


def test_a_missing_path_that_can_mean_one_file_only_reads_that_file_and_says_so(space: tuple[Path, Path]) -> None:
    root, _ = space
    (root / "readme.md").write_text("# Zephyr\n")
    read = tools_by_name(root)["read_file"]
    assert read(path="README.md") == "[there is no 'README.md'; this is 'readme.md']\n# Zephyr\n"  # type: ignore[operator]
    assert read(path="./deep.txt").startswith("[there is no './deep.txt'; this is 'sub/deep.txt']\ndeep")  # type: ignore[operator]
    (root / "other").mkdir()
    (root / "other" / "deep.txt").write_text("other\n")
    with pytest.raises(ToolFailure, match=r"did you mean 'other/deep\.txt' or 'sub/deep\.txt'\?"):
        read(path="deep.txt")  # type: ignore[operator]  # two files of that name: no guess
    # a guessed name that shares a word with one file's name only reads that file, and says so
    (root / "secret.txt").write_text("marmalade\n")
    assert read(path="notes/secret_word.txt") == (  # type: ignore[operator]
        "[there is no 'notes/secret_word.txt'; 'secret.txt' is the one file with a name like it, read instead]\n"
        "marmalade\n"
    )
    (root / "secret_key.txt").write_text("k\n")
    with pytest.raises(ToolFailure, match=r"there is no file 'secret_word\.txt'"):
        read(path="secret_word.txt")  # type: ignore[operator]  # two files share the word: no guess
    # a word several names hold ties the guess to none of them, in any language
    (root / "alt_datei.txt").write_text("a\n")
    (root / "liste_datei.txt").write_text("l\n")
    (root / "geheim.txt").write_text("g\n")
    with pytest.raises(ToolFailure, match=r"there is no file 'neu_datei\.txt'"):
        read(path="neu_datei.txt")  # type: ignore[operator]
    assert read(path="geheim_datei.txt").startswith("[there is no 'geheim_datei.txt'; 'geheim.txt' is")  # type: ignore[operator]
    (root / "Übersicht.md").write_text("ü\n")
    assert read(path="übersicht_2026.md").startswith("[there is no 'übersicht_2026.md'; 'Übersicht.md' is")  # type: ignore[operator]
    append = tools_by_name(root, write=True)["append_note"]
    append(path="README.md", text="x")  # type: ignore[operator]  # writing never guesses: a new file
    assert (root / "README.md").read_text() == "x\n" and (root / "readme.md").read_text() == "# Zephyr\n"
