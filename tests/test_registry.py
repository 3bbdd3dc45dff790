"""The backend registry: built-in names, a package's backend through the entry-point group, and
clear errors for names and factories that do not work."""

import json
import textwrap
from pathlib import Path

import pytest

from shapeloop import UsageError, backends
from shapeloop.cli import main

PLUGIN = """
import json

from shapeloop import BaseBrain, Capabilities, Reply, Request


class EchoBrain(BaseBrain):
    capabilities = Capabilities()

    def __init__(self, model, base_url):
        self.model, self.base_url = model, base_url

    def ask(self, request: Request) -> Reply:
        step = {"reason": "r", "action": "answer", "tool": "", "args": {},
                "answer": f"echo from {self.model} at {self.base_url}"}
        return Reply(text=json.dumps(step), applied=request.constraint)


def make(model, *, base_url=None, **options):
    return EchoBrain(model, base_url)


def not_a_brain(model, **options):
    return "a string"
"""


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package ``shapeloop-echo`` on sys.path, registering backends as a pip install would."""
    site = tmp_path / "site"
    info = site / "shapeloop_echo-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "shapeloop_echo.py").write_text(textwrap.dedent(PLUGIN))
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shapeloop-echo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[shapeloop.backends]\necho = shapeloop_echo:make\nbroken = shapeloop_echo:not_a_brain\n"
        "openai = shapeloop_echo:make\ngone = shapeloop_gone:make\n"
    )
    monkeypatch.syspath_prepend(str(site))
    return site


def test_a_package_backend_runs_under_shapeloop_run(
    installed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "Say it.", "--root", str(tmp_path), "--backend", "echo", "--model", "m1", "--json"]
    assert main([*argv, "--base-url", "http://x"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["answer"] == "echo from m1 at http://x" and data["backend"] == "echo"


def test_names_list_the_built_ins_first_and_a_package_cannot_take_one_over(installed: Path) -> None:
    assert backends.names() == ["llamacpp", "ollama", "openai", "instructor", "broken", "echo", "gone"]
    assert backends.factory("openai") is backends.BUILTIN["openai"]


def test_an_unknown_name_lists_the_backends(installed: Path) -> None:
    with pytest.raises(UsageError, match=r"no backend named 'nope'; the backends are: llamacpp, .*echo"):
        backends.create("nope", "m")


def test_a_factory_that_returns_no_brain_or_cannot_be_imported_is_refused(installed: Path) -> None:
    with pytest.raises(UsageError, match="returned str, which is not a Brain"):
        backends.create("broken", "m")
    with pytest.raises(UsageError, match=r"'gone' \(shapeloop_gone:make\) could not be imported"):
        backends.create("gone", "m")


def test_a_server_backend_needs_a_model_and_the_embedded_one_no_url() -> None:
    with pytest.raises(UsageError, match="the openai backend needs a model"):
        backends.create("openai")
    with pytest.raises(UsageError, match="takes no base URL"):
        backends.create("llamacpp", base_url="http://x")


def test_create_passes_the_context_to_the_backend() -> None:
    pytest.importorskip("ollama", reason="the ollama client is not installed: pip install '.[ollama]'")
    brain = backends.create("ollama", "m", base_url="http://127.0.0.1:1", context=2048)
    assert brain.num_ctx == 2048  # type: ignore[attr-defined]
    brain.close()
