"""The JSON Lines files a run writes: :func:`open_jsonl` opens one to append to, and a path no file
can have, or one that cannot be written, is refused with one kind of message.

Below the events (whose ``JsonlSink`` appends through it) and the run's transcript (which streams
and saves through it); ``shapeloop.run`` re-exports :func:`open_jsonl`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from typing import IO

try:
    import fcntl
except ImportError:  # Windows: no flock; files are written unlocked there
    fcntl = None  # type: ignore[assignment]

from shapeloop.errors import TranscriptError


def open_jsonl(path: str | os.PathLike[str], *, exclusive: bool = False) -> IO[str]:
    """Open ``path`` to append JSON Lines to, creating it; refuse a symlink, a folder, or anything
    that is not a regular file, with a message saying what to pass instead.

    Args:
        path: the file.
        exclusive: take the file's exclusive lock (``flock``), held until the file is closed or the
            process ends; a file another open file holds locked is refused.

    Raises:
        TranscriptError: the path cannot be written, or (``exclusive``) another writer holds it.
    """
    shown = os.fspath(path)
    check_path(shown)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise unwritable(shown, why_unwritable(exc)) from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise TranscriptError(f"cannot write a transcript to {shown!r}: it is not a regular file; name a file")
    if exclusive:
        try:
            _lock(fd, shown)
        except TranscriptError:
            os.close(fd)
            raise
    return os.fdopen(fd, "a", encoding="utf-8")


@contextlib.contextmanager
def held(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the lock of the file at ``path``, where there is one, while the block replaces it: a file
    another conversation or run is writing is refused (replaced, its writer would go on appending to a
    file no name leads to)."""
    shown = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # nothing there yet (or nothing to lock): the write says what is wrong
        yield
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            _lock(fd, shown)
        yield
    finally:
        os.close(fd)


def _lock(fd: int, shown: str) -> None:
    """Take the exclusive lock of an open file, or refuse: another open file holds it."""
    if fcntl is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        raise TranscriptError(
            f"cannot write a transcript to {shown!r}: another conversation or run is writing it (the file "
            "is locked); close that one first (close(), or the end of its with block), or name another file"
        ) from exc
    except OSError:  # a file system without locks: the file is written unlocked, as before
        pass


def check_path(shown: str) -> None:
    """Refuse, before anything touches the disk, a path no file can have."""
    why = (
        "the path is empty" if not shown
        else "it holds a NUL character" if "\0" in shown
        else "it ends with a slash, as a folder's path does" if shown.endswith(("/", os.sep))
        else None
    )  # fmt: skip
    if why is not None:
        raise unwritable(shown, why)


def why_unwritable(exc: OSError) -> str | None:
    """What an ``OSError`` of writing a transcript means, in words."""
    said = {
        errno.ELOOP: "it is a symlink",
        errno.EISDIR: "it is a directory",
        errno.ENAMETOOLONG: "its name is too long for the file system (give a shorter one)",
    }
    return said.get(exc.errno or 0, exc.strerror)


def unwritable(shown: str, why: str | None) -> TranscriptError:
    """The error for a transcript that cannot be written to ``shown``, saying why and what to do."""
    return TranscriptError(f"cannot write a transcript to {shown!r}: {why}; name a file in a folder you can write")
