"""Ollama, through the ``ollama`` client: ``format`` for constrained steps, ``tools`` for native calls.

``options.num_ctx`` is always set, because Ollama's default window silently truncates long prompts.
A thinking model's thinking is kept apart from the text, never read as the step. The client's
errors become shapeloop's at one boundary: statuses in :meth:`OllamaBrain._status_error`, the rest
by type in :func:`_errors`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import httpx
import pydantic

from shapeloop.backends._common import ErrorTable, mapped_errors, parse_arguments, with_backoff
from shapeloop.brain import BaseBrain, Capabilities, Finish, Message, Reply, Request, Usage
from shapeloop.errors import BackendError, BackendTimeout, BackendUnavailable, SchemaRefused
from shapeloop.extract import split_think
from shapeloop.tools import ToolCall


class OllamaBrain(BaseBrain):
    """A brain on an Ollama server.

    Args:
        model: the Ollama model name (``qwen2.5-coder:0.5b``).
        host: the server; ``$OLLAMA_HOST`` or ``http://127.0.0.1:11434`` by default.
        num_ctx: the context window, set explicitly on every request.
        max_tokens: bound on generated tokens per step (``num_predict``).
        temperature: sampling temperature.
        think: ask a thinking model to think (``None`` leaves it to the model).
        retries: tries in all when the server answers 429 or 503.
        timeout: seconds to wait for one reply.
        transport: an httpx transport for the client (tests pass ``httpx.MockTransport``).
        sleep: how to wait between retries.
    """

    def __init__(
        self,
        model: str,
        *,
        host: str | None = None,
        num_ctx: int = 8192,
        max_tokens: int = 512,
        temperature: float = 0.0,
        think: bool | None = None,
        retries: int = 5,
        timeout: float = 600.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        try:
            import ollama
        except ImportError as exc:
            raise BackendUnavailable(
                "the ollama client is not installed: pip install 'shapeloop[ollama]'", backend="ollama"
            ) from exc
        self._response_error: type[Exception] = ollama.ResponseError
        self._errors = _errors(ollama)
        extra: dict[str, Any] = {} if transport is None else {"transport": transport}
        self.client = ollama.Client(host=host, timeout=timeout, **extra)
        self.timeout = timeout
        self.model = model
        self.num_ctx = num_ctx
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.think = think
        self.retries = retries
        self._sleep = sleep

    capabilities = Capabilities(native_tools=True, exclusive=False)  # a server takes concurrent requests

    def close(self) -> None:
        """Close the HTTP connections."""
        self.client.close()  # type: ignore[no-untyped-call]

    def ask(self, request: Request) -> Reply:
        """Ask with ``format`` set to the schema, or with the tools through Ollama's ``tools``."""
        if request.tools is not None:
            reply = self._chat(request.messages, tools=[dict(t) for t in request.tools])
        else:
            schema = request.schema
            reply = self._chat(request.messages, format=dict(schema) if schema is not None else None)
        return replace(reply, applied=request.constraint)

    def _chat(self, messages: Sequence[Message], **extra: Any) -> Reply:
        options = {"num_ctx": self.num_ctx, "num_predict": self.max_tokens, "temperature": self.temperature}

        def call() -> Any:
            return self.client.chat(
                model=self.model, messages=[dict(m) for m in messages], stream=False, options=options,
                think=self.think, **extra,
            )  # fmt: skip

        url = self.client._client.base_url
        with mapped_errors(self._errors, backend="ollama", url=url, timeout=self.timeout):
            try:
                response = with_backoff(call, status_of=_status, attempts=self.retries, sleep=self._sleep)
            except self._response_error as exc:
                raise self._status_error(exc, extra) from exc
        return self._reply(response)

    def _status_error(self, exc: Any, extra: Mapping[str, Any]) -> BackendError:
        """An error status: a missing model, a refused tool list or format (a refusal), or a failure."""
        status, message = exc.status_code, str(exc.error)
        if status == 404 and "not found" in message:
            return BackendUnavailable(
                f"Ollama has no model {self.model!r}: run `ollama pull {self.model}`", backend="ollama"
            )
        if "tools" in extra and status == 400 and "does not support tools" in message:
            return SchemaRefused(f"{self.model} does not support native tools: {message}", backend="ollama")
        if "format" in extra and extra["format"] is not None and status in (400, 500) and "format" in message:
            return SchemaRefused(f"Ollama refused the schema: {message}", backend="ollama")
        return BackendError(f"Ollama answered {status}: {message}", backend="ollama")

    def _reply(self, response: Any) -> Reply:
        message = response.message
        text = message.content or ""
        thinking = message.thinking
        if "<think>" in text:
            text, thought = split_think(text)
            thinking = "\n".join(part for part in (thinking, thought) if part) or None
        calls = tuple(
            ToolCall(tool=c.function.name, args=parse_arguments(c.function.arguments))
            for c in (message.tool_calls or ())
        )
        usage = None
        if response.prompt_eval_count is not None or response.eval_count is not None:
            usage = Usage(prompt_tokens=response.prompt_eval_count or 0, completion_tokens=response.eval_count or 0)
        return Reply(
            text=text,
            usage=usage,
            finish=Finish.LENGTH if response.done_reason == "length" else Finish.STOP,
            engine="ollama",
            thinking=thinking,
            tool_calls=calls,
        )


def _status(exc: Exception) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _errors(ollama: Any) -> ErrorTable:
    """How the ollama client's errors (and httpx's and pydantic's, which it lets through) become ours."""
    return (
        (ConnectionError, BackendUnavailable,
         "cannot reach Ollama at {url}: start it with `ollama serve` (or set OLLAMA_HOST)"),
        (httpx.TimeoutException, BackendTimeout,
         "Ollama at {url} did not answer within {timeout:g} s (the request timed out): raise timeout="),
        (json.JSONDecodeError, BackendError, "Ollama at {url} answered with a body that is not JSON: {exc}"),
        (RecursionError, BackendError, "Ollama at {url} answered with a body nested too deeply to read"),
        (pydantic.ValidationError, BackendError, "Ollama at {url} answered with something not a chat reply: {exc}"),
        (httpx.HTTPError, BackendError, "the request to Ollama at {url} failed: {exc!r}"),
        (ollama.RequestError, BackendError, "the ollama client refused the request: {exc}"),
    )  # fmt: skip
