"""Identifiers a model made up: an ``id`` argument whose value appears nowhere in what it was given.

A small model asked "how many leave days does Ana Ruiz have left?" with ``find_employee(name)`` and
``get_leave_balance(employee_id)`` calls the second at once, with an id it invented (``"E-12345"``),
and then reports whatever the tool says about that id. An id cannot be guessed: it comes from the
task, from the caller's instructions, or from an earlier result. (The tools' documentation does not
count: its example ids, "e.g. E-12345", are the ones small models copy.) So a call whose id argument
holds a value found in none of them is not run; the model is told where the id has to come from.

Which arguments are ids is read off their names (``id``, ``user_id``, ``trackId``, ``order_ids``,
``uuid``) and the ``uuid`` format; enum values and the parameter's own default are never questioned.

The constrained step also holds an id to one word, or to a phrase the user's words quote
(:func:`id_patterns`, :func:`quoted`), and leaves out a tool whose required id nothing given could
fill (:func:`unsourced`): asked "What is the email address of Priya Raman's manager?",
qwen2.5-coder-0.5b called ``getManager(employee_id="E-12345")`` first, and after the refusal
``getContact`` with the same id, before it found her.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from shapeloop.grounding import is_text, with_pattern

_SNAKE_ID = re.compile(r"(?:^|[_-])(?:ids?|uuids?)$")
_CAMEL_ID = re.compile(r"[a-z0-9](?:Ids?|IDs?|Uuids?|UUIDs?)$")


def is_id_name(name: str) -> bool:
    """Whether a parameter's name says it holds an identifier."""
    return bool(_CAMEL_ID.search(name) or _SNAKE_ID.search(name.lower()))


def made_up_ids(parameters: Mapping[str, Any], args: Mapping[str, Any], seen: str) -> list[tuple[str, Any]]:
    """The ``(path, value)`` of every id argument whose value appears nowhere in ``seen``.

    Args:
        parameters: the tool's JSON schema for its arguments.
        args: the call's arguments.
        seen: the text the model had to go on: the caller's instructions, the task, earlier results
            (not the tools' documentation: its example ids are what small models copy).
    """
    folded = seen.casefold()
    return [(path, value) for path, value in _ids(parameters, args, "") if not _appears(value, folded)]


def _ids(schema: Mapping[str, Any], value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """The id values inside ``value``, walking objects and arrays along the schema."""
    if isinstance(value, Mapping):
        properties = schema.get("properties") or {}
        for key, item in value.items():
            sub = properties.get(key) if isinstance(properties, Mapping) else None
            sub = sub if isinstance(sub, Mapping) else {}
            where = f"{path}.{key}" if path else str(key)
            if _questioned(key, sub):
                if item != sub.get("default"):
                    yield from ((where, one) for one in _scalars(item))
            else:
                yield from _ids(sub, item, where)
    elif isinstance(value, list):
        items = schema.get("items")
        for index, item in enumerate(value):
            yield from _ids(items if isinstance(items, Mapping) else {}, item, f"{path}[{index}]")


def unsourced(parameters: Mapping[str, Any], given: str) -> str | None:
    """The first required id parameter that nothing in ``given`` could fill, or None: an integer id
    where ``given`` writes no digit, a text id whose documented example has a digit ("employee id,
    e.g. E-12345") where ``given`` writes no word of the example's shape (letters, digits and marks
    in the same order: "E-30418" is one, "12" is not). A text id with no such example may be any
    word ("alice"), and is never judged so."""
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping):
        return None
    for name in parameters.get("required") or ():
        schema = properties.get(name)
        if not isinstance(schema, Mapping) or not _questioned(str(name), schema) or "default" in schema:
            continue
        if schema.get("type") == "integer" and not re.search(r"\d", given):
            return str(name)
        example = _example(schema)
        if schema.get("type") == "string" and example and _shape(example) not in _shapes(given):
            return str(name)
    return None


