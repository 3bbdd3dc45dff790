"""The loop: ask the model for a step, run the tool it names, feed the result back, and stop with
a reason a person can read."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from shapeloop import prompts
from shapeloop.brain import Brain, Finish, Message, Reply, Usage, as_brain, checked_reply
from shapeloop.errors import BackendError, SchemaRefused, TimedOut
from shapeloop.events import (
    AnswerGiven,
    AnswerRejected,
    Event,
    Mode,
    ModeChanged,
    RepeatNoticed,
    ReplyCut,
    ReplyReceived,
    ReplyUnreadable,
    RunStopped,
    Sink,
    StepBegan,
    StopReason,
    ThoughtGiven,
    ToolCalled,
    ToolReturned,
    Transcript,
)
from shapeloop.extract import extract_step
from shapeloop.guards import BarrenRepeats, Budget, CallRepeats
from shapeloop.step import Step, flat_schema, step_schema
from shapeloop.text import escape_surrogates
from shapeloop.tools import Approver, Tool, Toolbox, ToolCall, ToolStatus, call_within

Acceptor = Callable[[str], "bool | str"]


@dataclass(frozen=True, kw_only=True)
class AgentRun:
    """How a run went.

    Attributes:
        stop: why it ended; only ``answered`` carries an accepted answer.
        reason: a sentence a person can read, naming the facts (the call, the count, the limit).
        answer: the accepted answer, or None.
        steps: how many steps were asked of the model (a switch to prose mode costs none).
        mode: the mode the run ended in: ``constrained`` or ``prose`` (or ``native``).
        usage: token totals, when the backend reported them.
        transcript: every message and event, in order.
        events: the events, as emitted.
    """

    stop: StopReason
    reason: str
    answer: str | None
    steps: int
    mode: Mode
    usage: Usage | None
    transcript: Transcript
    events: tuple[Event, ...] = field(default=(), repr=False)

    @property
    def ok(self) -> bool:
        """The run ended with an accepted answer."""
        return self.stop is StopReason.ANSWERED

    @property
    def messages(self) -> list[Message]:
        """The whole conversation, to continue it in another run (``history=``)."""
        return self.transcript.messages

    def to_dict(self) -> dict[str, Any]:
        """The run as plain data (for ``--json``)."""
        usage = None
        if self.usage is not None:
            usage = {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
                "cached_tokens": self.usage.cached_tokens,
                "total_tokens": self.usage.total_tokens,
            }
        return {
            "stop": self.stop.value,
            "reason": self.reason,
            "answer": self.answer,
            "steps": self.steps,
            "mode": self.mode.value,
            "usage": usage,
            "events": [e.to_dict() for e in self.events],
        }


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
    accept_answer: Acceptor | None = None,
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
    tool_timeout: float | None = 60.0,
) -> AgentRun:
    """Run a task to an answer or to a stop with a reason.

    Args:
        brain: the model: anything with ``ask(messages, schema) -> Reply``, or a plain function
            ``fn(messages, schema) -> str``.
        tools: the tools the model may call.
        task: what the user asks.
        max_steps: steps before the run stops as ``max_steps``.
        max_result_chars: tool results longer than this are cut, with a marker.
        stuck_limit: repeats of one identical call (or barren reply) that stop the run.
        accept_answer: ``accept_answer(text)`` returns True, or an objection that is put to the
            model (it costs a step). Only the caller can tell a finished task from a model that
            gave up.
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
        mode: ``constrained`` (the default; falls back to prose if the backend refuses or
            ignores the schema), ``prose`` from the start, or ``native`` (the backend's own tool
            calls; falls back to constrained, then prose).
        schema: ``per_tool`` (one variant per tool) or ``flat`` (the five-field schema).
        max_reason_chars: bound on the length of ``reason`` in the schema.
        history: messages of an earlier run to continue from (e.g. ``previous.messages``).
        on_repeat: called when a call or a barren reply starts repeating, before the stuck limit
            stops the run (a routing brain's ``notice_repeat`` is called too), so a router can
            escalate.
        transcript_path: append the transcript here as JSON Lines, each entry flushed as it
            happens (so an exception, Ctrl-C or ``kill -9`` loses at most the entry in flight).
            The path is checked before the model is asked anything: a folder, a symlink or a
            missing folder raises :class:`~shapeloop.errors.TranscriptError`.
        tool_timeout: seconds one tool call may take before it ends as ``ERROR: ... timed out``
            and the run goes on; None for no limit. The tool's thread cannot be killed: it runs
            on in the background and its result is dropped.
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
    )
    offered = list(toolbox.tools.values())
    if schema == "flat":
        step_json = flat_schema(max_reason_chars=max_reason_chars)
    else:
        step_json = step_schema(offered, max_reason_chars=max_reason_chars)
    sinks = [] if on_event is None else [on_event] if callable(on_event) else list(on_event)
    run = _Run(
        brain=as_brain(brain),
        toolbox=toolbox,
        schema=step_json,
        mode=Mode(mode),
        max_steps=max_steps,
        stuck_limit=stuck_limit,
        accept=accept_answer,
        sinks=sinks,
        budget=Budget(max_tokens=max_tokens, max_seconds=max_seconds),
        specs=[t.spec() for t in offered],
        on_repeat=on_repeat,
        task=task,
    )
    earlier = [m for m in history or () if m["role"] != "system"]
    opening = [Message(role="system", content=prompts.system_prompt(offered, prose=True, extra=system))]
    opening += earlier
    opening.append(Message(role="user", content=prompts.task_message(task, continued=bool(earlier))))
    if transcript_path is not None:
        run.transcript = Transcript.streaming(transcript_path)
    return run.execute(opening, transcript_path)


