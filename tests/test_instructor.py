"""The instructor backend with a real instructor client over a mocked OpenAI endpoint."""

import json

import httpx
import pytest

import fake_openai
from helpers import answer_step
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
    run = run_agent(brain, [], "Colour?")
    assert run.ok and run.answer == "teal"
    assert len(seen) == 2
    retry_messages = json.dumps(seen[1]["messages"])
    assert "Field required" in retry_messages and "tool" in retry_messages
    # both attempts are counted: the failed one cost tokens too
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
