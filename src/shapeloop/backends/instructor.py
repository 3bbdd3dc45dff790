"""instructor: a validated :class:`~shapeloop.Step` from any provider instructor supports, with
its validation retries feeding the error back to the model, and its token usage counted in the run."""

from __future__ import annotations

import os
from typing import Any

from shapeloop.brain import BaseBrain, Capabilities, Constraint, Finish, Reply, Request, SchemaSupport, Usage
from shapeloop.errors import BackendError, BackendUnavailable, SchemaRefused
from shapeloop.step import Step, flat_schema


class InstructorBrain(BaseBrain):
    """A brain that asks instructor for a :class:`Step`.

    The schema of each question is the step model itself, so instructor's mode decides how it is
    asked (``JSON`` puts the schema in the prompt and asks for a JSON object; ``TOOLS`` uses a tool
    call; ``MD_JSON`` reads a fenced block). A reply that does not validate is sent back with the
    validation error, up to ``max_retries`` times.

    Args:
        model: the model name.
        client: an instructor client (``instructor.from_openai(...)``, ``instructor.from_provider``);
            by default one is made for an OpenAI-compatible server at ``base_url``.
        base_url: the OpenAI-compatible API root when no client is given.
        api_key: the key for that server (``$OPENAI_API_KEY``, or a placeholder for local ones).
        mode: instructor's mode name when no client is given: ``TOOLS`` (the default: the step is
            a forced function call, which servers constrain), ``JSON`` or ``MD_JSON``.
        max_retries: validation retries.
        max_tokens: bound on generated tokens per request.
        temperature: sampling temperature.
    """

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key: str | None = None,
        mode: str = "TOOLS",
        max_retries: int = 2,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> None:
        if client is None:
            try:
                import instructor
                import openai
            except ImportError as exc:
                raise BackendUnavailable(
                    "instructor is not installed: pip install 'shapeloop[instructor]'", backend="instructor"
                ) from exc
            key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
            client = instructor.from_openai(openai.OpenAI(base_url=base_url, api_key=key), mode=instructor.Mode[mode])
        self.client = client
        self.model = model
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.temperature = temperature

    capabilities = Capabilities(schema=SchemaSupport.FLAT)

    def close(self) -> None:
        """Close the underlying client's connections, when it has them."""
        close = getattr(getattr(self.client, "client", None), "close", None)
        if callable(close):
            close()

    def ask(self, request: Request) -> Reply:
        """Ask for a validated step (the flat step, whatever schema is asked for), or for prose
        when no schema is; the reply text is the step as JSON."""
        if request.tools is not None:
            raise SchemaRefused("instructor takes no native tools here", backend="instructor")
        options = {
            "model": self.model, "messages": [dict(m) for m in request.messages], "max_retries": self.max_retries,
            "max_tokens": self.max_tokens, "temperature": self.temperature,
        }  # fmt: skip
        try:
            if request.schema is None:
                return _prose(self.client.chat.completions.create(response_model=None, **options))
            step, completion = self.client.chat.completions.create_with_completion(response_model=Step, **options)
        except Exception as exc:
            raise _translate(exc) from exc
        applied = Constraint.SCHEMA if dict(request.schema or {}) == flat_schema() else Constraint.FLAT
        return Reply(
            text=step.to_json(), usage=_usage(completion), finish=Finish.STOP, applied=applied, engine="instructor"
        )


def _translate(exc: Exception) -> BackendError:
    name = type(exc).__name__
    if name in ("APIConnectionError", "ConnectError"):
        return BackendUnavailable(f"instructor cannot reach the server: {exc}", backend="instructor")
    if name == "InstructorRetryException":
        return BackendError(f"no valid step after instructor's retries: {exc}", backend="instructor")
    return BackendError(f"instructor failed: {name}: {exc}", backend="instructor")


def _usage(completion: Any) -> Usage | None:
    raw = getattr(completion, "usage", None)
    if raw is None:
        return None
    details = getattr(raw, "prompt_tokens_details", None)
    return Usage(
        prompt_tokens=int(getattr(raw, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(raw, "completion_tokens", 0) or 0),
        cached_tokens=int(getattr(details, "cached_tokens", 0) or 0),
    )


def _prose(completion: Any) -> Reply:
    choice = completion.choices[0]
    return Reply(
        text=choice.message.content or "",
        usage=_usage(completion),
        finish=Finish.LENGTH if choice.finish_reason == "length" else Finish.STOP,
        applied=Constraint.NONE,
        engine="instructor",
    )
