"""The loop: ask the model for a step, run the tool it names, feed the result back, and stop with
a reason a person can read."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from shapeloop import checks, fit, ids, prompts
from shapeloop import offer as offer_module
from shapeloop.brain import (
    Brain,
    Capabilities,
    Constraint,
    Finish,
    Message,
    Reply,
    Request,
    SchemaSupport,
    Usage,
    as_brain,
    checked_reply,
)
from shapeloop.errors import BackendError, SchemaRefused, TimedOut
from shapeloop.events import (
    AnswerGiven,
    AnswerRejected,
    CallRefused,
    Event,
    ModeChanged,
    RepeatNoticed,
    ReplyCut,
    ReplyReceived,
    ReplyUnreadable,
    RunStopped,
    Sink,
    StepBegan,
    ThoughtGiven,
    ToolCalled,
    ToolReturned,
)
from shapeloop.extract import extract_step
from shapeloop.guards import BarrenRepeats, Budget, CallRecord, CallRepeats
from shapeloop.offer import Offer
from shapeloop.output import TypedAnswer, typed_answer
from shapeloop.run import AgentRun, Mode, OutputT, StopReason, Transcript
from shapeloop.step import Batch, Step, led
from shapeloop.text import escape_surrogates
from shapeloop.toolbox import Approver, Toolbox, ToolResult, ToolStatus, call_within
from shapeloop.tools import Tool, ToolCall
from shapeloop.values import made_up_values

# Module settings so that the benchmark's variants can change them (the questions put to an answer
# have theirs in shapeloop.checks, the shaping of the step schema in shapeloop.offer).
# Whether a call is refused before it runs when a number, date, time or name in its required arguments is
# written nowhere in the task or the results (``ground_values``; see shapeloop.values).
VALUE_CHECK = True
# Take the worked example out of the system prompt once an answer copies it (see _withdraw_example).
WITHDRAW_EXAMPLE = True
# Keep a repeated call's tool out one step past the call it was offered to chain to (``repeat_held``).
REPEAT_HOLD = True
# An answer the step has to give after one call's good result has its reason begin "The result says"
# (prompts.ANSWER_LEAD): the model goes on with what the result says. Not after a batch.
ANSWER_LEAD = True
# A call refused again with the same refusal is answered next, as a good result made again is: after
# "outside the workspace", qwen2.5-coder-0.5b tried the same path with every file tool until stuck.
REFUSAL_ANSWERS = True
# A tool whose required id nothing given could fill is left out of the step (shapeloop.ids.unsourced):
# the model looks the id up first, or answers that it needs one.
ID_SOURCES = True
# The order the tools are shown in: as the caller gives them, or those that share more words with the
# task first, a tool whose required id nothing given could fill not moved up ("shared-words", the
# variant "tools-by-words": qwen2.5-coder-0.5b chose the first-listed of similar tools).
TOOL_ORDER: Literal["given", "shared-words"] = "given"


def choose_mode(wanted: Mode, capabilities: Capabilities) -> tuple[Mode, str]:
    """The mode a run starts in: the one wanted, or the nearest below it that the brain declares.

    Returns the mode and, when it is not the one wanted, the reason (else an empty string).
    """
    mode, reason = wanted, ""
    if mode is Mode.NATIVE and not capabilities.native_tools:
        mode, reason = Mode.CONSTRAINED, "the backend has no native tool calls"
    if mode is Mode.CONSTRAINED and capabilities.schema is SchemaSupport.NONE:
        mode, reason = Mode.PROSE, "the backend cannot constrain a reply to a schema"
    return mode, reason


def _step_down(mode: Mode) -> Mode:
    return Mode.CONSTRAINED if mode is Mode.NATIVE else Mode.PROSE


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):  # RecursionError: a reply of thousands of "["
        return False


def run_agent(
    brain: Brain | Callable[..., Any],
    tools: Iterable[Tool],
    task: str,
    *,
    max_steps: int = 12,
    max_result_chars: int = 4000,
    stuck_limit: int = 2,
    accept_answer: Callable[[OutputT], bool | str] | None = None,
    approve: Approver | None = None,
    on_event: Sink | Sequence[Sink] | None = None,
    system: str | None = None,
    allow_tools: Iterable[str] | None = None,
    deny_tools: Iterable[str] | None = None,
    max_tokens: int | None = None,
    max_seconds: float | None = None,
    mode: Mode | Literal["constrained", "prose", "native"] = Mode.CONSTRAINED,
    schema: Literal["per_tool", "flat"] = "per_tool",
    max_reason_chars: int | None = None,
    history: Sequence[Message] | None = None,
    on_repeat: Callable[[RepeatNoticed], None] | None = None,
    transcript_path: str | os.PathLike[str] | None = None,
    output_type: type[OutputT] | Mapping[str, Any] | None = None,
    batch: bool = False,
    tool_timeout: float | None = 60.0,
    ground_ids: bool = True,
    ground_values: bool = True,
) -> AgentRun[OutputT]:
    """Run a task to an answer or to a stop with a reason.

    Args:
        brain: the model: a :class:`~shapeloop.Brain` (capabilities, ``ask(request) -> Reply``,
            ``close()``), or a plain function ``fn(messages, schema) -> str``.
        tools: the tools the model may call.
        task: what the user asks.
        max_steps: steps before the run stops as ``max_steps``.
        max_result_chars: tool results longer than this are cut, with a marker.
        stuck_limit: repeats of one identical call (or barren reply) that stop the run.
        accept_answer: ``accept_answer(answer)`` returns True, or an objection that is put to the
            model (it costs a step). Only the caller can tell a finished task from a model that
            gave up. It receives the text, or the validated object when ``output_type`` is given.
        approve: ``approve(call)`` decides whether a ``needs_approval`` tool may run: True, or
            False / a reason for refusing. Without it such tools are denied.
        on_event: a sink, or several, called with every event as it happens.
        system: extra instructions appended to the system prompt.
        allow_tools: if given, only these tools are offered.
        deny_tools: tools never offered nor run; deny wins over allow.
        max_tokens: stop as ``budget`` once this many tokens are used.
        max_seconds: stop as ``budget`` once this much wall time has passed, also in the middle
            of a model or tool call (the call is abandoned: its thread cannot be killed, so it
            runs on in the background and its result is dropped).
        mode: ``constrained`` (the default; falls back to prose if the backend declares no
            schema support, refuses the schema or ignores it), ``prose`` from the start, or
            ``native`` (the backend's own tool calls; falls back to constrained, then prose).
        schema: ``per_tool`` (one variant per tool) or ``flat`` (the five-field schema; with
            ``output_type`` or ``batch``, every tool's arguments opened to any object); a brain
            that declares flat schemas only gets the flat one.
        max_reason_chars: bound on the length of ``reason`` in the schema.
        history: messages of an earlier run to continue from (e.g. ``previous.messages``).
        on_repeat: called when a call or a barren reply starts repeating, before the stuck limit
            stops the run (the count also goes to the brain in ``Request.repeats``, so a router
            can escalate).
        transcript_path: append the transcript here as JSON Lines, each entry flushed as it
            happens (so an exception, Ctrl-C or ``kill -9`` loses at most the entry in flight).
            The path is checked before the model is asked anything: a folder, a symlink or a
            missing folder raises :class:`~shapeloop.errors.TranscriptError`.
        output_type: the answer's type: a pydantic model, a dataclass, a ``TypedDict``, or a JSON
            schema (a dict). The answer variant of the step schema is then that schema; an answer
            that does not validate goes back to the model with the validator's messages (it costs a
            step). ``run.output`` holds the object, ``run.answer`` its JSON.
        batch: let the model make several independent calls in one step
            (``{"action": "calls", "calls": [...]}``); they run concurrently, except calls whose
            tools share a ``lock_key``, and their results come back together, in the model's order.
        tool_timeout: seconds one tool call may take before it ends as ``ERROR: ... timed out``
            and the run goes on; None for no limit. The tool's thread cannot be killed: it runs
            on in the background and its result is dropped.
        ground_ids: refuse to run a call whose id argument (``id``, ``user_id``, ``trackId``, ...)
            holds a value that appears nowhere in the conversation: an id the model made up
            (:mod:`shapeloop.ids`). The model is told to find it first. A constrained step also
            leaves out a tool whose required id nothing given could fill yet: an integer id before
            any number is written, a text id documented as "e.g. E-12345" before a word of that shape.
        ground_values: refuse a call, before it runs, whose required arguments hold a number, date,
            time or name (of a city, a team, a person: ``city="Oslo"``) written nowhere in the
            conversation, in any common form ("March 3rd 2024" for ``2024-03-03``, "2:30 pm" for
            ``14:30``, "NYC" for ``"New York"``): a value the model made up, most often for a
            tool that does not fit the task (:mod:`shapeloop.values`). The step is refused
            (:class:`~shapeloop.events.CallRefused`, no :class:`~shapeloop.events.ToolCalled`), the
            model is told which arguments the task does not give, and the tool is kept out of the
            next constrained step.
    """
    if not isinstance(task, str) or not task.strip():
        raise ValueError("task must be a non-empty string")
    task = escape_surrogates(task)
    if max_steps < 1 or stuck_limit < 1:
        raise ValueError("max_steps and stuck_limit must be at least 1")
    if max_seconds is not None and max_seconds < 0:
        raise ValueError(f"max_seconds must be 0 or more, not {max_seconds!r}")
    toolbox = Toolbox(
        tools,
        allow=allow_tools,
        deny=deny_tools,
        approve=approve,
        max_result_chars=max_result_chars,
        timeout=tool_timeout,
        ground_ids=ground_ids,
    )
    offered = list(toolbox.tools.values())
    if TOOL_ORDER == "shared-words":
        offered = _by_shared_words(task, offered)
    brain = as_brain(brain)
    flat = schema == "flat" or brain.capabilities.schema is SchemaSupport.FLAT
    typed = None if output_type is None else typed_answer(output_type)
    answer_schema = None if typed is None else typed.schema

    offer = Offer.of(offered, flat=flat, answer_schema=answer_schema, batch=batch, max_reason_chars=max_reason_chars)
    sinks = [] if on_event is None else [on_event] if callable(on_event) else list(on_event)
    earlier = [m for m in history or () if m["role"] != "system"]
    run = _Run(
        brain=brain,
        toolbox=toolbox,
        offer=offer,
        mode=Mode(mode),
        max_steps=max_steps,
        stuck_limit=stuck_limit,
        accept=accept_answer,
        sinks=sinks,
        budget=Budget(max_tokens=max_tokens, max_seconds=max_seconds),
        specs=[t.spec() for t in offered],
        on_repeat=on_repeat,
        task=task,
        typed=typed,
        batch=batch,
        example_shown=bool(offered),
        instructions=system or "",
        ground_values=ground_values and VALUE_CHECK,
        answered_before="\n".join(m["content"] for m in earlier if m["role"] == "assistant"),
    )
    prompt = prompts.system_prompt(offered, prose=True, extra=system, answer_schema=answer_schema, batch=batch)
    if WITHDRAW_EXAMPLE:
        run.plain_prompt = prompts.system_prompt(
            offered, prose=True, extra=system, answer_schema=answer_schema, batch=batch, example=False
        )
    opening = [Message(role="system", content=prompt)]
    opening += earlier
    opening.append(Message(role="user", content=prompts.task_message(task, continued=bool(earlier))))
    if transcript_path is not None:
        run.transcript = Transcript.streaming(transcript_path)
    return run.execute(opening, transcript_path)


def _words(text: str) -> frozenset[str]:
    """The words of a result, case aside."""
    return frozenset(re.findall(r"[\w-]+", text.casefold()))


def _by_shared_words(task: str, tools: list[Tool]) -> list[Tool]:
    """``tools``, those that share more of the task's own words with it first (as
    :func:`~shapeloop.fit.shared_words` reads them, a path not counted as "file"), ties in the given
    order; a tool whose required id nothing in the task could fill counts none."""
    words = fit.shared_words(re.sub(r"\S*[/.\\]\S*", " ", task), [(tool.name, tool.description) for tool in tools])

    def shared(tool: Tool) -> int:
        if ids.unsourced(tool.parameters, task) is not None:
            return 0
        return len(words & fit.shared_words(task, [(tool.name, tool.description)]))

    return sorted(tools, key=lambda tool: -shared(tool))


@dataclass(kw_only=True)
class _Run:
    brain: Brain
    toolbox: Toolbox
    offer: Offer
    mode: Mode
    max_steps: int
    stuck_limit: int
    accept: Callable[[Any], bool | str] | None
    sinks: list[Sink]
    budget: Budget
    specs: list[dict[str, Any]]
    on_repeat: Callable[[RepeatNoticed], None] | None = None
    task: str = ""
    typed: TypedAnswer | None = None
    batch: bool = False
    native_called: bool = False
    repeats: int = 0
    results: int = 0  # tool results fed back so far
    # After a repeated call, the next call may not be to that tool again: the model is asked for the
    # answer or another tool instead of a third identical call (a refused answer in between does
    # not lift this).
    excluded: frozenset[str] = frozenset()
    # After an answer that only repeated a failed call's error, the next constrained step calls a
    # tool: small models copy the error again and again when they may answer.
    must_call: bool = False
    # After a call that returned the same result as before (not a failure), the next constrained step
    # answers: small models made such a call again at once, then called tools that did not fit,
    # instead of answering from the result they had.
    must_answer: bool = False
    answer_forced: bool = False  # the last request allowed an answer only
    # An answer put a question (see _questioned) may leave the next constrained step fewer choices:
    # ``only`` holds the tools it may call.
    # the tools it has named, each with the words of the results it was named for
    chain_asked: dict[str, frozenset[str]] = field(default_factory=dict)
    unread_asked: bool = False  # an answer was questioned for a file (URL, address) the task names
    left_asked: bool = False  # an answer was questioned for a file (URL, address) no call has taken
    form_asked: bool = False  # an answer was questioned for lacking the yes or no the task asks for
    talk_asked: bool = False  # an answer was questioned for speaking of the results, saying nothing of them
    only: frozenset[str] | None = None
    called: list[ToolCall] = field(default_factory=list)  # the calls made so far
    last_result: ToolResult | None = None  # the last single call's result
    opened: int = 0  # the messages before the first step: what the loop said after them is feedback
    # tools refused for a made-up id or value since the last call that ran
    blocked: frozenset[str] = frozenset()
    # the tool whose call repeated when the next step was offered the tools that take its result:
    # kept out one step past that next call too (smollm2-135m and qwen2.5-coder-0.5b made the
    # repeated call a third time after the offered one, and were stopped as stuck)
    repeat_held: frozenset[str] = frozenset()
    ground_values: bool = True  # refuse calls with made-up numbers, dates, times and names
    quotable: list[str] = field(default_factory=list)  # the loop's findings an answer may repeat to the user
    answered_before: str = ""  # the earlier conversation's assistant turns: a value may come from them
    failed_tool: str | None = None  # the tool of the last call, while that call failed
    failed_text: str = ""  # that call's error
    given: list[str] = field(default_factory=list)  # the user turns before the task, the task, each result
    asked: list[str] = field(default_factory=list)  # the user turns and the caller's objections alone
    example_shown: bool = False  # the system prompt holds the worked example
    plain_prompt: str = ""  # the system prompt without it, for when it is withdrawn
    example_withdrawn: bool = False
    instructions: str = ""  # the caller's own words in the system prompt (``system=``)
    last_failure: str | None = None  # the last result, while it is an error
    messages: list[Message] = field(default_factory=list)
    transcript: Transcript = field(default_factory=Transcript)
    events: list[Event] = field(default_factory=list)
    usage: Usage | None = None
    calls: CallRepeats = field(default_factory=CallRepeats)
    barren: BarrenRepeats = field(default_factory=BarrenRepeats)
    step: int = 0
    answer: str | None = None
    output: Any = None
    outcome: tuple[StopReason, str] | None = None

    def execute(self, opening: list[Message], transcript_path: str | os.PathLike[str] | None) -> AgentRun:
        try:
            for message in opening:
                self._say(message["role"], message["content"])
            self.given = [m["content"] for m in opening if m["role"] == "user"]
            self.asked = list(self.given)
            self.opened = len(self.messages)
            mode, reason = choose_mode(self.mode, self.brain.capabilities)
            if mode is not self.mode:
                self._switch(mode, reason)
            while self.outcome is None:
                self._one_step()
        except KeyboardInterrupt:
            self._finish(StopReason.INTERRUPTED, f"interrupted by the user (Ctrl-C) during step {self.step}")
        except BaseException as exc:
            self.transcript.add({"type": "error", "step": self.step, "error": repr(exc)})
            if transcript_path is not None:
                exc.add_note(f"shapeloop: the transcript so far is in {os.fspath(transcript_path)}")
            raise
        finally:
            self.transcript.close()
        assert self.outcome is not None
        return AgentRun(
            stop=self.outcome[0],
            reason=self.outcome[1],
            answer=self.answer,
            steps=self.step,
            mode=self.mode,
            usage=self.usage,
            transcript=self.transcript,
            events=tuple(self.events),
            output=self.output,
        )

    def _one_step(self) -> None:
        if self.step >= self.max_steps:
            self._finish(StopReason.MAX_STEPS, self._max_steps_reason())
            return
        spent = self.budget.exceeded(self.usage.total_tokens if self.usage else 0)
        if spent is not None:
            self._finish(StopReason.BUDGET, f"{spent}, after {self.step} steps")
            return
        self.step += 1
        self._emit(StepBegan(step=self.step, mode=self.mode))
        reply = self._ask()
        if reply is None:
            return
        if reply.tool_calls:
            self._on_native_calls(reply)
            return
        self._say("assistant", reply.text)
        if reply.finish is Finish.LENGTH:
            self._emit(ReplyCut(step=self.step, text=reply.text))
            self._barren(reply.text, prompts.cut_feedback(), "cut-off")
            return
        if self.mode is Mode.NATIVE:
            # After native calls, a reply in plain text is the model's answer.
            found = extract_step(reply.text)
            step = found.step or Step(reason="", action="answer", tool="", args={}, answer=reply.text.strip())
        else:
            ignored = _ignored_schema(reply) if self.mode is Mode.CONSTRAINED else None
            if ignored is not None:
                self._switch(Mode.PROSE, ignored)
            found = extract_step(reply.text)
            error = (found.error or "no step found") if found.step is None else self._names_no_tool(found.step)
            if found.step is None or error is not None:
                self._emit(ReplyUnreadable(step=self.step, text=reply.text, error=error or ""))
                self._barren(reply.text, prompts.unreadable_feedback(error or ""), "unreadable")
                return
            step = found.step
        self._emit(ThoughtGiven(step=self.step, text=step.reason))
        if isinstance(step, Batch):
            self._on_batch(step, reply.text)
        elif step.action == "answer":
            self._on_answer(step.answer, reply.text)
        else:
            self._on_tool(step, reply.text)

    def _ask(self) -> Reply | None:
        try:
            reply = checked_reply(self.brain, self._request())
        except BackendError as exc:
            self._finish(StopReason.BACKEND_ERROR, f"the backend failed at step {self.step}: {exc}")
            return None
        except TimedOut:
            spent = self.budget.exceeded(0) or "the time budget is spent"
            self._finish(StopReason.BUDGET, f"{spent}, while the model was answering step {self.step}")
            return None
        self._count(reply.usage)
        self._emit(
            ReplyReceived(step=self.step, text=reply.text, finish=reply.finish, usage=reply.usage, engine=reply.engine)
        )
        return reply

    def _request(self) -> Reply:
        """Ask in the current mode, stepping down native -> constrained -> prose on a refusal."""
        while True:
            try:
                reply = call_within(self.budget.remaining(), self.brain.ask, self._question())
            except SchemaRefused as exc:
                if self.mode is Mode.PROSE:
                    raise BackendError(f"the backend refused a prose request: {exc}") from exc
                self._switch(_step_down(self.mode), str(exc))
                continue
            if self.mode is Mode.NATIVE and self._declined_tools(reply):
                self._count(reply.usage)  # the reply is set aside, but its tokens were spent
                self._switch(Mode.CONSTRAINED, "the model answered without calling a tool")
                continue
            self.answer_forced = self.must_answer and self.mode is Mode.CONSTRAINED
            self.must_call = self.must_answer = False
            self.only = None
            return reply

    def _question(self) -> Request:
        """The request for the current mode."""
        messages = list(self.messages)
        if self.mode is Mode.NATIVE:
            return Request(messages=messages, tools=self.specs, repeats=self.repeats, results=self.results)
        schema = None
        if self.mode is Mode.CONSTRAINED:
            given = self._given()
            # an answer-only step offers no arguments to hold to the written values or the quoted ids
            checked = self._checked() if self.ground_values and not self.must_answer else None
            asked = None if self.must_answer else self._asked()
            if self.must_answer:
                schema = self.offer.schema(frozenset(self.toolbox.tools), True, given)
                if ANSWER_LEAD and self.last_result is not None and self.last_result.status is ToolStatus.OK:
                    schema = led(schema, prompts.ANSWER_LEAD)
            elif self.only is not None:
                excluded = frozenset(self.toolbox.tools) - self.only
                schema = self.offer.schema(excluded, not self.must_call, given, checked, asked)
            else:
                schema = self.offer.schema(
                    self.excluded | self._unsourced(given), not self.must_call, given, checked, asked
                )
        offered = tuple((t.name, t.description) for t in self.toolbox.tools.values() if t.name not in self.excluded)
        return Request(messages=messages, schema=schema, repeats=self.repeats, results=self.results, task=self.task,
                       offered=offered)  # fmt: skip

    def _declined_tools(self, reply: Reply) -> bool:
        """A first native reply that calls nothing, though tools were offered: the model will not use them."""
        return not reply.tool_calls and not self.native_called and bool(self.specs) and reply.finish is Finish.STOP

    def _count(self, usage: Usage | None) -> None:
        if usage is not None:
            self.usage = usage if self.usage is None else self.usage + usage

    def _on_native_calls(self, reply: Reply) -> None:
        self.native_called = True
        steps = [
            Step(reason=reply.text.strip(), action="tool", tool=call.tool, args=dict(call.args), answer="")
            for call in reply.tool_calls
        ]
        # The record keeps the calls in the step shape, so a later switch to another mode reads on.
        self._say("assistant", "\n".join(step.to_json() for step in steps))
        self._emit(ThoughtGiven(step=self.step, text=steps[0].reason))
        if self.batch:
            self._run_calls(list(reply.tool_calls))
            return
        for step in steps:
            self._on_tool(step, step.to_json())
            if self.outcome is not None:
                return

    def _switch(self, mode: Mode, reason: str) -> None:
        self.mode = mode
        self._emit(ModeChanged(step=self.step, mode=mode, reason=reason))

    def _on_tool(self, step: Step, raw: str) -> None:
        call = ToolCall(tool=step.tool, args=step.args)
        if self._refused([call], raw):
            return
        self._emit(ToolCalled(step=self.step, call=call))
        result = self.toolbox.run(call, seconds_left=self.budget.remaining(), seen=self._given())
        self.results += 1
        self.given.append(result.text)
        self.called.append(call)
        self.last_result = result
        record = self._record(result)
        self.barren.reset()
        self.last_failure = _failure(result)
        status = self._status(result, record).value
        self.must_answer = _same_again(result, record)
        chained = self._chained_on_repeat(result) if self.must_answer else None
        if chained is not None:  # the tools that take the result, or the answer
            self.must_answer, self.only = False, chained.only
        # the repeated tool stays out a step past the offered call, unless it is itself offered (a file
        # that names another file)
        hold = chained is not None and REPEAT_HOLD and chained.only is not None and call.tool not in chained.only
        held, self.repeat_held = self.repeat_held, frozenset({call.tool}) if hold else frozenset()
        feedback = prompts.tool_feedback(
            result,
            record,
            status=status,
            failed_before=self._waiting(call),
            answer_next=self.must_answer,
            then="" if chained is None else chained.feedback,
            task=self.task,
            restate=self.brain.capabilities.restate_task,
        )
        self._say("user", feedback)
        # a failed call waits for another tool's result that may give what it needed; said once
        self.failed_tool = call.tool if result.status is ToolStatus.ERROR else None
        self.failed_text = result.text if result.status is ToolStatus.ERROR else ""
        self._check_repeats([record])
        # the id has to come from another tool first: a tool refused for a made-up id is kept out
        # until a call runs (refused one after another, each kept out: qwen2.5-coder-0.5b went
        # back and forth between two such tools and never called the one that finds the id)
        self.blocked = self.blocked | {call.tool} if result.made_up else frozenset()
        self.excluded |= self.blocked | held

    def _chained_on_repeat(self, result: ToolResult) -> checks.Question | None:
        """After a call made again for the same result: the tools that take a value of it, which the
        next step may call instead of answering (:func:`~shapeloop.checks.chained_on_repeat`), with
        a call and an answer left."""
        if self.step + 2 > self.max_steps:
            return None
        tools = self.toolbox.tools.values()
        excluded, named = self._chain_named(result)
        question = checks.chained_on_repeat(result, tools, self.called, excluded, self.task, named)
        if question is not None:
            self._chain_asked(question, result)
        return question

    def _chain_named(self, result: ToolResult) -> tuple[frozenset[str], frozenset[str]]:
        """The tools a chain question leaves out after ``result`` (those kept out, and those named
        for results that wrote every word it writes: the same result again, spaced otherwise, or an
        earlier one), and those named for other results, which the task must still ask for."""
        words = _words(result.text)
        same = frozenset(name for name, seen in self.chain_asked.items() if words <= seen)
        return self.excluded | same, frozenset(self.chain_asked) - same

    def _chain_asked(self, question: checks.Question, result: ToolResult) -> None:
        """Keep the words of ``result`` with each tool the question named."""
        words = _words(result.text)
        for name in question.named:
            self.chain_asked[name] = self.chain_asked.get(name, frozenset()) | words

    def _refused(self, calls: list[ToolCall], raw: str) -> bool:
        """Refuse a step whose calls hold a number, date, time or name that nothing the model was given
        writes (``ground_values``): none of its calls runs, their tools are kept out of the next
        constrained step, and the model is told what the task does not give. Where other tools say
        they give it (:func:`~shapeloop.grounding.gives`: ``geocode``, "Latitude and longitude of a
        city", for ``get_timezone(latitude, longitude)``), the model is told to call one, and the
        next constrained step does (:func:`~shapeloop.checks.providers`)."""
        if not self.ground_values:
            return False
        given = self._checked()
        made_up = [
            (call, values)
            for call in calls
            if (tool := self.toolbox.tools.get(call.tool)) is not None
            and (values := made_up_values(tool.parameters, call.args, given + self._chosen(tool)))
        ]
        if not made_up:
            return False
        for call, values in made_up:
            shown = ", ".join(f"{path} {json.dumps(value, ensure_ascii=False)}" for path, value in values)
            objection = f"written nowhere in the task or the results: {shown}"
            self._emit(CallRefused(step=self.step, call=call, objection=objection))
        self.blocked |= {call.tool for call, _ in made_up}
        self.excluded |= self.blocked
        refused = [(c.tool, v) for c, v in made_up]
        self.quotable.append(prompts.made_up_values_finding(refused))
        wanted = {str(path).split(".")[-1].split("[")[0] for _, values in made_up for path, _ in values}
        providers = checks.providers(wanted, self.toolbox.tools.values(), self.excluded)
        self._barren(raw, prompts.made_up_values_feedback(refused, providers), "made-up-value")
        if providers and self.outcome is None:
            self.only = frozenset(providers)
            self.must_call = True
        return True

    def _chosen(self, tool: Tool) -> str:
        """The values the constrained step offered a tool's arguments (``Tool.choices``), which the
        model was given as much as the task's words."""
        if tool.choices is None or not offer_module.TOOL_CHOICES:
            return ""
        choices = tool.choices(self._asked())
        values = choices.values() if isinstance(choices, Mapping) else ()
        return "".join(f"\n{value}" for listed in values if not isinstance(listed, str) for value in listed)

    def _waiting(self, call: ToolCall) -> str | None:
        """The tool whose failed call this call's result may unblock: not this tool itself, and not
        when the failure named this tool as the one to use instead ("a file: read it with
        read_file"), since then this call was the fix, and calling the failed tool again undoes it."""
        if self.failed_tool is None or self.failed_tool == call.tool:
            return None
        if re.search(rf"(?<![\w.]){re.escape(call.tool)}(?![\w])", self.failed_text):
            return None
        return self.failed_tool

    def _on_batch(self, step: Batch, raw: str) -> None:
        if not self.batch:
            self._barren(raw, prompts.batch_off_feedback(), "batch")
            return
        self._run_calls([ToolCall(tool=call.tool, args=call.args) for call in step.calls])

    def _run_calls(self, calls: list[ToolCall]) -> None:
        """Run the calls of one step as a batch, and put every result back in one turn."""
        if self._refused(calls, "\n".join(map(str, calls))):
            return
        for call in calls:
            self._emit(ToolCalled(step=self.step, call=call))
        results = self.toolbox.run_batch(calls, seconds_left=self.budget.remaining(), seen=self._given())
        self.results += len(results)
        self.given += [result.text for result in results]
        self.called += calls
        self.last_result = None
        records = [self._record(result) for result in results]
        self.barren.reset()
        self.last_failure = next((f for f in map(_failure, reversed(results)) if f is not None), None)
        statuses = [self._status(result, record).value for result, record in zip(results, records, strict=True)]
        self.must_answer = all(_same_again(result, record) for result, record in zip(results, records, strict=True))
        self._say("user", prompts.batch_feedback(results, records, statuses=statuses, task=self.task))
        self._check_repeats(records)

    @staticmethod
    def _status(result: ToolResult, record: CallRecord) -> ToolStatus:
        return ToolStatus.REPEAT if record.repeats else result.status

    def _record(self, result: ToolResult) -> CallRecord:
        """Count the call for repeats and tell the sinks how it went."""
        record = self.calls.observe(result.call, result.text)
        self._emit(
            ToolReturned(
                step=self.step,
                call=result.call,
                status=self._status(result, record),
                text=result.text,
                chars=result.chars,
                truncated=result.truncated,
                repeats=record.repeats,
            )
        )
        return record

    def _check_repeats(self, records: list[CallRecord]) -> None:
        """Stop as stuck on the first call at the stuck limit; otherwise notice each repeating call,
        and keep its tool out of the next constrained step."""
        for record in records:
            if record.repeats >= self.stuck_limit:
                same = record.repeats + 1
                detail = (
                    "with the same result each time"
                    if same == record.times
                    else f"and the last {same} calls returned the same result"
                )
                self._finish(
                    StopReason.STUCK,
                    f"{record.call} was called {record.times} times {detail} (stuck_limit={self.stuck_limit} repeats)",
                )
                return
        repeating = [record for record in records if record.repeats]
        self.excluded = frozenset(record.call.tool for record in repeating)
        for record in repeating:
            self._repeating(RepeatNoticed(step=self.step, what=str(record.call), times=record.times))

    def _on_answer(self, answer: Any, raw: str) -> None:
        if isinstance(answer, str):
            answer = escape_surrogates(answer)  # JSON's "\ud800" decodes to a lone surrogate
        if self.typed is not None:
            checked = self.typed.check(answer)
            if checked.errors:
                shown = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
                objection = "the answer does not match the output type: " + "; ".join(checked.errors)
                self._emit(AnswerRejected(step=self.step, text=shown, objection=objection))
                # identical answers fail identically, whatever the reason around them says
                failure = "invalid answer " + json.dumps(answer, sort_keys=True, default=str)
                self._barren(failure, prompts.invalid_answer_feedback(checked.errors), "invalid-answer")
                return
            value, text = checked.value, checked.text
        elif not isinstance(answer, str):
            shown = json.dumps(answer, ensure_ascii=False)
            self._emit(AnswerRejected(step=self.step, text=shown, objection="the answer is not text"))
            self._barren(raw, prompts.answer_not_text_feedback(), "non-text-answer")
            return
        elif not answer.strip():
            self._emit(AnswerRejected(step=self.step, text=answer, objection="the answer is empty"))
            self._barren(raw, prompts.empty_answer_feedback(), "empty-answer")
            return
        elif self._echoes_failure(answer):
            objection = "the answer repeats a failed call's error"
            self._emit(AnswerRejected(step=self.step, text=answer, objection=objection))
            self._barren(raw, prompts.error_answer_feedback(), "error-echo")
            self.must_call = self.outcome is None
            return
        elif self.example_shown and not self.example_withdrawn and prompts.copies_example(answer, self._given()):
            objection = "the answer was copied from the prompt's worked example"
            self._emit(AnswerRejected(step=self.step, text=answer, objection=objection))
            self._barren(raw, prompts.example_answer_feedback(), "example-copy")
            self._withdraw_example()
            return
        elif prompts.copies_loop(answer, self._loop_words(), self._given()):
            objection = "the answer repeats the loop's own instructions"
            self._emit(AnswerRejected(step=self.step, text=answer, objection=objection))
            self._barren(raw, prompts.loop_words_answer_feedback(), "loop-copy")
            self._withdraw_example()
            return
        else:
            value = text = answer
        if self._questioned(text):
            return
        verdict: bool | str = True if self.accept is None else self.accept(value)
        if verdict is True:
            self.answer, self.output = text, value
            self._emit(AnswerGiven(step=self.step, text=text))
            self._finish(StopReason.ANSWERED, f"answered after {self.step} step{'s' if self.step != 1 else ''}")
            return
        objection = verdict if isinstance(verdict, str) and verdict.strip() else "the answer was not accepted"
        self.given.append(objection)  # the caller's words: an answer may take them up
        self.asked.append(objection)
        self._emit(AnswerRejected(step=self.step, text=text, objection=objection))
        self._barren(raw, prompts.rejection_feedback(objection), "rejected-answer")

    def _withdraw_example(self) -> None:
        """Once an answer copies the worked example or the loop's words (the example's reason, "The
        result gives the price.", is the words most copied), ask the step again without them: the
        example leaves the system prompt, and the copied reply and the feedback on it leave what the
        model reads (the transcript keeps both, and notes the new prompt). Told of the copy, or
        with the example gone but its own copy in view, qwen2.5-coder-0.5b gave the same copy again,
        as greedy decoding of the same context does, until the run was spent. Once a run; after
        it, the example check is off (only the model's own earlier words could be copied)."""
        if not self.example_shown or self.example_withdrawn or not self.plain_prompt or self.outcome is not None:
            return
        self.example_withdrawn = True
        self.messages[0] = Message(role="system", content=self.plain_prompt)
        del self.messages[-2:]  # the copy and the feedback on it
        why = "the worked example was withdrawn, and the copied answer taken out of what the model reads"
        self.transcript.add({"type": "system_prompt", "step": self.step, "content": self.plain_prompt, "why": why})

    def _loop_words(self) -> str:
        """The loop's own words to the model: its fixed instructions and the feedback it gave, less
        the findings an answer may pass on (``quotable``)."""
        said = [m["content"] for m in self.messages[self.opened :] if m["role"] == "user"]
        words = "\n".join([prompts.LOOP_TEXT, *said])
        for finding in self.quotable:
            words = words.replace(finding, "\n")
        return words

    def _questioned(self, shown: str) -> bool:
        """Put the first question :mod:`shapeloop.checks` has for this answer to the model, each
        once a run (the chain question once for each tool and result); none without the steps left
        to act on it (a call and an answer after a question that makes the next step call). An
        answer the step had to give is asked only whether it says more than talk of the results, and
        whether it has the yes, the no or the number the task asks for: qwen2.5-coder-1.5b, made to
        answer after reading animals.txt twice, said "The result does not answer the task." to "How
        many animals are listed?"."""
        if self.step >= self.max_steps or self.budget.exceeded(self.usage.total_tokens if self.usage else 0):
            return False
        tools = list(self.toolbox.tools.values())
        # a forced answer is asked only for its form: the other questions make the next step call
        room = self.step + 2 <= self.max_steps and not self.answer_forced
        question = None
        if not self.called and not self.unread_asked and room:
            question = checks.unread(self.task, shown, tools, self.excluded)
            self.unread_asked = question is not None
        if question is None and self.called and not self.left_asked and room:
            question = checks.left_unread(self.task, shown, tools, self.called, self.excluded)
            self.left_asked = question is not None
        if question is None and self.last_result is not None and room:
            excluded, named = self._chain_named(self.last_result)
            question = checks.unchained(self.last_result, tools, self.called, excluded, self.task, named)
            if question is not None:
                self._chain_asked(question, self.last_result)
        if question is None and self.results and not self.talk_asked and self.typed is None:
            question = checks.about_results(self._asked(), shown)
            self.talk_asked = question is not None
        if question is None and not self.form_asked and self.typed is None:
            answered = self.results > 0
            question = checks.not_yes_or_no(self.task, shown, answered_from_results=answered)
            if question is None:
                question = checks.not_a_number(self.task, shown, answered_from_results=answered)
            self.form_asked = question is not None
        if question is None:
            return False
        self._emit(AnswerRejected(step=self.step, text=shown, objection=question.objection))
        if question.retract:
            del self.messages[-1]  # the answer; the transcript keeps it
        else:
            self._say("user", question.feedback)
        self.only, self.must_call, self.must_answer = question.only, question.must_call, question.must_answer
        return True

    def _echoes_failure(self, text: str) -> bool:
        """The answer passes off an ``ERROR:`` result as the answer to the task. Not a refusal
        (``DENIED:``, a cancelled batch): a tool that will not do what the task asks ("outside the
        workspace", "not approved") is what the user has to be told, and qwen2.5-coder-0.5b, whose
        answer was refused for repeating it, retried the refused call until its steps ran out."""
        said = " ".join(text.split())
        if said.startswith("ERROR:"):
            return True
        if self.last_failure is None:
            return False
        message = " ".join(self.last_failure.split(":", 1)[-1].split())[:60]
        return len(message) >= 12 and message in said

    def _barren(self, raw: str, feedback: str, what: str) -> None:
        repeats = self.barren.observe(raw)
        if repeats >= self.stuck_limit:
            self._finish(
                StopReason.BARREN,
                f"the model gave the same {what} reply {repeats + 1} times in a row, running "
                f"nothing and finishing nothing (stuck_limit={self.stuck_limit} repeats)",
            )
            return
        if repeats:
            self._repeating(RepeatNoticed(step=self.step, what=f"{what} reply", times=repeats + 1))
        self._say("user", feedback)

    def _repeating(self, event: RepeatNoticed) -> None:
        """Count a repeat (later requests carry the count) and tell the sinks and the caller's hook."""
        self.repeats += 1
        self._emit(event)
        if self.on_repeat is not None:
            self.on_repeat(event)

    def _names_no_tool(self, step: Step | Batch) -> str | None:
        """The shape error of a tool step that names no tool, or None."""
        if isinstance(step, Batch) or step.action != "tool" or step.tool.strip():
            return None
        offered = ", ".join(sorted(self.toolbox.tools)) or "none"
        return f'the action is "tool" but "tool" names no tool (the tools are: {offered})'

    def _max_steps_reason(self) -> str:
        last = next(
            (e for e in reversed(self.events) if not isinstance(e, (StepBegan, ReplyReceived, ThoughtGiven))),
            None,
        )
        tail = f"; the last step ended with {last.kind.replace('_', ' ')}" if last is not None else ""
        return f"no accepted answer after {self.max_steps} steps (max_steps={self.max_steps}){tail}"

    def _unsourced(self, given: str) -> frozenset[str]:
        """The tools whose required id nothing ``given`` could fill (:func:`shapeloop.ids.unsourced`);
        none where leaving them out would leave no tool to a step that has to call one."""
        if not ID_SOURCES or not self.toolbox.ground_ids:
            return frozenset()
        unsourced = frozenset(
            name for name, tool in self.toolbox.tools.items() if ids.unsourced(tool.parameters, given)
        )
        if self.must_call and not frozenset(self.toolbox.tools) - self.excluded - unsourced:
            return frozenset()
        return unsourced

    def _given(self) -> str:
        """What the model was given to work from: the caller's instructions (``system=``), the earlier
        conversation's and this task's user turns, and the tools' results. Not the tools'
        documentation (its example values, "e.g. E-12345", are what small models copy), not what the
        model wrote, nor the loop's words around a result (they quote the call). An id and an
        answer's facts have to come from here."""
        return "\n".join([self.instructions, *self.given])

    def _asked(self) -> str:
        """The user's own words: the caller's instructions, the user turns, the caller's objections.
        Not the results: they quote back the values a model made up ("ERROR: no file 'x y.txt'")."""
        return "\n".join([self.instructions, *self.asked])

    def _checked(self) -> str:
        """What a call's numbers, dates, times and names are checked against: what the model was given
        (:meth:`_given`) and the earlier conversation's answers."""
        return self._given() + "\n" + self.answered_before

    def _say(self, role: str, content: str) -> None:
        message = Message(role=role, content=content)  # type: ignore[typeddict-item]
        self.messages.append(message)
        self.transcript.add_message(message)

    def _emit(self, event: Event) -> None:
        self.events.append(event)
        self.transcript.add_event(event)
        for sink in self.sinks:
            sink(event)

    def _finish(self, stop: StopReason, reason: str) -> None:
        self.outcome = (stop, reason)
        self._emit(RunStopped(step=self.step, stop=stop, reason=reason))


def _same_again(result: ToolResult, record: CallRecord) -> bool:
    """A call made before, with the same result, and that result not a failure: the model has it. A
    refusal counts (``REFUSAL_ANSWERS``): it will not change, and the user is to be told of it; not
    one that names what to try instead ("did you mean 'notes/todo.txt'?")."""
    if not record.repeats:
        return False
    if result.status is ToolStatus.DENIED:
        return REFUSAL_ANSWERS and _OFFERS.search(result.text) is None
    return result.status is ToolStatus.OK


# A refusal that names what to try instead.
_OFFERS = re.compile(r"\bdid you mean\b", re.IGNORECASE)


def _failure(result: ToolResult) -> str | None:
    """The result's text while it is an error (an answer may not pass it off)."""
    return result.text if result.status is ToolStatus.ERROR else None


def _ignored_schema(reply: Reply) -> str | None:
    """Why a reply to a constrained request shows the schema was not applied, or None."""
    if reply.applied is Constraint.NONE:
        return "the backend did not apply the schema"
    if not _is_json_object(reply.text):
        return "the backend ignored the schema: the reply was not a JSON object"
    return None
