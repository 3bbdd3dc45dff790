"""Reading a step out of a prose reply. Pure functions, no I/O, never raises on any text.

The step is the *last* object in the reply that validates, not the span from the first ``{`` to the
last ``}``: real replies carry drafts, second thoughts after a correct object, braces inside strings
and whole programs inside string values.

Where a step may begin is found by one regular expression: an opening brace followed by one of the
step's keys (a brace inside a JSON string is followed by an escaped quote, so it never matches).
Those places are tried last first, each decoded by the standard library's JSON scanner from that
position, within a window that grows only while the object may be longer; every decode is charged
to a budget proportional to the reply's length, so reading is linear on any input, and nothing
recurses deeper than the JSON scanner's own guarded depth.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from shapeloop.limits import Limits, json_decoder
from shapeloop.step import BATCH_FIELDS, FIELDS, Batch, Call, LeanAnswer, LeanCalls, Step

_FENCE = re.compile(r"^[ \t]*```[A-Za-z0-9_.+-]*[ \t]*$", re.MULTILINE)
_THINK_TAGS = (("<think>", "</think>"), ("<thinking>", "</thinking>"))
_THINK_BLOCKS = tuple(
    (close, re.compile(re.escape(open_) + ".*?" + re.escape(close), re.DOTALL)) for open_, close in _THINK_TAGS
)
_SPACE = re.compile(r"\s*")
# An object that may be a step: its first key is one of the step's fields (extra keys are refused).
_SHAPES = (frozenset(FIELDS), frozenset(BATCH_FIELDS))  # a step's keys, or a batch's
# and in a batch run also its two lean shapes: {"calls": [...]} and {"answer": ...}
_BATCH_SHAPES = (*_SHAPES, frozenset({"calls"}), frozenset({"answer"}))
Shapes = tuple[frozenset[str], ...]
_OPENING = re.compile(r'\{[ \t\r\n]*"(?:' + "|".join(sorted(frozenset().union(*_BATCH_SHAPES))) + ')"')
_WINDOW = 256  # characters decoded at first from a candidate; grown fourfold while cut short
_VALIDATION_COST = 256  # what a full validation is charged, in characters of budget
_ENCLOSING_TRIES = 8  # earlier candidates tried as the step around a lean one


@dataclass(frozen=True, kw_only=True)
class Extraction:
    """What :func:`extract_step` found, and how.

    Attributes:
        step: the step (a :class:`Batch` for several calls at once), or None when the reply holds none.
        objects: how many places the scan found where a step may begin (an opening brace and
            one of the step's keys), outside ``<think>`` blocks.
        chosen: index of the winning object among those, in the order they begin; None when the
            whole reply was the step or no step was found.
        whole: the whole reply (after stripping) parsed as the step.
        stripped: what was set aside: ``"think"`` blocks and code ``"fence"`` lines.
        error: why no step was found, or why the most recent object was not a step.
    """

    step: Step | Batch | None
    objects: int = 0
    chosen: int | None = None
    whole: bool = False
    stripped: tuple[str, ...] = ()
    error: str | None = None

    @property
    def summary(self) -> str:
        """One readable line: what was done to find the step."""
        removed = f" (set aside: {', '.join(self.stripped)})" if self.stripped else ""
        if self.step is not None and self.whole:
            return f"the whole reply was the step{removed}"
        if self.step is not None:
            return f"object {(self.chosen or 0) + 1} of {self.objects} was the step{removed}"
        return f"no step among {self.objects} object(s){removed}: {self.error}"


def extract_step(text: str, *, limits: Limits | None = None, batch: bool = False) -> Extraction:
    """Find the step in a model's reply.

    The whole reply is tried first (also with a leading ``<think>`` block and an outer code fence
    taken off). Otherwise every place where a step may begin is found, those inside
    ``<think>...</think>`` are set aside, and the rest are decoded last first: the first that
    validates as a :class:`Step` wins. The reply's text is never altered, so a think tag or a
    fence inside a string value survives.

    In a batch run (``batch``) a step may also be written ``{"calls": [{"name", "arguments"}, ...]}``
    or ``{"answer": ...}``; elsewhere an object of one key is never a step.

    The JSON is read strictly (:func:`~shapeloop.limits.json_decoder`): an object holding NaN,
    Infinity or an integer longer than ``limits.max_integer_digits`` is not a step, and the error
    says which number.
    """
    decoder = json_decoder(limits or Limits())
    regions = _think_regions(text)
    stripped = (("think",) if regions else ()) + (("fence",) if _FENCE.search(text) else ())
    shapes = _BATCH_SHAPES if batch else _SHAPES
    for candidate in (text.strip(), _unwrap(text, regions)):
        whole = _as_step(candidate, decoder, shapes)
        if not isinstance(whole, str):
            return Extraction(step=whole, whole=True, stripped=stripped)
    starts = [match.start() for match in _OPENING.finditer(text)]
    if regions:
        starts = [start for start in starts if not _inside(start, regions)]
    return _last_step(text, starts, stripped, decoder, shapes)


def split_think(text: str) -> tuple[str, str]:
    """``(visible, thinking)``: the reply without its closed ``<think>`` blocks, and those blocks."""
    regions = _think_regions(text)
    if not regions:
        return text, ""
    visible, thinking, pos = [], [], 0
    for start, end in sorted(regions):
        if start < pos:
            continue
        visible.append(text[pos:start])
        thinking.append(text[start:end])
        pos = end
    visible.append(text[pos:])
    return "".join(visible).strip(), "\n".join(thinking)


def _unwrap(text: str, regions: list[tuple[int, int]]) -> str:
    """The reply without leading think blocks and without an outer code fence."""
    pos = _after_space(text, 0)
    for start, end in regions:
        if start != pos:
            break
        pos = _after_space(text, end)
    body = text[pos:].strip()
    first = body.find("\n")  # only the first and last lines matter: no split into every line
    if _FENCE.fullmatch(body if first == -1 else body[:first].rstrip("\r")):
        body = "" if first == -1 else body[first + 1 :]
    last = body.rfind("\n")
    if _FENCE.fullmatch(body[last + 1 :].rstrip("\r")):
        body = body[: max(last, 0)]
    return body.strip()


def _after_space(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _think_regions(text: str) -> list[tuple[int, int]]:
    """Spans of closed ``<think>...</think>`` (and ``<thinking>``) blocks, sorted and disjoint.

    One regular expression each, searched only up to the last closing tag, so a tag left open
    costs one scan."""
    kinds: list[list[tuple[int, int]]] = []
    for close, pattern in _THINK_BLOCKS:
        last = text.rfind(close)
        if last != -1:
            kinds.append([match.span() for match in pattern.finditer(text, 0, last + len(close))])
    return _merged(kinds[0] + kinds[1]) if len(kinds) == 2 else (kinds[0] if kinds else [])


def _merged(regions: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The regions, sorted, with overlapping ones joined."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(regions):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _inside(position: int, regions: list[tuple[int, int]]) -> bool:
    """``position`` lies in one of the sorted, disjoint ``regions``."""
    index = bisect.bisect_right(regions, position, key=lambda region: region[0]) - 1
    return index >= 0 and regions[index][0] <= position < regions[index][1]


def _last_step(
    text: str, starts: list[int], stripped: tuple[str, ...], decoder: json.JSONDecoder, shapes: Shapes
) -> Extraction:
    error = None
    if not starts:
        error = "the reply holds no JSON object" + (" that starts like a step" if "{" in text else "")
    # Bounds on the work, both linear in the reply: characters decoded, and decodes tried (a
    # failed decode costs microseconds however short it is).
    budget, tries = 4 * len(text) + 64 * _WINDOW, 64 + len(text) // _WINDOW
    for index in range(len(starts) - 1, max(-1, len(starts) - 1 - tries), -1):
        if budget < 0:
            break
        value, cost, end = _decode_at(text, starts[index], decoder)
        budget -= cost
        result = value if isinstance(value, str) else _step_of(value, shapes, explain=error is None)
        if not isinstance(result, str):
            if isinstance(value, dict) and len(value) == 1:  # a lean step: it may sit in a call's arguments
                outer = _enclosing(text, starts[:index], end, decoder, shapes)
                if outer is not None:
                    return Extraction(step=outer[1], objects=len(starts), chosen=outer[0], stripped=stripped)
            return Extraction(step=result, objects=len(starts), chosen=index, stripped=stripped)
        if isinstance(value, dict) and value.keys() in shapes:
            budget -= _VALIDATION_COST
        error = error or result
    return Extraction(step=None, objects=len(starts), stripped=stripped, error=error)


def _enclosing(
    text: str, starts: list[int], end: int, decoder: json.JSONDecoder, shapes: Shapes
) -> tuple[int, Step | Batch] | None:
    """The step that encloses an object ending at ``end`` (``{"answer": ...}`` inside a call's
    arguments is part of the call, not the step), with its index among ``starts``; None if none does.
    The nearest few earlier candidates are tried, the nearest first."""
    for index in range(len(starts) - 1, max(-1, len(starts) - 1 - _ENCLOSING_TRIES), -1):
        value, _, outer_end = _decode_at(text, starts[index], decoder)
        if isinstance(value, dict) and outer_end >= end:
            step = _step_of(value, shapes, explain=False)
            if not isinstance(step, str):
                return index, step
    return None


def _decode_at(text: str, start: int, decoder: json.JSONDecoder) -> tuple[Any, int, int]:
    """The JSON value that begins at ``start`` (or why there is none), the characters it cost, and
    where it ends (``start`` when there is none).

    The scanner reads a window of the text, grown while an error could be the window's cut
    rather than the text's: a decode error counts the lines up to its position, so decoding
    the whole rest of a long reply from each candidate would be quadratic.
    """
    size, cost = _WINDOW, 0
    while True:
        stop = min(len(text), start + size)
        window = text[start:stop]
        cost += len(window)
        try:
            value, end = decoder.raw_decode(window)
            return value, cost, start + end
        except json.JSONDecodeError as exc:
            cut_short = exc.pos >= len(window) - 8 or exc.msg.startswith("Unterminated string")
            if stop == len(text) or not cut_short:
                return f"invalid JSON ({exc.msg} at character {exc.pos})", cost, start
        except ValueError as exc:  # a number the strict reader refuses: more text cannot mend it
            return f"invalid JSON ({exc})", cost, start
        except RecursionError:
            return "invalid JSON (nested too deeply)", cost, start
        size *= 4


def _as_step(candidate: str, decoder: json.JSONDecoder, shapes: Shapes) -> Step | Batch | str:
    """The candidate as a step, or a short reason why it is not one."""
    if not candidate.startswith("{"):
        return "the reply is not a JSON object"
    try:
        data = decoder.decode(candidate)
    except (ValueError, RecursionError) as exc:
        return f"invalid JSON ({exc})"
    return _step_of(data, shapes, explain=True)


def _lean_step(data: dict[str, Any]) -> Step | Batch | str:
    """A batch run's lean step (``{"calls": [{"name", "arguments"}]}`` or ``{"answer"}``) as a
    :class:`Batch` or :class:`Step`, or what is wrong with it, in the lean shape's own terms."""
    try:
        if "calls" in data:
            lean = LeanCalls.model_validate(data)
            return Batch(reason="", action="calls", calls=[Call(tool=c.name, args=c.arguments) for c in lean.calls])
        answer = LeanAnswer.model_validate(data).answer
    except ValidationError as exc:
        return "not a valid step: " + _errors(exc)
    return Step(reason="", action="answer", tool="", args={}, answer=answer)


def _errors(exc: ValidationError) -> str:
    """pydantic's account of a failed validation, one clause per error."""
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'step'}: {err['msg']}" for err in exc.errors())


def _step_of(data: Any, shapes: Shapes, *, explain: bool) -> Step | Batch | str:
    """``data`` as a step, or why not: pydantic's account when ``explain``, else a short one
    (a full validation error costs far more than a glance at the keys)."""
    if not isinstance(data, dict):
        return "the JSON is not an object"
    if not explain and data.keys() not in shapes:
        return "not a valid step: its keys are not the step's fields"
    if shapes is _BATCH_SHAPES and "action" not in data and data.keys() & {"calls", "answer"}:
        return _lean_step(data)
    try:
        return Batch.model_validate(data) if data.get("action") == "calls" else Step.model_validate(data)
    except ValidationError as exc:
        return "not a valid step: " + _errors(exc)
