"""An OpenAI-compatible server on loopback (answering as :mod:`fake_openai` does) that counts the
requests it has in flight at once, to show that a client overlaps them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

import fake_openai


class OverlapServer(ThreadingHTTPServer):
    """An OpenAI-compatible server on loopback that counts requests in flight at once.

    The first ``hold`` requests are held until ``hold`` of them are in flight together (a barrier),
    so a client that sends one request at a time gets 503s instead of an overlap.
    """

    daemon_threads = True

    def __init__(self, hold: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hold = hold
        self.barrier = threading.Barrier(hold, timeout=10)
        self.lock = threading.Lock()
        self.seen = 0
        self.in_flight = 0
        self.most_in_flight = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: OverlapServer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        server = self.server
        with server.lock:
            server.seen += 1
            held = server.seen <= server.hold
            server.in_flight += 1
            server.most_in_flight = max(server.most_in_flight, server.in_flight)
        try:
            if held:
                server.barrier.wait()
            answer = fake_openai.respond(httpx.Request("POST", server.url, content=body))
            status, payload = answer.status_code, answer.content
        except threading.BrokenBarrierError:
            status, payload = 503, b'{"error": "requests did not overlap"}'
        finally:
            with server.lock:
                server.in_flight -= 1
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serving(hold: int) -> Iterator[OverlapServer]:
    """An :class:`OverlapServer` answering on a thread, for the ``with`` block."""
    server = OverlapServer(hold=hold)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
