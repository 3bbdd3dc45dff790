"""The Ollama backend through the real ``ollama`` client, against a server on loopback that speaks
Ollama's chat API; and against a real daemon at ``OLLAMA_HOST`` when one answers."""

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fake_ollama import FakeOllama, running
from helpers import answer_step, call_step, lean_answer, tool_step
from shapeloop import (
    BackendError,
    BackendUnavailable,
    Finish,
    Mode,
    SchemaRefused,
    StopReason,
    run_agent,
    step_schema,
    tool,
)
from shapeloop.backends.ollama import OllamaBrain
from shapeloop.brain import Request
from shapeloop.cli import main
from shapeloop.testing import BrainConformance

pytest.importorskip("ollama", reason="the ollama client is not installed: pip install '.[ollama]'")


HI = Request(messages=[{"role": "user", "content": "x"}])


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOllama]:
    with running() as fake:
        yield fake


@pytest.fixture(autouse=True)
def fresh(server: FakeOllama) -> None:
    server.requests.clear()
    server.script.clear()
    server.busy_left = 2


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return "red"


class TestOllamaConformance(BrainConformance):
    native_tools = True

    @pytest.fixture(autouse=True)
    def _server(self, server: FakeOllama) -> None:
        self.url = server.url

    def make_brain(self, *, max_tokens: int = 256) -> OllamaBrain:
        return OllamaBrain("qwen2.5-coder:0.5b", host=self.url, max_tokens=max_tokens)

    def make_brain_on(self, transport: httpx.BaseTransport) -> OllamaBrain:
        return OllamaBrain("m", host="http://ollama.test:11434", transport=transport, timeout=7)


def test_a_refused_format_is_a_schema_refusal_and_the_run_goes_to_prose(server: FakeOllama) -> None:
    brain = OllamaBrain("noformat", host=server.url)
    with pytest.raises(SchemaRefused, match="Ollama refused the schema: invalid format"):
        brain.ask(Request(messages=HI.messages, schema={"type": "object"}))
    server.script = [{"content": "Here: " + answer_step("red")}]
    run = run_agent(brain, [lookup], "Colour?")
    assert run.ok and run.mode is Mode.PROSE and run.answer == "red"


def test_a_server_error_on_a_prose_request_is_no_refusal(server: FakeOllama) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json={"error": "invalid format string in the template"})

    brain = OllamaBrain("m", host="http://ollama.test:11434", transport=httpx.MockTransport(handler))
    with pytest.raises(BackendError, match="Ollama answered 500") as caught:
        brain.ask(HI)
    assert not isinstance(caught.value, SchemaRefused)


def test_requests_carry_the_schema_num_ctx_and_no_streaming(server: FakeOllama) -> None:
    server.script = [{"content": call_step("lookup", key="colour")}, {"content": lean_answer("red")}]
    run = run_agent(OllamaBrain("m", host=server.url, num_ctx=4096), [lookup], "Colour?")
    assert run.ok and run.mode is Mode.CONSTRAINED
    first = server.requests[0]
    assert first["stream"] is False
    assert first["options"]["num_ctx"] == 4096 and first["options"]["num_predict"] == 512
    assert first["format"] == step_schema([lookup], batch=True)  # the default step
    assert run.usage is not None and run.usage.prompt_tokens > 0
    # the five-field step
    server.requests.clear()
    server.script = [{"content": tool_step("lookup", key="colour")}, {"content": answer_step("red")}]
    run = run_agent(OllamaBrain("m", host=server.url, num_ctx=4096), [lookup], "Colour?", batch=False)
    assert run.ok and run.mode is Mode.CONSTRAINED
    assert server.requests[0]["format"]["anyOf"][0]["properties"]["tool"] == {"const": "lookup"}


def test_thinking_is_kept_apart_and_never_parsed_as_the_step(server: FakeOllama) -> None:
    server.script = [{"content": answer_step("red")}]
    reply = OllamaBrain("m", host=server.url, think=True).ask(HI)
    assert reply.thinking == "Let me think about the weather." and reply.text == answer_step("red")
    assert server.requests[0]["think"] is True
    server.script = [{"content": answer_step("blue")}]
    reply = OllamaBrain("inline-thinker", host=server.url).ask(HI)
    assert reply.text == answer_step("blue") and reply.thinking == "<think>hmm, what shape?</think>"


