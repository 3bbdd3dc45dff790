"""The words the loop says to the model: the system prompt and the feedback after each step.

Kept short and literal: a 135M model follows a short instruction and ignores a long one. The full
tool documentation, the rules, and a worked example whose answer comes from its result were each
measured on the project's suite (``measurements/tuning-history.md``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from shapeloop.guards import CallRecord
from shapeloop.toolbox import ToolResult, ToolStatus
from shapeloop.tooldoc import render_tools
from shapeloop.tools import Tool, drop_titles

_INTRO = "You complete the user's task one step at a time: each step either calls one tool or gives the final answer."

_FORMAT = """Every reply is one JSON object with these five fields, in this order:
  "reason": one short sentence: what you do next and why
  "action": "tool" to call a tool, or "answer" to finish
  "tool": the name of the tool to call ("" when answering)
  "args": the tool's arguments as an object ({} when answering)
  "answer": your final answer to the task ("" when calling a tool)"""

_RULES = (
    "Call a tool only when it does what the task asks. When no tool fits the task, or the task needs "
    'no tool, do not call one: give your answer (action "answer"), and if you cannot do the task, say so.',
    "Take argument values from the task as it gives them (names, numbers, units, code). Leave out "
    "optional arguments the task does not ask for.",
    "You cannot see files or anything else except through the tools: do not guess what a tool would return, call it.",
    # The fifth round's words: the sixth round's ("ERROR: ... not an answer. DENIED: ... do not retry
    # it.") moved qwen2.5-coder-0.5b's first step on tasks that have no refusal in them (a first
    # call lost on each half, an abstention lost), and gained nothing the loop's handling of a
    # refusal did not already give.
    "After a tool call, the next message gives its result. Your answer says what the results say. A "
    "result starting with ERROR: or DENIED: means the call failed or was refused: it is not an answer.",
)

# A worked example with a made-up tool: the call, its result, and an answer taken from that result.
# The answer is about something no real task asks, because qwen2.5-coder-0.5b copied a standalone
# example answer ("It is snowing in Oslo.") word for word.
_EXAMPLE_ANSWER = "A kilo of apples costs 2.40 EUR."
_EXAMPLE = "\n".join(
    [
        "Example, with a made-up tool get_price (use the real tools above):",
        "Task: How much is a kilo of apples?",
        'You: {"reason": "I need the price of apples", "action": "tool", "tool": "get_price", '
        '"args": {"item": "apples"}, "answer": ""}',
        'Result of get_price({"item": "apples"}): apples cost 2.40 EUR per kilo',
        'You: {"reason": "The result gives the price", "action": "answer", "tool": "", "args": {}, '
        f'"answer": "{_EXAMPLE_ANSWER}"}}',
    ]
)


# A run whose steps make their calls as a list (``batch``) asks its first step exactly as one raw
# constrained call asks (the functions as JSON, the tool-call JSON small models were trained on): the
# loop's own words there ("one function, or several at once when the task asks for several things", a
# paragraph on results to come) sent qwen2.5-coder-0.5b into several calls where one was asked and
# away from answering where no function fits (BFCL's report sample: 73 of 160 first steps right
# against raw's 103). What the model must know about results is said where they arrive.
_BATCH = """You can call these functions:
{functions}

Reply with one JSON object: {{"calls": [{{"name": "<function name>", "arguments": {{...}}}}, ...]}} to call \
one function or several, or {{"answer": "..."}} to answer directly when the question needs no function or \
none of them fits."""

_BATCH_NO_TOOLS = """You complete the user's task. There are no functions to call at this step: reply with one JSON \
object, {"answer": "..."}, your final answer."""

_PROSE = "Reply with the JSON object only: no other text before or after it."


_NEXT_BATCH = 'If these results answer the task, reply with {"answer": "..."} now; otherwise make more calls.'
_SAYS = " Your answer says what the results say."
_FAILURES = " A result starting with ERROR: or DENIED: means the call failed or was refused: it is not an answer."


def system_prompt(
    tools: Sequence[Tool],
    *,
    prose: bool,
    extra: str | None = None,
    answer_schema: Mapping[str, Any] | None = None,
    batch: bool = False,
) -> str:
    """The system prompt for a run with these tools.

    Args:
        tools: the tools advertised to the model, each with its whole documentation.
        prose: the backend cannot enforce the schema, so say plainly that only JSON is wanted.
        extra: the caller's own instructions, appended.
        answer_schema: the schema of a typed answer, shown so the model knows the fields to fill.
        batch: the model makes its calls as a list, one or several in one step.
    """
    if batch:
        lines = [_BATCH.format(functions=render_tools(tools, "json")) if tools else _BATCH_NO_TOOLS]
    elif tools:
        lines = [_INTRO, _FORMAT, "", "Tools:", render_tools(tools, "outline"), "", "Rules:"]
        lines += [*(f"- {rule}" for rule in _RULES), "", _EXAMPLE]
    else:
        lines = [_INTRO, _FORMAT, "", "There are no tools in this run: answer directly.", "", "Rules:"]
        lines += [f"- {rule}" for rule in _RULES]
    if answer_schema is not None:
        lines += [
            "",
            'In this task "answer" is not text: it is a JSON value matching this schema, filled in '
            f"from what the tools return: {_schema_text(answer_schema)}",
        ]
    if prose and not batch:  # the batch prompt already asks for one JSON object; this line
        lines.append(_PROSE)  # after it sent qwen2.5-coder-0.5b's integers running on ("duration": 2000...)
    if extra:
        lines += ["", extra.strip()]
    return "\n".join(lines)


