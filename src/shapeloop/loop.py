"""The loop: ask the model for a step, run the tool it names, feed the result back, and stop with
a reason a person can read.

The loop itself is plain: the step, the extractor, repeats and barren replies, the caller's
acceptor, tool feedback, guards and events. Help beyond that comes from the run's policies
(:mod:`shapeloop.policies`), which the loop reaches through three hooks only (:class:`PolicySet`).
:func:`~shapeloop.run_agent` (:mod:`shapeloop.agent`) checks a caller's arguments and starts one.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shapeloop import prompts
from shapeloop.brain import (
    Brain,
    Finish,
    Message,
    Reply,
    Request,
    Usage,
    checked_reply,
    ignored_schema,
)
from shapeloop.errors import BackendError, SchemaRefused, TimedOut
from shapeloop.events import (
    AnswerGiven,
    AnswerRejected,
    CallRefused,
    CallsMerged,
    Event,
    ModeChanged,
    PolicyIntervened,
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
    max_steps_reason,
)
from shapeloop.extract import extract_step
from shapeloop.guards import BarrenRepeats, Budget, CallRecord, CallRepeats
from shapeloop.offer import Offer
from shapeloop.output import TypedAnswer, answer_problem
from shapeloop.policies import RunView
from shapeloop.policies.seam import PolicySet, Shape
from shapeloop.run import AgentRun, Mode, StopReason, Transcript, choose_mode
from shapeloop.step import Batch, Step, batch_json, held_answer, hold_for, names_no_tool
from shapeloop.toolbox import Toolbox, ToolResult, ToolStatus, call_within
from shapeloop.tools import ToolCall

ANSWERING = re.compile(r'\s*\{\s*"answer"')  # a calls step being written that opened an answer
ACTION_ANSWER = re.compile(r'"action"\s*:\s*"answer"')  # a five-field step that chose to answer


@dataclass(kw_only=True)
class Loop:
    """One run of the loop, made by :func:`~shapeloop.run_agent`: :meth:`execute` asks for steps until a stop."""

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
    cut: int = 0  # characters of the last reply, when it was cut off at the length limit (else 0)
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
            self._finish(StopReason.MAX_STEPS, max_steps_reason(self.events, self.max_steps))
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
        cut_off = reply.finish is Finish.LENGTH and not reply.tool_calls
        self.cut = max(1, len(reply.text)) if cut_off else 0
        if reply.tool_calls:
            self._on_native_calls(reply)
            return
        self._say("assistant", reply.text)
        if cut_off:
            self._emit(ReplyCut(step=self.step, text=reply.text))
            answering = bool(ANSWERING.match(reply.text)) if self.batch else bool(ACTION_ANSWER.search(reply.text))
            self._barren(reply.text, prompts.cut_feedback(batch=self.batch, answering=answering), "cut-off")
            return
        step = self._read(reply)
        if step is None:
            return
        if step.reason:  # a calls step has no reason to show
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
            found = extract_step(reply.text, limits=self.toolbox.limits, batch=self.batch)
            return found.step or Step(reason="", action="answer", tool="", args={}, answer=reply.text.strip())
        ignored = ignored_schema(reply) if self.mode is Mode.CONSTRAINED else None
        if ignored is not None:
            self._switch(Mode.PROSE, ignored)
        found = extract_step(reply.text, limits=self.toolbox.limits, batch=self.batch)
        error = (
            (found.error or "no step found") if found.step is None else names_no_tool(found.step, self.toolbox.tools)
        )
        if found.step is None or error is not None:
            self._emit(ReplyUnreadable(step=self.step, text=reply.text, error=error or ""))
            self._barren(reply.text, prompts.unreadable_feedback(error or "", batch=self.batch), "unreadable")
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
        decided: list[str] = []  # the policy whose margin turned the step, as the brain asked it

        def confirm(lean: float) -> str:
            policy, why = shape.confirm(lean)
            decided[:] = [policy] if why else []
            return why

        while True:
            try:
                reply = checked_reply(
                    self.brain, call_within(self.budget.remaining(), self.brain.ask, self._question(shape, confirm))
                )
            except SchemaRefused as exc:
                if self.mode is Mode.PROSE:
                    raise BackendError(f"the backend refused a prose request: {exc}") from exc
                self._switch(Mode.CONSTRAINED if self.mode is Mode.NATIVE else Mode.PROSE, str(exc))
                continue
            if reply.leaned:  # a margin a policy asked for changed the model's choice
                within = "the model's lean was within the margin"
                by = decided[0] if decided else shape.margins_by
                self._emit(PolicyIntervened(step=self.step, policy=by, hook="shape_step",
                                            change=reply.leaned, reason=within))  # fmt: skip
            # a first native reply that calls nothing, though tools were offered: the model will not use them
            declined = not reply.tool_calls and not self.native_called and bool(self.toolbox.tools)
            if self.mode is Mode.NATIVE and declined and reply.finish is Finish.STOP:
                self._count(reply.usage)  # the reply is set aside, but its tokens were spent
                self._switch(Mode.CONSTRAINED, "the model answered without calling a tool")
                continue
            return reply

    def _question(self, shape: Shape, confirm: Callable[[float], str] | None = None) -> Request:
        """The request for the current mode, shaped by the run's policies."""
        messages = list(self.messages)
        if shape.excluded and messages[0]["role"] == "system":  # only the offered tools are documented
            messages[0] = Message(role="system", content=self.offer.prompt(shape.excluded))
        if shape.note:  # read at this step only: the conversation does not keep it
            messages.append(Message(role="user", content=shape.note))
        offered = [t for t in self.toolbox.tools.values() if t.name not in shape.excluded]
        if self.mode is Mode.NATIVE:
            return Request(messages=messages, tools=[t.spec() for t in offered], repeats=self.repeats,
                           results=self.results)  # fmt: skip
        schema = None
        if self.mode is Mode.CONSTRAINED:
            schema = self.offer.schema(shape.excluded, answer=shape.may_answer, hold=shape.hold)
            if self.cut:  # the retry of a cut reply: the grammar holds its answer to about half the length
                schema = held_answer(schema, hold_for(self.cut))
        return Request(messages=messages, schema=schema, repeats=self.repeats, results=self.results, task=self.task,
                       offered=tuple((t.name, t.description) for t in offered),
                       call_margin=shape.call_margin, confirm_answer=confirm if shape.leans else None)  # fmt: skip

    def _count(self, usage: Usage | None) -> None:
        self.usage = self.usage if usage is None else usage if self.usage is None else self.usage + usage

    def _on_native_calls(self, reply: Reply) -> None:
        self.native_called = True
        calls, reason = list(reply.tool_calls), reply.text.strip()
        steps = [Step(reason=reason, action="tool", tool=c.tool, args=dict(c.args), answer="") for c in calls]
        # The record keeps the calls in the step shape, so a later switch to another mode reads on.
        self._say("assistant", batch_json(calls) if self.batch else "\n".join(s.to_json() for s in steps))
        if reason:
            self._emit(ThoughtGiven(step=self.step, text=reason))
        if self.batch:
            self._run_calls(calls, "\n".join(map(str, calls)), batched=True)
            return
        for call, step in zip(calls, steps, strict=True):
            self._run_calls([call], step.to_json(), batched=False)
            if self.outcome is not None:
                return

    def _switch(self, mode: Mode, reason: str) -> None:
        self.mode = mode
        self._emit(ModeChanged(step=self.step, mode=mode, reason=reason))

    def _run_calls(self, calls: list[ToolCall], raw: str, *, batched: bool) -> None:
        """Run the calls of one step (one, or a batch) and put the results back in one turn, unless a
        policy refuses one of them: then none runs, and the model reads why. A call written several
        times in one step runs once (:class:`~shapeloop.events.CallsMerged`)."""
        calls, merged = _merged(calls)
        for call, times in zip(calls, merged, strict=True):
            if times > 1:
                self._emit(CallsMerged(step=self.step, call=call, times=times))
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
            feedback = prompts.batch_feedback(results, records, statuses=statuses, task=self.task, merged=merged)
            self._say("user", feedback)
        else:
            self._say("user", prompts.tool_feedback(results[0], records[0], status=statuses[0]))
        self._check_repeats(records)

    def _record(self, result: ToolResult) -> CallRecord:
        """Count the call for repeats, keep its outcome for the policies, and tell the sinks."""
        record = self.calls.observe(result.call, result.text)
        status = _status(result, record)
        self.policies.record(result.call, result.status, result.text, record.repeats, self.step)
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
                self._finish(StopReason.STUCK, record.stuck_reason(self.stuck_limit))
                return
        for record in records:
            if record.repeats:
                self._repeating(RepeatNoticed(step=self.step, what=str(record.call), times=record.times))

    def _on_answer(self, answer: Any, raw: str) -> None:
        problem, value, text = answer_problem(answer, self.typed)
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


def _merged(calls: list[ToolCall]) -> tuple[list[ToolCall], list[int]]:
    """The distinct calls of a step, in the order first written, and how many times each was written."""
    first: dict[str, ToolCall] = {}
    written: Counter[str] = Counter()
    for call in calls:
        first.setdefault(call.key, call)
        written[call.key] += 1
    return list(first.values()), [written[key] for key in first]


def _status(result: ToolResult, record: CallRecord) -> ToolStatus:
    return ToolStatus.REPEAT if record.repeats else result.status
