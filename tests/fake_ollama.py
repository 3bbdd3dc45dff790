"""An HTTP server on loopback that speaks Ollama's chat API, for driving the real ``ollama`` client."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def instance(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A value that satisfies ``schema`` (the subset of JSON schema that step schemas use)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return instance(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return instance(schema["anyOf"][0], defs)
    kind = schema.get("type", "object")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: instance(v, defs) for k, v in props.items() if k in schema.get("required", props)}
    if kind == "string":
        return "Oslo" * max(1, schema.get("minLength", 1))
    if kind == "array" and "items" in schema:  # a batch step's calls: at least one
        return [instance(schema["items"], defs) for _ in range(schema.get("minItems", 0))]
    return {"integer": 1, "number": 1.5, "boolean": True, "array": [], "null": None}[kind]


class FakeOllama(ThreadingHTTPServer):
    """Records requests; answers like Ollama. Model names choose behaviours:

    ``missing`` is not pulled (404); ``busy`` answers 429 twice first; ``notools`` refuses tools;
    ``inline-thinker`` writes ``<think>`` into its content; ``noformat`` refuses a ``format`` schema.
    """

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.script: list[dict[str, Any]] = []
        self.busy_left = 2

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append(body)
        model = body.get("model", "")
        if model == "missing":
            return 404, {"error": f'model "{model}" not found, try pulling it first'}
        if model == "busy" and self.busy_left > 0:
            self.busy_left -= 1
            return 429, {"error": "server busy, please try again"}
        if model == "notools" and body.get("tools"):
            return 400, {"error": f"registry.ollama.ai/library/{model}:latest does not support tools"}
        if model == "noformat" and isinstance(body.get("format"), dict):
            return 500, {"error": "invalid format: the JSON schema could not be compiled to a grammar"}
        message: dict[str, Any] = {"role": "assistant", "content": ""}
        options = body.get("options") or {}
        if self.script:
            message.update(self.script.pop(0))
        elif isinstance(body.get("format"), dict):
            message["content"] = json.dumps(instance(body["format"]))
        elif body.get("tools"):
            tool = body["tools"][0]["function"]
            message["tool_calls"] = [{"function": {"name": tool["name"], "arguments": instance(tool["parameters"])}}]
        else:
            message["content"] = " ".join(str(n) for n in range(1, 200))
        if body.get("think"):
            message["thinking"] = "Let me think about the weather."
        if model == "inline-thinker":
            message["content"] = "<think>hmm, what shape?</think>" + message["content"]
        done_reason = "stop"
        limit = options.get("num_predict")
        if isinstance(limit, int) and 0 < limit < len(message["content"].split()):
            message["content"] = " ".join(message["content"].split()[:limit])
            done_reason = "length"
        prompt = sum(len(m.get("content", "")) for m in body.get("messages", []))
        return 200, {
            "model": model, "created_at": "2026-11-30T00:00:00Z", "message": message, "done": True,
            "done_reason": done_reason, "prompt_eval_count": max(1, prompt // 4),
            "eval_count": max(1, len(message["content"]) // 4),
        }  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    server: FakeOllama

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        status, payload = self.server.answer(body) if self.path == "/api/chat" else (404, {"error": "not found"})
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def running() -> Iterator[FakeOllama]:
    server = FakeOllama()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
