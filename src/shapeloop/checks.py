"""Questions the loop puts to an answer before it stands, and the tools that give a refused value.

Each question is asked once a run (the chain question once for each result that gives a new value,
see :func:`unchained`), and only where it can still help (a step is left to act on it).
An answer is questioned when, by what the conversation holds, the task is not done yet:

- :func:`unread`: no call was made, and the task names a file, a URL or an email address that a
  tool takes ("Who is the maintainer named in readme.md?");
- :func:`left_unread`: calls were made, and the task names a file (a URL, an email address) that a
  tool takes and no call took ("Do city_a.txt and city_b.txt name the same city?", with city_a.txt
  read alone);
- :func:`unchained`: the last result gives a value another tool takes ("employee id E-30418" for
  ``get_leave_balance(employee_id)``, "180.156 g/mol" for a ``molar_mass`` described "in g/mol"),
  or points to one file ("The answer you want is in data/secret.txt");
- :func:`not_yes_or_no`: the task asks for a yes or a no, and the answer holds neither;
- :func:`not_a_number`: the task asks how many, and the answer holds no number;
- :func:`about_results`: the answer speaks of the results ("The result does not give the
  maintainer's name.") and says nothing that the task did not.

A question says what the next constrained step may do (:class:`Question`). The module's switches
turn each off, for the benchmark's variants.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from shapeloop import ids, prompts
from shapeloop.grounding import (
    declines,
    described_in,
    gives,
    holds_value,
    identifier_words,
    named_inputs,
    result_words,
    taken_from,
    written_inputs,
)
from shapeloop.toolbox import ToolResult, ToolStatus
from shapeloop.tools import Tool, ToolCall

# Question an answer given right after a result that another tool takes (see unchained).
CHAIN_CHECK = True
# What the step after that question may do: "call" one of the tools named (measured best on the
# tune half), "choose" between them and the answer, or "open" (everything, as before).
CHAIN_STEP: Literal["call", "choose", "open"] = "call"
# Where a parameter's name does not say it, read its description for what a result gives it: its head,
# its unit, a code it gives as an example (see grounding.described_in).
CHAIN_DESCRIBED = True
# Question an answer given before any call to a task that names a file, a URL or an email address a
# tool takes (see unread).
UNREAD_CHECK = True
# Question an answer given after calls, none of which took a file (URL, email address) the task
# names (see left_unread).
LEFT_UNREAD_CHECK = True
# After a call refused for a made-up value, name the tools that say they give it (see providers).
PROVIDERS = True
# After a call made again for the same result, offer the tools that take a value of it as well as
# the answer (see chained_on_repeat).
CHAIN_ON_REPEAT = True
# Name again, after a later result it takes a value of, a tool named before and not called, where the
# task asks for what it does (see unchained).
CHAIN_AGAIN = True
# Question an answer with no number to a task that asks how many (see not_a_number).
COUNT_CHECK = True
# Question an answer that speaks of the results and says nothing the task did not (see about_results).
RESULTS_TALK_CHECK = True


# Words of a tool's name that say it changes something: a question never makes the next step call it.
_ACTING = frozenset(
    ("delete", "remove", "rm", "write", "append", "create", "update", "send", "move", "rename", "drop", "kill",
     "upload", "overwrite", "edit", "modify", "insert", "replace", "truncate", "wipe", "purge", "destroy",
     "deploy", "publish", "submit", "cancel", "pay", "transfer", "execute", "exec", "reset", "restart",
     "shutdown", "install", "uninstall", "buy", "sell", "refund", "approve", "reject", "disable", "enable",
     "unblock", "unban", "revoke", "reboot", "terminate", "suspend", "activate", "deactivate", "notify",
     "assign", "unassign", "unmute", "subscribe", "unsubscribe", "enroll", "revert", "rollback")
)  # fmt: skip
# Words that act only as a name's first word, the verb: ``book_hotel`` acts, ``get_book`` reads.
_ACTING_FIRST = frozenset(
    ("book", "order", "post", "put", "set", "run", "stop", "save", "share", "invite", "schedule", "charge",
     "close", "archive", "commit", "push", "log", "start", "block", "ban", "grant", "lock", "unlock",
     "restore", "flush", "mute", "register", "unregister", "withdraw", "deposit", "mark", "tag",
     "label", "trigger", "launch", "merge", "clear", "reserve")
)  # fmt: skip


def acts(tool: Tool) -> bool:
    """Whether a tool may change something: it needs approval, or its name says so (``delete_file``,
    ``sendEmail``, ``files.write``, ``book_hotel``; not ``get_order``). A question put to an answer
    never makes the next step call such a tool: "What is ~/.bashrc for?" must not lead to
    ``delete_file``."""
    words = identifier_words(tool.name)
    return tool.needs_approval or not _ACTING.isdisjoint(words) or (bool(words) and words[0] in _ACTING_FIRST)


@dataclass(frozen=True, kw_only=True)
class Question:
    """An answer put back to the model: the objection (for the ``AnswerRejected`` event), the
    feedback it reads, the tools it named, and what the next constrained step may do."""

    objection: str
    feedback: str
    named: frozenset[str] = frozenset()
    only: frozenset[str] | None = None  # the tools the next constrained step may call
    must_call: bool = False  # and it may not answer
    must_answer: bool = False  # it may only answer
    # the answer leaves what the model reads, and no feedback is given: the step is asked again
    retract: bool = False


def unread(task: str, answer: str, tools: Iterable[Tool], excluded: frozenset[str]) -> Question | None:
    """Question an answer given before any call when the task names a file, a URL or an email
    address that a tool takes (:func:`~shapeloop.grounding.named_inputs`): the model cannot see it.
    qwen2.5-coder-0.5b answered "Who is the maintainer named in readme.md?" with "The maintainer of
    this repository is @johndoe." without reading it. The answer is taken back, unsaid, and the step
    asked again with a call to one of those tools as the only choice: with the question in view ("Do
    not answer yet: ..."), the model read the file and then did not answer from it ("The result
    answers the task, so I will call another tool."). Not an answer that declines ("I cannot delete
    files"); not for tools that act (:func:`acts`)."""
    if not UNREAD_CHECK or declines(answer):
        return None
    takers = [
        (tool.name, *named[0])
        for tool in tools
        if tool.name not in excluded and not acts(tool) and (named := named_inputs(tool.parameters, task))
    ]
    if not takers:
        return None
    listed = ", ".join(f"{name} ({parameter} {value!r})" for name, parameter, value in takers)
    objection = f"given before any call, though the task names what a tool reads: {listed}"
    return _calling(objection, "", frozenset(name for name, _, _ in takers), retract=True)


def left_unread(
    task: str, answer: str, tools: Iterable[Tool], called: Sequence[ToolCall], excluded: frozenset[str]
) -> Question | None:
    """Question an answer given after calls, none of which took a file, a URL or an email address
    that the task names and a tool takes (:func:`~shapeloop.grounding.written_inputs`): "Do
    city_a.txt and city_b.txt name the same city? Answer yes or no." was answered "Yes" by
    qwen2.5-coder-0.5b after it had read city_a.txt alone. The next constrained step calls one of
    those tools, told which values it has not taken.

    A call took a value where an argument (at any depth) is that value, a path that ends with it
    ("todo.txt" for "notes/todo.txt", or the other way), or text that holds it as a whole
    (``"SELECT * FROM 'sales.csv'"``). Only a tool that takes nothing else (``read_file(path)``, not
    ``email_customer(customer_email, body)``: a value alone cannot be a message), and not one that
    acts (:func:`acts`). Not a value the task writes in a clause that keeps it from being read
    ("Without opening secrets.env, ...", "only if it is empty, read data.csv instead"), nor an answer
    that declines or asks for what it lacks."""
    if not LEFT_UNREAD_CHECK or _spared(answer):
        return None
    taken = [_as_input(value) for call in called for value in _texts(call.args)]
    takers: list[tuple[str, str, list[str]]] = []
    for tool in tools:
        if tool.name in excluded or acts(tool):
            continue
        for parameter, values in written_inputs(tool.parameters, task):
            if tool.parameters.get("required") != [parameter]:
                continue
            left = [v for v in values if not _kept_from(task, v) and not _taken(_as_input(v), taken)]
            if left:
                takers.append((tool.name, parameter, left))
                break
    if not takers:
        return None
    named = ", ".join(f"{name} ({parameter} {left[0]!r})" for name, parameter, left in takers)
    names = frozenset(name for name, _, _ in takers)
    return _calling(f"no call has taken what the task names: {named}", prompts.left_unread_feedback(takers), names)


def _calling(objection: str, feedback: str, names: frozenset[str], *, retract: bool = False) -> Question:
    """A question whose next constrained step must call one of the tools ``names``."""
    return Question(objection=objection, feedback=feedback, named=names, only=names, must_call=True, retract=retract)


def _texts(value: object) -> Iterator[str]:
    """The strings in an argument's value, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _texts(item)


def _as_input(value: str) -> str:
    """A path, URL or address as compared: case aside, with "/" for "\\", no "./", no "#fragment"."""
    written = value.strip().casefold().replace("\\", "/")
    written = written.split("#", 1)[0] if "://" in written else written
    written = written.rstrip("/")
    return written[2:] if written.startswith("./") else written


def _taken(named: str, taken: Sequence[str]) -> bool:
    """Whether a call's argument (one of ``taken``) is the value ``named``, a path that ends with the
    other, or text that holds it whole."""
    return bool(named) and any(
        named == t or named.endswith("/" + t) or t.endswith("/" + named) or holds_value(t, named) for t in taken
    )


# Words that keep a value the task writes from being read: "without opening secrets.env", "do not
# read it", "only if it is empty, read data.csv instead".
_KEPT_FROM = re.compile(
    r"\b(?:without|do not|don'?t|don’t|never|except|excluding|unless|only if|instead|rather than|avoid|skip|ignore)\b",
    re.IGNORECASE,
)


def _kept_from(task: str, value: str) -> bool:
    """Whether the clause of ``task`` that writes ``value`` (between the punctuation around it) keeps
    it from being read."""
    at = task.find(value)
    if at < 0:
        return False
    start = max(task.rfind(mark, 0, at) for mark in ".;,!?:\n") + 1
    ends = [i for mark in ".;,!?:\n" if (i := task.find(mark, at + len(value))) >= 0]
    return _KEPT_FROM.search(task[start : min(ends, default=len(task))]) is not None


def unchained(
    result: ToolResult,
    tools: Iterable[Tool],
    called: Sequence[ToolCall],
    excluded: frozenset[str],
    task: str = "",
    named: frozenset[str] = frozenset(),
) -> Question | None:
    """Question an answer given right after a result that another tool takes as its argument
    (``find_employee`` gave "employee id E-30418", ``get_leave_balance`` takes ``employee_id``), or
    that points to one file, URL or email address a tool takes ("The answer you want is in
    data/secret.txt", for ``read_file`` itself): the next constrained step calls one of those tools
    (``CHAIN_STEP``). Not a tool in ``excluded`` (kept out, or named for results that wrote every
    word this one writes), one already called with a value of this result, nor one that acts
    (:func:`acts`); only after a good result that holds a number (a value, not "no such employee")
    or that one pointer, to a value no call has used yet ("appended to notes.txt" points nowhere
    new). qwen2.5-coder-0.5b answered most two-step tasks with their first result. A tool in
    ``named`` (named after an earlier result, and not called) is named again only where the task
    asks for what it does (:func:`_asked_for`) and the result writes a value no call has used: "What
    is the email address of Priya Raman's manager?" names ``getManager`` and ``getContact`` after
    ``findEmployee``; qwen2.5-coder-0.5b called ``getManager`` and answered with the manager's name
    and id, which ``getContact`` takes."""
    if not CHAIN_CHECK or not (takers := _takers(result, tools, called, excluded, task, named)):
        return None
    listed = ", ".join(f"{name} ({parameter})" for name, parameter, _ in takers)
    names = frozenset(name for name, _, _ in takers)
    return Question(
        objection=f"not yet called, and taking a value the last result gives: {listed}",
        feedback=prompts.chain_feedback(takers, must_call=CHAIN_STEP == "call"),
        named=names,
        only=None if CHAIN_STEP == "open" else names,
        must_call=CHAIN_STEP == "call",
    )


def chained_on_repeat(
    result: ToolResult,
    tools: Iterable[Tool],
    called: Sequence[ToolCall],
    excluded: frozenset[str],
    task: str = "",
    named: frozenset[str] = frozenset(),
) -> Question | None:
    """After a call made again for the same result, where a tool not yet called takes a value of it
    (the test of :func:`unchained`): the next constrained step calls that tool or answers, where it
    would otherwise only answer. qwen2.5-coder-0.5b searched hotels twice, and was made to answer
    with the list where the task wanted the cheapest one's cancellation policy. Not forced to call:
    the result may be the answer ("What is Jonas Berg's employee id?"). ``named``: as for
    :func:`unchained`."""
    if not CHAIN_ON_REPEAT or not (takers := _takers(result, tools, called, excluded, task, named)):
        return None
    names = frozenset(name for name, _, _ in takers)
    return Question(
        objection="a call made again for the same result, which another tool takes",
        feedback=prompts.repeat_chain_feedback(takers),
        named=names,
        only=names,
    )


def _takers(
    result: ToolResult,
    tools: Iterable[Tool],
    called: Sequence[ToolCall],
    excluded: frozenset[str],
    task: str,
    named: frozenset[str] = frozenset(),
) -> list[tuple[str, str, str | None]]:
    """The tools that take a value of a good result, each with the parameter and, for a pointer,
    the value (see :func:`unchained`). A tool whose parameter only its description ties to the
    result (:func:`~shapeloop.grounding.described_in`) must also be asked for by the task
    (:func:`_asked_for`); one in ``named`` must be asked for, and the result must write a value
    with a digit that no call has used."""
    if result.status is not ToolStatus.OK:
        return []
    tools = list(tools)
    done = [tool for tool in tools if any(call.tool == tool.name for call in called)]
    words = result_words(result.text)
    holds_number = re.search(r"\d", result.text) is not None
    used = {str(value).strip().casefold() for call in called for value in call.args.values()}
    fresh = any(word.casefold() not in used for word in ids.digit_words(result.text))
    takers: list[tuple[str, str, str | None]] = []
    for tool in tools:
        if tool.name in excluded or acts(tool):
            continue
        if tool.name in named and not (CHAIN_AGAIN and fresh and _asked_for(task, tool, done, result.text)):
            continue
        if any(
            holds_value(result.text, value) for call in called if call.tool == tool.name for value in call.args.values()
        ):
            continue
        pointed = [
            (p, v) for p, v in named_inputs(tool.parameters, result.text, alone=True) if v.casefold() not in used
        ]
        if pointed:  # "The answer you want is in data/secret.txt": even the tool that gave it
            takers.append((tool.name, pointed[0][0], pointed[0][1]))
        elif tool.name == result.call.tool or not holds_number:
            continue
        elif taken := taken_from(tool.parameters, words, result.text) or _described(tool, result.text, task, done):
            takers.append((tool.name, taken, None))
        elif shown := _shown(tool, result.text, task, done, used):
            takers.append(shown)
    return takers


def _shown(
    tool: Tool, result: str, task: str, used: Sequence[Tool], values: set[str]
) -> tuple[str, str, str | None] | None:
    """``tool``, the id parameter whose pattern or documented example a word of the result fits
    (:func:`~shapeloop.ids.shown_in`) and that word where it is the one no call has used, where the
    task asks for what the tool does (``CHAIN_DESCRIBED``) and some fitting word is new: after
    ``getManager`` gave "manager of E-20931: Tomás Ortega (E-11802)", ``getContact`` with
    ``employee_id`` "E-11802"; after "manager of E-20931: none on record", nothing."""
    if not CHAIN_DESCRIBED or not _asked_for(task, tool, used, result):
        return None
    if not (shown := ids.shown_in(tool.parameters, result)):
        return None
    parameter, words = shown
    new = [word for word in words if word.casefold() not in values]
    if not new:
        return None
    return tool.name, parameter, new[0] if len(new) == 1 else None


def _described(tool: Tool, result: str, task: str, used: Sequence[Tool]) -> str | None:
    """The parameter of ``tool`` whose description ties it to the result, where the task asks for
    what the tool does (``CHAIN_DESCRIBED``)."""
    if not CHAIN_DESCRIBED or not (taken := described_in(tool.parameters, result)):
        return None
    return taken if _asked_for(task, tool, used, result) else None


def _asked_for(task: str, tool: Tool, used: Sequence[Tool], result: str) -> bool:
    """Whether the task asks for what ``tool`` does, and neither a tool already called nor the result
    gives it: a word of four letters or more that the task shares with the tool's name or
    description and not with theirs, nor with the result. "How many moles are in 50 g of glucose?"
    asks for ``grams_to_moles`` after ``molar_mass`` gave "180.156 g/mol"; "What is the molar mass
    of glucose?" does not (qwen2.5-coder-0.5b, sent on to it, answered "1.0000 mol"), nor does "What
    is the temperature in Oslo?" after "Oslo: temperature 8 C" ask for a tool that converts one."""
    asked = {word for word in result_words(task) if len(word) >= 4} - _SAYS_NOTHING - result_words(result)
    done: set[str] = set()
    for other in used:
        done |= _tool_words(other)
    return bool(asked & (_tool_words(tool) - done))


def _tool_words(tool: Tool) -> frozenset[str]:
    """The words of a tool's name and description."""
    return result_words(" ".join(identifier_words(tool.name)) + " " + tool.description)


# An answer that asks the user for what it lacks ("I need the employee's id", "Please provide the
# order number"): a question about its form would only press the model to make the thing up.
_ASKS_USER = re.compile(r"\b(?:I need (?:the|your|an?|more)|please (?:provide|give|tell|send|share|specify))\b", re.I)


def _spared(answer: str) -> bool:
    """An answer a question about its form leaves alone: it declines, or asks for what it lacks."""
    return declines(answer) or _ASKS_USER.search(answer) is not None


def not_yes_or_no(task: str, answer: str, *, answered_from_results: bool) -> Question | None:
    """Question an answer without a yes or a no to a task that asks for one ("Does animals.txt list
    a wolf? Answer yes or no."): qwen2.5-coder-0.5b answered with the file's text. Not an answer that
    declines. After a result the next step answers; before one it may call a tool."""
    if not prompts.asks_yes_or_no(task) or _spared(answer):
        return None
    if re.search(r"\b(?:yes|no|yep|yeah|yup|nope|nah|true|false)\b", answer, re.IGNORECASE):
        return None
    return Question(
        objection="the task asks for yes or no",
        feedback=prompts.yes_or_no_feedback(),
        must_answer=answered_from_results,
    )


# Words an answer to "how many" may give instead of digits: number words ("There are no ERROR
# lines."), quantities ("a couple", "half", "all of them", "nobody") and an honest "the file does
# not say"; not "The result does not answer the task.".
_QUANTITY = re.compile(
    r"\b(?:zero|none|no|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    r"fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|"
    r"hundred|thousand|million|billion|dozens?|once|twice|both|single|half|quarter|couple|few|several|pair|"
    r"many|most|all|every|nothing|nobody|neither|(?:do|does|did)(?: not|n'?t|n’t) (?:know|say|show|mention|"
    r"list|state|tell))\b"
    # a number on its own: not the digits of a date, a time, an id or a path ("2026-11-01 ERROR disk
    # full" is a log line given back, not a count)
    r"|(?<![\w.:/-])\d+(?:[.,]\d+)*(?![\w:/-]|[.,]\d)",
    re.IGNORECASE,
)


def not_a_number(task: str, answer: str, *, answered_from_results: bool) -> Question | None:
    """Question an answer without a number to a task that asks how many ("How many ERROR lines
    does log/app.log have?"): qwen2.5-coder-0.5b answered with the log's text, qwen2.5-coder-1.5b
    with "The result does not answer the task.". Not an answer with a quantity word ("a couple",
    "nobody"), one that declines or asks for what it lacks, nor a task that asks for yes or no. After
    a result the next step answers; before one it may call a tool."""
    if not COUNT_CHECK or not prompts.asks_how_many(task) or prompts.asks_yes_or_no(task) or _spared(answer):
        return None
    if _QUANTITY.search(answer):
        return None
    return Question(
        objection="the task asks how many",
        feedback=prompts.how_many_feedback(),
        must_answer=answered_from_results,
    )


# An answer that speaks of what the loop showed the model: "the result", "the previous call", "this
# output", "the tool's response".
_ABOUT_RESULTS = re.compile(
    r"\b(?:the|this|that|these|those|each|every|my|its|your)\s+(?:[\w'’]+\s+)?(?:results?|outputs?|calls?|responses?)\b",
    re.IGNORECASE,
)
# Words that say nothing of what a result holds: function words, and the words of talk about results
# and tasks ("The result does not give the maintainer's name.").
_SAYS_NOTHING = result_words(
    "a an the is are was were be been being am it its this that these those there here of in on at to for "
    "from with by as and or but so if not no nor do does did done has have had having me my we our you "
    "your they them their he she his her same each every any all some what which who whom whose how why "
    "when where than then yet still also only just again already before after previous last first next "
    "earlier above below time result output call response reply tool answer task question request give "
    "gave given say said show shown contain hold return match find found provide tell mention name number "
    "value text information info data detail file folder path line content about can could would should "
    "will may might need use used get got make made see seen read look isn doesn don didn aren wasn won"
)


def about_results(task: str, answer: str) -> Question | None:
    """Question an answer that speaks of the results ("the result", "the previous call") and says
    nothing that ``task`` (the user's words) did not: no word beyond the task's and those of talk
    about results, no number the task does not write. qwen2.5-coder-1.5b read readme.md, then
    answered "What version is given in readme.md?" with "The result is not the version number in the
    readme.md file." and "Who is the maintainer named in readme.md?" with "The result does not give
    the maintainer's name."; the user never sees the results, and "Version 3.2.1" was in view. The
    next step answers. Not an answer that declines ("I cannot tell from the result"), nor one to a
    question that a yes or a no answers (:func:`_closed`)."""
    if not RESULTS_TALK_CHECK or not _ABOUT_RESULTS.search(answer) or declines(answer) or _closed(task):
        return None
    words = {word for word in result_words(answer) if len(word) > 1} - result_words(task) - _SAYS_NOTHING
    numbers = set(re.findall(r"\d+", answer)) - set(re.findall(r"\d+", task))
    if words or numbers:
        return None
    return Question(
        objection="the answer speaks of the results and says nothing the task did not",
        feedback=prompts.about_results_feedback(),
        must_answer=True,
    )


def _closed(task: str) -> bool:
    """Whether the task asks a question that a yes or a no answers, whose answer may be all the
    task's words ("Was the test result positive?" - "The result was positive.")."""
    aux = r"(?:is|are|was|were|am|do|does|did|can|could|has|have|had|will|would|should|shall|may|must)(?:n'?t|n’t)?"
    asked = re.search(rf"(?:^|[.!?]\s+){aux}\b[^.!?\n]*\?", task, re.IGNORECASE | re.MULTILINE)
    return prompts.asks_yes_or_no(task) or asked is not None


def providers(wanted: Iterable[str], tools: Iterable[Tool], excluded: frozenset[str]) -> list[str]:
    """The tools whose documentation says they give a value that a parameter in ``wanted`` takes
    (:func:`~shapeloop.grounding.gives`: ``geocode``, "Latitude and longitude of a city", for
    ``get_timezone(latitude, longitude)``); not one in ``excluded``, nor one that acts.
    qwen2.5-coder-0.5b, refused for made-up coordinates, answered "Not run." instead of calling it."""
    if not PROVIDERS:
        return []
    names = set(wanted)
    return [
        tool.name
        for tool in tools
        if tool.name not in excluded and not acts(tool)
        and any(gives(tool.name, tool.description, tool.parameters, name) for name in names)
    ]  # fmt: skip