def shown_in(parameters: Mapping[str, Any], text: str) -> tuple[str, list[str]] | None:
    """The first required text id parameter that words of ``text`` with a digit could fill, by the
    parameter's own documentation, with those words: each matches its ``pattern``, or where it has
    none (or one that could take long to match, see :func:`_fitting`), has the exact shape of its
    documented example, a letter in it. "manager of E-20931: Tomás Ortega (E-11802)" shows two
    values of the ``employee_id`` ("employee id, e.g. E-12345") of ``getContact``, though it never
    says "employee id"; "UTF-8" and "2024" show none."""
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping):
        return None
    words = [word for word in digit_words(text) if len(word) <= _LONGEST_ID]
    for name in parameters.get("required") or ():
        schema = properties.get(name)
        if not isinstance(schema, Mapping) or not _questioned(str(name), schema) or not is_text(schema):
            continue
        fits = _fitting(schema, words)
        if fits:
            return str(name), fits
    return None


def digit_words(text: str) -> list[str]:
    """The words of ``text`` (runs of letters, digits and hyphens) that hold a digit, once each, in order."""
    return list(dict.fromkeys(w.strip("-") for w in re.findall(r"[\w-]+", text) if re.search(r"\d", w)))


# No id is longer; a longer word is not matched against a caller's pattern at all.
_LONGEST_ID = 64
# A group with a quantifier after it ("^([a-z0-9]+-?)*$"): such a pattern can take seconds on one
# word of a result, so an id is read by its example instead.
_NESTED = re.compile(r"\)[*+?{]")


def _fitting(schema: Mapping[str, Any], words: Sequence[str]) -> list[str]:
    """The words that fit a text id's ``pattern``; where it has none, or one with a quantified
    group, or one Python cannot read, those of its documented example's exact shape (each letter
    "a", each digit "9": "E-11802" for "E-12345"), where the example has a letter."""
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and not _NESTED.search(pattern):
        try:
            return [word for word in words if re.search(pattern, word)]
        except re.error:
            pass
    example = _example(schema)
    if not example or not re.search(r"[^\W\d_]", example):
        return []
    return [word for word in words if _exact(word) == _exact(example)]


def _exact(word: str) -> str:
    """Each letter as "a", each digit as "9", marks as they are: "E-30418" -> "a-99999"."""
    return re.sub(r"[^\W\d_]", "a", re.sub(r"\d", "9", word))


def _example(schema: Mapping[str, Any]) -> str | None:
    """The first example with a digit that a parameter's description gives ("e.g. E-12345")."""
    examples = (m.group(1) for m in _EXAMPLE_ID.finditer(str(schema.get("description") or "")))
    return next((e for e in examples if re.search(r"\d", e)), None)


@functools.lru_cache(maxsize=2)  # asked for each offered tool, in one step
def _shapes(given: str) -> frozenset[str]:
    """The shapes of the words ``given`` writes, wherever they stand: "E-30418" in '{"id":"E-30418"}',
    "id=E-30418" or "E-30418's"."""
    return frozenset(_shape(word.strip("-")) for word in re.findall(r"[\w-]+", given))


# The example a description gives of an id: "e.g. E-12345", 'for example "R-1234"'.
_EXAMPLE_ID = re.compile(r"\b(?:e\.g\.|for example|such as)[:,]?\s*[\"'`“]?([\w-]+)", re.IGNORECASE)


def _shape(word: str) -> str:
    """Runs of letters as "a", of digits as "9", marks as they are: "E-30418" -> "a-9"."""
    return re.sub(r"[^\W\d_]+", "a", re.sub(r"\d+", "9", word))


def _questioned(name: str, schema: Mapping[str, Any]) -> bool:
    """An id parameter whose values are not fixed by the schema itself."""
    if "enum" in schema or "const" in schema:
        return False
    return is_id_name(str(name)) or schema.get("format") == "uuid"


def _scalars(value: Any) -> Iterator[Any]:
    if isinstance(value, list):
        for item in value:
            yield from _scalars(item)
    elif (isinstance(value, str) and value.strip()) or (isinstance(value, int) and not isinstance(value, bool)):
        yield value


def _appears(value: Any, folded: str) -> bool:
    """Whether the value is written in the text: a whole number as a whole number, text as itself."""
    if isinstance(value, int):
        return re.search(rf"(?<![\d.]){re.escape(str(value))}(?![\d])", folded) is not None
    text = value.strip().casefold()
    return text in folded or text.lstrip("#") in folded


# An id written alone: no space of any kind, no control character (and no quote or backslash, which
# llama.cpp's grammar would take raw).
ID_PATTERN = '^[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u180e\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"\\\\]+$'


