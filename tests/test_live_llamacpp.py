"""Live tests: real small models in-process through llama.cpp. CI pulls the models first."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import need_model
from shapeloop import Mode, StopReason, extract_step, models, run_agent, workspace_tools
from shapeloop.events import ReplyReceived, ToolCalled

pytestmark = pytest.mark.live
DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo"
TASK = "Read colour.txt and tell me the colour it names."


@pytest.fixture(scope="module")
def qwen():  # type: ignore[no-untyped-def]
    need_model("qwen2.5-coder-0.5b")
    from shapeloop.backends.llamacpp import LlamaCppBrain

    return LlamaCppBrain("qwen2.5-coder-0.5b", n_ctx=4096)


@pytest.fixture(scope="module")
def smol():  # type: ignore[no-untyped-def]
    need_model("smollm2-135m")
    from shapeloop.backends.llamacpp import LlamaCppBrain

    return LlamaCppBrain("smollm2-135m", n_ctx=4096)


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    return Path(shutil.copytree(DEMO, tmp_path / "demo"))


def test_qwen_answers_the_colour_task_in_constrained_mode(qwen, demo: Path) -> None:  # type: ignore[no-untyped-def]
    run = run_agent(qwen, workspace_tools(demo), TASK, max_steps=6)
    assert run.stop is StopReason.ANSWERED, run.reason
    assert run.mode is Mode.CONSTRAINED
    assert "teal" in (run.answer or "").lower()
    calls = [e.call for e in run.events if isinstance(e, ToolCalled)]
    assert any(c.tool == "read_file" and c.args.get("path") == "colour.txt" for c in calls)
    replies = [e for e in run.events if isinstance(e, ReplyReceived)]
    try:
        import llguidance  # noqa: F401

        expected = "llguidance"
    except ImportError:
        expected = "llama.cpp-grammar"
    assert all(r.engine == expected for r in replies)
    # the second step reuses the first step's prompt from the cache
    assert replies[1].usage is not None and replies[1].usage.cached_tokens > 0
    assert replies[1].usage.evaluated_tokens < replies[1].usage.prompt_tokens


@pytest.mark.parametrize("brain_name", ["qwen", "smol"])
def test_every_constrained_reply_parses_as_a_step(brain_name: str, request: pytest.FixtureRequest, demo: Path) -> None:
    brain = request.getfixturevalue(brain_name)
    tasks = [TASK, "List the files in the workspace.", "What is 2 + 2?"]
    replies = []
    for task in tasks:
        run = run_agent(brain, workspace_tools(demo, write=True), task, max_steps=4, approve=lambda c: False)
        replies += [e for e in run.events if isinstance(e, ReplyReceived)]
    assert replies
    for reply in replies:
        assert reply.finish == "stop", reply.text
        found = extract_step(reply.text, batch=True)  # the default step: calls or an answer
        assert found.step is not None and found.whole, reply.text


def test_a_prompt_that_does_not_fit_stops_with_the_count(demo: Path) -> None:
    need_model("smollm2-135m")
    from shapeloop.backends.llamacpp import LlamaCppBrain

    brain = LlamaCppBrain("smollm2-135m", n_ctx=256)
    run = run_agent(brain, workspace_tools(demo), "Summarise this: " + "lorem ipsum " * 200)
    assert run.stop is StopReason.BACKEND_ERROR
    assert "context window holds 256" in run.reason and "over by" in run.reason


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shapeloop.cli", *args], capture_output=True, text=True, timeout=600, env=env
    )


def test_shapeloop_run_end_to_end(demo: Path) -> None:
    need_model("qwen2.5-coder-0.5b")
    done = _cli("run", TASK, "--root", str(demo), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["stop"] == "answered" and "teal" in data["answer"].lower()
    shown = _cli("run", TASK, "--root", str(demo))
    assert shown.returncode == 0 and "teal" in shown.stdout.lower()
    # the call, with whatever optional arguments the model fills in (the calls step says nothing of them)
    called = re.search(r'  call     read_file\(\{[^\n]*"path": "colour\.txt"', shown.stderr)
    assert "── step 1" in shown.stderr and called, shown.stderr
    stopped = _cli("run", TASK, "--root", str(demo), "--max-steps", "1")
    assert stopped.returncode == 1 and "shapeloop: max_steps:" in stopped.stderr


def test_a_tampered_model_file_is_refused(tmp_path: Path, demo: Path) -> None:
    need_model("smollm2-135m")
    cache = tmp_path / "cache"
    cache.mkdir()
    copy = cache / models.lookup("smollm2-135m").filename
    shutil.copyfile(models.cached_path("smollm2-135m"), copy)
    with open(copy, "r+b") as handle:
        handle.seek(5_000_000)
        handle.write(b"\xff\xfe")
    done = _cli(
        "run",
        TASK,
        "--root",
        str(demo),
        "--model",
        "smollm2-135m",
        env={**os.environ, "SHAPELOOP_CACHE": str(cache)},
    )
    assert done.returncode == 2
    assert "does not match the pinned sha256" in done.stderr and "shapeloop pull smollm2-135m" in done.stderr
    assert not copy.exists()
