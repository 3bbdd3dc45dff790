"""Path containment: a root folder, and opening a path below it that never leads out.

Every path is opened relative to a descriptor of the root, one component at a time, with
``O_NOFOLLOW``: the kernel never follows a symlink for us. A symlink met on the way is read and
resolved by hand, inside the root, or refused; so neither ``..``, an absolute path, a symlink
pointing out, nor a symlink swapped in by another process between a check and an open can reach a
file outside. Only regular files with a single link are read or written (a hard link to an outside
file is refused), opening never blocks (FIFOs and devices are refused after a non-blocking open),
and nothing is written to a hidden path (``.git``, ``.env``).

Not covered: a folder that another process renames out of the root while a call is inside it.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import weakref
from collections import deque
from collections.abc import Iterable
from pathlib import Path

from shapeloop.errors import OutsideWorkspace, ToolFailure

_MAX_LINKS = 40  # symlinks resolved in one path, as the kernel's own limit
MAX_DEPTH = 32
"""The most names a path may have (``a/b/c.txt`` has 3): a model that loops cannot grow a tree without end."""
# a byte that is not UTF-8, as the listing shows it in a name (escape_surrogates writes it so)
_ESCAPED_BYTE = re.compile(r"\\x([89a-f][0-9a-f])")
# POSIX only (Linux, macOS): without openat and O_NOFOLLOW no open can be made race-free.
_POSIX = os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW") and hasattr(os, "fwalk")
_OPEN_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _OPEN_FLAGS
# What a refusal of a path outside the root says next. "Use a path inside it" sent qwen2.5-coder-0.5b
# to try the same path with every workspace tool until its run was stuck: no tool reaches it.
OUTSIDE_NOTE = ": no tool here can reach it, so tell the user it cannot be done"


class Root:
    """A root folder, held open, and the rule that every path opened through it stays inside it.

    Args:
        root: an existing directory.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        if not _POSIX:
            raise OSError("the workspace tools need a POSIX system (openat with O_NOFOLLOW): Linux or macOS")
        if not os.fspath(root):
            raise FileNotFoundError("the workspace root is empty: name a folder, e.g. --root .")
        real = Path(os.path.realpath(root))
        if not real.is_dir():
            raise FileNotFoundError(
                f"workspace root {os.fspath(root)!r} is not a directory: create it or pass another --root"
            )
        self.path = real
        self._fd = os.open(real, DIR_FLAGS)
        weakref.finalize(self, os.close, self._fd)

    def regular(self, fd: int, path: str) -> int:
        """The size of the open file, refusing folders (:class:`IsAFolder`), FIFOs, devices and
        hard-linked files."""
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsAFolder(f"{path!r} is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise ToolFailure(f"{path!r} is not a regular file (a FIFO, socket or device); it is not opened")
        if info.st_nlink > 1:
            raise ToolFailure(
                f"{path!r} has {info.st_nlink} hard links; files with more than one are refused, "
                "since the other link may be outside the workspace"
            )
        return info.st_size

    def open(self, path: str, flags: int, *, make_dirs: bool = False, hidden: bool = True) -> tuple[int, str]:
        """Open ``path`` below the root without following any symlink; return the descriptor and
        the path relative to the root. ``hidden=False`` refuses every name starting with a dot
        (:class:`HiddenPath`)."""
        pending: deque[str] = deque(self._parts(path))
        if not hidden:  # refused before any folder is made; a symlink's target is checked on the way
            _visible(pending, path)
        stack: list[int] = [self._fd]
        names: list[str] = []
        made: list[tuple[int, str]] = []  # folders this call made: (a descriptor of the parent, name)
        detours = 0
        done = False
        try:
            while True:
                name = pending.popleft() if pending else "."
                last = not pending
                if name == "..":
                    if not names:
                        raise OutsideWorkspace(f"{path!r} leads out of the workspace{OUTSIDE_NOTE}")
                    os.close(stack.pop())
                    names.pop()
                    name = "."
                    if not last:
                        continue
                elif name == "." and not last:
                    continue
                if not hidden:
                    _visible([name], path)
                name = _as_listed(name, stack[-1])
                try:
                    fd = os.open(name, (flags if last else DIR_FLAGS) | _OPEN_FLAGS, 0o644, dir_fd=stack[-1])
                except OSError as exc:
                    instead, new_folder = self._detour(exc, name, stack, names, path, last, make_dirs)
                    if new_folder:  # no symlink: nothing to count, a folder to remove if the call fails
                        made.append((os.dup(stack[-1]), name))
                    else:
                        detours += 1
                        if detours > _MAX_LINKS:
                            raise ToolFailure(f"{path!r} has too many symlinks to resolve") from exc
                    pending.extendleft(reversed(instead))
                    if len(names) + len(pending) > MAX_DEPTH:
                        raise ToolFailure(_too_deep(path)) from exc
                    continue
                if last:
                    done = True
                    return fd, "/".join([*names, name] if name != "." else names) or "."
                stack.append(fd)
                names.append(name)
        finally:
            for fd in stack[1:]:
                os.close(fd)
            _undo(made, keep=done)

    def _detour(
        self,
        exc: OSError,
        name: str,
        stack: list[int],
        names: list[str],
        path: str,
        last: bool,
        make_dirs: bool,
    ) -> tuple[list[str], bool]:
        """After a failed open: the components to walk instead (a symlink's target, or the name
        again after making its folder) and whether a folder was made, or a :class:`ToolFailure`
        saying why not."""
        try:
            target = os.readlink(name, dir_fd=stack[-1])
        except OSError:
            target = None
        if target is not None:
            if target.startswith("/"):
                parts = self._parts(target, shown=path)
                while len(stack) > 1:
                    os.close(stack.pop())
                names.clear()
                return parts, False
            return target.split("/"), False
        if isinstance(exc, FileNotFoundError) and make_dirs and not last:
            try:
                os.mkdir(name, 0o755, dir_fd=stack[-1])
            except FileExistsError:
                return [name], False  # made by another process meanwhile: not ours to remove
            return [name], True
        if isinstance(exc, FileNotFoundError):
            missing = path if last else "/".join([*names, name])
            raise NotFound(f"there is no {'file' if last else 'folder'} {missing!r}")
        if isinstance(exc, NotADirectoryError):
            raise NotAFolder(f"{path!r} is not a directory")
        if isinstance(exc, IsADirectoryError):
            raise IsAFolder(f"{path!r} is a directory")
        raise ToolFailure(f"cannot open {path!r}: {exc.strerror}")

    def _inside(self, path: str, shown: str | None) -> str:
        """What to do after an absolute path outside the root: the path inside it that a model may have
        meant ("/notes/todo.txt" for "notes/todo.txt", "/" for "."), where that path or the folder it
        would be made in is there, else that no tool can reach it. Not for a symlink's target
        (``shown``: the link's own name was the path asked for), nor a hidden name."""
        parts = [part for part in path.split("/") if part]
        if shown is not None or any(part.startswith(".") for part in parts):
            return OUTSIDE_NOTE
        relative = "/".join(parts) or "."
        for candidate in (relative, "/".join(parts[:-1])) if len(parts) > 1 else (relative,):
            try:
                fd, _ = self.open(candidate, os.O_RDONLY)
            except ToolFailure:
                continue
            os.close(fd)
            return f"; paths are relative to the workspace root: did you mean {relative!r}?"
        return OUTSIDE_NOTE

    def _parts(self, path: str, *, shown: str | None = None) -> list[str]:
        """The path's components below the root; an absolute path must lie inside the root."""
        if "\x00" in path:
            raise OutsideWorkspace("the path contains a NUL byte")
        text = path.strip() or "."
        if text.startswith("/"):
            root = os.fspath(self.path)
            if text != root and not text.startswith(root.rstrip("/") + "/"):
                raise OutsideWorkspace(f"{shown or path!r} is outside the workspace{self._inside(text, shown)}")
            text = text[len(root) :]
        parts = [part for part in text.split("/") if part]
        if len(parts) > MAX_DEPTH:
            raise ToolFailure(_too_deep(path))
        return parts


def _too_deep(path: str) -> str:
    shown = path if len(path) <= 80 else path[:80] + "..."
    return f"{shown!r} is too deep: a path here has at most {MAX_DEPTH} names (folders and the file)"


def _undo(made: list[tuple[int, str]], *, keep: bool) -> None:
    """Remove the folders a failed call made, newest first (a folder something else filled is kept),
    and close their parents' descriptors."""
    for parent, name in reversed(made):
        if not keep:
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=parent)
        os.close(parent)


