"""The README's "Your own backend" example passes the conformance kit it shows."""

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"

# The example talks to a server at 127.0.0.1:9000; here the server is TestBrain behind a mock transport.
SERVER = """

import json as _json

from shapeloop import TestBrain as _TestBrain


def _server(request):
    body = _json.loads(request.read())
    reply = _TestBrain().ask(Request(messages=body["messages"], schema=body["schema"]))
    return httpx.Response(200, json={"text": reply.text})


_made_by_the_readme = MyBrain.__init__


def _on_the_fake_server(self, model, *, transport=None):
    _made_by_the_readme(self, model, transport=transport or httpx.MockTransport(_server))


MyBrain.__init__ = _on_the_fake_server
"""


def test_the_own_backend_example_passes_the_kit(tmp_path: Path) -> None:
    text = README.read_text()
    section = text[text.index("### Your own backend") :]
    section = section[: section.index("\n### ", 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2, "the section shows the brain, then the kit"
    (tmp_path / "test_own_backend.py").write_text(blocks[0] + "\n" + blocks[1] + SERVER)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_own_backend.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert re.search(r"\b10 passed, 3 skipped\b", done.stdout), done.stdout[-500:]
