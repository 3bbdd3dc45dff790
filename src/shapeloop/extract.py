"""Reading a step out of a prose reply. Pure functions, no I/O, never raises on any text.

The step is the *last* object in the reply that validates, not the span from the first ``{`` to the
last ``}``: real replies carry drafts, second thoughts after a correct object, braces inside strings
and whole programs inside string values. The scan is string-aware and linear in the reply's length.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pydantic import ValidationError

from shapeloop.step import Batch, Step

_FENCE = re.compile(r"^[ \t]*```[A-Za-z0-9_.+-]*[ \t]*$", re.MULTILINE)
_THINK_TAGS = (("<think>", "</think>"), ("<thinking>", "</thinking>"))
# Characters that may stand between tokens of a JSON object (outside strings): structure,
# whitespace, numbers and the letters of true/false/null. Anything else means "this is prose".
_JSON_BARE = frozenset(" \t\r\n:,[]0123456789-+.eEtruefalsn")


@dataclass(frozen=True, kw_only=True)
class Extraction:
    """What :func:`extract_step` found, and how.

    Attributes:
        step: the step (a :class:`Batch` for several calls at once), or None when the reply holds none.
        objects: how many balanced ``{...}`` objects the scan found.
        chosen: index of the winning object, counting objects in the order they close; None when
            the whole reply was the step or no step was found.
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


def extract_step(text: str) -> Extraction:
    """Find the step in a model's reply.

    The whole reply is tried first (also with a leading ``<think>`` block and an outer code fence
    taken off). Otherwise every balanced object is found with a string-aware scan, objects inside
    ``<think>...</think>`` are set aside, and the rest are tried last first: the first that
    validates as a :class:`Step` wins. The reply's text is never altered, so a think tag or a fence
    inside a string value survives.
    """
    regions = _think_regions(text)
    stripped = (("think",) if regions else ()) + (("fence",) if _FENCE.search(text) else ())
    for candidate in (text.strip(), _unwrap(text)):
        whole = _as_step(candidate)
        if not isinstance(whole, str):
            return Extraction(step=whole, whole=True, stripped=stripped)
    spans = [span for span in find_objects(text) if not _inside(span, regions)]
    return _last_step(text, spans, stripped)


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


def _unwrap(text: str) -> str:
    """The reply without leading think blocks and without an outer code fence."""
    body = text.strip()
    while body.startswith("<think>") and "</think>" in body:
        body = body[body.index("</think>") + len("</think>") :].lstrip()
    lines = body.splitlines()
    if lines and _FENCE.fullmatch(lines[0]):
        lines = lines[1:]
    if lines and _FENCE.fullmatch(lines[-1]):
        lines = lines[:-1]
    return "\n".join(lines).strip()


def find_objects(text: str) -> list[tuple[int, int]]:
    """Spans ``(start, end)`` of balanced ``{...}`` objects, in the order they close.

    Quotes are tracked only inside an object, so apostrophes and quotes in prose do not matter;
    braces inside strings do not count. When an object turns out to be prose (a character that
    cannot stand between JSON tokens), the scan forgets the open braces and, if a string was
    opened inside it, rescans from just after that quote: that quote was most likely prose, and
    it hid the real object's braces. Rescanning is bounded, so the scan is linear.
    """
    n = len(text)
    spans: list[tuple[int, int]] = []
    stack: list[int] = []
    in_string = False
    string_start = -1
    budget = 3 * n + 64
    i = 0
    while i < n:
        budget -= 1
        c = text[i]
        if in_string:
            if c == "\\":
                i += 2
                continue
            in_string = c != '"'
        elif not stack:
            if c == "{":
                stack.append(i)
        elif c == '"':
            in_string, string_start = True, i
        elif c == "{":
            stack.append(i)
        elif c == "}":
            spans.append((stack.pop(), i + 1))
        elif c not in _JSON_BARE:
            rescan = string_start > stack[0] and budget > 0
            stack.clear()
            if rescan:
                i = string_start + 1
                continue
        i += 1
    return spans


def _think_regions(text: str) -> list[tuple[int, int]]:
    """Spans of closed ``<think>...</think>`` (and ``<thinking>``) blocks."""
    regions: list[tuple[int, int]] = []
    for open_tag, close_tag in _THINK_TAGS:
        pos = 0
        while (start := text.find(open_tag, pos)) != -1:
            end = text.find(close_tag, start)
            if end == -1:
                break
            pos = end + len(close_tag)
            regions.append((start, pos))
    return regions


def _inside(span: tuple[int, int], regions: list[tuple[int, int]]) -> bool:
    return any(start <= span[0] and span[1] <= end for start, end in regions)


def _last_step(text: str, spans: list[tuple[int, int]], stripped: tuple[str, ...]) -> Extraction:
    error = "the reply holds no JSON object" if not spans else None
    parse_budget = 8 * len(text) + 1024
    for index in range(len(spans) - 1, -1, -1):
        start, end = spans[index]
        parse_budget -= end - start
        if parse_budget < 0:
            error = error or "too many nested objects to read"
            break
        result = _as_step(text[start:end])
        if not isinstance(result, str):
            return Extraction(step=result, objects=len(spans), chosen=index, stripped=stripped)
        error = error or result
    return Extraction(step=None, objects=len(spans), stripped=stripped, error=error)


def _as_step(candidate: str) -> Step | Batch | str:
    """The candidate as a step, or a short reason why it is not one."""
    if not candidate.startswith("{"):
        return "the reply is not a JSON object"
    try:
        data = json.loads(candidate, strict=False)
    except (ValueError, RecursionError) as exc:
        return f"invalid JSON ({exc})"
    if not isinstance(data, dict):
        return "the JSON is not an object"
    try:
        return Batch.model_validate(data) if data.get("action") == "calls" else Step.model_validate(data)
    except ValidationError as exc:
        return "not a valid step: " + "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'step'}: {err['msg']}" for err in exc.errors()
        )
