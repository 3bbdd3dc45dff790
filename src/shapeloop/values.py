"""Numbers, dates, times and names a model made up: a call's value that nothing it was given writes.

Offered tools that do not fit the task, a small model calls one anyway and fills it in: "Set an alarm
for 7am" became ``days_between("2023-04-15", "2023-04-16")``, "Play some jazz" became
``bpm_to_ms(bpm=120)``, "Book a table in Rome" became ``searchHotels(check_in="2023-09-15", nights=2)``.
On the tune half of the suite, five of the six such first calls held a number or a date written
nowhere in the task, against none of the first calls that were right. A value cannot come from
nowhere: it comes from the task, the caller's instructions or an earlier result, written as the
model was given it or in another common form ("March 3rd 2024" for ``2024-03-03``, "2:30 pm" for
``14:30``, "4.5%" for ``0.045``, "three" for ``3``).

Numbers, ISO dates and times are questioned, and names (:func:`_is_name`) where the parameter takes
one (:func:`_names_taken`: ``city``, ``team``, ``player``): "Who won the 2018 FIFA World Cup?" became
``get_team_standing(team="FC Barcelona")``, "the weather at postcode 9008" became
``get_weather(city="Oslo")``. A name is written where one of its words is ("Barcelona" for "FC
Barcelona"), or as :meth:`_Written._holds_name` reads it. Other text is rewritten too freely to
check: a code ("the UK" is ``"GB"``, "Nvidia" is ``"NVDA"``), a setting, a title, a sentence, a
query, an expression, a path; but not the example the parameter's own documentation gives, where
that is made of words (``search_files(text="timeout")`` from 'e.g. "timeout"'). Only required
arguments (and what is nested in them), never an enum or const value, the parameter's default, or an
id (ids have their own check, :mod:`shapeloop.ids`). 0 and 1 pass: no one writes the 1 of ``x**2``.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import math
import re
import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any

from shapeloop.grounding import identifier_words, is_text, result_words, takes_input
from shapeloop.ids import is_id_name

# Check names as well as numbers, dates and times (a switch for the benchmark's variants).
NAMES = True
# Check text that copies its parameter's documented example (see _copied_example).
EXAMPLES = True

_NUMBER = re.compile(
    r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*(k|m|bn|thousand|million|billion)\b)?"
    r"|(?<=[a-zA-Z])\d+(?:\.\d+)?",
    re.IGNORECASE,
)
_SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}
# a value worked out from a written one by a unit the task names: minutes and seconds, hours, days
# and weeks, thousands (ms, grams), percent
_FACTORS = (1, 100, 60, 3600, 24, 7, 1000)
_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40,
    "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000,
    "dozen": 12, "twice": 2, "double": 2, "triple": 3, "thrice": 3, "quadruple": 4, "half": 0.5,
}  # fmt: skip
_WORDS = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")(?:-(one|two|three|four|five|six|seven|eight|nine))?\b")
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
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?(?:\s*[-–]\s*(\d{1,2})(?:st|nd|rd|th)?)?"
_YEAR = r"(?:,?\s+(\d{4}))?"
_ISO_VALUE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?")
_TIME_VALUE = re.compile(r"(\d{1,2}):(\d{2})(?::\d{2})?")
# dates as people write them: 2024-03-03, 3/3/2024, 3.3.2024, March 3rd 2024, 3 March 2024, 3rd of March
_WRITTEN_DATES = (
    (re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)"), "ymd"),
    (re.compile(r"(?<![\d/.])(\d{1,2})[/.](\d{1,2})[/.](\d{4}|\d{2})(?![\d/.])"), "dmy"),
    (re.compile(rf"\b{_MONTH}\s+{_DAY}\b{_YEAR}", re.IGNORECASE), "mdy"),
    (re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b{_YEAR}", re.IGNORECASE), "dmy-named"),
)
_WRITTEN_TIMES = (
    re.compile(r"(?<![\d:.])(\d{1,2})(?:[:.](\d{2}))?\s*([ap])\.?m\b\.?", re.IGNORECASE),
    re.compile(r"(?<![\d:])(\d{1,2})[:.h](\d{2})(?::\d{2}(?:\.\d+)?)?(?![\d:])(?!\s*[ap]\.?m\b)", re.IGNORECASE),
)
# words that make a date relative to one written ("tomorrow", "next Friday"): a date within two
# weeks of a written date passes
_RELATIVE = re.compile(
    r"\b(?:today|tonight|tomorrow|yesterday|next|last|this|week|weekend|monday|tuesday|wednesday|thursday"
    r"|friday|saturday|sunday)\b",
    re.IGNORECASE,
)
# "On which day of the week did 14 July 1789 fall?" names no date relative to another.
_DAY_OF_THE_WEEK = re.compile(r"\bdays? of the week\b", re.IGNORECASE)


def _relative(text: str) -> bool:
    """Whether ``text`` holds a word that can make a date relative to a written one (not the "week"
    of "the day of the week")."""
    return _RELATIVE.search(_DAY_OF_THE_WEEK.sub("", text)) is not None


def made_up_values(parameters: Mapping[str, Any], args: Mapping[str, Any], seen: str) -> list[tuple[str, Any]]:
    """The ``(path, value)`` of every number, date, time or name in a required argument that
    ``seen`` does not write, in any of the forms above.

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
    defs = {**(parameters.get("definitions") or {}), **(parameters.get("$defs") or {})}
    questioned = [
        found
        for name in required
        if isinstance(name, str) and name in args
        for found in _questioned(name, _schema(properties.get(name), defs), args[name], defs)
    ]
    if not questioned:
        return []
    written = _Written(seen)
    return [(path, value) for path, value in questioned if not written.holds(value)]