class NotFound(ToolFailure):
    """A path with a missing component; the tool adds what to try instead."""


class NotAFolder(ToolFailure):
    """A path with a file where a folder should be."""


class IsAFolder(ToolFailure):
    """A folder where a file was asked for; the tool that asked adds what to do instead."""


class HiddenPath(ToolFailure):
    """A hidden name (``.git``, ``.env``) in a path that ``open(..., hidden=False)`` was given."""


def _visible(names: Iterable[str], path: str) -> None:
    """Refuse a hidden name (``.git``, ``.env``): writes there can plant code or secrets."""
    for name in names:
        if name.startswith(".") and name not in (".", ".."):
            raise HiddenPath(f"{path!r} is a hidden path ({name!r})")


def _as_listed(name: str, folder: int) -> str:
    """The name in ``folder`` that ``name`` means: itself, or where no such name is there but one
    is with each ``\\xNN`` (NN from 80 to ff) read as the byte that is not UTF-8 it shows (the
    listing writes such a byte so), that one."""
    if "\\x" not in name:
        return name
    raw = _ESCAPED_BYTE.sub(lambda match: chr(0xDC00 + int(match.group(1), 16)), name)
    return raw if raw != name and not _exists(name, folder) and _exists(raw, folder) else name


def _exists(name: str, folder: int) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except (OSError, ValueError):
        return False
    return True
