"""Numbers, dates and times a model made up: a call's value that nothing it was given writes.

Offered tools that do not fit the task, a small model calls one anyway and fills it in: "Set an alarm
for 7am" became ``days_between("2023-04-15", "2023-04-16")``, "Play some jazz" became
``bpm_to_ms(bpm=120)``, "Book a table in Rome" became ``searchHotels(check_in="2023-09-15", nights=2)``.
On the tune half of the suite, five of the six such first calls held a number or a date written
nowhere in the task, against none of the first calls that were right. A value cannot come from
nowhere: it comes from the task, the caller's instructions or an earlier result, written as the
model was given it or in another common form ("March 3rd 2024" for ``2024-03-03``, "2:30 pm" for
``14:30``, "4.5%" for ``0.045``, "three" for ``3``).

Only numbers and ISO dates and times are questioned: other text is rewritten too freely to check
("the UK" is ``"GB"``, "Nvidia" is ``"NVDA"``). Only required arguments (and what is nested in them),
never an enum or const value, the parameter's default, or an id (ids have their own check,
:mod:`shapeloop.grounding`). 0 and 1 pass: no one writes the 1 of ``x**2``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from shapeloop.grounding import is_id_name

_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|(?<=[a-zA-Z])\d+(?:\.\d+)?")
_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40,
    "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000,
    "dozen": 12, "twice": 2, "double": 2, "triple": 3, "thrice": 3, "quadruple": 4, "half": 0.5,
}  # fmt: skip
_MONTHS = {
    name: number
    for number, names in enumerate(
        (("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
         ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
         ("november", "nov"), ("december", "dec")),
        start=1,
    )
    for name in names
}  # fmt: skip
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(\d{4}))?"
_ISO_VALUE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?")
_TIME_VALUE = re.compile(r"(\d{1,2}):(\d{2})(?::\d{2})?")
# dates as people write them: 2024-03-03, 3/3/2024, 3.3.2024, March 3rd 2024, 3 March 2024, 3rd of March
_WRITTEN_DATES = (
    (re.compile(r"(?<!\d)(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)"), "ymd"),
    (re.compile(r"(?<![\d/.])(\d{1,2})[/.](\d{1,2})[/.](\d{4}|\d{2})(?![\d/.])"), "dmy"),
    (re.compile(rf"\b{_MONTH}\s+{_DAY}\b{_YEAR}", re.IGNORECASE), "mdy"),
    (re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b{_YEAR}", re.IGNORECASE), "dmy-named"),
)
_WRITTEN_TIMES = (
    re.compile(r"(?<![\d:])(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\b\.?", re.IGNORECASE),
    re.compile(r"(?<![\d:])(\d{1,2})[:.h](\d{2})(?![\d:])(?!\s*[ap]\.?m\b)", re.IGNORECASE),
)


def made_up_values(parameters: Mapping[str, Any], args: Mapping[str, Any], seen: str) -> list[tuple[str, Any]]:
    """The ``(path, value)`` of every number, date or time in a required argument that ``seen``
    does not write, in any of the forms above.

    Args:
        parameters: the tool's JSON schema for its arguments.
        args: the call's arguments.
        seen: what the model was given: the caller's instructions, the task, earlier results (not
            the tools' documentation, whose examples small models copy).
    """
    required = parameters.get("required") or []
    properties = parameters.get("properties") or {}
    if not isinstance(required, list) or not isinstance(properties, Mapping):
        return []
    written = _Written(seen)
    made_up = []
    for name in required:
        if name not in args:
            continue
        schema = properties.get(name)
        for path, value in _questioned(str(name), schema if isinstance(schema, Mapping) else {}, args[name]):
            if not written.holds(value):
                made_up.append((path, value))
    return made_up


def _questioned(path: str, schema: Mapping[str, Any], value: Any) -> Iterator[tuple[str, Any]]:
    """The numbers and date or time strings in ``value`` that are the model's own choice."""
    if "enum" in schema or "const" in schema or is_id_name(path.rsplit(".", 1)[-1].split("[", 1)[0]):
        return
    if "default" in schema and value == schema["default"]:
        return
    if isinstance(value, Mapping):
        properties = schema.get("properties") or {}
        for key, item in value.items():
            sub = properties.get(key) if isinstance(properties, Mapping) else None
            yield from _questioned(f"{path}.{key}", sub if isinstance(sub, Mapping) else {}, item)
    elif isinstance(value, list):
        items = schema.get("items")
        for index, item in enumerate(value):
            yield from _questioned(f"{path}[{index}]", items if isinstance(items, Mapping) else {}, item)
    elif _is_number(value) or (isinstance(value, str) and _is_date_or_time(value.strip())):
        yield path, value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_date_or_time(text: str) -> bool:
    return bool(_ISO_VALUE.fullmatch(text) or _TIME_VALUE.fullmatch(text))


class _Written:
    """The numbers, dates and times a text writes, read once."""

    def __init__(self, text: str) -> None:
        folded = text.casefold()
        self.numbers = [float(n.replace(",", "")) for n in _NUMBER.findall(text)]
        self.numbers += [v for word, v in _NUMBER_WORDS.items() if re.search(rf"\b{word}\b", folded)]
        self.dates = set(_dates(text))
        self.times = set(_times(text))

    def holds(self, value: Any) -> bool:
        if isinstance(value, str):
            return self._holds_text(value.strip())
        return value in (0, 1) or any(
            math.isclose(value, candidate, rel_tol=1e-9, abs_tol=1e-12)
            for number in self.numbers
            for candidate in (number, -number, number / 100, number * 100)
        )

    def _holds_text(self, value: str) -> bool:
        iso = _ISO_VALUE.fullmatch(value)
        if iso is not None:
            year, month, day = (int(part) for part in iso.group(1, 2, 3))
            if not ({(year, month, day), (None, month, day)} & self.dates):
                return False
            return iso.group(4) is None or (int(iso.group(4)), int(iso.group(5))) in self.times
        clock = _TIME_VALUE.fullmatch(value)
        return clock is not None and (int(clock.group(1)), int(clock.group(2))) in self.times


def _dates(text: str) -> Iterator[tuple[int | None, int, int]]:
    """(year or None, month, day) of every date written in ``text``; a numeric d/m/y both ways."""
    for pattern, order in _WRITTEN_DATES:
        for match in pattern.finditer(text):
            if order == "ymd":
                yield int(match[1]), int(match[2]), int(match[3])
            elif order == "dmy":
                year = int(match[3]) if len(match[3]) == 4 else 2000 + int(match[3])
                yield year, int(match[2]), int(match[1])
                yield year, int(match[1]), int(match[2])
            else:
                month, day = (match[1], match[2]) if order == "mdy" else (match[2], match[1])
                yield (int(match[3]) if match[3] else None), _MONTHS[month.casefold()], int(day)


def _times(text: str) -> Iterator[tuple[int, int]]:
    """(hour, minute) of every clock time written in ``text``: "2:30 pm" is (14, 30)."""
    for match in _WRITTEN_TIMES[0].finditer(text):
        hour, minute = int(match[1]) % 12, int(match[2] or 0)
        yield (hour + 12 if match[3].casefold() == "p" else hour), minute
    for match in _WRITTEN_TIMES[1].finditer(text):
        yield int(match[1]), int(match[2])
    if re.search(r"\bnoon\b", text, re.IGNORECASE):
        yield 12, 0
    if re.search(r"\bmidnight\b", text, re.IGNORECASE):
        yield 0, 0