def _schema(schema: Any, defs: Mapping[str, Any]) -> Mapping[str, Any]:
    """A property's schema, its local ``$ref`` followed (pydantic puts enums and models in ``$defs``)."""
    if not isinstance(schema, Mapping):
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
        target = defs.get(ref.rsplit("/", 1)[-1])
        return {**target, **{k: v for k, v in schema.items() if k != "$ref"}} if isinstance(target, Mapping) else {}
    return schema


def _fixed(schema: Mapping[str, Any], value: Any, defs: Mapping[str, Any]) -> bool:
    """Whether the schema itself gives the value: an enum or const (in any ``anyOf``/``oneOf``
    branch) or the default."""
    if "enum" in schema or "const" in schema or ("default" in schema and value == schema["default"]):
        return True
    branches = [_schema(b, defs) for key in ("anyOf", "oneOf") for b in schema.get(key) or ()]
    return any("enum" in b or "const" in b for b in branches)


def _questioned(path: str, schema: Mapping[str, Any], value: Any, defs: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """The numbers, date or time strings and names in ``value`` that are the model's own choice."""
    if _fixed(schema, value, defs) or is_id_name(_own_name(path)):
        return
    if isinstance(value, Mapping):
        properties = schema.get("properties") or {}
        for key, item in value.items():
            sub = properties.get(key) if isinstance(properties, Mapping) else None
            yield from _questioned(f"{path}.{key}", _schema(sub, defs), item, defs)
    elif isinstance(value, list):
        items = _schema(schema.get("items"), defs)
        for index, item in enumerate(value):
            yield from _questioned(f"{path}[{index}]", items, item, defs)
    elif _is_number(value) or (
        isinstance(value, str) and (_made_up_text(path, schema, value.strip()) or _copied_example(path, schema, value))
    ):
        yield path, value


def _made_up_text(path: str, schema: Mapping[str, Any], text: str) -> bool:
    """Whether a text value is the model's own choice: a date or time, or a name (:func:`_is_name`)
    where the parameter takes one (:func:`_names_taken`)."""
    return _is_date_or_time(text) or (NAMES and _is_name(text) and _names_taken(path, schema))


# An example in a parameter's description: 'e.g. "timeout"', "for example Oslo", "such as `SELECT 1`".
_EXAMPLE = re.compile(
    r"\b(?:e\.g\.|for example|for instance|such as)[:,]?\s*"
    r"(?:\"([^\"]+)\"|'([^']+)'|`([^`]+)`|“([^”]+)”|([^,;()\"'`“]+?)(?=[,;()]|\.(?:\s|$)|\s+or\s|$))",
    re.IGNORECASE,
)
# Words of a parameter's name that say it takes a setting, whose example is as good a choice as any
# ("celsius" for a unit, "json" for a format): not checked.
_SETTINGS = frozenset(
    ("unit", "units", "format", "language", "lang", "locale", "sort", "order", "mode", "style", "type", "kind",
     "encoding", "currency", "timezone", "tz", "level", "theme", "precision", "method", "algorithm", "engine",
     "model", "version", "scale", "system", "region", "country", "separator", "delimiter", "case")
)  # fmt: skip


def _copied_example(path: str, schema: Mapping[str, Any], value: str) -> bool:
    """Whether a text value is the example its parameter's documentation gives (an ``examples`` entry,
    or one written after "e.g." in its description): ``search_files(text="timeout")`` for a task
    that names no timeout, from 'the text to look for, e.g. "timeout"'. Both qwen2.5-coder models
    searched for it. Not for a path, a URL or an address (the example may be a real file), a setting
    (``unit``, ``format``, ``language``: the example is as good a choice as any), nor a code
    (:func:`_wordlike`)."""
    name = _own_name(path)
    if not EXAMPLES or takes_input(name, schema) or not _SETTINGS.isdisjoint(identifier_words(name)):
        return False
    wanted = value.strip().casefold()
    described = schema.get("description")
    written = [m.group(m.lastindex or 0) for m in _EXAMPLE.finditer(described)] if isinstance(described, str) else []
    listed = schema.get("examples")
    examples = [*written, *(str(e) for e in listed if isinstance(e, str))] if isinstance(listed, list) else written
    return bool(wanted) and any(
        wanted == example.strip().rstrip(".").casefold() and _wordlike(example) for example in examples
    )


def _wordlike(example: str) -> bool:
    """An example made of words (``timeout``, ``Oslo``), not a code: a code is written from the task
    in another form ("iron" is ``Fe``, "dollars" is ``USD``), and may well be the one it means."""
    return re.search(r"[^\W\d_]{4,}", example) is not None and not example.isupper()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_date_or_time(text: str) -> bool:
    return bool(_ISO_VALUE.fullmatch(text) or _TIME_VALUE.fullmatch(text))


# Words of a parameter's name that say it takes a name: of a place, a team, a person, a company.
# Not a setting ("unit", "language", "priority"), a title or a message, which a model may choose or
# write: "Celsius" for ``unit`` is no name made up.
_NAMED = frozenset(
    ("city", "town", "village", "country", "nation", "region", "province", "county", "location", "place",
     "destination", "origin", "venue", "team", "club", "player", "athlete", "person", "people", "author",
     "artist", "band", "singer", "musician", "actor", "director", "composer", "company", "organization",
     "organisation", "brand", "employee", "customer", "client", "recipient", "contact", "manager", "owner",
     "member", "student", "patient", "user", "hotel", "restaurant", "airport", "station", "airline")
)  # fmt: skip
# Letters that NFKD leaves whole, and their Latin spelling ("Tromsø", "Łódź", "Diyarbakır").
_PLAIN_LETTERS = str.maketrans({"ø": "o", "ł": "l", "đ": "d", "ı": "i", "ß": "ss", "æ": "ae", "œ": "oe",
                                "þ": "th", "ð": "d"})  # fmt: skip
# Short words of a name that say nothing of which one it is
_NAME_FILLERS = frozenset(("of", "de", "la", "le", "el", "the", "and", "van", "von", "da", "di", "du", "del"))


def _names_taken(path: str, schema: Mapping[str, Any]) -> bool:
    """Whether a parameter takes a name, by its name's words (:data:`_NAMED`), and not a file path,
    a URL or an email address."""
    name = _own_name(path)
    words = {word.removesuffix("s") for word in identifier_words(name)}
    return not _NAMED.isdisjoint(words) and not takes_input(name, schema)


def _own_name(path: str) -> str:
    """The parameter's own name at the end of an argument's path (``destination.city`` -> ``city``,
    ``items[0]`` -> ``items``)."""
    return path.rsplit(".", 1)[-1].split("[", 1)[0]


def _is_name(text: str) -> bool:
    """A name: one to four words, the first a capital letter, with a small letter and a word of two
    letters or more ("FC Barcelona", "Oslo"; not "GB", "NVDA" or "H2O", a code; not a sentence, a
    path or an expression)."""
    words = text.split()
    return (
        1 <= len(words) <= 4
        and text[:1].isupper()
        and any(c.islower() for c in text)
        and re.search(r"[/\\@:=()<>{}\[\]*+^|;]", text) is None
        and bool(_name_words(text))
    )


def _plain(text: str) -> str:
    """``text`` case-folded, without accents."""
    folded = unicodedata.normalize("NFKD", text.casefold().translate(_PLAIN_LETTERS))
    return "".join(c for c in folded if not unicodedata.combining(c))


def _name_words(text: str) -> frozenset[str]:
    """A name's words that tell it apart: two letters or more, case-folded, without accents or plural
    s, not "of" or "de"."""
    return frozenset(word for word in result_words(_plain(text)) if len(word) >= 2) - _NAME_FILLERS


def _latin(text: str) -> bool:
    """Whether every letter of ``text`` is a Latin one (a task in another script may name a place in
    its own letters: 東京 for ``"Tokyo"``)."""
    return all(unicodedata.name(c, "LATIN").startswith("LATIN") for c in text if c.isalpha())


def _key(number: float) -> float:
    return round(number, 9)


class _Written:
    """The numbers, dates and times a text writes, read once, and the names it writes, read when asked."""

    def __init__(self, text: str) -> None:
        numbers = set(_numbers(text))
        self.numbers = {
            _key(candidate)
            for number in numbers
            for factor in _FACTORS
            for candidate in (number * factor, -number * factor, number / factor, -number / factor)
            if math.isfinite(candidate)
        }
        self.dates = set(_dates(text))
        self.relative = _relative(text)
        self.times = set(_times(text))
        self.text = text

    @functools.cached_property
    def _plain_text(self) -> str:
        return _plain(self.text)

    @functools.cached_property
    def _squashed(self) -> str:
        return re.sub(r"[\W_]+", "", self._plain_text)

    @functools.cached_property
    def _words(self) -> frozenset[str]:
        return _name_words(self.text)

    def _holds_name(self, value: str) -> bool:
        """Whether a name is written: one of its words ("barcelona" for "FC Barcelona"), a word it
        begins with ("Man" for "Manchester United"), its letters run together or apart ("spiderman"
        for "Spider-Man"), its initials ("NYC" for "New York", "UK" for "United Kingdom"); or the
        text has letters of another script, where a name cannot be compared."""
        words = _name_words(value)
        if not words.isdisjoint(self._words) or not _latin(self.text):
            return True
        if any(word[:end] in self._words for word in words for end in range(3, len(word))):
            return True
        squashed = re.sub(r"[\W_]+", "", _plain(value))
        if len(squashed) >= 4 and squashed in self._squashed:
            return True
        initials = "".join(word[0] for word in re.findall(r"[^\W\d_]+", _plain(value)))
        # as a word, or with one more letter ("NYC": New York City)
        written = rf"(?<![^\W\d_]){initials}[^\W\d_]?(?![^\W\d_])"
        return len(initials) >= 2 and re.search(written, self._plain_text) is not None

    def holds(self, value: Any) -> bool:
        if isinstance(value, str):
            return self._holds_text(value.strip())
        try:
            number = float(value)
        except OverflowError:  # a whole number too long for a float: nobody wrote that
            return False
        return number in (0, 1) or (math.isfinite(number) and _key(number) in self.numbers)

    def _holds_text(self, value: str) -> bool:
        iso = _ISO_VALUE.fullmatch(value)
        if iso is not None:
            year, month, day = (int(part) for part in iso.group(1, 2, 3))
            if not self._holds_date(year, month, day):
                return False
            return iso.group(4) is None or (int(iso.group(4)), int(iso.group(5))) in self.times
        clock = _TIME_VALUE.fullmatch(value)
        if clock is not None:
            return (int(clock.group(1)), int(clock.group(2))) in self.times
        return self._holds_name(value)

    def _holds_date(self, year: int, month: int, day: int) -> bool:
        if {(year, month, day), (None, month, day)} & self.dates:
            return True
        if not self.relative:
            return False
        try:
            wanted = datetime.date(year, month, day)
        except ValueError:
            return False
        for known in self.dates:
            with contextlib.suppress(ValueError, TypeError):
                if abs((datetime.date(known[0], known[1], known[2]) - wanted).days) <= 14:  # type: ignore[arg-type]
                    return True
        return False


def _numbers(text: str) -> Iterator[float]:
    """Every number ``text`` writes: digits ("2,500", "1.5 million", "5k"; "100,200,300" also as
    three), number words ("three", "twenty-five", "a dozen")."""
    for match in _NUMBER.finditer(text):
        digits = match.group(0)
        scale = _SCALE.get((match.group(1) or "").casefold(), 1.0)
        digits = digits[: match.start(1) - match.start(0)] if match.group(1) else digits
        with contextlib.suppress(ValueError, OverflowError):
            number = float(digits.replace(",", "").strip())
            yield from {number, number * scale}  # "20 m/s" is 20, not 20 million
            if "," in digits:  # "100,200,300": a list as much as a number
                yield from (float(part) for part in digits.split(",") if part.strip("-"))
    for match in _WORDS.finditer(text.casefold()):
        yield _NUMBER_WORDS[match[1]] + (_NUMBER_WORDS[match[2]] if match[2] else 0)


def _dates(text: str) -> Iterator[tuple[int | None, int, int]]:
    """(year or None, month, day) of every date written in ``text``; a numeric d/m/y both ways, a
    range ("May 2-5") as both its ends."""
    for pattern, order in _WRITTEN_DATES:
        for match in pattern.finditer(text):
            if order == "ymd":
                yield int(match[1]), int(match[2]), int(match[3])
            elif order == "dmy":
                year = int(match[3]) if len(match[3]) == 4 else 2000 + int(match[3])
                yield year, int(match[2]), int(match[1])
                yield year, int(match[1]), int(match[2])
            else:
                month, days = (match[1], match.group(2, 3)) if order == "mdy" else (match[3], match.group(1, 2))
                written = int(match[4]) if match[4] else None
                for day in days:
                    if day:
                        yield written, _MONTHS[month.casefold()], int(day)


def _times(text: str) -> Iterator[tuple[int, int]]:
    """(hour, minute) of every clock time written in ``text``: "2:30 pm" is (14, 30)."""
    for match in _WRITTEN_TIMES[0].finditer(text):
        hour, minute = int(match[1]) % 12, int(match[2] or 0)
        yield (hour + 12 if match[3].casefold() == "p" else hour), minute
    for match in _WRITTEN_TIMES[1].finditer(text):
        yield int(match[1]), int(match[2])
    if re.search(r"\b(?:noon|midday)\b", text, re.IGNORECASE):
        yield 12, 0
    if re.search(r"\bmidnight\b", text, re.IGNORECASE):
        yield 0, 0


# The layouts a date or time argument held to written values is given in: each is used where the
# argument's pattern (or its format, "date") takes it. None with seconds: the check reads hours and
# minutes, and any seconds pass, so those values cannot be listed.
_LAYOUTS = ("%Y-%m-%d", "%H:%M", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M")
# A pattern that is a date or time layout and nothing else, anchored: digits in runs of a fixed
# length, and separators ("^\d{4}-\d{2}-\d{2}$"; a dot escaped); not "^[^/]+$", which a date
# also matches.
_LAYOUT_ONLY = re.compile(r"\^(?:\\d\{\d\}|\\d|[-/: T]|\\[-/:. T])+\$")
# A numeric date with a two-digit year ("4/7/85"): the check reads it as 20xx, which is no reason to
# make that the only year a call may give.
_SHORT_YEAR = re.compile(r"(?<![\d/.])\d{1,2}[/.]\d{1,2}[/.]\d{2}(?![\d/.])")


_Moment = tuple[datetime.date | None, datetime.time | None]  # a written date, time, or both
_MAX_CHOICES = 32  # more written values than this, and the argument is left open (the check still reads it)


def held_to_written(parameters: Mapping[str, Any], seen: str) -> Mapping[str, Any]:
    """``parameters`` with every date or time argument that :func:`made_up_values` questions held to
    an ``enum`` of the dates or times ``seen`` writes, in the argument's layout; the same object where
    none is.

    The check refuses any other value, so the constrained step may as well not offer one:
    qwen2.5-coder-0.5b wrote ``1478-07-14`` for "14 July 1789" and ``23:30`` for "2:30 pm", in the
    right layout, and the refusal left it nothing to do but answer "Not run.". Only where what the
    check accepts can be listed: a text argument (required, or inside one) held to an anchored date
    or time layout by its ``pattern`` (``^\\d{4}-\\d{2}-\\d{2}$``; not one with seconds) or by
    ``format: date``, and ``seen`` writing such values. Dates stay open where ``seen`` writes one
    without a year or with two digits of one, or any word that can make a date relative ("today",
    "next", "this", "week", a weekday: the check then takes any date near a written one).
    """
    required = parameters.get("required") or []
    properties = parameters.get("properties") or {}
    if not isinstance(required, list) or not isinstance(properties, Mapping):
        return parameters
    held = {
        name: new
        for name in required
        if isinstance(name, str) and (new := _held(name, properties.get(name), seen)) is not None
    }
    if not held:
        return parameters
    return {**parameters, "properties": {**properties, **held}}


@functools.lru_cache(maxsize=2)  # asked for each offered tool with a date or time, in one step
def _written_values(seen: str) -> tuple[_Moment, ...]:
    """Every date and time ``seen`` writes, alone and (a date with a time) together: the dates only
    where the check takes no others (see :func:`held_to_written`), the pairs only where there are few."""
    dates = set(_dates(seen))
    dated = not _relative(seen) and _SHORT_YEAR.search(seen) is None
    dated = dated and all(year is not None for year, _, _ in dates)
    days = sorted({datetime.date(y, m, d) for y, m, d in dates if y and _valid(y, m, d)}) if dated else []
    clocks = sorted({datetime.time(h, m) for h, m in _times(seen) if 0 <= h < 24 and 0 <= m < 60})
    pairs = [(day, clock) for day in days for clock in clocks] if len(days) * len(clocks) <= _MAX_CHOICES else []
    return (*((day, None) for day in days), *((None, clock) for clock in clocks), *pairs)


def _valid(year: int, month: int, day: int) -> bool:
    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    return True


def _held(path: str, schema: Any, seen: str) -> dict[str, Any] | None:
    """The schema of one argument held to the written values its layout takes (at any depth), or
    None where nothing changes."""
    if not isinstance(schema, Mapping) or is_id_name(path) or "enum" in schema or "const" in schema:
        return None
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        nested = {key: new for key, sub in properties.items() if (new := _held(key, sub, seen)) is not None}
        return {**schema, "properties": {**properties, **nested}} if nested else None
    items = schema.get("items")
    if isinstance(items, Mapping):
        new_items = _held(path, items, seen)
        return {**schema, "items": new_items} if new_items is not None else None
    if not is_text(schema):
        return None
    pattern, layout = schema.get("pattern"), schema.get("format")
    if isinstance(pattern, str) and _LAYOUT_ONLY.fullmatch(pattern):
        fits = [text for text in _in_layouts(_written_values(seen)) if _full(pattern, text)]
    elif pattern is None and layout == "date":
        fits = [day.isoformat() for day, clock in _written_values(seen) if day is not None and clock is None]
    else:
        return None
    values: list[Any] = list(dict.fromkeys(fits))
    if not values or len(values) > _MAX_CHOICES:  # a log's timestamps: left open, and checked
        return None
    if isinstance(schema.get("default"), str) and schema["default"] not in values:
        values.append(schema["default"])  # the check passes a parameter's default
    kind = schema.get("type")
    if isinstance(kind, list) and "null" in kind:
        values.append(None)
    # the enum says the type: llama.cpp's grammar keeps a list of types and drops the enum
    return {**{k: v for k, v in schema.items() if k not in ("pattern", "format", "type")}, "enum": values}


def _in_layouts(moments: tuple[_Moment, ...]) -> Iterator[str]:
    """Each moment in every layout that takes exactly the parts it has."""
    for day, clock in moments:
        for layout in _LAYOUTS:
            if ("%Y" in layout) == (day is not None) and ("%H" in layout) == (clock is not None):
                yield datetime.datetime.combine(day or datetime.date.min, clock or datetime.time()).strftime(layout)


def _full(pattern: str, text: str) -> bool:
    """Whether ``text`` matches an anchored layout ``pattern`` (:data:`_LAYOUT_ONLY`); one with an
    escape Python's ``re`` refuses (``\\T``) matches nothing."""
    try:
        return re.fullmatch(pattern, text) is not None
    except re.error:
        return False
