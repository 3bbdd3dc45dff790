"""The instructor backend with a real instructor client over a mocked OpenAI endpoint."""

import json

import httpx
import pydantic
import pytest

import fake_openai
import shapeloop
from helpers import answer_step, call_step, lean_answer, tool_step
from shapeloop import Usage, flat_schema, run_agent
from shapeloop.brain import Request
from shapeloop.errors import BackendError
from shapeloop.testing import BrainConformance

instructor = pytest.importorskip("instructor", reason="instructor is not installed: pip install '.[instructor]'")
openai = pytest.importorskip("openai", reason="openai is not installed: pip install '.[instructor]'")


def _completion(content: str, prompt: int, completion: int) -> dict[str, object]:
    return {
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }  # fmt: skip


def _client(transport: httpx.BaseTransport, mode: str = "JSON"):  # type: ignore[no-untyped-def]
    client = openai.OpenAI(
        api_key="x", base_url="http://test/v1", http_client=httpx.Client(transport=transport), max_retries=0
    )
    return instructor.from_openai(client, mode=instructor.Mode[mode])


class TestInstructorConformance(BrainConformance):
    def make_brain(self, *, max_tokens: int = 256):  # type: ignore[no-untyped-def]
        from shapeloop.backends.instructor import InstructorBrain

        return InstructorBrain("m", client=_client(fake_openai.transport(), "TOOLS"), max_tokens=max_tokens)

    def make_brain_on(self, transport: httpx.BaseTransport):  # type: ignore[no-untyped-def]
        from shapeloop.backends.instructor import InstructorBrain

        return InstructorBrain("m", base_url="http://test/v1", transport=transport, client_retries=0)


def _brain(replies: list[str], seen: list[dict[str, object]]):  # type: ignore[no-untyped-def]
    from shapeloop.backends.instructor import InstructorBrain

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.read()))
        return httpx.Response(200, json=_completion(replies.pop(0), 100, 10))

    client = openai.OpenAI(
        api_key="x", base_url="http://test/v1", http_client=httpx.Client(transport=httpx.MockTransport(handler))
    )
    return InstructorBrain("m", client=instructor.from_openai(client, mode=instructor.Mode.JSON))


def test_validation_error_is_fed_back_and_usage_is_counted() -> None:
    seen: list[dict[str, object]] = []
    brain = _brain(['{"reason": "r", "action": "tool"}', answer_step("teal")], seen)
    run = run_agent(brain, [], "Colour?", batch=False)
    assert run.ok and run.answer == "teal"
    assert len(seen) == 2
    retry_messages = json.dumps(seen[1]["messages"])
    assert "'tool' is a required property" in retry_messages
    # both attempts are counted: the failed one cost tokens too
    assert run.usage == Usage(prompt_tokens=200, completion_tokens=20)
    # the default step: an empty answer goes back the same way
    seen.clear()
    brain = _brain(['{"answer": ""}', lean_answer("teal")], seen)
    run = run_agent(brain, [], "Colour?")
    assert run.ok and run.answer == "teal" and len(seen) == 2
    assert "should be non-empty" in json.dumps(seen[1]["messages"])
    assert run.usage == Usage(prompt_tokens=200, completion_tokens=20)


def test_no_valid_step_after_the_retries_is_a_backend_error() -> None:
    seen: list[dict[str, object]] = []
    brain = _brain(['{"nope": 1}'] * 3, seen)
    with pytest.raises(BackendError, match="no valid step after instructor's retries"):
        brain.ask(Request(messages=[{"role": "user", "content": "x"}], schema=flat_schema()))
    assert len(seen) == 3


def test_a_bug_in_our_code_is_not_dressed_as_a_backend_error() -> None:
    from shapeloop.backends.instructor import InstructorBrain

    class Broken:
        class chat:
            class completions:
                @staticmethod
                def create_with_completion(**options: object) -> object:
                    raise TypeError("a bug")

    with pytest.raises(TypeError, match="a bug"):
        InstructorBrain("m", client=Broken()).ask(Request(messages=[], schema=flat_schema()))


def _tools_brain(arguments: list[str], seen: list[dict[str, object]]):  # type: ignore[no-untyped-def]
    """An instructor brain in TOOLS mode whose server answers each request with a call of ``Step``."""
    from shapeloop.backends.instructor import InstructorBrain

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.read()))
        body = _completion("", 100, 10)
        body["choices"][0]["message"]["tool_calls"] = [  # type: ignore[index]
            {"id": "c", "type": "function", "function": {"name": "Step", "arguments": arguments.pop(0)}}
        ]
        return httpx.Response(200, json=body)

    client = openai.OpenAI(
        api_key="x", base_url="http://test/v1", http_client=httpx.Client(transport=httpx.MockTransport(handler))
    )
    return InstructorBrain("m", client=instructor.from_openai(client, mode=instructor.Mode.TOOLS))


class Colour(pydantic.BaseModel):
    name: str
    hex: str


@shapeloop.tool
def lookup(key: str) -> str:
    """Look a key up."""
    return "teal #008080"


def test_the_response_model_is_the_runs_schema_per_tool_and_typed() -> None:
    seen: list[dict[str, object]] = []
    typed = {"name": "teal", "hex": "#008080"}
    brain = _tools_brain(
        [tool_step("lookup", key="colour"), json.dumps({"reason": "r", "action": "answer", "tool": "", "args": {},
                                                         "answer": typed})],
        seen,
    )  # fmt: skip
    run = run_agent(brain, [lookup], "Colour?", output_type=Colour, batch=False)
    assert run.ok and run.output == Colour(**typed), run.reason
    parameters = seen[0]["tools"][0]["function"]["parameters"]  # type: ignore[index]
    expected = shapeloop.step_schema([lookup], answer_schema=Colour.model_json_schema())
    assert parameters["anyOf"] == expected["anyOf"]
    # the default step: calls or the typed answer
    seen.clear()
    brain = _tools_brain([call_step("lookup", key="colour"), lean_answer(typed)], seen)
    run = run_agent(brain, [lookup], "Colour?", output_type=Colour)
    assert run.ok and run.output == Colour(**typed), run.reason
    parameters = seen[0]["tools"][0]["function"]["parameters"]  # type: ignore[index]
    expected = shapeloop.step_schema([lookup], answer_schema=Colour.model_json_schema(), batch=True)
    assert parameters["anyOf"] == expected["anyOf"]


def test_a_call_that_breaks_its_tools_schema_is_sent_back_with_that_tools_error() -> None:
    seen: list[dict[str, object]] = []
    brain = _tools_brain([tool_step("lookup", wrong="colour"), tool_step("lookup", key="colour")], seen)
    reply = brain.ask(Request(messages=[{"role": "user", "content": "x"}], schema=shapeloop.step_schema([lookup])))
    assert json.loads(reply.text)["args"] == {"key": "colour"}
    retry = json.dumps(seen[1]["messages"])
    assert "args: 'key' is a required property" in retry
