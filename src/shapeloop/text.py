"""Making text from outside safe to write: to a UTF-8 file, to JSON, to a terminal.

File names, tool results and replies can hold lone surrogates (a file name that is not UTF-8 comes
to Python as ``\\udcXX``; JSON's ``"\\ud800"`` decodes to one). Writing such a string as UTF-8
raises, so it is escaped first: a byte that was not UTF-8 as ``\\xNN``, another lone surrogate as
``\\uXXXX``. Model text shown on a terminal also loses its control characters, so a reply cannot
retitle the window, hide text or move the cursor.
"""

from __future__ import annotations

import json
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
    """``value`` as one line of JSON that always encodes as UTF-8: non-ASCII text is kept as it
    is, and a lone surrogate becomes the JSON escape ``\\uXXXX`` (it reads back as the same string)."""
    line = json.dumps(value, ensure_ascii=False, default=str)
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", line)
