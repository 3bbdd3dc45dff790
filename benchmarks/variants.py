"""Prompt and mechanism variants measured against the shipped loop on the tune half.

Each variant is a context manager that changes the loop for the length of a benchmark run; the one
chosen by measurement becomes the shipped behaviour, and the figures of every variant tried stay in
``measurements/experiments/``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from shapeloop import checks, loop, offer, prompts, step, toolbox, values, workspace


@contextlib.contextmanager
def shipped() -> Iterator[None]:
    yield


@contextlib.contextmanager
def _patched(module: Any, **changes: object) -> Iterator[None]:
    saved = {name: getattr(module, name) for name in changes}
    for name, value in changes.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def _reordered(order: tuple[str, ...]) -> Callable[..., dict[str, Any]]:
    """``step_schema`` with the fields of every variant in ``order``."""

    def schema(*args: Any, **kwargs: Any) -> dict[str, Any]:
        built = step.step_schema(*args, **kwargs)
        for variant in built.get("anyOf", [built]):
            variant["properties"] = {name: variant["properties"][name] for name in order}
            variant["required"] = list(order)
        return built

    return schema


_DECISION_FIRST = """Every reply is one JSON object with these five fields, in this order:
  "action": "tool" to call a tool, or "answer" to finish
  "reason": one short sentence: why
  "tool": the name of the tool to call ("" when answering)
  "args": the tool's arguments as an object ({} when answering)
  "answer": your final answer to the task ("" when calling a tool)"""


@contextlib.contextmanager
def decision_first() -> Iterator[None]:
    """The decision (tool or answer) asked before the reason."""
    order = ("action", "reason", "tool", "args", "answer")
    with _patched(loop, step_schema=_reordered(order)), _patched(prompts, _FORMAT=_DECISION_FIRST):
        yield


_FIT_REASON = prompts._FORMAT.replace(
    '"reason": one short sentence: what you do next and why',
    '"reason": one short sentence: which tool does what the task asks, or that none does',
)

_NO_INVENTED = [
    *prompts._RULES[:2],
    "Never make up an argument value the task does not give (an id, coordinates, a date): get it from "
    "another tool first.",
    *prompts._RULES[2:],
]


@contextlib.contextmanager
def bias_every_step() -> Iterator[None]:
    """The embedded backend's answer bias at every step, as before it was kept to the first."""
    from shapeloop.backends.llamacpp import LlamaCppBrain

    with _patched(LlamaCppBrain, answer_bias_for=lambda self, request: self.answer_bias):
        yield


@contextlib.contextmanager
def no_bias() -> Iterator[None]:
    """No answer bias and no fit floor, with the fit still measured at each first step: the decision gaps
    and fits of a run like this calibrate any bias and floor (benchmarks.calibrate)."""
    from shapeloop.backends.llamacpp import LlamaCppBrain

    def measured_only(self: Any, request: Any) -> float:
        if request.results == 0:
            self.fit_of(request)
        return 0.0

    with _patched(LlamaCppBrain, answer_bias_for=measured_only):
        yield


@contextlib.contextmanager
def one_fit_floor() -> Iterator[None]:
    """The first fit floor alone, as before the higher floor for tasks that share no word with a tool."""
    from shapeloop.backends.llamacpp import LlamaCppBrain

    with _patched(LlamaCppBrain, _floor=lambda self, request: self.fit_floor):
        yield


@contextlib.contextmanager
def no_fit() -> Iterator[None]:
    """The answer bias alone, as before the fit floor: no task is judged unfit."""
    from shapeloop.backends.llamacpp import LlamaCppBrain

    original = LlamaCppBrain.answer_bias_for

    def bias_only(self: Any, request: Any) -> float:
        floor, self.fit_floor = self.fit_floor, None
        try:
            return original(self, request)
        finally:
            self.fit_floor = floor

    with _patched(LlamaCppBrain, answer_bias_for=bias_only):
        yield


@contextlib.contextmanager
def call_after_error() -> Iterator[None]:
    """After every failed call (not only after an answer that repeats its error) the next step calls a tool."""
    original = loop._Run._on_tool

    def on_tool(self: Any, step: Any) -> None:
        original(self, step)
        self.must_call = self.last_failure is not None and self.last_failure.startswith("ERROR:")

    with _patched(loop._Run, _on_tool=on_tool):
        yield


@contextlib.contextmanager
def answer_after_echo() -> Iterator[None]:
    """After an answer that repeats a failed call's error, the next step may answer again (as before)."""
    original = loop._Run._on_answer

    def on_answer(self: Any, answer: Any, raw: str) -> None:
        original(self, answer, raw)
        self.must_call = False

    with _patched(loop._Run, _on_answer=on_answer):
        yield


