"""Making text from outside safe to write: to a UTF-8 file, to JSON, to a terminal.

File names, tool results and replies can hold lone surrogates (a file name that is not UTF-8 comes
to Python as ``\\udcXX``; JSON's ``"\\ud800"`` decodes to one). Writing such a string as UTF-8
raises, so it is escaped first: a byte that was not UTF-8 as ``\\xNN``, another lone surrogate as
``\\uXXXX``. Model text shown on a terminal also loses its control characters, so a reply cannot
retitle the window, hide text or move the cursor.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls but tab and newline, DEL, and the C1 controls (CSI, OSC, ... in their 8-bit form).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_surrogates(text: str) -> str:
    """``text`` with every lone surrogate escaped, so it encodes as UTF-8."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    point = ord(match.group())
    if 0xDC80 <= point <= 0xDCFF:  # a byte that was not UTF-8, as surrogateescape carries it
        return f"\\x{point - 0xDC00:02x}"
    return f"\\u{point:04x}"


def printable(text: str) -> str:
    """``text`` for a terminal: surrogates escaped, control characters (ESC, BEL, CR...) dropped."""
    return _CONTROL.sub("", escape_surrogates(text))


def to_json(value: Any) -> str:
    """``value`` as one line of JSON that always encodes as UTF-8 and that a strict reader takes:
    non-ASCII text is kept as it is, a lone surrogate becomes the JSON escape ``\\uXXXX`` (it reads
    back as the same string), and what JSON cannot hold is written as text (see :func:`json_text`)."""
    line = json_text(value, ensure_ascii=False)
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", line)


_MOST_DEPTH = 200  # nesting written out in full; deeper values are cut (nothing valid gets there)
_MOST_BITS = 14_000  # about 4 200 digits: Python will not print a longer integer


def json_text(value: Any, **dumps: Any) -> str:
    """``json.dumps(value, **dumps)``, never raising for the values a model can send: NaN and
    Infinity become the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (never bare: strict
    readers refuse those), an integer too long to print becomes ``"<an integer of N bits>"``,
    nesting past 200 levels is cut to ``"..."``, and anything else is written as ``str()``."""
    try:
        return json.dumps(value, allow_nan=False, default=str, **dumps)
    except (ValueError, RecursionError):
        return json.dumps(_plain(value, 0), allow_nan=False, default=str, **dumps)


def _plain(value: Any, depth: int) -> Any:
    """``value`` with what JSON cannot write replaced by text (recursion bounded by ``_MOST_DEPTH``)."""
    if depth > _MOST_DEPTH:
        return "..."
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value).bit_length() > _MOST_BITS:
        return f"<an integer of {abs(value).bit_length()} bits>"
    if isinstance(value, dict):
        return {str(key): _plain(sub, depth + 1) for key, sub in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(sub, depth + 1) for sub in value]
    return value
