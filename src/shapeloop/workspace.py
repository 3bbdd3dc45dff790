"""Path containment, and the file tools built on it.

A workspace is a folder the model may read (and, if asked, append to). Nothing outside it is
reachable: not by ``..``, not by an absolute path, not through a symlink inside the root that
points out (also for a file about to be created), and not with a NUL byte.
"""

from __future__ import annotations

import os
from pathlib import Path

from shapeloop.errors import OutsideWorkspace, ToolFailure
from shapeloop.tools import Tool, tool

_SNIFF_BYTES = 8192
_MAX_READ_BYTES = 4 * 1024 * 1024
_MAX_LISTED = 200


class Workspace:
    """A root folder and the rule that every path stays inside it.

    Args:
        root: an existing directory.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        real = Path(os.path.realpath(root))
        if not real.is_dir():
            raise FileNotFoundError(
                f"workspace root {os.fspath(root)!r} is not a directory: create it or pass another --root"
            )
        self.root = real

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` (relative to the root), refusing anything that leaves the root."""
        if "\x00" in path:
            raise OutsideWorkspace("the path contains a NUL byte")
        real = Path(os.path.realpath(self.root / (path.strip() or ".")))
        if real != self.root and self.root not in real.parents:
            raise OutsideWorkspace(f"{path!r} is outside the workspace; use a path relative to the workspace root")
        return real

    def relative(self, real: Path) -> str:
        """``real`` as a path relative to the root, with forward slashes."""
        return real.relative_to(self.root).as_posix() or "."

    def read_text(self, path: str, *, offset: int = 0, limit: int = 3000) -> str:
        """Up to ``limit`` characters of a text file from ``offset``, with a note when there is more."""
        target = self.resolve(path)
        if target.is_dir():
            raise ToolFailure(f"{path!r} is a directory; use list_files to see inside it")
        if not target.is_file():
            raise ToolFailure(f"there is no file {path!r}; use list_files to see what is there")
        with open(target, "rb") as handle:
            data = handle.read(_MAX_READ_BYTES + 1)
        text = _decode_text(data[:_MAX_READ_BYTES], path=path, size=target.stat().st_size)
        offset = max(0, offset)
        if offset >= len(text) and text:
            raise ToolFailure(f"offset {offset} is past the end of {path!r} ({len(text)} characters)")
        end = min(len(text), offset + limit)
        chunk = text[offset:end]
        if offset == 0 and end == len(text) and len(data) <= _MAX_READ_BYTES:
            return chunk
        total = f"{len(text)}" if len(data) <= _MAX_READ_BYTES else f"more than {len(text)}"
        return f"{chunk}\n[read in part: characters {offset} to {end} of {total}]"

    def list(self, path: str = ".") -> str:
        """Files and folders under ``path``, recursively, as paths relative to the root."""
        target = self.resolve(path)
        if not target.is_dir():
            raise ToolFailure(f"{path!r} is not a directory" + ("" if target.exists() else " (it does not exist)"))
        lines: list[str] = []
        for current, dirs, files in os.walk(target):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            here = Path(current)
            entries = [(d, True) for d in dirs] + [(f, False) for f in sorted(files) if not f.startswith(".")]
            for name, is_dir in entries:
                lines.append(self.relative(here / name) + ("/" if is_dir else ""))
            if len(lines) > _MAX_LISTED:
                break
        if not lines:
            return "(empty directory)"
        lines.sort()
        if len(lines) > _MAX_LISTED:
            return "\n".join(lines[:_MAX_LISTED]) + f"\n[listing cut at {_MAX_LISTED} entries]"
        return "\n".join(lines)

    def append(self, path: str, text: str) -> str:
        """Append ``text`` (and a final newline) to a file, creating it and its folders if needed."""
        target = self.resolve(path)
        if target == self.root or target.is_dir():
            raise ToolFailure(f"{path!r} is a directory; name a file to append to")
        target.parent.mkdir(parents=True, exist_ok=True)
        payload = text if text.endswith("\n") else text + "\n"
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(target, flags, 0o644)
        except OSError as exc:
            raise ToolFailure(f"cannot append to {path!r}: {exc.strerror}") from exc
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            handle.write(payload)
        return f"appended {len(payload)} characters to {self.relative(target)}"


def _decode_text(data: bytes, *, path: str, size: int) -> str:
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise ToolFailure(f"{path!r} is a binary file ({size} bytes); read_file reads text only")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= len(data) - 3:  # a character cut at the read limit
            return data[: exc.start].decode("utf-8")
        raise ToolFailure(f"{path!r} is not UTF-8 text ({size} bytes); read_file reads text only") from exc


def workspace_tools(root: str | os.PathLike[str], *, write: bool = False, max_read_chars: int = 3000) -> list[Tool]:
    """File tools confined to ``root``: ``read_file``, ``list_files``, and with ``write=True``
    ``append_note`` (which needs approval).

    Args:
        root: the workspace folder; it must exist.
        write: also offer ``append_note``.
        max_read_chars: how much ``read_file`` returns at once; a longer file is read in part,
            with a note saying how to read on.
    """
    space = Workspace(root)

    @tool
    def read_file(path: str) -> str:
        """Read a text file in the workspace.

        Args:
            path: the file's path relative to the workspace root, e.g. "notes/todo.txt".
        """
        return space.read_text(path, limit=max_read_chars)

    @tool
    def list_files(path: str = ".") -> str:
        """List the files and folders in the workspace (recursively), as paths to pass to read_file.

        Args:
            path: the folder to list, relative to the workspace root; "." for all of it.
        """
        return space.list(path)

    tools = [read_file, list_files]
    if write:

        @tool(needs_approval=True)
        def append_note(path: str, text: str) -> str:
            """Append a line of text to a file in the workspace, creating the file if needed.

            Args:
                path: the file's path relative to the workspace root.
                text: the text to append.
            """
            return space.append(path, text)

        tools.append(append_note)
    return tools
