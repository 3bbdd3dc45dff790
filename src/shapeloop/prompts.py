"""The words the loop says to the model: the system prompt and the feedback after each step.

Kept short and literal: a 135M model follows a short instruction and ignores a long one. Each choice
here was measured on the tune half of the benchmark suite (``measurements/``): the full tool
documentation, the rule for when no tool fits, and feedback that names the task again.
"""

from __future__ import annotations

from collections.abc import Sequence

from shapeloop.guards import CallRecord
from shapeloop.tooldoc import DocStyle, render_tools
from shapeloop.tools import Tool, ToolResult

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
    "You cannot see files or anything else except through the tools: do not guess what a tool would "
    "return, call it.",
    "After a tool call, the next message gives its result. Your answer says what the results say. A "
    "result starting with ERROR: or DENIED: means the call failed or was refused: it is not an answer.",
]

# A made-up tool, so that a small model copies the shape and not the arguments of a real one. There
# is no example answer: qwen2.5-coder-0.5b copied one ("It is snowing in Oslo.") word for word.
_EXAMPLE = (
    'Example of a tool step, with a made-up tool get_weather: {"reason": "I need the weather in Oslo", '
    '"action": "tool", "tool": "get_weather", "args": {"city": "Oslo"}, "answer": ""}'
)

_PROSE = "Reply with the JSON object only: no other text before or after it."

DOC_STYLE: DocStyle = "outline"


def system_prompt(tools: Sequence[Tool], *, prose: bool, extra: str | None = None) -> str:
    """The system prompt for a run with these tools.

    Args:
        tools: the tools advertised to the model, each with its whole documentation.
        prose: the backend cannot enforce the schema, so say plainly that only JSON is wanted.
        extra: the caller's own instructions, appended.
    """
    lines = [_INTRO, _FORMAT, ""]
    if tools:
        lines += ["Tools:", render_tools(tools, DOC_STYLE)]
    else:
        lines.append("There are no tools in this run: answer directly.")
    lines += ["", "Rules:", *(f"- {rule}" for rule in _RULES)]
    if tools:
        lines += ["", _EXAMPLE]
    if prose:
        lines.append(_PROSE)
    if extra:
        lines += ["", extra.strip()]
    return "\n".join(lines)


def task_message(task: str, *, continued: bool) -> str:
    """The user turn that sets the task; in a continued conversation it is marked as the next one, so
    an earlier answer is not taken for this task's answer."""
    return f"Next task: {task}" if continued else task


def tool_feedback(result: ToolResult, record: CallRecord, *, status: str, task: str = "") -> str:
    """The user turn that carries a tool's result back to the model, with the task named again."""
    text = f"Result of {result.call}:\n{result.text}\n\n"
    if status in ("error", "denied"):
        text += "That call did not work: fix its arguments, call another tool, or say that you cannot do the task."
    else:
        text += 'If this result answers the task, reply with action "answer" and say what it says; otherwise call another tool.'  # noqa: E501
    if task:
        text += f"\nThe task: {_clip(task, 600)}"
    if status == "repeat":
        text += (
            f"\n\nNote: you made this same call {record.times} times and got this same result each "
            "time. Calling it again will not help: use the result above, call a different tool, "
            "or give your answer."
        )
    return text


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


def rejection_feedback(objection: str) -> str:
    """After the caller's acceptor objected to an answer."""
    return f"Your answer was not accepted: {objection}\nContinue the task: call a tool, or give a corrected answer."


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
