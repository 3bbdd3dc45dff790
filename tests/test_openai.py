"""The OpenAI-compatible backend over a mock transport: the conformance kit, the dialects, the
error boundary, and reading the reply."""

import httpx
import pytest

import fake_openai
from helpers import answer_step
from shapeloop import BackendError, Mode, Request, SchemaRefused, run_agent
from shapeloop.backends.openai import OpenAIBrain
from shapeloop.testing import BrainConformance

HI = Request(messages=[{"role": "user", "content": "x"}])
SCHEMA = {"type": "object"}


class TestOpenAIConformance(BrainConformance):
    def make_brain(self, *, max_tokens: int = 256) -> OpenAIBrain:
        return OpenAIBrain("m", transport=fake_openai.transport(), max_tokens=max_tokens)

    def make_brain_on(self, transport: httpx.BaseTransport) -> OpenAIBrain:
        return OpenAIBrain("m", transport=transport, timeout=7)


def _answering(content: str) -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"message": {"content": content}, "finish_reason": "stop"}]})


def test_thinking_is_split_from_the_text_and_never_read_as_the_step() -> None:
    brain = OpenAIBrain(
        "m", transport=httpx.MockTransport(lambda r: _answering("<think>plan</think>" + answer_step("ok")))
    )
    reply = brain.ask(HI)
    assert reply.text == answer_step("ok") and reply.thinking == "<think>plan</think>"


def test_a_refused_dialect_is_dropped_and_the_other_one_kept() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = request.read().decode()
        seen.append("json_schema" if '"json_schema"' in body else "json_object")
        if seen[-1] == "json_schema":
            message = 'response_format type must be one of "text" or "json_object", but got: json_schema'
            return httpx.Response(500, json={"error": {"message": message}})
        return _answering(answer_step("ok"))

    brain = OpenAIBrain("m", transport=httpx.MockTransport(handler))
    assert brain.ask(Request(messages=[], schema=SCHEMA)).applied == "schema"
    brain.ask(Request(messages=[], schema=SCHEMA))
    assert brain.dialects == ["json_object"] and seen == ["json_schema", "json_object", "json_object"]


def test_a_server_error_that_mentions_a_schema_drops_no_dialect() -> None:
    failing = [True]

    def handler(request: httpx.Request) -> httpx.Response:
        if failing.pop() if failing else False:
            return httpx.Response(500, json={"error": {"message": "out of memory while applying the schema"}})
        return _answering(answer_step("ok"))

    brain = OpenAIBrain("m", transport=httpx.MockTransport(handler))
    with pytest.raises(BackendError, match="500") as caught:
        brain.ask(Request(messages=[], schema=SCHEMA))
    assert not isinstance(caught.value, SchemaRefused)
    assert brain.dialects == ["json_schema", "json_object"]
    assert brain.ask(Request(messages=[], schema=SCHEMA)).applied == "schema"


def test_a_programming_error_under_the_boundary_propagates_as_it_is() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise TypeError("a bug, not the server")

    with pytest.raises(TypeError, match="a bug"):
        OpenAIBrain("m", transport=httpx.MockTransport(handler)).ask(HI)


def test_a_reply_with_no_choices_is_a_backend_error() -> None:
    brain = OpenAIBrain("m", transport=httpx.MockTransport(lambda r: httpx.Response(200, json={"id": "x"})))
    with pytest.raises(BackendError, match="no choices"):
        brain.ask(HI)


def test_the_timeout_is_named() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("read timed out", request=request)

    with pytest.raises(BackendError, match=r"did not answer within 7 s \(the request timed out\)"):
        OpenAIBrain("m", timeout=7, transport=httpx.MockTransport(handler)).ask(HI)


def test_a_server_that_rejects_every_dialect_is_a_refusal_and_the_loop_goes_to_prose() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = request.read().decode()
        if "response_format" in body:
            return httpx.Response(400, json={"error": {"message": "response_format is not supported"}})
        return httpx.Response(200, json={"choices": [{"message": {"content": "Here: " + answer_step("ok")},
                                                      "finish_reason": "stop"}]})  # fmt: skip

    brain = OpenAIBrain("m", transport=httpx.MockTransport(handler))
    with pytest.raises(SchemaRefused, match=r"json_schema.*json_object"):
        brain.ask(Request(messages=[{"role": "user", "content": "x"}], schema={"type": "object"}))
    run = run_agent(OpenAIBrain("m", transport=httpx.MockTransport(handler)), [], "t")
    assert run.ok and run.mode is Mode.PROSE


def test_busy_openai_server_is_retried() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) < 3:
            return httpx.Response(503, json={"error": "loading model"})
        choice = {"message": {"content": answer_step("ok")}, "finish_reason": "length"}
        return httpx.Response(200, json={"choices": [choice], "usage": {"prompt_tokens": 5, "completion_tokens": 2}})

    waits: list[float] = []
    reply = OpenAIBrain("m", transport=httpx.MockTransport(handler), sleep=waits.append).ask(Request(messages=[]))
    assert waits == [0.5, 1.0] and reply.finish == "length" and reply.usage is not None


def test_native_tool_calls_are_read() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        message = {"content": None, "tool_calls": [{"id": "1", "type": "function",
                   "function": {"name": "read_file", "arguments": '{"path": "colour.txt"}'}}]}  # fmt: skip
        return httpx.Response(200, json={"choices": [{"message": message, "finish_reason": "tool_calls"}]})

    reply = OpenAIBrain("m", transport=httpx.MockTransport(handler)).ask(Request(messages=[], tools=[]))
    assert reply.tool_calls[0].tool == "read_file" and reply.tool_calls[0].args == {"path": "colour.txt"}