# the feedback after a result, without "now": multi-step tasks were answered after their first call
_NEXT_PATIENT = (
    "If this result gives what the task asks for, answer with it. If the task needs more (another "
    "value, or a second call that uses this result), call the next tool."
)

_PLAIN_HINT = "; use list_files to see what is there"  # the error's ending before it named files

VARIANTS: dict[str, Callable[[], AbstractContextManager[None]]] = {
    "shipped": shipped,
    "json-docs": lambda: _patched(prompts, DOC_STYLE="json"),
    "no-example": lambda: _patched(prompts, _EXAMPLE=""),
    "decision-first": decision_first,
    "fit-reason": lambda: _patched(prompts, _FORMAT=_FIT_REASON),
    "no-invented-values": lambda: _patched(prompts, _RULES=_NO_INVENTED),
    "bias-every-step": bias_every_step,
    "call-after-error": call_after_error,
    "no-bias": no_bias,
    "no-fit": no_fit,
    "one-fit-floor": one_fit_floor,
    "answer-after-echo": answer_after_echo,
    "patient-next": lambda: _patched(prompts, _NEXT=_NEXT_PATIENT),
    "plain-path-errors": lambda: _patched(workspace.Workspace, _near=lambda self, path: _PLAIN_HINT),
    "no-id-check": lambda: _patched(toolbox, made_up_ids=lambda parameters, args, seen: []),
    "no-chain-check": lambda: _patched(checks, CHAIN_CHECK=False),
    "chain-by-name": lambda: _patched(checks, CHAIN_DESCRIBED=False),
    "outside-use-a-path": lambda: _patched(workspace, OUTSIDE_NOTE="; use a path inside it"),
    "no-refusal-answers": lambda: _patched(loop, REFUSAL_ANSWERS=False),
    "no-id-sources": lambda: _patched(loop, ID_SOURCES=False),
    "no-value-check": lambda: _patched(loop, VALUE_CHECK=False),
    "no-name-check": lambda: _patched(values, NAMES=False),
    "no-example-check": lambda: _patched(values, EXAMPLES=False),
    "no-left-unread": lambda: _patched(checks, LEFT_UNREAD_CHECK=False),
    "no-named-required": lambda: _patched(offer, NAMED_REQUIRED=False),
    "chain-check-open": lambda: _patched(checks, CHAIN_STEP="open"),
    "chain-check-choose": lambda: _patched(checks, CHAIN_STEP="choose"),
    "no-unread-check": lambda: _patched(checks, UNREAD_CHECK=False),
    "no-providers": lambda: _patched(checks, PROVIDERS=False),
    "no-yes-no-check": lambda: _patched(checks, not_yes_or_no=lambda task, answer: None),
    "no-layout-patterns": lambda: _patched(offer, LAYOUT_PATTERNS=False),
    "keep-example": lambda: _patched(loop, WITHDRAW_EXAMPLE=False),
    "no-chain-on-repeat": lambda: _patched(checks, CHAIN_ON_REPEAT=False),
    "chain-once": lambda: _patched(checks, CHAIN_AGAIN=False),
    "tools-by-words": lambda: _patched(loop, TOOL_ORDER="shared-words"),
    "no-repeat-hold": lambda: _patched(loop, REPEAT_HOLD=False),
    "no-answer-lead": lambda: _patched(loop, ANSWER_LEAD=False),
    "no-count-check": lambda: _patched(checks, COUNT_CHECK=False),
    "no-results-talk": lambda: _patched(checks, RESULTS_TALK_CHECK=False),
    "task-after-result-holds": lambda: _patched(prompts, RESTATE_TASK=True),
    "no-restate-task": lambda: _patched(prompts, RESTATE_TASK=False),
    "holds-wording": lambda: _patched(prompts, _NEXT=prompts._NEXT_RESTATED),
    "no-written-choices": lambda: _patched(offer, WRITTEN_CHOICES=False),
    "no-id-patterns": lambda: _patched(offer, ID_PATTERNS=False),
    "all-optional-args": lambda: _patched(offer, ASKED_ONLY=False),
    "no-loop-copy-check": lambda: _patched(prompts, copies_loop=lambda answer, loop_words, seen: False),
    "list-not-a-folder": lambda: _patched(workspace, LIST_NOTE_LINES=False),
    "no-search": lambda: _patched(workspace, SEARCH_TOOL=False),
}