@dataclass(kw_only=True)
class _Run:
    brain: Brain
    toolbox: Toolbox
    schema: dict[str, Any]
    mode: Mode
    max_steps: int
    stuck_limit: int
    accept: Acceptor | None
    sinks: list[Sink]
    budget: Budget
    specs: list[dict[str, Any]]
    on_repeat: Callable[[RepeatNoticed], None] | None = None
    task: str = ""
    native_called: bool = False
    messages: list[Message] = field(default_factory=list)
    transcript: Transcript = field(default_factory=Transcript)
    events: list[Event] = field(default_factory=list)
    usage: Usage | None = None
    calls: CallRepeats = field(default_factory=CallRepeats)
    barren: BarrenRepeats = field(default_factory=BarrenRepeats)
    step: int = 0
    answer: str | None = None
    outcome: tuple[StopReason, str] | None = None

    def execute(self, opening: list[Message], transcript_path: str | os.PathLike[str] | None) -> AgentRun:
        try:
            for message in opening:
                self._say(message["role"], message["content"])
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
            if self.mode is Mode.CONSTRAINED and not _is_json_object(reply.text):
                self._switch(Mode.PROSE, "the backend ignored the schema: the reply was not a JSON object")
            found = extract_step(reply.text)
            if found.step is None:
                error = found.error or "no step found"
                self._emit(ReplyUnreadable(step=self.step, text=reply.text, error=error))
                self._barren(reply.text, prompts.unreadable_feedback(error), "unreadable")
                return
            step = found.step
        self._emit(ThoughtGiven(step=self.step, text=step.reason))
        if step.action == "answer":
            self._on_answer(step, reply.text)
        else:
            self._on_tool(step)

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
                if self.mode is Mode.NATIVE:
                    reply = self._ask_native()
                    if reply is not None:
                        return reply
                    continue
                schema = self.schema if self.mode is Mode.CONSTRAINED else None
                return call_within(self.budget.remaining(), self.brain.ask, list(self.messages), schema)
            except SchemaRefused as exc:
                if self.mode is Mode.PROSE:
                    raise BackendError(f"the backend refused a prose request: {exc}") from exc
                self._switch(Mode.CONSTRAINED if self.mode is Mode.NATIVE else Mode.PROSE, str(exc))

    def _ask_native(self) -> Reply | None:
        """A native reply, or None after stepping down to constrained mode."""
        ask_native = getattr(self.brain, "ask_native", None)
        if ask_native is None:
            self._switch(Mode.CONSTRAINED, "the backend has no native tool calls")
            return None
        reply: Reply = call_within(self.budget.remaining(), ask_native, list(self.messages), self.specs)
        if not reply.tool_calls and not self.native_called and self.specs and reply.finish is Finish.STOP:
            self._count(reply.usage)  # the reply is set aside, but its tokens were spent
            self._switch(Mode.CONSTRAINED, "the model answered without calling a tool")
            return None
        return reply

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
        for step in steps:
            self._on_tool(step)
            if self.outcome is not None:
                return

    def _switch(self, mode: Mode, reason: str) -> None:
        self.mode = mode
        self._emit(ModeChanged(step=self.step, mode=mode, reason=reason))

    def _on_tool(self, step: Step) -> None:
        call = ToolCall(tool=step.tool, args=step.args)
        self._emit(ToolCalled(step=self.step, call=call))
        result = self.toolbox.run(call, seconds_left=self.budget.remaining())
        record = self.calls.observe(call, result.text)
        status = ToolStatus.REPEAT if record.repeats else result.status
        self._emit(
            ToolReturned(
                step=self.step,
                call=call,
                status=status,
                text=result.text,
                chars=result.chars,
                truncated=result.truncated,
                repeats=record.repeats,
            )
        )
        self.barren.reset()
        self._say("user", prompts.tool_feedback(result, record, status=status.value, task=self.task))
        if record.repeats >= self.stuck_limit:
            same = record.repeats + 1
            detail = (
                "with the same result each time"
                if same == record.times
                else f"and the last {same} calls returned the same result"
            )
            self._finish(
                StopReason.STUCK,
                f"{call} was called {record.times} times {detail} (stuck_limit={self.stuck_limit} repeats)",
            )
        elif record.repeats:
            self._repeating(RepeatNoticed(step=self.step, what=str(call), times=record.times))

    def _on_answer(self, step: Step, raw: str) -> None:
        text = escape_surrogates(step.answer)  # JSON's "\ud800" decodes to a lone surrogate
        if not text.strip():
            self._emit(AnswerRejected(step=self.step, text=text, objection="the answer is empty"))
            self._barren(raw, prompts.empty_answer_feedback(), "empty-answer")
            return
        verdict: bool | str = True if self.accept is None else self.accept(text)
        if verdict is True:
            self.answer = text
            self._emit(AnswerGiven(step=self.step, text=text))
            self._finish(StopReason.ANSWERED, f"answered after {self.step} step{'s' if self.step != 1 else ''}")
            return
        objection = verdict if isinstance(verdict, str) and verdict.strip() else "the answer was not accepted"
        self._emit(AnswerRejected(step=self.step, text=text, objection=objection))
        self._barren(raw, prompts.rejection_feedback(objection), "rejected-answer")

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
        """Tell the sinks, the caller's hook and a routing brain that the run has begun to repeat."""
        self._emit(event)
        if self.on_repeat is not None:
            self.on_repeat(event)
        notice = getattr(self.brain, "notice_repeat", None)
        if callable(notice):
            notice(event)

    def _max_steps_reason(self) -> str:
        last = next(
            (e for e in reversed(self.events) if not isinstance(e, (StepBegan, ReplyReceived, ThoughtGiven))),
            None,
        )
        tail = f"; the last step ended with {last.kind.replace('_', ' ')}" if last is not None else ""
        return f"no accepted answer after {self.max_steps} steps (max_steps={self.max_steps}){tail}"

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
