"""Any OpenAI-compatible chat server: llama-server, vLLM, LM Studio, llama-cpp-python's server.

Constrained steps go as ``response_format``. Servers speak two dialects: OpenAI's
``{"type": "json_schema", "json_schema": {...}}`` and llama.cpp's ``{"type": "json_object",
"schema": {...}}``; the first one a server accepts is kept for the rest of the run. A server that
rejects both is a refusal, and the loop goes to prose.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from shapeloop.backends._common import parse_arguments, with_backoff
from shapeloop.brain import Finish, Message, Reply, Usage
from shapeloop.errors import BackendError, BackendUnavailable, SchemaRefused
from shapeloop.extract import split_think
from shapeloop.tools import ToolCall

DIALECTS = ("json_schema", "json_object")


class _HTTPStatus(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:500]}")
        self.status_code = status
        self.body = body


class OpenAIBrain:
    """A brain on an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        model: the model name the server knows.
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``.
        api_key: sent as a bearer token; ``$OPENAI_API_KEY`` by default (local servers need none).
        max_tokens: bound on generated tokens per step.
        temperature: sampling temperature.
        timeout: seconds to wait for one reply.
        retries: tries in all when the server answers 429 or 503.
        transport: an httpx transport (tests pass ``httpx.MockTransport``).
        sleep: how to wait between retries.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key: str | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        timeout: float = 600.0,
        retries: int = 5,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport)
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.retries = retries
        self._sleep = sleep
        self.dialects: list[str] = list(DIALECTS)

    def close(self) -> None:
        """Close the HTTP connections."""
        self.client.close()

    def __enter__(self) -> OpenAIBrain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ask(self, messages: Sequence[Message], schema: Mapping[str, Any] | None) -> Reply:
        """Ask with ``response_format`` set to the schema, trying each dialect the server may speak."""
        if schema is None:
            return self._complete(messages, {})
        refusals: list[str] = []
        for dialect in list(self.dialects):
            try:
                reply = self._complete(messages, {"response_format": _response_format(dialect, schema)})
            except _HTTPStatus as exc:
                if not _is_schema_refusal(exc):
                    raise self._translate(exc) from exc
                refusals.append(f"{dialect}: {exc}")
                self.dialects.remove(dialect)
                continue
            self.dialects = [dialect]  # keep what worked
            return reply
        raise SchemaRefused("the server refused the step schema (" + "; ".join(refusals) + ")", backend="openai")

    def ask_native(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> Reply:
        """Ask with the tools through the ``tools`` field."""
        try:
            return self._complete(messages, {"tools": [dict(t) for t in tools], "tool_choice": "auto"})
        except _HTTPStatus as exc:
            if exc.status_code in (400, 422, 500) and "tool" in exc.body.lower():
                raise SchemaRefused(f"the server refused native tools: {exc}", backend="openai") from exc
            raise self._translate(exc) from exc

    def _complete(self, messages: Sequence[Message], extra: Mapping[str, Any]) -> Reply:
        body = {
            "model": self.model, "messages": [dict(m) for m in messages], "max_tokens": self.max_tokens,
            "temperature": self.temperature, "stream": False, **extra,
        }  # fmt: skip
        try:
            data = with_backoff(lambda: self._post(body), status_of=_status, attempts=self.retries, sleep=self._sleep)
        except _HTTPStatus as exc:
            if "response_format" in extra and _is_schema_refusal(exc):
                raise
            raise self._translate(exc) from exc
        return _reply(data)

    def _post(self, body: Mapping[str, Any]) -> dict[str, Any]:
        try:
            response = self.client.post("/chat/completions", json=body)
        except httpx.TransportError as exc:
            raise BackendUnavailable(
                f"cannot reach {self.client.base_url}: is the server running? ({exc})", backend="openai"
            ) from exc
        if response.status_code >= 400:
            raise _HTTPStatus(response.status_code, response.text)
        try:
            data: dict[str, Any] = response.json()
        except (ValueError, RecursionError) as exc:  # RecursionError: a body of thousands of "["
            raise BackendError(
                f"the server's reply is not readable JSON ({type(exc).__name__})", backend="openai"
            ) from exc
        return data

    def _translate(self, exc: _HTTPStatus) -> BackendError:
        if exc.status_code in (401, 403):
            return BackendUnavailable(f"the server refused the API key ({exc}): set OPENAI_API_KEY", backend="openai")
        if exc.status_code == 404:
            return BackendUnavailable(
                f"no such model or endpoint at {self.client.base_url} ({exc}): check --model and --base-url",
                backend="openai",
            )
        return BackendError(f"the server answered {exc}", backend="openai")


def _response_format(dialect: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    if dialect == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "step", "schema": dict(schema), "strict": False}}
    return {"type": "json_object", "schema": dict(schema)}


def _is_schema_refusal(exc: _HTTPStatus) -> bool:
    body = exc.body.lower()
    return exc.status_code in (400, 422, 500) and any(
        word in body for word in ("response_format", "json_schema", "json_object", "schema", "'text'")
    )


def _reply(data: Mapping[str, Any]) -> Reply:
    try:
        choice = data["choices"][0]
        message = choice.get("message") or {}
    except (KeyError, IndexError, TypeError) as exc:
        raise BackendError(f"the server's reply has no choices: {str(data)[:300]}", backend="openai") from exc
    text, thinking = split_think(message.get("content") or "")
    calls = tuple(
        ToolCall(tool=c["function"]["name"], args=parse_arguments(c["function"].get("arguments")))
        for c in message.get("tool_calls") or ()
        if c.get("function")
    )
    raw = data.get("usage") or None
    usage = None
    if raw:
        cached = ((raw.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0
        usage = Usage(
            prompt_tokens=int(raw.get("prompt_tokens") or 0),
            completion_tokens=int(raw.get("completion_tokens") or 0),
            cached_tokens=int(cached),
        )
    return Reply(
        text=text,
        usage=usage,
        finish=Finish.LENGTH if choice.get("finish_reason") == "length" else Finish.STOP,
        engine="openai",
        thinking=message.get("reasoning_content") or thinking or None,
        tool_calls=calls,
    )


def _status(exc: Exception) -> int | None:
    return exc.status_code if isinstance(exc, _HTTPStatus) else None
