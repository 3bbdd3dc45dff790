"""The loop: ask the model for a step, run the tool it names, feed the result back, and stop with
a reason a person can read.

The loop itself is plain: the step, the extractor, repeats and barren replies, the caller's
acceptor, tool feedback, guards and events. Help beyond that comes from the run's policies
(:mod:`shapeloop.policies`), which the loop reaches through three hooks only (:class:`_Policies`).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from shapeloop import prompts
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
from shapeloop.limits import Limits
from shapeloop.offer import Offer
from shapeloop.output import TypedAnswer, typed_answer
from shapeloop.policies import DEFAULT, Policy, RunView
from shapeloop.policies.seam import PolicySet, Shape
from shapeloop.run import AgentRun, Mode, OutputT, StopReason, Transcript
from shapeloop.step import Batch, Step
from shapeloop.text import escape_surrogates
from shapeloop.toolbox import Approver, Toolbox, ToolResult, ToolStatus, call_within
from shapeloop.tools import Tool, ToolCall


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
    policies: Sequence[Policy] | None = None,
    limits: Limits | None = None,
    ground_ids: bool | None = None,
    ground_values: bool | None = None,
) -> AgentRun[OutputT]:
    """Run a task to an answer or to a stop with a reason.

    Args:
        brain: a :class:`~shapeloop.Brain`, or a function ``fn(messages, schema) -> str``.
        tools: the tools the model may call.
        task: what the user asks.
        max_steps: steps before the run stops as ``max_steps``.
        max_result_chars: tool results longer than this are cut, with a marker.
        stuck_limit: repeats of one identical call (or barren reply) that stop the run.
        accept_answer: ``accept_answer(answer)`` returns True, or an objection put to the model (it
            costs a step); asked last, after the policies. It gets the text, or the typed object.
        approve: ``approve(call)`` decides whether a ``needs_approval`` tool may run: True, or
            False / a reason for refusing. Without it such tools are denied.
        on_event: a sink, or several, called with every event as it happens.
        system: extra instructions appended to the system prompt.
        allow_tools: if given, only these tools are offered; ``deny_tools`` are never offered nor
            run (deny wins).
        max_tokens: stop as ``budget`` once this many tokens are used; ``max_seconds``: once this
            much wall time has passed, also in the middle of a model or tool call (abandoned).
        mode: ``constrained`` (falls back to prose where the backend refuses or ignores the schema),
            ``prose``, or ``native`` (the backend's own tool calls; falls back to constrained).
        schema: ``per_tool`` (one variant per tool) or ``flat`` (the five-field schema).
        max_reason_chars: bound on the length of ``reason`` in the schema.
        history: messages of an earlier run to continue from (``previous.messages``).
        on_repeat: called when a call or a barren reply starts repeating, before the stuck limit.
        transcript_path: append the transcript here as JSON Lines, each entry flushed as it happens;
            checked before the model is asked anything.
        output_type: the answer's type (a pydantic model, dataclass, ``TypedDict`` or JSON schema);
            an answer that does not validate goes back with the validator's messages.
        batch: let the model make several independent calls in one step (``action: calls``).
        tool_timeout: seconds one tool call may take before it ends as ``ERROR: ... timed out``.
        policies: the help this run gives the model (:mod:`shapeloop.policies`): None for
            :data:`~shapeloop.policies.DEFAULT`, ``()`` for the plain loop, or any tuple of
            policies; each change one makes is a :class:`~shapeloop.events.PolicyIntervened` event.
        limits: bounds on schemas, replies and arguments (:class:`~shapeloop.limits.Limits`): sizes,
            integer digits, nesting, and the time a schema's ``pattern`` may take; defaults when None.
        ground_ids: deprecated, no effect (id grounding was removed: it refused legitimate calls).
        ground_values: deprecated, no effect (value grounding was removed: it refused "tomorrow",
            "München" called as Munich, and every translation).
    """
    for name, value in (("ground_ids", ground_ids), ("ground_values", ground_values)):
        if value is not None:
            warnings.warn(
                f"run_agent({name}=...) has no effect and will be removed: grounding was taken out of the loop "
                "because it refused legitimate calls; pass policies=... instead (see shapeloop.policies)",
                DeprecationWarning,
                stacklevel=2,
            )
    if not isinstance(task, str) or not task.strip():
        raise ValueError("task must be a non-empty string")
    task = escape_surrogates(task)
    if max_steps < 1 or stuck_limit < 1:
        raise ValueError("max_steps and stuck_limit must be at least 1")
    if max_seconds is not None and max_seconds < 0:
        raise ValueError(f"max_seconds must be 0 or more, not {max_seconds!r}")
    chosen = tuple(DEFAULT if policies is None else policies)
    for policy in chosen:
        if not isinstance(policy, Policy):
            raise TypeError(f"policies takes shapeloop.policies.Policy objects, not {policy!r}: subclass Policy")
    toolbox = Toolbox(
        tools, allow=allow_tools, deny=deny_tools, approve=approve, max_result_chars=max_result_chars,
        timeout=tool_timeout, limits=limits,
    )  # fmt: skip
    offered = list(toolbox.tools.values())
    brain = as_brain(brain)
    flat = schema == "flat" or brain.capabilities.schema is SchemaSupport.FLAT
    typed = None if output_type is None else typed_answer(output_type, limits=limits)
    answer_schema = None if typed is None else typed.schema
    offer = Offer(tools=offered, flat=flat, answer_schema=answer_schema, batch=batch, max_reason_chars=max_reason_chars)
    sinks = [] if on_event is None else [on_event] if callable(on_event) else list(on_event)
    earlier = [m for m in history or () if m["role"] != "system"]
    run = _Run(
        brain=brain, toolbox=toolbox, offer=offer, mode=Mode(mode), max_steps=max_steps, stuck_limit=stuck_limit,
        accept=accept_answer, sinks=sinks, budget=Budget(max_tokens=max_tokens, max_seconds=max_seconds),
        on_repeat=on_repeat, task=task, typed=typed, batch=batch,
        policies=PolicySet.start(chosen, task, offered, brain),
    )  # fmt: skip
    prompt = prompts.system_prompt(offered, prose=True, extra=system, answer_schema=answer_schema, batch=batch)
    opening = [Message(role="system", content=prompt), *earlier]
    opening.append(Message(role="user", content=prompts.task_message(task, continued=bool(earlier))))
    if transcript_path is not None:
        run.transcript = Transcript.streaming(transcript_path)
    return run.execute(opening, transcript_path)


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
    policies: PolicySet
    on_repeat: Callable[[RepeatNoticed], None] | None = None
    task: str = ""
    typed: TypedAnswer | None = None
    batch: bool = False
    native_called: bool = False
    repeats: int = 0
    results: int = 0  # tool results fed back so far
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
            for event in self.policies.started(self.brain):
                self._emit(event)
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
            stop=self.outcome[0], reason=self.outcome[1], answer=self.answer, steps=self.step, mode=self.mode,
            usage=self.usage, transcript=self.transcript, events=tuple(self.events), output=self.output,
            policies=self.policies.names, interventions=self.policies.counts(self.events),
        )  # fmt: skip

    def _one_step(self) -> None:
        if self.step >= self.max_steps:
            self._finish(StopReason.MAX_STEPS, _max_steps_reason(self.events, self.max_steps))
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
        step = self._read(reply)
        if step is None:
            return
        self._emit(ThoughtGiven(step=self.step, text=step.reason))
        if isinstance(step, Batch):
            if not self.batch:
                self._barren(reply.text, prompts.batch_off_feedback(), "batch")
                return
            self._run_calls([ToolCall(tool=c.tool, args=c.args) for c in step.calls], reply.text, batched=True)
        elif step.action == "answer":
            self._on_answer(step.answer, reply.text)
        else:
            self._run_calls([ToolCall(tool=step.tool, args=step.args)], reply.text, batched=False)

    def _read(self, reply: Reply) -> Step | Batch | None:
        """The step in a reply, or None after feeding back why there is none."""
        if self.mode is Mode.NATIVE:
            # After native calls, a reply in plain text is the model's answer.
            found = extract_step(reply.text, limits=self.toolbox.limits)
            return found.step or Step(reason="", action="answer", tool="", args={}, answer=reply.text.strip())
        ignored = _ignored_schema(reply) if self.mode is Mode.CONSTRAINED else None
        if ignored is not None:
            self._switch(Mode.PROSE, ignored)
        found = extract_step(reply.text, limits=self.toolbox.limits)
        error = (
            (found.error or "no step found") if found.step is None else _names_no_tool(found.step, self.toolbox.tools)
        )
        if found.step is None or error is not None:
            self._emit(ReplyUnreadable(step=self.step, text=reply.text, error=error or ""))
            self._barren(reply.text, prompts.unreadable_feedback(error or ""), "unreadable")
            return None
        return found.step

    def _ask(self) -> Reply | None:
        try:
            reply = self._request()
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
        shape = self.policies.shape_step(self._view(), self._emit)
        while True:
            try:
                reply = checked_reply(
                    self.brain, call_within(self.budget.remaining(), self.brain.ask, self._question(shape))
                )
            except SchemaRefused as exc:
                if self.mode is Mode.PROSE:
                    raise BackendError(f"the backend refused a prose request: {exc}") from exc
                self._switch(Mode.CONSTRAINED if self.mode is Mode.NATIVE else Mode.PROSE, str(exc))
                continue
            # a first native reply that calls nothing, though tools were offered: the model will not use them
            declined = not reply.tool_calls and not self.native_called and bool(self.toolbox.tools)
            if self.mode is Mode.NATIVE and declined and reply.finish is Finish.STOP:
                self._count(reply.usage)  # the reply is set aside, but its tokens were spent
                self._switch(Mode.CONSTRAINED, "the model answered without calling a tool")
                continue
            return reply

    def _question(self, shape: Shape) -> Request:
        """The request for the current mode, shaped by the run's policies."""
        messages = list(self.messages)
        if shape.note:  # read at this step only: the conversation does not keep it
            messages.append(Message(role="user", content=shape.note))
        offered = [t for t in self.toolbox.tools.values() if t.name not in shape.excluded]
        if self.mode is Mode.NATIVE:
            specs = [t.spec() for t in offered]
            return Request(messages=messages, tools=specs, repeats=self.repeats, results=self.results)
        schema = None
        if self.mode is Mode.CONSTRAINED:
            schema = self.offer.schema(shape.excluded, answer=shape.may_answer)
        return Request(messages=messages, schema=schema, repeats=self.repeats, results=self.results, task=self.task,
                       offered=tuple((t.name, t.description) for t in offered))  # fmt: skip

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
            self._run_calls(list(reply.tool_calls), "\n".join(map(str, reply.tool_calls)), batched=True)
            return
        for step in steps:
            self._run_calls([ToolCall(tool=step.tool, args=step.args)], step.to_json(), batched=False)
            if self.outcome is not None:
                return

    def _switch(self, mode: Mode, reason: str) -> None:
        self.mode = mode
        self._emit(ModeChanged(step=self.step, mode=mode, reason=reason))

    def _run_calls(self, calls: list[ToolCall], raw: str, *, batched: bool) -> None:
        """Run the calls of one step (one, or a batch) and put the results back in one turn, unless a
        policy refuses one of them: then none runs, and the model reads why."""
        view = self._view()
        for call in calls:
            refusal = self.policies.check_call(view, call, self._emit)
            if refusal is not None:
                self._emit(CallRefused(step=self.step, call=call, objection=refusal.reason))
                self._barren(raw, prompts.refused_call_feedback(str(call), refusal.feedback), "refused-call")
                return
        for call in calls:
            self._emit(ToolCalled(step=self.step, call=call))
        left = self.budget.remaining()
        if batched:
            results = self.toolbox.run_batch(calls, seconds_left=left)
        else:
            results = [self.toolbox.run(calls[0], seconds_left=left)]
        self.results += len(results)
        records = [self._record(result) for result in results]
        self.barren.reset()
        statuses = [_status(result, record).value for result, record in zip(results, records, strict=True)]
        if batched:
            self._say("user", prompts.batch_feedback(results, records, statuses=statuses, task=self.task))
        else:
            self._say("user", prompts.tool_feedback(results[0], records[0], status=statuses[0]))
        self._check_repeats(records)

    def _record(self, result: ToolResult) -> CallRecord:
        """Count the call for repeats, keep its outcome for the policies, and tell the sinks."""
        record = self.calls.observe(result.call, result.text)
        status = _status(result, record)
        self.policies.record(result.call, result.status, result.text, record.repeats)
        self._emit(
            ToolReturned(
                step=self.step, call=result.call, status=status, text=result.text, chars=result.chars,
                truncated=result.truncated, repeats=record.repeats,
            )
        )  # fmt: skip
        return record

    def _check_repeats(self, records: list[CallRecord]) -> None:
        """Stop as stuck on the first call at the stuck limit; otherwise notice each repeating call."""
        for record in records:
            if record.repeats >= self.stuck_limit:
                self._finish(StopReason.STUCK, _stuck_reason(record, self.stuck_limit))
                return
        for record in records:
            if record.repeats:
                self._repeating(RepeatNoticed(step=self.step, what=str(record.call), times=record.times))

    def _on_answer(self, answer: Any, raw: str) -> None:
        problem, value, text = _answer_problem(answer, self.typed)
        if problem is not None:
            objection, feedback, what = problem
            self._emit(AnswerRejected(step=self.step, text=text, objection=objection))
            # identical invalid typed answers fail identically, whatever the reason around them says
            self._barren(f"invalid answer {text}" if what == "invalid-answer" else raw, feedback, what)
            return
        objected = self.policies.check_answer(self._view(), text, self._emit)
        if objected is not None:
            self._emit(AnswerRejected(step=self.step, text=text, objection=objected.reason))
            self._barren(raw, objected.feedback, "objected-answer")
            return
        verdict: bool | str = True if self.accept is None else self.accept(value)
        if verdict is True:
            self.answer, self.output = text, value
            self._emit(AnswerGiven(step=self.step, text=text))
            self._finish(StopReason.ANSWERED, f"answered after {self.step} step{'s' if self.step != 1 else ''}")
            return
        said = verdict if isinstance(verdict, str) and verdict.strip() else "the answer was not accepted"
        self._emit(AnswerRejected(step=self.step, text=text, objection=said))
        self._barren(raw, prompts.rejection_feedback(said), "rejected-answer")

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

    def _view(self) -> RunView:
        return self.policies.view(
            messages=self.messages, step=self.step if self.step else 1, max_steps=self.max_steps, brain=self.brain
        )

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


def _stuck_reason(record: CallRecord, limit: int) -> str:
    same = record.repeats + 1
    detail = (
        "with the same result each time"
        if same == record.times
        else f"and the last {same} calls returned the same result"
    )
    return f"{record.call} was called {record.times} times {detail} (stuck_limit={limit} repeats)"


def _answer_problem(answer: Any, typed: TypedAnswer | None) -> tuple[tuple[str, str, str] | None, Any, str]:
    """``(problem, value, text)``: an answer checked against the output type, or for being text at all.
    ``problem`` is None, or ``(objection, feedback, kind of barren reply)``."""
    if isinstance(answer, str):
        answer = escape_surrogates(answer)  # JSON's "\ud800" decodes to a lone surrogate
    if typed is not None:
        checked = typed.check(answer)
        if checked.errors:
            objection = "the answer does not match the output type: " + "; ".join(checked.errors)
            shown = json.dumps(answer, sort_keys=True, default=str, ensure_ascii=False)
            return (objection, prompts.invalid_answer_feedback(checked.errors), "invalid-answer"), None, shown
        return None, checked.value, checked.text
    if not isinstance(answer, str):
        shown = json.dumps(answer, ensure_ascii=False)
        return ("the answer is not text", prompts.answer_not_text_feedback(), "non-text-answer"), None, shown
    if not answer.strip():
        return ("the answer is empty", prompts.empty_answer_feedback(), "empty-answer"), None, answer
    return None, answer, answer


def _names_no_tool(step: Step | Batch, tools: Mapping[str, Tool]) -> str | None:
    """The shape error of a tool step that names no tool, or None."""
    if isinstance(step, Batch) or step.action != "tool" or step.tool.strip():
        return None
    offered = ", ".join(sorted(tools)) or "none"
    return f'the action is "tool" but "tool" names no tool (the tools are: {offered})'


def _max_steps_reason(events: Sequence[Event], max_steps: int) -> str:
    ended = (e for e in reversed(events) if not isinstance(e, (StepBegan, ReplyReceived, ThoughtGiven)))
    last = next(ended, None)
    tail = f"; the last step ended with {last.kind.replace('_', ' ')}" if last is not None else ""
    return f"no accepted answer after {max_steps} steps (max_steps={max_steps}){tail}"


def _status(result: ToolResult, record: CallRecord) -> ToolStatus:
    return ToolStatus.REPEAT if record.repeats else result.status


def _ignored_schema(reply: Reply) -> str | None:
    """Why a reply to a constrained request shows the schema was not applied, or None."""
    if reply.applied is Constraint.NONE:
        return "the backend did not apply the schema"
    try:
        is_object = isinstance(json.loads(reply.text), dict)
    except (ValueError, RecursionError):  # RecursionError: a reply of thousands of "["
        is_object = False
    return None if is_object else "the backend ignored the schema: the reply was not a JSON object"
