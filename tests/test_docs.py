"""The docs site's code runs: every Python block of every page, and the site builds with --strict.

A page's ```python blocks run in order in one namespace, from the repository root, each in a fresh
interpreter per page. A block that begins with a ``# needs ...`` comment (a real model, a server)
is not run: it is compiled, and every shapeloop name it imports must exist, so a renamed function
breaks this test rather than the page. A ```text block right after a ```python block is the
output that block prints, and is checked.
"""

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import shapeloop

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
BLOCK = re.compile(r"```(\w+)[^\n]*\n(.*?)```", re.S)

RUNNER = """
import contextlib, io, json, sys, types
page = types.ModuleType("docs_page")
sys.modules["docs_page"] = page
outputs = []
for name, source in json.load(sys.stdin):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, name, "exec"), page.__dict__)
    outputs.append(out.getvalue())
print(json.dumps(outputs))
"""


def blocks(page: Path) -> list[tuple[str, str, str]]:
    """``(language, source, text block that follows it or "")`` for each fenced block of ``page``."""
    text = page.read_text()
    found = list(BLOCK.finditer(text))
    out = []
    for index, here in enumerate(found):
        after = found[index + 1] if index + 1 < len(found) else None
        follows = after is not None and not text[here.end() : after.start()].strip() and after.group(1) == "text"
        out.append((here.group(1), here.group(2), after.group(2) if follows and after else ""))
    return out


def needs_something(source: str) -> bool:
    return source.lstrip().startswith("# needs ")


def run_blocks(page: Path, sources: list[str]) -> list[str]:
    named = [(f"{page.relative_to(ROOT)} block {i + 1}", source) for i, source in enumerate(sources)]
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", RUNNER], input=json.dumps(named),
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    outputs: list[str] = json.loads(done.stdout.splitlines()[-1])
    return outputs


def runnable(page: Path) -> list[tuple[str, str]]:
    """``(source, output shown)`` of the page's Python blocks that run here."""
    return [(source, shown) for lang, source, shown in blocks(page) if lang == "python" and not needs_something(source)]


def held(page: Path) -> list[str]:
    """The page's Python blocks that need a model or a server."""
    return [source for lang, source, _ in blocks(page) if lang == "python" and needs_something(source)]


WITH_CODE = [page for page in PAGES if runnable(page)]
WITH_HELD = [page for page in [*PAGES, ROOT / "README.md"] if held(page)]


@pytest.mark.parametrize("page", WITH_CODE, ids=[str(p.relative_to(DOCS)) for p in WITH_CODE])
def test_the_python_blocks_of_each_page_run_and_print_what_the_page_shows(page: Path) -> None:
    blocks_here = runnable(page)
    outputs = run_blocks(page, [source for source, _ in blocks_here])
    for (source, shown), printed in zip(blocks_here, outputs, strict=True):
        if shown:
            assert printed.strip() == shown.strip(), f"{page.name}: the block\n{source}\nprints\n{printed}"


def imported_names(source: str) -> list[tuple[str, str]]:
    return [
        (node.module, alias.name)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "shapeloop"
        for alias in node.names
    ]


@pytest.mark.parametrize("page", WITH_HELD, ids=[p.name for p in WITH_HELD])
def test_blocks_that_need_a_model_compile_and_import_only_names_that_exist(page: Path) -> None:
    for source in held(page):
        for module, name in imported_names(source):
            assert hasattr(importlib.import_module(module), name), f"{page.name}: from {module} import {name}"


def test_the_pages_run_some_code_and_hold_back_only_what_needs_a_model() -> None:
    assert len(WITH_CODE) >= 6 and len(WITH_HELD) >= 2


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    nav = set(re.findall(r":\s*([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M))
    assert nav == {str(p.relative_to(DOCS)) for p in PAGES}


def test_the_own_backend_example_passes_the_conformance_kit(tmp_path: Path) -> None:
    text = (DOCS / "backends.md").read_text()
    section = text[text.index("## Your own backend") :]
    section = section[: section.index("\n## ", 1)]
    brain, kit = (source for lang, source, _ in blocks_of(section) if lang == "python")
    (tmp_path / "test_own_backend.py").write_text(brain + "\n" + kit + SERVER)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_own_backend.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert re.search(r"\b\d+ passed, \d+ skipped\b", done.stdout), done.stdout[-500:]
    assert " failed" not in done.stdout


def blocks_of(text: str) -> list[tuple[str, str, str]]:
    return [(m.group(1), m.group(2), "") for m in BLOCK.finditer(text)]


# The example talks to a server at 127.0.0.1:9000; here the server is TestBrain behind a mock transport.
SERVER = """

import json as _json

from shapeloop import TestBrain as _TestBrain


def _server(request):
    body = _json.loads(request.read())
    reply = _TestBrain().ask(Request(messages=body["messages"], schema=body["schema"]))
    return httpx.Response(200, json={"text": reply.text})


_made_by_the_page = MyBrain.__init__


def _on_the_fake_server(self, model, *, transport=None):
    _made_by_the_page(self, model, transport=transport or httpx.MockTransport(_server))


MyBrain.__init__ = _on_the_fake_server
"""


def test_the_site_builds_strict_and_the_reference_shows_every_public_name(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra is not installed")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    reference = (tmp_path / "site" / "reference" / "shapeloop" / "index.html").read_text()
    missing = [name for name in shapeloop.__all__ if f'id="shapeloop.{name}"' not in reference]
    assert not missing, f"not in the generated reference: {missing}"
