"""instructor: a validated :class:`~shapeloop.Step` from any provider instructor supports, with
its validation retries feeding the error back to the model, and its token usage counted in the run."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import httpx

from shapeloop.backends._common import ErrorTable, mapped_errors
from shapeloop.brain import BaseBrain, Capabilities, Constraint, Finish, Reply, Request, SchemaSupport, Usage
from shapeloop.errors import BackendError, BackendTimeout, BackendUnavailable, SchemaRefused
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
        timeout: seconds to wait for one reply, when no client is given.
        client_retries: the openai client's own retries of a failed request (a timeout, 429, 5xx)
            when no client is given.
        transport: an httpx transport for the client made here (tests pass ``httpx.MockTransport``).
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
        timeout: float = 600.0,
        client_retries: int = 2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        try:
            import instructor
            import openai
        except ImportError as exc:
            raise BackendUnavailable(
                "instructor is not installed: pip install 'shapeloop[instructor]'", backend="instructor"
            ) from exc
        self._owned: Any = None
        if client is None:
            key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
            # openai 3 types http_client as httpx2's client and takes httpx's as well
            http: Any = httpx.Client(
                transport=transport, timeout=timeout, event_hooks={"response": [_json_only(openai)]}
            )
            self._owned = openai.OpenAI(base_url=base_url, api_key=key, http_client=http, max_retries=client_retries)
            client = instructor.from_openai(self._owned, mode=instructor.Mode[mode])
        self.client = client
        self._errors = _errors(instructor, openai)
        self.model = model
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.temperature = temperature

    capabilities = Capabilities(schema=SchemaSupport.FLAT)

    def close(self) -> None:
        """Close the client this brain made (a client passed in stays its owner's to close)."""
        if self._owned is not None:
            self._owned.close()

    def ask(self, request: Request) -> Reply:
        """Ask for a validated step (the flat step, whatever schema is asked for), or for prose
        when no schema is; the reply text is the step as JSON."""
        if request.tools is not None:
            raise SchemaRefused("instructor takes no native tools here", backend="instructor")
        options = {
            "model": self.model, "messages": [dict(m) for m in request.messages], "max_retries": self.max_retries,
            "max_tokens": self.max_tokens, "temperature": self.temperature,
        }  # fmt: skip
        with mapped_errors(self._errors, backend="instructor"):
            if request.schema is None:
                return _prose(self.client.chat.completions.create(response_model=None, **options))
            step, completion = self.client.chat.completions.create_with_completion(response_model=Step, **options)
        applied = Constraint.SCHEMA if dict(request.schema or {}) == flat_schema() else Constraint.FLAT
        return Reply(
            text=step.to_json(), usage=_usage(completion), finish=Finish.STOP, applied=applied, engine="instructor"
        )


def _errors(instructor: Any, openai: Any) -> ErrorTable:
    """How instructor's and the openai client's errors become ours, specific types first."""
    from instructor.core import InstructorError, InstructorRetryException

    return (
        (openai.APITimeoutError, BackendTimeout, "the server did not answer in time (the request timed out): {exc}"),
        (openai.APIConnectionError, BackendUnavailable, "instructor cannot reach the server: {exc}"),
        (openai.AuthenticationError, BackendUnavailable, "the server refused the API key ({exc}): set OPENAI_API_KEY"),
        (openai.NotFoundError, BackendUnavailable, "no such model or endpoint ({exc}): check --model and --base-url"),
        (openai.APIStatusError, BackendError, "the server answered {exc.status_code}: {exc}"),
        (openai.APIResponseValidationError, BackendError, "{exc}"),
        (InstructorRetryException, BackendError, "no valid step after instructor's retries: {exc}"),
        (openai.OpenAIError, BackendError, "the openai client failed: {exc!r}"),
        (InstructorError, BackendError, "instructor failed: {exc!r}"),
    )


def _json_only(openai: Any) -> Callable[[httpx.Response], None]:
    """A response hook: a 2xx body that is not JSON is the server's error, not a reply (the openai
    client would hand the text on, and instructor would fail on it far from the cause)."""

    def check(response: httpx.Response) -> None:
        if response.is_success:
            response.read()
            try:
                json.loads(response.content)
            except ValueError:
                message = (
                    f"the server answered {response.status_code} with a body that is not JSON: {response.text[:200]!r}"
                )
                raise openai.APIResponseValidationError(response, response.text, message=message) from None

    return check


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
