"""What a tool's parameters take, and what the conversation gives them.

Read off parameter names, types and descriptions, and the text of the task and the results: which
tool takes a value a result names or its description says a result gives (:func:`taken_from`,
:func:`described_in`), which optional arguments the task asks for
(:func:`asked_only`, :func:`named_required`), which files, URLs or addresses a text names
(:func:`named_inputs`), which layout a date argument is written in
(:func:`layout_patterns`), whether an answer declines (:func:`declines`), and which tool gives what
another takes (:func:`gives`). The identifiers a model made up are :mod:`shapeloop.ids`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

# Words of a parameter's name that say nothing about what it takes.
_GENERIC = frozenset(
    ("id", "ids", "uuid", "uuids", "name", "names", "type", "value", "values", "data", "text", "info", "number",
     "numbers", "key", "code", "list", "item", "items", "the", "of", "a", "an", "to", "from", "by", "in", "for")
)  # fmt: skip


def _name_words(name: str) -> set[str]:
    """A parameter name's meaningful words, without plural s and one-letter pieces:
    ``employee_id`` -> {"employee"}, ``trackId`` -> {"track"}, ``lat1`` -> {"lat"}."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return {word for word in result_words(spaced) if len(word) > 1} - _GENERIC


def identifier_words(name: str) -> list[str]:
    """The words of a tool's or a parameter's name, case-folded: ``sendEmail``, ``send_email``,
    ``mail.send-now`` -> their words split at capitals, "_", "." and "-"."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|[_.\-]", " ", name).casefold().split()


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def result_words(text: str) -> frozenset[str]:
    """The words of a text as :func:`taken_from` compares them: letters of any script, case-folded,
    without plural s."""
    return frozenset(_stem(word) for word in re.findall(r"[^\W\d_]+", text.casefold()))


def taken_from(parameters: Mapping[str, Any], words: frozenset[str], text: str = "") -> str | None:
    """The first required parameter whose name's words are all among ``words`` (those of a tool's
    result, from :func:`result_words`), or None: the result names what the tool takes ("employee id
    E-30418" for ``employee_id``).

    Small models answered a two-step task with its first result (an employee's id for the leave
    balance it unlocks); a tool that takes a value the result names is the likely next step.

    A parameter with fixed values (an ``enum`` or ``const``) is named only where the result, ``text``,
    writes one of them: "36 goals in 35 league matches" names no ``league`` of
    ``premier_league``/``la_liga``.
    """
    required = parameters.get("required") or []
    properties = parameters.get("properties")
    for name in required if isinstance(required, list) else []:
        named = _name_words(str(name))
        if not named or not named <= words:
            continue
        schema = properties.get(name) if isinstance(properties, Mapping) else None
        fixed = _fixed_values(schema) if isinstance(schema, Mapping) else None
        if fixed is None or any(holds_value(text, value) for value in fixed):
            return str(name)
    return None


# Where a parameter's description ends its head, the thing it takes: "latitude | of the first point",
# "molar mass | in g/mol", "ISO 4217 code|, e.g. USD".
_HEAD_END = re.compile(
    r"[,;:(]|\s(?:of|in|for|from|to|with|as|at|on|by|that|which|e\.g\.|i\.e\.|such as|like)(?!\w)", re.IGNORECASE
)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
# Heads that many results write without giving what the parameter takes ("Date of the meeting" after
# any result with a date in it).
_COMMON_HEADS = frozenset(
    ("date", "time", "day", "year", "month", "amount", "price", "total", "count", "size", "length", "quantity")
)
# A unit the description gives after "in": "molar mass in g/mol", "distance in km"; two characters or
# more with a letter among them, or "%" ("in 4 digits" gives none).
_UNIT = re.compile(r"\bin\s+(?!(?:the|a|an|this|that|its|their|which)\b)([^\W\d_][^\s,;()]+|%)", re.IGNORECASE)
# A code the description gives as its example: "ISO 4217 code, e.g. USD", "the ticker symbol, e.g. \"IBM\"".
_EXAMPLE_CODE = re.compile(r"(?i:\b(?:e\.g\.|for example|such as))[:,]?\s*[\"'“]?([A-Z][A-Z0-9]{1,5})(?![\w-])")


def described_in(parameters: Mapping[str, Any], text: str) -> str | None:
    """The first required parameter whose description says that ``text`` (a tool's result) gives
    what it takes, or None: the description's head is among the result's words ("latitude of the
    first point" after "latitude -2.171, longitude -79.9224"), the unit it gives follows a number in
    the result ("molar mass in g/mol" after "C6H12O6: 180.156 g/mol"), or the code it gives as an
    example stands in the result ("ISO 4217 code, e.g. USD" after "NVDA: 131.38 USD").

    A parameter's name alone (:func:`taken_from`) missed these: qwen2.5-coder-0.5b answered "how many
    moles in 50 g of glucose" with the molar mass, and "one NVDA share in euros" with the price in
    dollars, where a tool it had not called took the value the result gave.
    """
    required = parameters.get("required") or []
    properties = parameters.get("properties")
    if not isinstance(required, list) or not isinstance(properties, Mapping):
        return None
    words = result_words(text)
    for name in required:
        schema = properties.get(name) if isinstance(name, str) else None
        if not isinstance(schema, Mapping) or _fixed_values(schema) is not None:
            continue
        described = schema.get("description")
        if not isinstance(described, str):
            continue
        head = _ARTICLE.sub("", _HEAD_END.split(described.strip(), maxsplit=1)[0].strip())
        named = {word for word in _name_words(head) if len(word) >= 3}
        if named and named <= words and not named <= _COMMON_HEADS:
            return str(name)
        unit = _UNIT.search(described)
        written = unit.group(1).rstrip(".") if unit else ""
        unit_follows = re.search(rf"\d\s*{re.escape(written)}(?![\w/])", text, re.IGNORECASE) if written else None
        if unit_follows and (len(written) >= 2 or written == "%"):
            return str(name)
        code = _EXAMPLE_CODE.search(described)
        if code and re.search(rf"(?<![\w-]){code.group(1)}(?![\w-])", text):
            return str(name)
    return None


def _fixed_values(schema: Mapping[str, Any]) -> list[Any] | None:
    """The values a parameter's schema allows, where it lists them (``enum``, ``const``)."""
    if "const" in schema:
        return [schema["const"]]
    enum = schema.get("enum")
    return list(enum) if isinstance(enum, list) else None


def holds_value(text: str, value: Any) -> bool:
    """Whether ``text`` holds an argument's value as a whole: a number as a whole number, text not
    as part of a longer word or id ("E-1" is not in "E-10418")."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return False
    written = str(value).strip().casefold()
    if not written:
        return False
    edge = r"[\d.]" if isinstance(value, (int, float)) else r"[\w-]"
    return re.search(rf"(?<!{edge}){re.escape(written)}(?!{edge})", text.casefold()) is not None


def asked_only(parameters: Mapping[str, Any], words: frozenset[str], text: str) -> Mapping[str, Any]:
    """``parameters`` without the optional arguments nothing asks for: a top-level property that is
    not required stays only if every word of its name is among ``words`` (those of the task and the
    results, from :func:`result_words`) or one of its enum values is written in ``text``. The same
    object when nothing is left out.

    Small models fill every optional argument they are offered: ``read_file(path, length=1)``, a day
    count made ``inclusive``. Left out of the constrained step's schema, they take their defaults;
    "in fahrenheit" keeps ``unit`` (an enum value), "for 3 passengers" keeps ``passengers``.
    """
    properties = parameters.get("properties")
    required = parameters.get("required") or []
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return parameters
    kept = {
        name: schema for name, schema in properties.items()
        if name in required or _asked(str(name), schema, words, text)
    }  # fmt: skip
    if len(kept) == len(properties):
        return parameters
    return {**parameters, "properties": kept}


def _asked(name: str, schema: Any, words: frozenset[str], text: str) -> bool:
    named = _name_words(name)
    if named and named <= words:
        return True
    values = schema.get("enum", []) if isinstance(schema, Mapping) else []
    return any(holds_value(text, value) for value in values if isinstance(value, (str, int, float)))


def named_required(parameters: Mapping[str, Any], text: str) -> Mapping[str, Any]:
    """``parameters`` with every optional top-level argument required whose enum holds a value,
    other than its default, that ``text`` writes as a whole word. The same object when none is.

    Offered ``hash_text(text, algorithm="sha256")`` for "what's the crc32 checksum of 'shapeloop'?",
    qwen2.5-coder-0.5b left ``algorithm`` out: an optional argument is one a small model may skip.
    Required, it is written, and the enum holds the value the task names.
    """
    properties = parameters.get("properties")
    required = parameters.get("required") or []
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return parameters
    named = [
        name for name, schema in properties.items()
        if name not in required and isinstance(schema, Mapping) and isinstance(schema.get("enum"), list)
        and any(holds_value(text, value) for value in schema["enum"] if value != schema.get("default"))
    ]  # fmt: skip
    return {**parameters, "required": [*required, *named]} if named else parameters


# What a parameter takes, read off its name's words or its format, and how a task writes one.
# File extensions a name without a slash must end in to be taken for a file ("readme.md"), so that
# "google.com", "Mr.Smith" and "sys.argv" are not.
_EXTENSIONS = (
    "txt|md|markdown|rst|csv|tsv|json|jsonl|yaml|yml|toml|ini|cfg|conf|env|log|xml|html?|css|js|mjs|ts|tsx|jsx|py|"
    "ipynb|rb|go|rs|java|kt|c|h|cpp|hpp|cs|php|sh|bash|ps1|bat|sql|db|sqlite|pdf|docx?|xlsx?|pptx?|odt|png|jpe?g|"
    "gif|svg|webp|mp3|wav|mp4|mov|zip|tar|gz|tgz|bz2|xz|7z|rar|lock|bin|dat|pkl|parquet"
)
_INPUT_KINDS: tuple[tuple[str, frozenset[str], frozenset[str], re.Pattern[str]], ...] = (
    ("url", frozenset({"url", "uri", "link", "href"}), frozenset({"uri", "url", "iri"}),
     re.compile(r"\bhttps?://[^\s\"'<>`]+[^\s\"'<>`.,;:!?)\]}。、…]", re.IGNORECASE)),
    ("email", frozenset({"email"}), frozenset({"email", "idn-email"}),
     re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+(?<!\.)")),
    # a file: a quoted name with an extension ("'meeting notes.txt'"), a path with a slash and an
    # extension ("notes/todo.txt", "../../etc/passwd"), an absolute path ("/data", not the full stop
    # after "/var/log/syslog."), or a name with
    # a known extension ("readme.md", "archive.tar.gz"); not a number, a version or "e.g."
    ("path", frozenset({"path", "file", "filename", "filepath", "dir", "directory", "folder"}), frozenset({"path"}),
     re.compile(rf"(?P<q>[\"'`])(?P<quoted>[^\"'`\n/\\]{{1,80}}?\.(?:{_EXTENSIONS}))(?P=q)"
                r"|(?<![\w@/.~-])(?:~?\.{0,2}/)?(?:[\w.-]+/)+[\w-]+(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{0,5}(?![\w/@-])"
                r"|(?<![\w@/.~:-])(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]+)*/?(?<!\.)(?![\w@-])"
                rf"|(?<![\w@/.~-])[\w-]+(?:\.[\w-]+)*\.(?:{_EXTENSIONS})(?![\w/@.-]*\w)", re.IGNORECASE)),
)  # fmt: skip


def _written(match: re.Match[str]) -> str:
    """What a match names: the name inside the quotes, or the match."""
    return match.groupdict().get("quoted") or match.group(0)


def _abbreviation(written: str) -> bool:
    """A letter, a dot and a letter ("e.g", "i.e", "a.m"), or a product named like a script ("Node.js",
    "React.js"): not a file."""
    return re.fullmatch(r"[^\W\d_]\.[^\W\d_]|[A-Z][a-z]+\.js", written) is not None


def named_inputs(parameters: Mapping[str, Any], text: str, *, alone: bool = False) -> list[tuple[str, str]]:
    """The ``(parameter, value)`` of every required parameter that takes a file path, a URL or an
    email address, paired with the first one ``text`` writes: "Who is the maintainer named in
    readme.md?" names ``readme.md`` for ``read_file(path)``. A parameter's kind is read off its name's
    last word (``path``, ``file_name``, ``page_url``, ``customer_email``) or its ``format``. With ``alone``, only where
    ``text`` writes one such value (a pointer to a file, not a listing of files).

    What a task names this way is something the model cannot see without the tool: qwen2.5-coder-0.5b
    answered "The maintainer of this repository is @johndoe." without reading the file.
    """
    return [(name, values[0]) for name, values in written_inputs(parameters, text) if len(values) == 1 or not alone]


def written_inputs(parameters: Mapping[str, Any], text: str) -> list[tuple[str, list[str]]]:
    """Every required parameter that takes a file path, a URL or an email address, with every such
    value ``text`` writes, in order (see :func:`named_inputs`); not a parameter ``text`` gives none."""
    properties = parameters.get("properties")
    required = parameters.get("required") or []
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return []
    found = []
    for name in required:
        schema = properties.get(name)
        if not isinstance(schema, Mapping) or schema.get("type", "string") != "string" or "enum" in schema:
            continue
        written = _input_pattern(str(name), schema)
        if written is not None:
            values = list(dict.fromkeys(_written(m) for m in written.finditer(text) if not _abbreviation(_written(m))))
            if values:
                found.append((str(name), values))
    return found


def _input_pattern(name: str, schema: Mapping[str, Any]) -> re.Pattern[str] | None:
    """How a text writes what a parameter takes, where it takes a file path, a URL or an email
    address: read off its name's last word ("customer_email", "file_path"; not "email_body") or its
    ``format``."""
    words = re.findall(r"[a-z]+", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).lower())
    for _, named, formats, written in _INPUT_KINDS:
        if (words and words[-1] in named) or schema.get("format") in formats:
            return written
    return None


def takes_input(name: str, schema: Mapping[str, Any]) -> bool:
    """Whether a parameter takes a file path, a URL or an email address (see :func:`named_inputs`)."""
    return _input_pattern(name, schema) is not None


_DECLINING = re.compile(
    r"\b(?:can ?not|can'?t|can’t|could(?: not|n'?t|n’t)|unable|not able|not possible|impossible|no (?:tool|way|access)|"
    r"(?:do|does|did)(?: not|n'?t|n’t) have|(?:am|is|are)(?: not|n'?t|n’t) (?:allowed|permitted)|sorry)\b",
    re.IGNORECASE,
)


def declines(answer: str) -> bool:
    """Whether an answer says the task cannot be done ("I cannot delete files with these tools",
    "Sorry, I don't have access to that"): such an answer states nothing it would have to have read."""
    return _DECLINING.search(answer) is not None


# A date or time layout a parameter's description writes ("the date, YYYY-MM-DD", "HH:MM (24-hour)",
# "yyyy-MM-dd HH:mm:ss", "YYYY-MM-DDTHH:MM:SSZ"): groups of two to four layout letters.
_PART = r"(?:YYYY|yyyy|YY|yy|MM|DD|dd|HH|hh|mm|SS|ss)"
_LAYOUT = re.compile(rf"(?<![\w/:.+-]){_PART}(?:[-/:. T]{_PART})+Z?(?![\w/:-])")
_CHOICE = re.compile(r"\b(?:or|am|pm|a\.m\.|p\.m\.)(?:\b|$)", re.IGNORECASE)


def layout_patterns(parameters: Mapping[str, Any]) -> Mapping[str, Any]:
    """``parameters`` with a ``pattern`` on every text property, at any depth, whose description writes
    a date or time layout and that has no pattern, enum or format of its own: "YYYY-MM-DD" becomes
    ``^\\d{4}-\\d{2}-\\d{2}$``, so the constrained step writes the value in that layout. The same
    object when none does.

    qwen2.5-coder-0.5b called ``day_of_week(date="14 July 1789")`` against "the date, YYYY-MM-DD", as
    the task wrote it; held to the layout, the digits are the date's.
    """
    changed = with_pattern(parameters, None, _layout_pattern)
    return parameters if changed is None else changed


def _layout_pattern(schema: Mapping[str, Any], name: str | None) -> str | None:
    """The pattern of the one date or time layout a text property's description writes, if any."""
    described = str(schema.get("description", ""))
    layouts = set(_LAYOUT.findall(described))
    # one layout, and no other choice beside it ("YYYY-MM-DD or 'today'", "hh:mm am/pm")
    if len(layouts) == 1 and not _CHOICE.search(described):
        return "^" + _layout_regex(layouts.pop()) + "$"
    return None


def is_text(schema: Mapping[str, Any]) -> bool:
    """Whether a property's schema takes text (``"string"``, or a list of types holding it)."""
    kind = schema.get("type")
    return kind == "string" or (isinstance(kind, list) and "string" in kind)


def with_pattern(
    schema: Mapping[str, Any], name: str | None, pattern: Callable[[Mapping[str, Any], str | None], str | None]
) -> dict[str, Any] | None:
    """The schema with ``pattern(property, its name)`` on every text property, at any depth, that has
    no pattern, enum, const or format of its own and for which it gives one; None where nothing
    changes. An array's items go by the array's name."""
    out: dict[str, Any] = {}
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        changed = {
            key: with_pattern(sub, str(key), pattern) for key, sub in properties.items() if isinstance(sub, Mapping)
        }
        if any(sub is not None for sub in changed.values()):
            out["properties"] = {key: changed.get(key) or sub for key, sub in properties.items()}
    items = schema.get("items")
    if isinstance(items, Mapping) and (sub := with_pattern(items, name, pattern)) is not None:
        out["items"] = sub
    if is_text(schema) and not any(key in schema for key in ("pattern", "enum", "const", "format")):
        found = pattern(schema, name)
        if found is not None:
            out["pattern"] = found
    return {**schema, **out} if out else None


def _layout_regex(layout: str) -> str:
    """``YYYY-MM-DD`` -> ``\\d{4}-\\d{2}-\\d{2}``; ``T`` and the separators stand for themselves."""
    return "".join(
        rf"\d{{{len(m.group(0))}}}" if m.group(1) else re.escape(m.group(0)) if m.group(0) == "." else m.group(0)
        for m in re.finditer(r"([YyMDdHhmSs])\1*|.", layout)
    )


def gives(name: str, description: str, parameters: Mapping[str, Any], wanted: str) -> bool:
    """Whether a tool, by its name and description, gives what a parameter called ``wanted`` takes,
    and takes no such thing itself: ``geocode`` ("Latitude and longitude of a city", taking ``city``)
    gives ``latitude``; ``geo_distance`` (described with latitudes, taking ``lat1`` "latitude of the
    first point") takes it. The parameter's words (:func:`_name_words`) must all be among the tool's.
    """
    needed = {word for word in _name_words(wanted) if len(word) >= 4}  # "day" is in too many names
    if not needed or not needed <= result_words(" ".join(identifier_words(name)) + " " + description):
        return False
    properties = parameters.get("properties")
    for key, schema in properties.items() if isinstance(properties, Mapping) else ():
        described = str(schema.get("description", "")) if isinstance(schema, Mapping) else ""
        if needed & (_name_words(str(key)) | result_words(described)):
            return False
    return True
