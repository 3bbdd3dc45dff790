"""What a path that does not exist may mean, read off the workspace's files (as ``list_files`` shows
them): the one file it can only mean (:func:`twin`), the one file whose name shares a telling word
with it (:func:`namesake`), else the names to try (:func:`near`). Reading may follow a guess and
says so; writing never guesses."""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence

_MAX_HINTS = 8
_MAX_LISTED_HINT = 30


def near(path: str, files: Sequence[str]) -> str:
    """What to try instead of a path that does not exist: files of that name (or a name like it)
    elsewhere in the workspace, else the workspace's files, so the model's next call can be right."""
    wanted = stem(path)
    by_stem: dict[str, list[str]] = {}
    for line in files:
        by_stem.setdefault(stem(line), []).append(line)
    close = difflib.get_close_matches(wanted, by_stem, n=3, cutoff=0.75) if wanted else []
    similar = [line for found in close for line in by_stem[found]][:_MAX_HINTS]
    if similar:
        return f"; did you mean {' or '.join(repr(line) for line in similar)}?"
    if not files:
        return "; the workspace has no files"
    more = f" and {len(files) - _MAX_LISTED_HINT} more" if len(files) > _MAX_LISTED_HINT else ""
    return f"; the workspace has: {', '.join(files[:_MAX_LISTED_HINT])}{more}"


def twin(path: str, files: Sequence[str]) -> str | None:
    """The one file a missing path can only mean: the same path in other case, else the only file
    of that name (in any case) in the workspace; None when there is no such file or several.
    Never the path itself: a name the listing can only show escaped does not open as shown."""
    others = [f for f in files if f != path]
    wanted = re.sub(r"^(?:\./)+", "", path.strip()).casefold()
    if not wanted:
        return None
    for match in ([f for f in others if f.casefold() == wanted],
                  [f for f in others if f.rsplit("/", 1)[-1].casefold() == wanted.rsplit("/", 1)[-1]]):  # fmt: skip
        if len(match) == 1:
            return match[0]
        if match:
            return None
    return None


def namesake(path: str, files: Sequence[str]) -> str | None:
    """The one file whose name shares a word with a missing path's name: a small model guesses
    ``notes/secret_word.txt`` for ``data/secret.txt``, then repeats the guess whatever the error
    lists. A word that several of the workspace's file names hold (``draft``, ``datei``) ties the
    guess to none of them, in any language. None when no file or several do."""
    others = [f for f in files if f != path]
    wanted = name_words(path)
    if not others or not wanted:
        return None
    words = {line: name_words(line) for line in others}
    held = Counter(word for found in words.values() for word in found)
    telling = {word for word in wanted if held[word] == 1}
    sharing = [line for line in others if telling & words[line]]
    return sharing[0] if len(sharing) == 1 else None


def stem(path: str) -> str:
    """A path's file name without its extension, case-folded: what a model misremembers least."""
    name = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return (name.rsplit(".", 1)[0] if "." in name[1:] else name).casefold()


def name_words(path: str) -> set[str]:
    """The words of a path's file name (without its extension), letters and digits of any script, three
    or more."""
    return {word for word in re.findall(r"[^\W_]+", stem(path)) if len(word) >= 3}