def test_length_limit_is_a_length_stop(server: FakeOllama) -> None:
    reply = OllamaBrain("m", host=server.url, max_tokens=3).ask(HI)
    assert reply.finish is Finish.LENGTH and reply.text == "1 2 3"


def test_busy_server_is_retried_with_exponential_backoff(server: FakeOllama) -> None:
    waits: list[float] = []
    brain = OllamaBrain("busy", host=server.url, sleep=waits.append)
    reply = brain.ask(HI)
    assert reply.text and waits == [0.5, 1.0] and len(server.requests) == 3


def test_busy_beyond_the_retries_is_a_backend_error(server: FakeOllama) -> None:
    run = run_agent(OllamaBrain("busy", host=server.url, retries=2, sleep=lambda s: None), [], "t")
    assert run.stop is StopReason.BACKEND_ERROR and "429" in run.reason


def test_missing_model_says_how_to_pull_it(server: FakeOllama) -> None:
    with pytest.raises(BackendUnavailable, match="run `ollama pull missing`"):
        OllamaBrain("missing", host=server.url).ask(HI)


def test_refused_connection_says_to_start_ollama() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(BackendUnavailable, match="ollama serve"):
        OllamaBrain("m", host=f"http://127.0.0.1:{port}").ask(HI)


def test_native_tools_and_a_model_without_them(server: FakeOllama) -> None:
    run = run_agent(OllamaBrain("m", host=server.url), [lookup], "Colour in Oslo?", mode="native", max_steps=2)
    assert server.requests[0]["tools"][0]["function"]["name"] == "lookup"
    assert [e.kind for e in run.events[:4]] == ["step", "reply", "tool_call", "tool_result"]  # no empty thought
    with pytest.raises(SchemaRefused, match="does not support native tools"):
        OllamaBrain("notools", host=server.url).ask(Request(messages=HI.messages, tools=[lookup.spec()]))
    server.script = [{"content": tool_step("lookup", key="k")}, {"content": answer_step("red")}]
    run = run_agent(OllamaBrain("notools", host=server.url), [lookup], "Colour?", mode="native")
    assert run.ok and run.mode is Mode.CONSTRAINED


def _daemon() -> str | None:
    host = os.environ.get("OLLAMA_HOST", "http://127.0.0.1:11434")
    host = host if host.startswith("http") else f"http://{host}"
    try:
        models = httpx.get(f"{host}/api/tags", timeout=2).json().get("models", [])
    except (httpx.HTTPError, ValueError):
        return None
    return host if models else None


@pytest.mark.live
def test_live_ollama_daemon() -> None:
    host = _daemon()
    if host is None:
        pytest.skip(
            "LIVE TEST SKIPPED: no Ollama daemon with a model answers at $OLLAMA_HOST (default "
            "127.0.0.1:11434): run `ollama serve` and `ollama pull qwen2.5-coder:0.5b`"
        )
    name = httpx.get(f"{host}/api/tags").json()["models"][0]["name"]
    run = run_agent(OllamaBrain(name, host=host), [lookup], "Look up the key colour and tell me its value.")
    assert run.mode is Mode.CONSTRAINED and "unreadable" not in [e.kind for e in run.events]


def test_cli_runs_on_the_ollama_backend(server: FakeOllama, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "colour.txt").write_text("teal\n")
    server.script = [{"content": tool_step("read_file", path="colour.txt")}, {"content": answer_step("teal")}]
    args = ["run", "Colour?", "--root", str(tmp_path), "--backend", "ollama", "--base-url", server.url, "--json"]
    assert main([*args, "--model", "qwen2.5-coder:0.5b"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["answer"] == "teal" and data["backend"] == "ollama" and data["model"] == "qwen2.5-coder:0.5b"
    assert server.requests[0]["model"] == "qwen2.5-coder:0.5b"
    assert main(args) == 2
    assert "the ollama backend needs a model (--model)" in capsys.readouterr().err
    assert main([*args[:-1], "--model", "missing"]) == 1
    assert "ollama pull missing" in capsys.readouterr().err


def test_a_reply_too_deep_for_the_client_to_parse_is_a_backend_error(
    server: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    brain = OllamaBrain("m", host=server.url)

    def parse_deep_body(**kwargs: object) -> object:
        return json.loads("[" * 100_000)  # what the client does with such a body

    monkeypatch.setattr(brain.client, "chat", parse_deep_body)
    run = run_agent(brain, [], "t")
    assert run.stop is StopReason.BACKEND_ERROR and "nested too deeply" in run.reason
