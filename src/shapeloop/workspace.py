"""The file tools: reading, listing, searching and appending inside a workspace folder.

A workspace is a folder the model may read (and, if asked, append to); every path is opened through
:class:`shapeloop._confine.Root`, which never leads out of it (see there for how).
"""

from __future__ import annotations

import builtins
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from shapeloop import _guess as guess
from shapeloop._confine import DIR_FLAGS, HiddenPath, IsAFolder, NotAFolder, NotFound, Root
from shapeloop.errors import ToolFailure
from shapeloop.search import search as search_text
from shapeloop.text import escape_surrogates
from shapeloop.tools import Tool, tool

_SNIFF_BYTES = 8192
_MAX_LISTED = 200


class Workspace:
    """What the file tools do, in a root folder that no path leads out of.

    Args:
        root: an existing directory.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Root(root)

    @property
    def root(self) -> Path:
        """The root folder, its real path (symlinks resolved)."""
        return self._root.path

    def files_under(self, path: str, *, limit: int, depth: int) -> tuple[str, builtins.list[str], bool]:
        """The folder ``path`` as the root shows it, and the files under it, recursively, as paths
        relative to the root with symlinks resolved (each once), leaving out hidden ones (also where a
        symlink leads to one) and any a symlink leads out of the root to; at most ``limit`` files, no
        deeper than ``depth`` folders, and whether any were left out for either."""
        try:
            fd, shown = self._root.open(path, DIR_FLAGS)
        except NotFound:
            raise ToolFailure(f"there is no file or folder {path!r}{self._near(path)}") from None
        except NotAFolder:
            raise ToolFailure(f"{path!r} is neither a folder nor a text file") from None
        prefix = "" if shown == "." else shown + "/"
        found: dict[str, None] = {}
        cut = False
        try:
            # os.fwalk recurses once per level: a deep enough tree would raise RecursionError
            for current, dirs, files, _ in os.fwalk(".", dir_fd=fd):
                if current.count("/") >= depth and dirs:
                    dirs[:], cut = [], True
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                here = prefix + current[2:] + "/" if current != "." else prefix
                for name in sorted(f for f in files if not f.startswith(".")):
                    real = self.file_at(here + name)  # None for a symlink out, a loop, a FIFO
                    if real is not None and not any(part.startswith(".") for part in real.split("/")):
                        found[real] = None
                    if len(found) > limit:
                        return shown, sorted(found)[:limit], True
        finally:
            os.close(fd)
        return shown, sorted(found), cut

    def read_start(self, path: str, length: int) -> tuple[str, bool]:
        """Up to ``length`` bytes of a text file from its start, and whether that is the whole file."""
        text, _, whole = self._read(path, 0, length)
        return text, whole

    def resolve(self, path: str) -> str:
        """``path`` relative to the root, symlinks resolved, refusing anything that leaves the root."""
        fd, shown = self._root.open(path, os.O_RDONLY)
        os.close(fd)
        return shown

    def read_text(self, path: str, *, offset: int = 0, length: int = 3000) -> str:
        """Up to ``length`` bytes of a text file from byte ``offset``, with a note when there is more.

        Bytes that are not UTF-8 are shown as ``\\xNN``; a file with NUL bytes is refused as binary.
        """
        try:
            text, notes, _ = self._read(path, offset, length)
        except NotFound as exc:
            # the one file the path can mean, read as what it is (reading is safe; writing never guesses)
            twin = self._twin(path)
            if twin is not None:
                return f"[there is no {path!r}; this is {twin!r}]\n{self.read_text(twin, offset=offset, length=length)}"
            namesake = self._namesake(path)
            if namesake is not None:
                text = self.read_text(namesake, offset=offset, length=length)
                return f"[there is no {path!r}; {namesake!r} is the one file with a name like it, read instead]\n{text}"
            raise ToolFailure(f"{exc}{self._near(path)}") from None
        return _noted(text, notes)

    def _read(self, path: str, offset: int, length: int) -> tuple[str, builtins.list[str], bool]:
        """The text read, the notes on it, and whether it is the whole file."""
        if offset < 0 or length < 1:
            raise ToolFailure(f"offset must be 0 or more and length 1 or more (got offset={offset}, length={length})")
        fd, _ = self._root.open(path, os.O_RDONLY)
        try:
            size = self._root.regular(fd, path)
            if offset and offset >= size:
                raise ToolFailure(f"offset {offset} is past the end of {path!r} ({size} bytes)")
            if b"\x00" in os.pread(fd, _SNIFF_BYTES, 0):
                raise ToolFailure(f"{path!r} is a binary file ({size} bytes); read_file reads text only")
            data = os.pread(fd, length + 3, offset)
        except IsAFolder as exc:
            raise ToolFailure(f"{exc}; use list_files to see inside it") from None
        finally:
            os.close(fd)
        start, stop = _char_bounds(data, length, at_start=offset == 0)
        text = data[start:stop].decode("utf-8", errors="backslashreplace")
        notes = []
        if text != data[start:stop].decode("utf-8", errors="ignore"):
            notes.append("bytes that are not UTF-8 are shown as \\xNN")
        begin, end = offset + start, offset + stop
        whole = begin == 0 and end >= size
        if not whole:
            more = f"; read_file with offset={end} reads on" if end < size else "; this is the end"
            notes.append(f"read in part: bytes {begin} to {end} of {size}{more}")
        return text, notes, whole

    def list(self, path: str = ".", *, read_length: int = 3000) -> str:
        """Files and folders under ``path``, recursively, as paths relative to the root.

        A file is not an error: it is read (up to ``read_length`` bytes) and the result says so after
        the text. Small models list a file when they want its lines ("how many animals are listed in
        animals.txt?"), then answer with the error instead of reading it; a note put before the text
        was carried into the answer in its place ("The file 'animals.txt' is not a folder; ...").
        """
        try:
            fd, shown = self._root.open(path, DIR_FLAGS)
        except NotAFolder:
            if self.file_at(path) is None:
                raise
            text, notes, whole = self._read(path, 0, read_length)
            # list_files on a file says how many lines it has: a note of "not a folder" alone had a
            # model asked how many lines the file has answer that it has none
            if whole:
                notes.append(f"{path!r} is a file of {_lines(text)}: above is its text, as read_file gives it")
            else:
                notes.append(f"{path!r} is a file, not a folder: above is its text, as read_file gives it")
            return _noted(text, notes)
        except NotFound:
            raise ToolFailure(f"there is no folder {path!r}{self._near(path)}") from None
        prefix = "" if shown == "." else shown + "/"
        lines: list[str] = []
        try:
            for current, dirs, files, _ in os.fwalk(".", dir_fd=fd):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                here = prefix + current[2:] + "/" if current != "." else prefix
                lines += [f"{here}{_shown_name(d)}/" for d in dirs]
                lines += [f"{here}{_shown_name(f)}" for f in files if not f.startswith(".")]
                if len(lines) > _MAX_LISTED:
                    break
        finally:
            os.close(fd)
        if not lines:
            return "(empty directory)"
        lines.sort()
        if len(lines) > _MAX_LISTED:
            return "\n".join(lines[:_MAX_LISTED]) + f"\n[listing cut at {_MAX_LISTED} entries]"
        return "\n".join(lines)

    def append(self, path: str, text: str, *, max_chars: int = 4000) -> str:
        """Append ``text`` (and a final newline) to a file, creating it and its folders if needed."""
        if len(text) > max_chars:
            raise ToolFailure(f"the text is {len(text)} characters; one append writes at most {max_chars}: split it")
        payload = (text if text.endswith("\n") else text + "\n").encode("utf-8", errors="backslashreplace")
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            fd, shown = self._root.open(path, flags, make_dirs=True, hidden=False)
            try:
                self._root.regular(fd, path)
                view = memoryview(payload)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        except HiddenPath as exc:
            raise ToolFailure(f"{exc}; append_note does not write there") from None
        except IsAFolder as exc:  # refused at the open, or a folder made between the open and the check
            raise ToolFailure(f"{exc}; name a file to append to") from None
        return f"appended {len(payload)} bytes to {shown}"

    def _near(self, path: str) -> str:
        files = self._files()
        return "; use list_files to see what is there" if files is None else guess.near(path, files)

    def _twin(self, path: str) -> str | None:
        files = self._files()
        return None if files is None else guess.twin(path, files)

    def _namesake(self, path: str) -> str | None:
        return guess.namesake(path, self._files() or [])

    def _files(self) -> builtins.list[str] | None:
        """The workspace's files (as ``list_files`` shows them, folders and notes left out), or None."""
        try:
            listed = self.list(".").splitlines()
        except ToolFailure:
            return None
        return [line for line in listed if not line.endswith("/") and not line.startswith(("[", "(empty"))]

    def file_at(self, path: str) -> str | None:
        """The path, relative to the root with symlinks resolved, of the regular file ``path`` names
        inside the root; None where it names none (a folder, nothing, a place outside)."""
        try:
            fd, shown = self._root.open(path, os.O_RDONLY)
        except ToolFailure:
            return None
        try:
            return shown if stat.S_ISREG(os.fstat(fd).st_mode) else None
        finally:
            os.close(fd)


def _char_bounds(data: bytes, length: int, *, at_start: bool) -> tuple[int, int]:
    """Where a window of ``length`` bytes of ``data`` starts and stops on character boundaries
    (``data`` holds up to 3 bytes more, so a character cut at the end can be finished)."""
    start = 0
    if not at_start:  # skip the tail of a character that began before the offset
        while start < min(3, len(data)) and _continues(data[start]):
            start += 1
    stop = min(len(data), length)
    if stop < len(data) and _continues(data[stop]):
        back = stop
        while back > start and stop - back < 3 and _continues(data[back]):
            back -= 1
        if back > start and not _continues(data[back]):
            stop = back
        else:  # the window holds only part of one character: take all of it
            while stop < len(data) and _continues(data[stop]):
                stop += 1
    return start, max(start, stop)


def _noted(text: str, notes: Iterable[str]) -> str:
    """``text`` with each note after it, on a line of its own in brackets."""
    return text + "".join(f"\n[{note}]" for note in notes)


def _lines(text: str) -> str:
    """How many lines ``text`` has, as words: "3 lines" (lines end at "\\n", as grep and search_files
    count them; a last line without one counts)."""
    count = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    return "1 line" if count == 1 else f"{count} lines"


def _continues(byte: int) -> bool:
    """A UTF-8 continuation byte (``10xxxxxx``)."""
    return 0x80 <= byte < 0xC0


def _shown_name(name: str) -> str:
    """A file name for the listing, bytes that are not UTF-8 shown as ``\\xNN``."""
    return escape_surrogates(name)


def workspace_tools(
    root: str | os.PathLike[str],
    *,
    write: bool = False,
    search: bool = True,
    max_read_chars: int = 3000,
    max_append_chars: int = 4000,
) -> list[Tool]:
    """File tools confined to ``root``: ``read_file``, ``list_files``, ``search_files``, and with
    ``write=True`` ``append_note`` (which needs approval).

    Args:
        root: the workspace folder; it must exist.
        write: also offer ``append_note``.
        search: offer ``search_files`` (the lines of the files that hold a text).
        max_read_chars: how much ``read_file`` returns at once (in bytes); a longer file is read in
            part, with a note giving the offset to read on from.
        max_append_chars: the most one ``append_note`` writes.
    """
    space = Workspace(root)

    @tool(read_only=True)
    def read_file(path: str, offset: int = 0, length: int = max_read_chars) -> str:
        """Read a text file in the workspace.

        Args:
            path: the file's path relative to the workspace root, e.g. "notes/todo.txt".
            offset: where to start, in bytes; a long file is read in parts, and each part says
                the offset of the next.
            length: how many bytes to read at most.
        """
        return space.read_text(path, offset=offset, length=min(length, max_read_chars))

    @tool(read_only=True)
    def list_files(path: str = ".") -> str:
        """List the files and folders in the workspace (recursively), as paths to pass to read_file.

        Args:
            path: the folder to list, relative to the workspace root; "." for all of it.
        """
        return space.list(path, read_length=max_read_chars)

    @tool(read_only=True)
    def search_files(text: str, path: str = ".") -> str:
        """Find the lines of the workspace's files that hold a text (case aside), and count them.

        Args:
            text: the text to look for, e.g. "timeout".
            path: the folder or file to search, relative to the workspace root; "." for all of it.
        """
        return search_text(space, text, path)

    tools = [read_file, list_files]
    if search:
        tools.append(search_files)
    if write:
        # One key for every append to this workspace, not one per path as written: "notes.txt",
        # "./notes.txt", the root's absolute path, a symlink or another case can name one file, and
        # appends are quick, so running them all in the model's order costs nothing.
        @tool(needs_approval=True, lock_key=f"append_note:{space.root}")
        def append_note(path: str, text: str) -> str:
            """Append a line of text to a file in the workspace, creating the file if needed.

            Args:
                path: the file's path relative to the workspace root.
                text: the text to append.
            """
            return space.append(path, text, max_chars=max_append_chars)

        tools.append(append_note)
    return tools
