"""The command line with bad input, through a real subprocess: one line per bad input on stderr,
exit 2, no traceback, and nothing loaded or pulled first."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import answer_step


def shapeloop(*args: str, cache: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SHAPELOOP_CACHE": str(cache), "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "shapeloop.cli", *args], input=stdin, capture_output=True, text=True, env=env, timeout=60
    )


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    folder = tmp_path / "cache"
    folder.mkdir()
    return folder


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "t", "--root", "ROOT", "--max-steps", "0"], ["--max-steps must be 1 or more, not 0"]),
        (["run", "t", "--root", "ROOT", "--max-steps", "-1"], ["--max-steps must be 1 or more, not -1"]),
        (["run", "   ", "--root", "ROOT"], ["the task is empty"]),
        (["run", "t", "--root", ""], ["--root is empty"]),
        (["run", "t", "--root", "ROOT/nope"], ["is not a directory"]),
        (["run", "t", "--root", "ROOT", "--ctx", "0"], ["--ctx must be at least 256"]),
        (["run", "t", "--root", "ROOT", "--transcript", "ROOT"], ["cannot write a transcript", "it is a directory"]),
        (["run", "t", "--root", "ROOT", "--transcript", "ROOT/no/t.jsonl"], ["cannot write a transcript"]),
        (["run", "t", "--root", "ROOT", "--transcript", "ROOT/link.jsonl"], ["it is a symlink"]),
        (["run", "t", "--root", "ROOT", "--model", "gpt-17"], ["unknown model 'gpt-17'"]),
        (["run", "t", "--root", "ROOT", "--backend", "openai"], ["the openai backend needs a model (--model)"]),
        (["run", "t", "--root", "ROOT", "--max-steps", "many"], ["argument --max-steps: invalid int value"]),
        (["chat", "--root", "ROOT", "--max-steps", "0"], ["--max-steps must be 1 or more, not 0"]),
        (["run", "t", "--root", "ROOT", "--policies", "grounding"], ["--policies: unknown policy 'grounding'"]),
    ],
)
def test_each_bad_input_is_one_line_and_exit_two_before_any_model(
    tmp_path: Path, cache: Path, args: list[str], expected: list[str]
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "link.jsonl").symlink_to(tmp_path / "victim.txt")
    done = shapeloop(*[a.replace("ROOT", str(root)) for a in args], cache=cache)
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert all(line.startswith("shapeloop: error: ") for line in lines), done.stderr
    problem = next(line for line in lines if expected[0] in line)
    assert all(part in problem for part in expected), done.stderr
    assert "Traceback" not in done.stderr
    assert list(cache.iterdir()) == []  # nothing was pulled
    assert not (tmp_path / "victim.txt").exists()


def test_several_bad_inputs_are_each_named(tmp_path: Path, cache: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text("[]")
    args = ["run", "", "--root", str(tmp_path / "nope"), "--max-steps", "0", "--script", str(script)]
    done = shapeloop(*args, cache=cache)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 3, done.stderr


def test_chat_appends_each_task_to_the_transcript(tmp_path: Path, cache: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([answer_step("one"), answer_step("two")]))
    transcript = tmp_path / "chat.jsonl"
    done = shapeloop(
        "chat", "--root", str(tmp_path), "--script", str(script), "--transcript", str(transcript),
        cache=cache, stdin="first\nsecond\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    entries = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert [e["text"] for e in entries if e.get("kind") == "answer"] == ["one", "two"]


def test_text_that_is_not_utf8_reaches_neither_a_traceback_nor_broken_json(tmp_path: Path, cache: Path) -> None:
    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.txt"), "wb") as handle:
        handle.write(b"x")
    script = tmp_path / "script.json"
    steps = [
        '{"reason": "r", "action": "tool", "tool": "list_files", "args": {}, "answer": ""}',
        answer_step("listed \ud800 \x1b]0;owned\x07"),
    ]
    script.write_text(json.dumps(steps))
    done = shapeloop("run", "t", "--root", str(tmp_path), "--script", str(script), "--json", cache=cache)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["answer"] == "listed \\ud800 \x1b]0;owned\x07"
    assert any("caf\\xe9.txt" in str(e.get("text")) for e in data["events"])
    shown = shapeloop("run", "t", "--root", str(tmp_path), "--script", str(script), cache=cache)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "listed \\ud800 ]0;owned\n"
    assert "\x1b]" not in shown.stderr


def test_model_text_in_stop_reasons_reaches_the_terminal_without_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from helpers import tool_step
    from shapeloop.cli import main

    script = tmp_path / "script.json"
    script.write_text(json.dumps([tool_step("read_file", path="\x1b]0;owned\x07x.txt")] * 3))
    assert main(["run", "t", "--root", str(tmp_path), "--script", str(script)]) == 1
    err = capsys.readouterr().err
    assert "shapeloop: stuck: read_file" in err and "owned" in err
    assert "\x1b" not in err and "\x07" not in err


def test_chat_says_when_the_window_cannot_hold_the_tools(tmp_path: Path, cache: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([answer_step("one")]))
    args = ["chat", "--root", str(tmp_path), "--script", str(script), "--ctx", "300"]
    done = shapeloop(*args, cache=cache, stdin="hi\n")
    assert done.returncode == 2, done.stderr
    assert "--ctx 300: the workspace tools' documentation alone takes" in done.stderr
    assert "Traceback" not in done.stderr
