import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from helpers import answer_step, tool_step
from shapeloop.cli import main
from shapeloop.models import CATALOGUE


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "colour.txt").write_text("teal\n")
    return folder


def script(tmp_path: Path, *replies: str) -> str:
    path = tmp_path / f"script-{uuid.uuid4().hex}.json"
    path.write_text(json.dumps(list(replies)))
    return str(path)


def test_run_prints_the_answer_and_exits_zero(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    replies = script(tmp_path, tool_step("read_file", path="colour.txt"), answer_step("teal"))
    assert main(["run", "What colour?", "--root", str(root), "--script", replies]) == 0
    out, err = capsys.readouterr()
    assert out == "teal\n"
    assert '  call     read_file({"path": "colour.txt"})' in err and "■ answered" in err


def test_run_json_is_one_object(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    replies = script(tmp_path, answer_step("teal"))
    assert main(["run", "t", "--root", str(root), "--script", replies, "--json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["stop"] == "answered" and data["answer"] == "teal" and data["mode"] == "constrained"
    assert err == ""


def test_a_stop_exits_non_zero_with_the_reason(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    replies = script(tmp_path, *[tool_step("read_file", path="colour.txt")] * 3)
    assert main(["run", "t", "--root", str(root), "--script", replies]) == 1
    assert "shapeloop: stuck: read_file" in capsys.readouterr().err


def test_bad_input_exits_two_with_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "t", "--root", str(tmp_path / "missing"), "--script", "x"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("shapeloop: error: workspace root") and "is not a directory" in err[0]
    assert err[1] == "shapeloop: error: --script 'x' is not a file" and len(err) == 2
    (tmp_path / "ws").mkdir()
    assert main(["run", "t", "--root", str(tmp_path / "ws"), "--model", "gpt-17"]) == 2
    assert "unknown model 'gpt-17'" in capsys.readouterr().err
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"not a model at all")
    assert main(["run", "t", "--root", str(tmp_path / "ws"), "--model", str(fake)]) == 2
    assert "is not a GGUF model file" in capsys.readouterr().err


def test_acting_tools_are_denied_without_a_terminal_and_allowed_with_approve(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    steps = [tool_step("append_note", path="n.txt", text="hello"), answer_step("done")]
    assert main(["run", "t", "--root", str(root), "--write", "--script", script(tmp_path, *steps)]) == 0
    assert "DENIED: append_note was not approved (no terminal" in capsys.readouterr().err
    assert not (root / "n.txt").exists()
    assert main(["run", "t", "--root", str(root), "--write", "--approve", "--script", script(tmp_path, *steps)]) == 0
    assert (root / "n.txt").read_text() == "hello\n"
    args = ["run", "t", "--root", str(root), "--write", "--no-approve", "--script", script(tmp_path, *steps)]
    assert main(args) == 0
    assert "denied by --no-approve" in capsys.readouterr().err
    assert (root / "n.txt").read_text() == "hello\n"


def test_transcript_file_is_written(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    main(
        [
            "run",
            "t",
            "--root",
            str(root),
            "--script",
            script(tmp_path, answer_step("x")),
            "--transcript",
            str(out),
        ]
    )
    assert json.loads(out.read_text().splitlines()[-1])["kind"] == "stop"


def test_models_lists_the_catalogue(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHAPELOOP_CACHE", str(tmp_path))
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]:
        assert name in out
    assert str(tmp_path) in out
    # a model's preset (the policies its default run adds) is named on its line, and only there
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    for entry in CATALOGUE.values():
        named = f"preset: {', '.join(entry.preset)}"
        assert (named in lines[entry.name]) == bool(entry.preset), lines[entry.name]
    assert "preset: abstain" in lines["qwen2.5-coder-0.5b"]


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def _wait_for(session: str, text: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux("capture-pane", "-p", "-t", session, "-S", "-200")
        if text in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared; the screen was:\n{screen}")


@pytest.mark.parametrize(("key", "appended"), [("y", True), ("n", False)])
def test_interactive_approval_through_a_real_terminal(root: Path, tmp_path: Path, key: str, appended: bool) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: apt-get install tmux (the CI script does)")
    steps = script(tmp_path, tool_step("append_note", path="n.txt", text="from the model"), answer_step("done"))
    session = f"shapeloop-test-{uuid.uuid4().hex[:8]}"
    status = tmp_path / "status"
    command = (
        f"{sys.executable} -m shapeloop.cli run 'note it' --root {root} --write --script {steps}; "
        f"echo $? > {status}; sleep 30"
    )
    _tmux("new-session", "-d", "-s", session, "-x", "200", "-y", "50", command)
    try:
        screen = _wait_for(session, "[y/N]")
        assert 'Allow append_note({"path": "n.txt", "text": "from the model"})? [y/N]' in screen
        _tmux("send-keys", "-t", session, key, "Enter")
        _wait_for(session, "■ answered")
        deadline = time.monotonic() + 30
        while not status.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False, capture_output=True)
    assert status.read_text().strip() == "0"
    assert (root / "n.txt").exists() is appended
    if appended:
        assert (root / "n.txt").read_text() == "from the model\n"


def test_chat_keeps_the_conversation_across_tasks_in_a_real_terminal(root: Path, tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: apt-get install tmux (the CI script does)")
    steps = script(tmp_path, tool_step("read_file", path="colour.txt"), answer_step("teal"), answer_step("still teal"))
    transcript = tmp_path / "chat.jsonl"
    session = f"shapeloop-chat-{uuid.uuid4().hex[:8]}"
    command = (
        f"{sys.executable} -m shapeloop.cli chat --root {root} --script {steps} --transcript {transcript}; "
        "echo chat-ended-$?; sleep 30"
    )
    _tmux("new-session", "-d", "-s", session, "-x", "200", "-y", "50", command)
    try:
        _wait_for(session, "you>")
        _tmux("send-keys", "-t", session, "What colour is in colour.txt?", "Enter")
        _wait_for(session, "answered after 2 steps")
        _tmux("send-keys", "-t", session, "Are you sure?", "Enter")
        _wait_for(session, "still teal")
        _tmux("send-keys", "-t", session, "C-d", "")
        screen = _wait_for(session, "chat-ended-")  # the chat has exited: its transcript is whole
        assert "\nteal\n" in screen and "chat-ended-0" in screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False, capture_output=True)
    entries = [json.loads(line) for line in transcript.read_text().splitlines()]
    users = [e["content"] for e in entries if e.get("role") == "user"]
    assert users[0] == "What colour is in colour.txt?" and users[-1] == "Next task: Are you sure?"


def test_run_takes_policies_per_run_and_reports_them(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replies = script(tmp_path, answer_step("teal"))
    args = ["run", "t", "--root", str(root), "--script", replies, "--json"]
    assert main([*args, "--policies", "plain,fit-floor"]) == 0
    report = json.loads(capsys.readouterr().out)
    # a scripted brain has no log-probabilities: the run says it went on without the policy
    assert report["policies"] == []
    left_out = [e for e in report["events"] if e.get("policy") == "fit-floor"]
    assert left_out and left_out[0]["hook"] == "for_run" and "logprobs" in left_out[0]["reason"]
    assert main([*args, "--policies", "plain"]) == 0
    assert json.loads(capsys.readouterr().out)["policies"] == []
