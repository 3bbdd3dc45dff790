"""A conformance suite any brain adapter can run with pytest.

Subclass :class:`BrainConformance` in a test module, name the subclass ``Test...`` and implement
:meth:`~BrainConformance.make_brain`; the checks read what the backend can do from the brain's own
:attr:`~shapeloop.Brain.capabilities`, and skip (with the reason) what does not apply::

    from shapeloop.testing import BrainConformance

    class TestMyBackend(BrainConformance):
        def make_brain(self, *, max_tokens=256):
            return MyBrain(model="...", max_tokens=max_tokens)

        def make_brain_on(self, transport):  # an HTTP backend: the error-mapping checks run too
            return MyBrain(model="...", transport=transport)

If two adapters stay green, they cannot silently drift apart.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Iterator
from typing import Any, ClassVar

import httpx
import jsonschema
import pytest

from shapeloop.agent import run_agent
from shapeloop.brain import Brain, Capabilities, Constraint, Finish, Message, Reply, Request, SchemaSupport
from shapeloop.errors import BackendError, BackendTimeout, BackendUnavailable, SchemaRefused
from shapeloop.run import Mode
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
    """The checks every brain adapter must pass.

    Attributes:
        reports_usage: replies carry token counts.
        length_stop: a reply cut by the token limit is reported as ``Finish.LENGTH``.
        model_calls_tools: the model behind a backend that takes native tools really calls them
            (False for a server that takes ``tools`` but whose model writes the call as text).
    """

    reports_usage: ClassVar[bool] = True
    length_stop: ClassVar[bool] = True
    model_calls_tools: ClassVar[bool] = True

    _made: list[Brain]

    @pytest.fixture(autouse=True)
    def _close_brains(self) -> Iterator[None]:
        self._made = []
        yield
        for brain in self._made:
            brain.close()

    def _brain(self, **options: Any) -> Brain:
        brain = self.make_brain(**options)
        self._made.append(brain)
        return brain

    @abc.abstractmethod
    def make_brain(self, *, max_tokens: int = 256) -> Brain:
        """A fresh brain whose replies are bounded to ``max_tokens`` tokens."""

    def make_brain_on(self, transport: httpx.BaseTransport) -> Brain | None:
        """A brain whose HTTP requests go through ``transport``; None (the default) for a backend
        that speaks no HTTP, which skips the error-mapping checks."""
        return None

    def test_declares_what_it_can_do(self) -> None:
        brain = self._brain()
        assert isinstance(brain, Brain), "a brain declares capabilities, takes ask(request) and has close()"
        assert isinstance(brain.capabilities, Capabilities)

    def test_answers_in_prose(self) -> None:
        reply = self._brain().ask(Request(messages=_messages("Say hello in one word.")))
        assert isinstance(reply, Reply)
        assert isinstance(reply.text, str) and reply.text.strip()
        assert reply.finish in (Finish.STOP, Finish.LENGTH)
        assert reply.applied is Constraint.NONE, "a prose reply says that nothing constrained it"

    def test_schema(self) -> None:
        brain = self._brain()
        support = brain.capabilities.schema
        if support is SchemaSupport.NONE:
            pytest.skip("the backend declares no schema support")
        schema = step_schema([WEATHER])
        question = _messages(
            'Reply with a JSON object with the keys "reason", "action", "tool", "args" and "answer": '
            "call get_weather for Oslo."
        )
        reply = brain.ask(Request(messages=question, schema=schema))
        assert reply.applied in (Constraint.SCHEMA, Constraint.FLAT), reply.applied
        if support is SchemaSupport.FLAT:
            assert reply.applied is Constraint.FLAT, "a flat-only backend says it applied the flat schema"
        applied = schema if reply.applied is Constraint.SCHEMA else flat_schema()
        jsonschema.validate(json.loads(reply.text), applied)

    def test_the_loop_runs_on_it(self) -> None:
        brain = self._brain()
        run = run_agent(brain, [WEATHER], "What is the weather in Oslo?", max_steps=3)
        expected = Mode.PROSE if brain.capabilities.schema is SchemaSupport.NONE else Mode.CONSTRAINED
        assert run.mode is expected, (run.mode, run.reason)
        assert run.steps >= 1
        if expected is Mode.CONSTRAINED:
            assert "unreadable" not in [e.kind for e in run.events]

    def test_length_stop(self) -> None:
        if not self.length_stop:
            pytest.skip("the backend is declared not to report length stops")
        reply = self._brain(max_tokens=5).ask(Request(messages=_messages("Count from 1 to 200, one per line.")))
        assert reply.finish is Finish.LENGTH

    def test_usage(self) -> None:
        if not self.reports_usage:
            pytest.skip("the backend is declared not to report usage")
        reply = self._brain().ask(Request(messages=_messages("Say hello.")))
        assert reply.usage is not None
        assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0

    def test_native_calls(self) -> None:
        brain = self._brain()
        if not brain.capabilities.native_tools:
            pytest.skip("the backend declares no native tool calls")
        if not self.model_calls_tools:
            pytest.skip("the model behind the backend is declared not to call tools natively")
        question = _messages("What is the weather in Oslo? Use the get_weather tool.")
        reply = brain.ask(Request(messages=question, tools=[WEATHER.spec()]))
        assert reply.applied is Constraint.TOOLS
        assert reply.tool_calls, reply.text
        assert reply.tool_calls[0].tool == "get_weather"
        assert "city" in reply.tool_calls[0].args

    def test_tools_it_does_not_declare_are_refused(self) -> None:
        brain = self._brain()
        if brain.capabilities.native_tools:
            pytest.skip("the backend declares native tool calls")
        with pytest.raises(SchemaRefused):
            brain.ask(Request(messages=_messages("Use the tool."), tools=[WEATHER.spec()]))

    def test_closes_and_works_as_a_context_manager(self) -> None:
        brain: Any = self.make_brain()
        with brain as entered:
            assert entered is brain
        brain.close()  # a second close is harmless

    def _failing(self, handler: Any) -> Brain:
        brain = self.make_brain_on(httpx.MockTransport(handler))
        if brain is None:
            pytest.skip("the backend speaks no HTTP (make_brain_on returns None)")
        self._made.append(brain)
        return brain

    def test_a_body_that_is_not_json_is_a_backend_error(self) -> None:
        brain = self._failing(lambda request: httpx.Response(200, text="<html>proxy login</html>"))
        with pytest.raises(BackendError) as caught:
            brain.ask(Request(messages=_messages("Hi.")))
        assert not isinstance(caught.value, SchemaRefused)

    def test_a_timeout_is_said_as_a_timeout(self) -> None:
        def handler(request: httpx.Request) -> httpx.Response:
            raise httpx.ReadTimeout("timed out", request=request)

        brain = self._failing(handler)
        with pytest.raises(BackendTimeout, match="timed out"):
            brain.ask(Request(messages=_messages("Hi.")))

    def test_a_server_error_is_a_backend_error_not_a_refusal(self) -> None:
        body = {"error": {"message": "failed to apply the schema: internal error"}}
        brain = self._failing(lambda request: httpx.Response(500, json=body))
        with pytest.raises(BackendError, match="500") as caught:
            brain.ask(Request(messages=_messages("Hi.")))
        assert not isinstance(caught.value, (SchemaRefused, BackendUnavailable))

    def test_a_refused_connection_is_unavailable(self) -> None:
        def handler(request: httpx.Request) -> httpx.Response:
            raise httpx.ConnectError("connection refused", request=request)

        brain = self._failing(handler)
        with pytest.raises(BackendUnavailable):
            brain.ask(Request(messages=_messages("Hi.")))
