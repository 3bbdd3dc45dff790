"""The instructor backend with a real instructor client over a mocked OpenAI endpoint."""

import json

import httpx
import pytest

from helpers import answer_step
from shapeloop import Usage, run_agent
from shapeloop.errors import BackendError

instructor = pytest.importorskip("instructor", reason="instructor is not installed: pip install '.[instructor]'")
openai = pytest.importorskip("openai", reason="openai is not installed: pip install '.[instructor]'")


def _completion(content: str, prompt: int, completion: int) -> dict[str, object]:
    return {
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }  # fmt: skip


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
    assert "'tool' is a required property" in retry_messages
    # both attempts are counted: the failed one cost tokens too
    assert run.usage == Usage(prompt_tokens=200, completion_tokens=20)


def test_no_valid_step_after_the_retries_is_a_backend_error() -> None:
    seen: list[dict[str, object]] = []
    brain = _brain(['{"nope": 1}'] * 3, seen)
    with pytest.raises(BackendError, match="no valid step after instructor's retries"):
        brain.ask([{"role": "user", "content": "x"}], None)
    assert len(seen) == 3
