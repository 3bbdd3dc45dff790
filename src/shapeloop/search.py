"""``search_files``: the lines of a workspace's files that hold a text, counted.

Small models cannot count the lines they read ("How many lines of log/app.log contain ERROR?"), nor
find a file by what it says without reading every file; a search gives both. Where no line holds a
phrase of several words, the lines that hold one of its words are given instead: qwen2.5-coder-1.5b
searched "server port" where the file said ``port = 8080``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from shapeloop.errors import ToolFailure
from shapeloop.text import escape_surrogates

MAX_FILES = 1000  # files searched at most
MAX_DEPTH = 64  # folders below the one searched (os.fwalk recurses once per level)
MAX_BYTES = 200_000  # read of each file
MAX_SHOWN = 40  # matching lines shown
_SHOWN_CHARS = 200  # of each line shown
_SAID_CHARS = 100  # of the text, where the result repeats it
_MAX_WORDS = 8  # words the fallback looks for
# words a text of several words does not fall back to
_FUNCTION_WORDS = frozenset(
    ("the", "and", "for", "with", "that", "this", "from", "are", "was", "were", "has", "have", "its", "into",
     "not", "but", "any", "all", "which", "what", "who", "where", "when", "how", "does", "did", "file", "files",
     "line", "lines")
)  # fmt: skip

# where a line holds what is looked for, or -1
Finder = Callable[[str], int]


class Searchable(Protocol):
    """What a search reads a folder through: :class:`~shapeloop.workspace.Workspace` is one (declared
    here, so this module need not import the workspace that imports it)."""

    def file_at(self, path: str) -> str | None:
        """The regular file ``path`` names, relative to the root with symlinks resolved, or None."""
        ...

    def files_under(self, path: str, *, limit: int, depth: int) -> tuple[str, list[str], bool]:
        """The folder as the root shows it, the files under it, and whether any were left out."""
        ...

    def read_start(self, path: str, length: int) -> tuple[str, bool]:
        """Up to ``length`` bytes of a text file from its start, and whether that is all of it."""
        ...


@dataclass
class _Found:  # filled in by _holding as it reads
    shown: list[str] = field(default_factory=list)
    count: int = 0
    files: dict[str, None] = field(default_factory=dict)


def search(
    space: Searchable,
    text: str,
    path: str = ".",
    *,
    max_shown: int = MAX_SHOWN,
    max_files: int = MAX_FILES,
    max_bytes: int = MAX_BYTES,
) -> str:
    """The lines of the text files under ``path`` (a folder or a file) that hold ``text``, case and runs
    of spaces aside, each as ``file:line: text``, and a last line that counts them and says what was
    left unsearched. A folder's hidden files are not searched (a file named alone is, as ``read_file``
    reads it), nor the files in it that cannot be read as text; a file named alone that cannot be is
    an error, as with ``read_file``. At most ``max_files`` files are searched, and the first
    ``max_bytes`` bytes of each."""
    written = " ".join(text.split())
    needle = written.casefold()
    if not needle:
        raise ToolFailure('give the text to look for, e.g. text="timeout"')
    skipped = 0
    named = space.file_at(path)
    if named is not None:
        texts, cut, where = [(named, *space.read_start(named, max_bytes))], False, repr(escape_surrogates(named))
    else:
        shown, files, cut = space.files_under(path, limit=max_files, depth=MAX_DEPTH)
        texts = _readable(space, files, max_bytes)
        skipped = len(files) - len(texts)
        where = "the workspace" if shown == "." else repr(escape_surrogates(shown))
    said = repr(_clip(written, _SAID_CHARS))
    notes = _notes(texts, cut, skipped, max_files, max_bytes)
    found = _holding(texts, lambda line: line.find(needle), max_shown)
    header = ""
    if not found.count:
        words = [w for w in dict.fromkeys(re.findall(r"\w+", needle)) if len(w) > 2 and w not in _FUNCTION_WORDS]
        words = words[:_MAX_WORDS]
        if len(words) > 1 or (words and words[0] != needle):
            pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, words)) + r")(?!\w)")
            found = _holding(texts, lambda line: m.start() if (m := pattern.search(line)) else -1, max_shown)
            listed = ", ".join(map(repr, words))
            header = f"no line in {where} holds {said}; " + (
                f"these hold {listed}" if len(words) == 1 else f"these hold one of its words ({listed})"
            )
            if not found.count:
                nor = listed if len(words) == 1 else f"any of its words ({listed})"
                return f"no line in {where} holds {said}, nor {nor}{notes}"
            said = listed if len(words) == 1 else "one of those words"
    if not found.count:
        return f"no line in {where} holds {said}{notes}"
    if len(found.files) == 1:
        files_said = repr(escape_surrogates(next(iter(found.files))))
    else:
        files_said = f"{len(found.files)} files"
    lines_said = "1 line" if found.count == 1 else f"{found.count} lines"
    more = f", the first {max_shown} shown" if found.count > max_shown else ""
    summary = f"[{lines_said} in {files_said} {'holds' if found.count == 1 else 'hold'} {said}{more}{notes}]"
    return "\n".join(([f"[{header}]"] if header else []) + found.shown + [summary])


def _readable(space: Searchable, files: list[str], max_bytes: int) -> list[tuple[str, str, bool]]:
    """Each file's name, its text (from the start) and whether that is all of it; not the files that
    cannot be read as text (binary, unreadable, with a second hard link, gone since)."""
    texts = []
    for name in files:
        try:
            texts.append((name, *space.read_start(name, max_bytes)))
        except ToolFailure:
            continue
    return texts


def _holding(texts: list[tuple[str, str, bool]], finder: Finder, max_shown: int) -> _Found:
    """The lines of ``texts`` where ``finder`` finds what is looked for (in a line casefolded, runs of
    spaces as one; -1 where it does not), the first ``max_shown`` of them shown around what was found."""
    found = _Found()
    for name, content, _ in texts:
        for number, line in enumerate(content.split("\n"), 1):
            flat = " ".join(line.split())
            at = finder(flat.casefold())
            if at < 0:
                continue
            found.count += 1
            found.files[name] = None
            if len(found.shown) < max_shown:
                found.shown.append(f"{escape_surrogates(name)}:{number}: {_around(flat, at)}")
    return found


def _around(line: str, at: int) -> str:
    """The line (its spaces run together), cut to its shown length around the place ``at``."""
    if len(line) <= _SHOWN_CHARS:
        return line
    start = max(0, min(at - _SHOWN_CHARS // 4, len(line) - _SHOWN_CHARS))
    end = start + _SHOWN_CHARS
    return ("..." if start else "") + line[start:end] + ("..." if end < len(line) else "")


def _clip(text: str, most: int) -> str:
    return text if len(text) <= most else text[:most] + "..."


def _notes(texts: list[tuple[str, str, bool]], cut: bool, skipped: int, max_files: int, max_bytes: int) -> str:
    """What was left unsearched: files past the limits, files that are not text, the ends of long
    files."""
    notes = []
    if cut:
        notes.append(
            f"not every file was searched (at most {max_files}, in folders at most {MAX_DEPTH} deep): search a folder "
            "within to see the rest"
        )
    if skipped:
        notes.append(f"{skipped} {'file' if skipped == 1 else 'files'} that could not be read as text passed over")
    partly = [name for name, _, whole in texts if not whole]
    if len(partly) == 1:
        notes.append(f"only the first {max_bytes} bytes of {escape_surrogates(partly[0])!r} were searched")
    elif partly:
        notes.append(f"only the first {max_bytes} bytes of {len(partly)} long files were searched")
    return "".join(f"; {note}" for note in notes)
