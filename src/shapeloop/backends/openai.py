"""Any OpenAI-compatible chat server: llama-server, vLLM, LM Studio, llama-cpp-python's server.

Constrained steps go as ``response_format``. Servers speak two dialects: OpenAI's
``{"type": "json_schema", "json_schema": {...}}`` and llama.cpp's ``{"type": "json_object",
"schema": {...}}``; the first one a server accepts is kept, and a dialect is dropped only when the
server refuses it by name (or refuses ``response_format`` itself). A server that refuses both is a
refusal, and the loop goes to prose. Transport, timeout, status and body errors become shapeloop's
at one boundary (:data:`ERRORS`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import httpx

from shapeloop.backends._common import ErrorTable, mapped_errors, parse_arguments, with_backoff
from shapeloop.brain import BaseBrain, Capabilities, Finish, Message, Reply, Request, Usage
from shapeloop.errors import BackendError, BackendTimeout, BackendUnavailable, SchemaRefused
from shapeloop.extract import split_think
from shapeloop.tools import ToolCall

DIALECTS = ("json_schema", "json_object")


class _HTTPStatus(Exception):
    """A status of 400 or more, kept apart from the transport's errors until it is classified."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:500]}")
        self.status_code = status
        self.body = body


class _NotJSON(Exception):
    """A 2xx response whose body is not a JSON object."""


ERRORS: ErrorTable = (
    (
        httpx.TimeoutException,
        BackendTimeout,
        "{url} did not answer within {timeout:g} s (the request timed out): a slow model needs a larger timeout=",
    ),
    (httpx.ConnectError, BackendUnavailable, "cannot reach {url}: is the server running? ({exc})"),
    (httpx.DecodingError, BackendError, "the reply from {url} could not be decoded: {exc}"),
    (httpx.RemoteProtocolError, BackendError, "{url} broke the HTTP protocol (it may have crashed): {exc}"),
    (_NotJSON, BackendError, "{url} answered with a body that is not a JSON object: {exc}"),
    (httpx.HTTPError, BackendError, "the request to {url} failed: {exc!r}"),
)
"""How httpx's errors and a non-JSON body become shapeloop's; statuses are classified apart."""


class OpenAIBrain(BaseBrain):
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

    Attributes:
        dialects: the ``response_format`` dialects still to try, the one that worked first.
    """

    capabilities = Capabilities(native_tools=True, exclusive=False)  # a server takes concurrent requests

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
        self.timeout = timeout
        self.retries = retries
        self._sleep = sleep
        self.dialects: list[str] = list(DIALECTS)

    def close(self) -> None:
        """Close the HTTP connections."""
        self.client.close()

    def ask(self, request: Request) -> Reply:
        """Ask with ``response_format`` set to the schema, or with the tools in ``tools``."""
        try:
            if request.tools is not None:
                reply = self._ask_native(request.messages, request.tools)
            elif request.schema is not None:
                reply = self._ask_schema(request.messages, request.schema)
            else:
                reply = self._complete(request.messages, {})
        except _HTTPStatus as exc:
            raise self._status_error(exc) from exc
        return replace(reply, applied=request.constraint)

    def _ask_schema(self, messages: Sequence[Message], schema: Mapping[str, Any]) -> Reply:
        """Try each dialect the server may speak; drop one only when the server refuses it by name."""
        refusals: list[str] = []
        for dialect in list(self.dialects):
            try:
                reply = self._complete(messages, {"response_format": _response_format(dialect, schema)})
            except _HTTPStatus as exc:
                if not _refuses(exc, dialect):
                    raise
                refusals.append(f"{dialect}: {exc}")
                self.dialects.remove(dialect)
                continue
            self.dialects = [dialect, *(d for d in self.dialects if d != dialect)]
            return reply
        raise SchemaRefused("the server refused the step schema (" + "; ".join(refusals) + ")", backend="openai")

    def _ask_native(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> Reply:
        try:
            return self._complete(messages, {"tools": [dict(t) for t in tools], "tool_choice": "auto"})
        except _HTTPStatus as exc:
            if _refuses(exc, "tools"):
                raise SchemaRefused(f"the server refused native tools: {exc}", backend="openai") from exc
            raise

    def _complete(self, messages: Sequence[Message], extra: Mapping[str, Any]) -> Reply:
        """One completion; a status of 400 or more leaves as :class:`_HTTPStatus`, for the caller to classify."""
        body = {
            "model": self.model, "messages": [dict(m) for m in messages], "max_tokens": self.max_tokens,
            "temperature": self.temperature, "stream": False, **extra,
        }  # fmt: skip
        return _reply(self._retried(body))

    def _retried(self, body: Mapping[str, Any]) -> dict[str, Any]:
        with mapped_errors(ERRORS, backend="openai", url=self.client.base_url, timeout=self.timeout):
            return with_backoff(lambda: self._post(body), status_of=_status, attempts=self.retries, sleep=self._sleep)

    def _post(self, body: Mapping[str, Any]) -> dict[str, Any]:
        response = self.client.post("/chat/completions", json=body)
        if response.status_code >= 400:
            raise _HTTPStatus(response.status_code, response.text)
        try:
            data = response.json()
        except (ValueError, RecursionError) as exc:  # RecursionError: a body of thousands of "["
            raise _NotJSON(repr(response.text[:200])) from exc
        if not isinstance(data, dict):
            raise _NotJSON(repr(response.text[:200]))
        return data

    def _status_error(self, exc: _HTTPStatus) -> BackendError:
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


def _refuses(exc: _HTTPStatus, feature: str) -> bool:
    """The status refuses ``feature`` (a dialect, or ``tools``) by name, or ``response_format`` itself.

    Servers say so in words only (llama-server answers 500 "response_format type must be one of
    text or json_object, but got: json_schema"), so the words must name what was tried.
    """
    body = exc.body.lower()
    named = feature in body or (feature != "tools" and "response_format" in body)
    return exc.status_code in (400, 422, 500) and named


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
