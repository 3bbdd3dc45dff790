"""An OpenAI-compatible ``/chat/completions`` endpoint in an ``httpx.MockTransport``, answering with
:class:`~shapeloop.TestBrain`: a valid reply for any ``response_format`` schema or ``tools``."""

from __future__ import annotations

import json
from typing import Any

import httpx

from shapeloop import Request, TestBrain


def respond(request: httpx.Request) -> httpx.Response:
    """Answer one chat completion as a server that honours the schema would."""
    body: dict[str, Any] = json.loads(request.read())
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
    reply = TestBrain().ask(Request(messages=body["messages"], schema=schema, tools=body.get("tools")))
    limit = 4 * int(body.get("max_tokens") or 512)
    calls = [{"id": str(i), "type": "function", "function": {"name": c.tool, "arguments": json.dumps(c.args)}}
             for i, c in enumerate(reply.tool_calls)]  # fmt: skip
    message = {"role": "assistant", "content": reply.text[:limit], "tool_calls": calls or None}
    finish = "length" if len(reply.text) > limit else "tool_calls" if calls else "stop"
    usage = {"prompt_tokens": len(json.dumps(body["messages"])) // 4, "completion_tokens": len(reply.text) // 4 + 1}
    return httpx.Response(200, json={"choices": [{"message": message, "finish_reason": finish}], "usage": usage})


def transport() -> httpx.MockTransport:
    """The fake server as a transport."""
    return httpx.MockTransport(respond)
