"""The words the loop says to the model: the system prompt and the feedback after each step.

Kept short and literal: a 135M model follows a short instruction and ignores a long one. Each choice
here was measured on the tune half of the benchmark suite (``measurements/``): the full tool
documentation, the rules, and a worked example whose answer comes from its result. Restating the
task after each single result was measured too: qwen2.5-coder-0.5b then made the same call again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from shapeloop.guards import CallRecord
from shapeloop.toolbox import ToolResult, ToolStatus
from shapeloop.tooldoc import DocStyle, render_tools
from shapeloop.tools import Tool, drop_titles

_INTRO = "You complete the user's task one step at a time: each step either calls one tool or gives the final answer."

_FORMAT = """Every reply is one JSON object with these five fields, in this order:
  "reason": one short sentence: what you do next and why
  "action": "tool" to call a tool, or "answer" to finish
  "tool": the name of the tool to call ("" when answering)
  "args": the tool's arguments as an object ({} when answering)
  "answer": your final answer to the task ("" when calling a tool)"""

_RULES = [
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
]

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

# Words of the example's task and answer that a real task's answer has no reason to hold unless its
# task or results do: an answer with them was copied from the example.
EXAMPLE_WORDS = ("apples", "2.40")


def copies_example(answer: str, seen: str) -> bool:
    """Whether ``answer`` holds words of the worked example that ``seen`` (the task and the results,
    not the system prompt) does not: the model copied the example instead of answering."""
    said, known = _words(answer), _words(seen)
    return any(word in said and word not in known for word in EXAMPLE_WORDS)


def copies_loop(answer: str, loop_words: str, seen: str) -> bool:
    """Whether ``answer`` is a phrase of the loop's own words (``loop_words``: its fixed words and
    the feedback around results) of five words or more, with a word that ``seen`` (the task, the
    results, the caller's words) does not hold: "The result gives the price." copied from the worked
    example's reason, "You have what it gives." from an earlier feedback. An answer with letters
    outside ASCII is never taken for a copy (the loop's words are English)."""
    if not answer.isascii():
        return False
    said = _phrase(answer).split()
    loop = f" {' | '.join(_phrase(line) for line in loop_words.splitlines())} "  # a copy stays within a line
    if len(said) >= 5 and f" {' '.join(said)} " in loop:
        return not _words(answer) <= _words(seen)
    # a long stretch copied, the answer cut off or changed around it ("Not run: the check_in of your
    # call to searchHotels is written nowhere ... that tool does not fit the task: you")
    known = _words(seen)
    return any(not set(run) <= known for run in _runs_in(said, loop, COPIED_RUN))


# words in a row that an answer with other words around them may not take from the loop
COPIED_RUN = 8


def _runs_in(words: list[str], text: str, least: int) -> Iterator[list[str]]:
    """The stretches of ``least`` words in a row of ``words`` that ``text`` (a padded phrase) holds."""
    for start in range(len(words) - least + 1):
        run = words[start : start + least]
        if f" {' '.join(run)} " in text:
            yield run


def _phrase(text: str) -> str:
    return " ".join(re.findall(r"[a-z]+|\d+(?:\.\d+)?", text.casefold()))


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+|\d+(?:\.\d+)?", text.casefold()))


_PROSE = "Reply with the JSON object only: no other text before or after it."

DOC_STYLE: DocStyle = "outline"

_BATCH = (
    'To make several independent calls in one step, reply with action "calls" and the list of calls, '
    'instead of "tool", "args" and "answer":\n'
    + json.dumps(
        {"reason": "I need the weather in two cities", "action": "calls",
         "calls": [{"tool": "get_weather", "args": {"city": "Oslo"}},
                   {"tool": "get_weather", "args": {"city": "Bergen"}}]}
    )
    + "\nThe results come back together, in the same order."
)  # fmt: skip

_NEXT_BATCH = 'If these results answer the task, reply with action "answer" now; otherwise make more calls.'

# The loop's fixed words to the model that an answer has no reason to repeat (see copies_loop): not
# the rules, whose "say that you cannot" an answer may follow to the letter, nor the example's result
# and answer, which copies_example judges by their words, so that a task about a price is answered.
_EXAMPLE_STEPS = [line.replace(_EXAMPLE_ANSWER, "") for line in _EXAMPLE.splitlines() if "2.40" not in line
                  or _EXAMPLE_ANSWER in line]  # fmt: skip
LOOP_TEXT = "\n".join([_INTRO, _FORMAT, *_EXAMPLE_STEPS, _PROSE, _BATCH, _NEXT_BATCH])


def system_prompt(
    tools: Sequence[Tool],
    *,
    prose: bool,
    extra: str | None = None,
    answer_schema: Mapping[str, Any] | None = None,
    batch: bool = False,
    example: bool = True,
) -> str:
    """The system prompt for a run with these tools.

    Args:
        tools: the tools advertised to the model, each with its whole documentation.
        prose: the backend cannot enforce the schema, so say plainly that only JSON is wanted.
        extra: the caller's own instructions, appended.
        answer_schema: the schema of a typed answer, shown so the model knows the fields to fill.
        batch: the model may make several calls in one step.
        example: show the worked example (there are tools, and it has not been copied).
    """
    lines = [_INTRO, _FORMAT, ""]
    if tools:
        lines += ["Tools:", render_tools(tools, DOC_STYLE)]
    else:
        lines.append("There are no tools in this run: answer directly.")
    lines += ["", "Rules:", *(f"- {rule}" for rule in _RULES)]
    if tools and example and _EXAMPLE:
        lines += ["", _EXAMPLE]
    if tools and batch:
        lines += ["", _BATCH]
    if answer_schema is not None:
        lines += [
            "",
            'In this task "answer" is not text: it is a JSON value matching this schema, filled in '
            f"from what the tools return: {_schema_text(answer_schema)}",
        ]
    if prose:
        lines.append(_PROSE)
    if extra:
        lines += ["", extra.strip()]
    return "\n".join(lines)


def task_message(task: str, *, continued: bool) -> str:
    """The user turn that sets the task; in a continued conversation it is marked as the next one, so
    an earlier answer is not taken for this task's answer."""
    return f"Next task: {task}" if continued else task


# After a result.
_NEXT = (
    'If this result answers the task, reply with action "answer" now and say what it says; otherwise call another tool.'
)
# After a result, for a model whose backend asks for the task again (``Capabilities.restate_task``):
# the task's words, and the answer asked for from the result. On the tune half's 23 workspace tasks
# it gained qwen2.5-coder-1.5b three ("The result does not answer the task." had been its answer
# after reading the very file the task named) and cost qwen2.5-coder-0.5b four.
_NEXT_RESTATED = (
    'If this result holds what the task asks for, reply with action "answer" now and answer the task from it; '
    "otherwise call another tool."
)
# The task again after each good result: None, as the backend asks; True or False for every model (the
# benchmark's variants).
RESTATE_TASK: bool | None = None
_FAILED = "That call did not work: fix its arguments, call another tool, or say that you cannot do the task."
_REFUSED = "That call was refused: do not make it again. Call another tool, or tell the user it cannot be done."


def tool_feedback(
    result: ToolResult,
    record: CallRecord,
    *,
    status: str,
    failed_before: str | None = None,
    answer_next: bool = False,
    then: str = "",
    task: str = "",
    restate: bool = False,
) -> str:
    """The user turn that carries a tool's result back to the model.

    ``failed_before`` names a tool whose call failed earlier in the run: after another tool's result
    the model is reminded to call it again with what it now has (small models answered with the
    result that was only the way to it: an employee's id instead of the leave balance it unlocks).
    ``answer_next``: the call was made before with this same result, and the next step must answer;
    ``then``: it was, and this says what to do instead (:func:`repeat_chain_feedback`).
    ``restate``: the model's backend asks for the task's words again after a result (``task``), and
    the answer from it (``RESTATE_TASK`` overrides). Only after a good result: after a refusal, the
    task's words sent qwen2.5-coder-1.5b on to list folders in search of what it had been refused.
    """
    text = f"Result of {result.call}:\n{result.text}\n\n"
    restated = bool(task) and result.status is ToolStatus.OK and (restate if RESTATE_TASK is None else RESTATE_TASK)
    if restated:  # a long task keeps its end, where the question usually is
        text += f"The task: {_clip_middle(task, 600)}\n"
    if status == "ok" and failed_before:
        text += (
            f"Earlier, your call to {failed_before} failed. If this result gives what {failed_before} "
            f"needed, call {failed_before} again with it now; if it already answers the task, answer."
        )
        return text
    if answer_next or then:
        # Imperatives only: qwen2.5-coder-0.5b gave "You have what it gives." from an earlier
        # wording as its answer.
        return text + (
            f"You made this same call {record.times} times and got this same result each time. "
            + (then or 'Reply with action "answer" now and say what the result says.')
        )
    text += _FAILED if status == "error" else _REFUSED if status == "denied" else _NEXT_RESTATED if restated else _NEXT
    if status == "repeat":
        text += (
            f"\n\nNote: you made this same call {record.times} times and got this same result each "
            "time. Calling it again will not help: use the result above, call a different tool, "
            "or give your answer."
        )
    return text


def batch_feedback(
    results: Sequence[ToolResult], records: Sequence[CallRecord], *, statuses: Sequence[str], task: str = ""
) -> str:
    """The user turn that carries the results of a batch back, in the order of the calls, with the
    task where one of them is good (a batch restates it for every model; after a refusal or errors
    only, it sent the model searching for what it had been refused, as after one call)."""
    parts = [f"Results of {len(results)} call{'s' if len(results) != 1 else ''}, in the order you made them:"]
    for number, (result, record, status) in enumerate(zip(results, records, statuses, strict=True), start=1):
        part = f"[{number}] {result.call}:\n{result.text}"
        if status == "repeat":
            part += f"\n(Note: you made this same call {record.times} times and got this same result each time.)"
        parts.append(part)
    good = any(result.status is ToolStatus.OK for result in results)
    parts.append(_NEXT_BATCH + (f"\nThe task: {_clip(task, 600)}" if task and good else ""))
    return "\n\n".join(parts)


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


def unreadable_feedback(error: str) -> str:
    """After a reply that holds no valid step."""
    return (
        f"Your reply was not a valid step ({_clip(error)}). Reply with one JSON object with the "
        'fields "reason", "action", "tool", "args" and "answer".'
    )


def cut_feedback() -> str:
    """After a reply cut off at the length limit."""
    return (
        "Your reply was cut off at the length limit before it was complete. Reply again, "
        'shorter: keep "reason" to one short sentence.'
    )


def empty_answer_feedback() -> str:
    """After an answer step whose answer is empty."""
    return 'Your answer was empty. Put your answer to the task in "answer", or call a tool.'


def made_up_values_finding(refused: Sequence[tuple[str, Sequence[tuple[str, Any]]]]) -> str:
    """What was wrong with a step whose calls hold numbers, dates, times or names that nothing the model was
    given writes: the parameters, not the values (small models copy what the loop says). An answer
    may repeat it (qwen2.5-coder-0.5b gives the feedback back word for word): "the task does not
    give the start_date that days_between needs, and a value cannot be made up" tells the user why
    the task was not done."""
    said = []
    for tool, values in refused:
        named = list(dict.fromkeys(path for path, _ in values))
        listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
        said.append(f"the {listed} that {tool} needs")
    return f"the task does not give {' or '.join(said)}, and a value cannot be made up"


def made_up_values_feedback(
    refused: Sequence[tuple[str, Sequence[tuple[str, Any]]]], providers: Sequence[str] = ()
) -> str:
    """After a step whose calls hold numbers, dates, times or names that nothing the model was given writes:
    the finding, and where ``providers`` (tools that give those values) are named, an imperative to
    call one. With "Use given values, or answer." after it, qwen2.5-coder-0.5b answered with both
    sentences; the refused tool is kept out of the next step, which says the rest."""
    text = f"Not run: {made_up_values_finding(refused)}."
    if providers:
        text += f" Call {' or '.join(providers)} first to get it."
    return text


def error_answer_feedback() -> str:
    """After an answer that repeats a failed call's error as if it were the answer."""
    return (
        "Your answer repeats the error of a failed call, and an error is not an answer to the task. Call a "
        "tool again: the same one with its arguments fixed as the error says, or another one."
    )


def example_answer_feedback() -> str:
    """After an answer copied from the worked example in the instructions."""
    return (
        "Your answer comes from the example in the instructions, not from this task. Answer this task "
        "from its own results, or call a tool to get them."
    )


def loop_words_answer_feedback() -> str:
    """After an answer that copies the loop's own instructions or feedback."""
    return (
        "Your answer repeats words of the instructions, not of a result. Answer this task with what its "
        "results say, or call a tool to get them."
    )


def chain_feedback(takers: Sequence[tuple[str, str, str | None]], *, must_call: bool = False) -> str:
    """After an answer given while other tools take a value the last result gives: ``takers``
    holds each such tool's name, the parameter and, where the result points to one file, URL or
    address, that value; ``must_call``: the next step calls one of them."""
    named = "; ".join(f"{tool} takes {parameter}" for tool, parameter, _ in takers)
    tools = " or ".join(tool for tool, _, _ in takers)
    if must_call:
        # imperatives only: qwen2.5-coder-0.5b gave a statement of this feedback back as its answer
        calls = _calls(takers, "the last result")
        return f"Do not answer yet. Call {calls} now, then answer the task from what it returns."
    return (
        f"Before you answer: tools you have not called take a value that the last result gives ({named}). "
        f"If the task asks for what {tools} returns, call it now with that value; if the last result "
        "already answers the task, give your answer again."
    )


def repeat_chain_feedback(takers: Sequence[tuple[str, str, str | None]]) -> str:
    """After a call made again for the same result, where tools not yet called take a value of it.
    Imperatives only (see :func:`chain_feedback`)."""
    calls = _calls(takers, "this result")
    return f"If the task needs more than this result gives, call {calls} now. Otherwise answer from this result."


def _calls(takers: Sequence[tuple[str, str, str | None]], source: str) -> str:
    """The calls that take a result's value: "get_leave_balance with the employee_id from the last
    result", or with the value itself where the result points to one."""
    return " or ".join(
        f"{tool} with the {parameter} from {source}"
        if value is None
        else f"{tool} with {parameter} {json.dumps(value, ensure_ascii=False)}"
        for tool, parameter, value in takers
    )


def asks_yes_or_no(task: str) -> bool:
    """Whether the task asks for a yes or a no: "Answer yes or no.", "reply with 'yes' or 'no'",
    "(yes/no)", "... yes or no?" at the end; not "a yes/no column"."""
    pair = r"[\"']?yes[\"']?\s*(?:or|/)\s*[\"']?no[\"']?"
    return any(
        re.search(pattern, task, re.IGNORECASE)
        for pattern in (rf"\b(?:answer|reply|respond|say)\b\W+(?:(?:with|just|only|simply|a)\W+)*{pair}\b",
                        rf"\(\s*{pair}\s*\)", rf"\b{pair}\s*[?.!]?\s*$")
    )  # fmt: skip


def asks_how_many(task: str) -> bool:
    """Whether the task asks for a count: "How many animals are listed?", "Count the ERROR lines in
    app.log."; not "how many" inside a quotation. Not "how much": its answers are as often "It's
    free" or "on request" as a number."""
    unquoted = re.sub(r"\"[^\"]*\"|(?<!\w)'[^']*'(?!\w)", " ", task)
    return re.search(r"\bhow\s+many\b|^\W*count\b", unquoted, re.IGNORECASE) is not None


def how_many_feedback() -> str:
    """After an answer with no number, to a task that asks how many. Imperatives only."""
    return "The task asks how many. Give your answer again, with the number the results give."


# How the reason of an answer the step has to give after a good result begins: qwen2.5-coder-0.5b
# and -1.5b, made to answer with the text of notes/todo.txt or readme.md in view, began "The result
# does not answer the task" and answered with an error they made up, or with that sentence.
ANSWER_LEAD = "The result says"


def left_unread_feedback(takers: Sequence[tuple[str, str, Sequence[str]]]) -> str:
    """After an answer given while no call has taken the files (URLs, addresses) the task names: the
    values left, and for each tool the call that takes its first. Imperatives only."""
    left = takers[0][2]
    named = ", ".join(repr(value) for value in left)
    them = "them" if len(left) > 1 else "it"
    calls = " or ".join(f"{name} with {parameter} {values[0]!r}" for name, parameter, values in takers)
    return f"The task names {named}, and no call has taken {them} yet. Call {calls}."


def about_results_feedback() -> str:
    """After an answer that speaks of the results and says nothing of what they hold. Imperatives
    only."""
    return "Give your answer again: answer the task itself, with the words and numbers the results give."


def yes_or_no_feedback() -> str:
    """After an answer with neither yes nor no, to a task that asks for one. Imperatives only."""
    return "The task asks for yes or no. Give your answer again, starting with Yes or No."


def rejection_feedback(objection: str) -> str:
    """After the caller's acceptor objected to an answer."""
    return f"Your answer was not accepted: {objection}\nContinue the task: call a tool, or give a corrected answer."


def _schema_text(schema: Mapping[str, Any]) -> str:
    """A schema as compact JSON without pydantic's titles, which only lengthen the prompt."""
    return json.dumps(drop_titles(schema), ensure_ascii=False, separators=(",", ":"))


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip_middle(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters in its middle: its start and its end are kept."""
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return f"{text[:half]} … {text[len(text) - half :]}"
