"""A conformance suite any brain adapter can run with pytest.

Subclass :class:`BrainConformance` in a test module, name the subclass ``Test...``, implement
:meth:`~BrainConformance.make_brain` and declare what the backend does; pytest runs every check on it::

    from shapeloop.testing import BrainConformance

    class TestMyBackend(BrainConformance):
        native_tools = True

        def make_brain(self, *, max_tokens=256):
            return MyBrain(model="...", max_tokens=max_tokens)

If two adapters stay green, they cannot silently drift apart.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Iterator
from typing import Any, ClassVar

import jsonschema
import pytest

from shapeloop.brain import Brain, Finish, Message, Reply
from shapeloop.errors import SchemaRefused
from shapeloop.events import Mode
from shapeloop.loop import run_agent
from shapeloop.step import flat_schema, step_schema
from shapeloop.tools import Tool

WEATHER = Tool(
    name="get_weather",
    description="Get the current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    fn=lambda city: f"It is snowing in {city}.",
)


def _messages(text: str) -> list[Message]:
    return [
        Message(role="system", content="You are a helpful assistant. Be brief."),
        Message(role="user", content=text),
    ]


class BrainConformance(abc.ABC):
    """The checks every brain adapter must pass. Class attributes say what the backend does.

    Attributes:
        schema_behaviour: ``"honours"`` (replies always satisfy the schema), ``"flat"`` (replies
            are always valid steps, but not tied to the per-tool variants, as instructor's),
            ``"refuses"`` (raises :class:`SchemaRefused`) or ``"ignores"`` (answers prose anyway).
        reports_usage: replies carry token counts.
        native_tools: the brain has ``ask_native`` and the model calls tools through it.
        length_stop: a reply cut by the token limit is reported as ``Finish.LENGTH``.
    """

    schema_behaviour: ClassVar[str] = "honours"
    reports_usage: ClassVar[bool] = True
    native_tools: ClassVar[bool] = False
    length_stop: ClassVar[bool] = True

    _made: list[Any]

    @pytest.fixture(autouse=True)
    def _close_brains(self) -> Iterator[None]:
        self._made = []
        yield
        for brain in self._made:
            close = getattr(brain, "close", None)
            if callable(close):
                close()

    def _brain(self, **options: Any) -> Brain:
        brain = self.make_brain(**options)
        self._made.append(brain)
        return brain

    @abc.abstractmethod
    def make_brain(self, *, max_tokens: int = 256) -> Brain:
        """A fresh brain whose replies are bounded to ``max_tokens`` tokens."""

    def test_answers_in_prose(self) -> None:
        reply = self._brain().ask(_messages("Say hello in one word."), None)
        assert isinstance(reply, Reply)
        assert isinstance(reply.text, str) and reply.text.strip()
        assert reply.finish in (Finish.STOP, Finish.LENGTH)

    def test_schema(self) -> None:
        schema = step_schema([WEATHER])
        brain = self._brain()
        question = _messages(
            'Reply with a JSON object with the keys "reason", "action", "tool", "args" and "answer": '
            "call get_weather for Oslo."
        )
        if self.schema_behaviour == "refuses":
            try:
                brain.ask(question, schema)
            except SchemaRefused:
                return
            raise AssertionError("the backend was declared to refuse schemas but did not raise SchemaRefused")
        reply = brain.ask(question, schema)
        if self.schema_behaviour == "honours":
            jsonschema.validate(json.loads(reply.text), schema)
        elif self.schema_behaviour == "flat":
            jsonschema.validate(json.loads(reply.text), flat_schema())
        else:
            assert isinstance(reply.text, str)

    def test_the_loop_runs_on_it(self) -> None:
        run = run_agent(self._brain(), [WEATHER], "What is the weather in Oslo?", max_steps=3)
        expected = {"honours": Mode.CONSTRAINED, "flat": Mode.CONSTRAINED, "refuses": Mode.PROSE}.get(
            self.schema_behaviour
        )
        assert expected is None or run.mode is expected, (run.mode, run.reason)
        assert run.steps >= 1
        if self.schema_behaviour in ("honours", "flat"):
            assert "unreadable" not in [e.kind for e in run.events]

    def test_length_stop(self) -> None:
        if not self.length_stop:
            return
        reply = self._brain(max_tokens=5).ask(_messages("Count from 1 to 200, one number per line."), None)
        assert reply.finish is Finish.LENGTH

    def test_usage(self) -> None:
        reply = self._brain().ask(_messages("Say hello."), None)
        if not self.reports_usage:
            return
        assert reply.usage is not None
        assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0

    def test_native_calls(self) -> None:
        brain: Any = self._brain()
        question = _messages("What is the weather in Oslo? Use the get_weather tool.")
        if not self.native_tools:
            if hasattr(brain, "ask_native"):
                try:
                    reply = brain.ask_native(question, [WEATHER.spec()])
                except SchemaRefused:
                    return
                assert isinstance(reply, Reply)
            return
        reply = brain.ask_native(question, [WEATHER.spec()])
        assert reply.tool_calls, reply.text
        assert reply.tool_calls[0].tool == "get_weather"
        assert "city" in reply.tool_calls[0].args