def task_message(task: str, *, continued: bool) -> str:
    """The user turn that sets the task; in a continued conversation it is marked as the next one, so
    an earlier answer is not taken for this task's answer."""
    return f"Next task: {task}" if continued else task


# After a result.
_RESULT, _RESULTS = "Result of ", "Results of "  # how a results message opens (one call, a batch)
_NEXT = (
    'If this result answers the task, reply with action "answer" now and say what it says; otherwise call another tool.'
)
_FAILED = "That call did not work: fix its arguments, call another tool, or say that you cannot do the task."
_REFUSED = "That call was refused: do not make it again. Call another tool, or tell the user it cannot be done."


def tool_feedback(result: ToolResult, record: CallRecord, *, status: str) -> str:
    """The user turn that carries a tool's result back to the model; a repeat is named with its count."""
    text = f"{_RESULT}{result.call}:\n{result.text}\n\n"
    text += _FAILED if status == "error" else _REFUSED if status == "denied" else _NEXT
    if status == "repeat":
        text += (
            f"\n\nNote: you made this same call {record.times} times and got this same result each "
            "time. Calling it again will not help: use the result above, call a different tool, "
            "or give your answer."
        )
    return text


def batch_feedback(
    results: Sequence[ToolResult],
    records: Sequence[CallRecord],
    *,
    statuses: Sequence[str],
    task: str = "",
    merged: Sequence[int] = (),
) -> str:
    """The user turn that carries the results of a batch back, in the order of the calls, with the
    task where one of them is good (after a refusal or errors only, it sent the model searching for
    what it had been refused). ``merged[i]`` is how many times the step wrote call ``i`` (it ran once)."""
    parts = [f"{_RESULTS}{len(results)} call{'s' if len(results) != 1 else ''}, in the order you made them:"]
    for number, (result, record, status) in enumerate(zip(results, records, statuses, strict=True), start=1):
        part = f"[{number}] {result.call}:\n{result.text}"
        written = merged[number - 1] if number <= len(merged) else 1
        if written > 1:
            part += f"\n(Note: you wrote this same call {written} times in one step; it ran once.)"
        if status == "repeat":
            part += f"\n(Note: you made this same call {record.times} times and got this same result each time.)"
        parts.append(part)
    good = any(result.status is ToolStatus.OK for result in results)
    failed = any(result.status is not ToolStatus.OK for result in results)
    closing = _NEXT_BATCH + _SAYS + (_FAILURES if failed else "")
    parts.append(closing + (f"\nThe task: {_clip(task, 600)}" if task and good else ""))
    return "\n\n".join(parts)


def settled(text: str) -> str:
    """A results message as a conversation's history keeps it once its request is done: the step
    instruction after the results (it was for that request's next step: "reply with ... now")
    taken off, so a later request does not read it, nor the answer shape it shows, as its own."""
    if not text.startswith((_RESULT, _RESULTS)):  # an objection, a note: not a results message
        return text
    ends = [text.rfind("\n\n" + instruction) for instruction in (_NEXT_BATCH, _NEXT, _FAILED, _REFUSED)]
    end = max(ends)
    return text if end < 0 else text[:end]


def batch_off_feedback() -> str:
    """After a batch of calls in a run that takes one call a step."""
    return 'This run takes one call a step: reply with action "tool" and one call, or with action "answer".'


def invalid_answer_feedback(errors: Sequence[str]) -> str:
    """After an answer that does not validate against the run's output type."""
    listed = "\n".join(f"- {_clip(error, 200)}" for error in errors)
    return (
        f"Your answer does not match the required schema:\n{listed}\n"
        'Reply again with a corrected "answer", or call a tool to find what is missing.'
    )


def answer_not_text_feedback() -> str:
    """After an answer that is an object or a number where text is wanted."""
    return 'Your answer must be text: put your answer to the task in "answer" as a string, or call a tool.'


def unreadable_feedback(error: str, *, batch: bool = False) -> str:
    """After a reply that holds no valid step."""
    shape = (
        '{"calls": [{"name": ..., "arguments": {...}}]} or {"answer": "..."}'
        if batch
        else 'the fields "reason", "action", "tool", "args" and "answer"'
    )
    return f"Your reply was not a valid step ({_clip(error)}). Reply with one JSON object: {shape}."


def cut_feedback(*, batch: bool = False, answering: bool = False) -> str:
    """After a reply cut off at the length limit; ``answering``: it was writing an answer."""
    shorter = ("give a shorter answer" if answering else "make fewer calls at once" if batch
               else 'keep "reason" to one short sentence')  # fmt: skip
    return f"Your reply was cut off at the length limit before it was complete. Reply again, shorter: {shorter}."


def empty_answer_feedback() -> str:
    """After an answer step whose answer is empty."""
    return 'Your answer was empty. Put your answer to the task in "answer", or call a tool.'


def refused_call_feedback(call: str, feedback: str) -> str:
    """After a policy refused a call before it ran: the policy's words."""
    return f"Your call {call} was not run: {feedback}"


def rejection_feedback(objection: str) -> str:
    """After the caller's acceptor objected to an answer."""
    return f"Your answer was not accepted: {objection}\nContinue the task: call a tool, or give a corrected answer."


def _schema_text(schema: Mapping[str, Any]) -> str:
    """A schema as compact JSON without pydantic's titles, which only lengthen the prompt."""
    return json.dumps(drop_titles(schema), ensure_ascii=False, separators=(",", ":"))


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