def id_patterns(parameters: Mapping[str, Any], phrases: Sequence[str] = ()) -> Mapping[str, Any]:
    """``parameters`` with :data:`ID_PATTERN` on every text id property (:func:`is_id_name`), at
    any depth, that has no pattern, enum, const or format of its own, widened to each of ``phrases``
    as written (see :func:`quoted`); the same object when none does.

    qwen2.5-coder-0.5b called ``getHotelDetails(hotel_id="H-8812 Gion Garden Inn 41,200 JPY")`` with
    a whole line of the search's result: it passes the id check, since the result writes it, and the
    tool finds no such hotel. Held to one word, the id is ``H-8812``. An id with a space in it
    ("Share the sheet \"Q3 Budget\" with Ana") is quoted as often as not: the phrases the
    conversation quotes may be written, as quoted, and nothing else with a space can. Give an id that
    is neither a pattern of its own.
    """
    pattern = ID_PATTERN
    if phrases:  # no "(?:": llama.cpp takes none
        pattern = ID_PATTERN[:-1].replace("^", "^(", 1) + "|" + "|".join(map(_literal, phrases)) + ")$"
    changed = with_pattern(parameters, None, lambda schema, name: pattern if name and is_id_name(name) else None)
    return parameters if changed is None else changed


# A phrase quoted with a space in it: "Q3 Budget", 'Kyoto Trip', “Team A”, «Équipe B», `a b`: each
# opening quote and the marks that close it. A straight quote opens after no letter or digit and
# closes before none ("a 6\" pipe" opens nothing); a pair is read whole, however long, so that one
# long value does not shift the pairs after it, and kept if it is at most 60 characters, without a
# quote, backslash, control character, "^", "[" or "]".
_CLOSING = {'"': '"', "'": "'", "`": "`", "“": "”", "„": "“”", "«": "»", "‘": "’"}
_STRAIGHT = frozenset("\"'`")
_QUOTABLE = re.compile(r"[^\x00-\x1f\x7f\u2028\u2029\"'`\\^[\]“”„«»‘’]{1,60}")
_REGEX_SPECIAL = re.compile(r"([.$*+?(){}|])")  # each written as a class of one: both grammar engines take it
_FIRST_QUOTED, _LAST_QUOTED = 4, 12  # the phrases kept: the first quoted (the task's), and the newest


@functools.lru_cache(maxsize=2)  # asked for each offered tool, in one step
def quoted(text: str) -> tuple[str, ...]:
    """The phrases ``text`` quotes that have a space in them, each once: the first few (the caller's
    instructions' and the task's) and the newest. Not from a line that reports a failure or a refusal
    (``ERROR:``, ``DENIED:``): it quotes the model's own made-up values back."""
    found = []
    for line in text.splitlines():
        if not line.lstrip().startswith(("ERROR:", "DENIED:")):
            found += [phrase for phrase in _pairs(line) if re.search(r"\s", phrase) and _QUOTABLE.fullmatch(phrase)]
    phrases = list(dict.fromkeys(found))
    if len(phrases) <= _FIRST_QUOTED + _LAST_QUOTED:
        return tuple(phrases)
    return (*phrases[:_FIRST_QUOTED], *phrases[-_LAST_QUOTED:])


def _pairs(line: str) -> Iterator[str]:
    """What each pair of quotes on the line holds, stripped, in one pass (a quote left open costs
    nothing); a backslash escapes the next character, as JSON writes a quote inside a string."""
    opened: dict[str, int] = {}  # an opening quote -> where its phrase starts
    at = 0
    while at < len(line):
        mark = line[at]
        if mark == "\\":
            at += 2
            continue
        before = line[at - 1] if at else " "
        after = line[at + 1] if at + 1 < len(line) else " "
        closes = next((o for o in opened if mark in _CLOSING[o] and (o not in _STRAIGHT or not after.isalnum())), None)
        if closes is not None:
            yield line[opened.pop(closes) : at].strip()
        elif mark in _CLOSING and mark not in opened and (mark not in _STRAIGHT or not before.isalnum()):
            opened[mark] = at + 1
        at += 1


def _literal(phrase: str) -> str:
    """A phrase as a regex that both grammar engines read as itself."""
    return _REGEX_SPECIAL.sub(r"[\1]", phrase)
