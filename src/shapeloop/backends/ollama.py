"""Ollama, through the ``ollama`` client: ``format`` for constrained steps, ``tools`` for native calls.

``options.num_ctx`` is always set, because Ollama's default window silently truncates long prompts.
A thinking model's thinking is kept apart from the text, never read as the step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shapeloop.backends._common import parse_arguments, with_backoff
from shapeloop.brain import Finish, Message, Reply, Usage
from shapeloop.errors import BackendError, BackendUnavailable, SchemaRefused
from shapeloop.extract import split_think
from shapeloop.tools import ToolCall


class OllamaBrain:
    """A brain on an Ollama server.

    Args:
        model: the Ollama model name (``qwen2.5-coder:0.5b``).
        host: the server; ``$OLLAMA_HOST`` or ``http://127.0.0.1:11434`` by default.
        num_ctx: the context window, set explicitly on every request.
        max_tokens: bound on generated tokens per step (``num_predict``).
        temperature: sampling temperature.
        think: ask a thinking model to think (``None`` leaves it to the model).
        retries: tries in all when the server answers 429 or 503.
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
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        try:
            import ollama
        except ImportError as exc:
            raise BackendUnavailable("the ollama client is not installed: pip install 'shapeloop[ollama]'") from exc
        self._ollama = ollama
        self.client = ollama.Client(host=host)
        self.model = model
        self.num_ctx = num_ctx
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.think = think
        self.retries = retries
        self._sleep = sleep

    def close(self) -> None:
        """Close the HTTP connections."""
        self.client.close()  # type: ignore[no-untyped-call]

    def __enter__(self) -> OllamaBrain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ask(self, messages: Sequence[Message], schema: Mapping[str, Any] | None) -> Reply:
        """Ask with ``format`` set to the schema (or no format for prose)."""
        return self._chat(messages, format=dict(schema) if schema is not None else None)

    def ask_native(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> Reply:
        """Ask with the tools through Ollama's ``tools``."""
        return self._chat(messages, tools=[dict(t) for t in tools])

    def _chat(self, messages: Sequence[Message], **extra: Any) -> Reply:
        options = {"num_ctx": self.num_ctx, "num_predict": self.max_tokens, "temperature": self.temperature}

        def call() -> Any:
            return self.client.chat(
                model=self.model, messages=[dict(m) for m in messages], stream=False, options=options,
                think=self.think, **extra,
            )  # fmt: skip

        try:
            response = with_backoff(call, status_of=_status, attempts=self.retries, sleep=self._sleep)
        except self._ollama.ResponseError as exc:
            raise self._translate(exc, extra) from exc
        except RecursionError as exc:  # the client parses a body nested thousands deep
            raise BackendError("Ollama's reply is nested too deeply to read", backend="ollama") from exc
        except ConnectionError as exc:
            raise BackendUnavailable(
                f"cannot reach Ollama at {self.client._client.base_url}: start it with `ollama serve` "
                "(or set OLLAMA_HOST)",
                backend="ollama",
            ) from exc
        return self._reply(response)

    def _translate(self, exc: Any, extra: Mapping[str, Any]) -> BackendError:
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
