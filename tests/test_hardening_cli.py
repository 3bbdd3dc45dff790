"""Issue 35, the command line's row: one line for each bad input whatever extras are installed, and
the inputs checked before anything is created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shapeloop import cli


@pytest.fixture(params=["installed", "missing"])
def extras(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs twice: with the backends' extras as they are here, and with none installed."""
    if request.param == "missing":
        gone = {name: (f"shapeloop_no_such_module_{name}", extra) for name, (_, extra) in cli._EXTRAS.items()}
        monkeypatch.setattr(cli, "_EXTRAS", gone)
    return str(request.param)


def errors(capsys: pytest.CaptureFixture[str]) -> list[str]:
    lines = capsys.readouterr().err.splitlines()
    assert all(line.startswith("shapeloop: error: ") for line in lines), lines
    return lines


def test_an_empty_task_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], extras: str) -> None:
    assert cli.main(["run", "", "--root", str(tmp_path)]) == cli.EXIT_USAGE
    assert [line.split(": ", 2)[2][:17] for line in errors(capsys)] == ["the task is empty"]


@pytest.mark.parametrize("bad", ["folder", "missing-folder", "symlink"])
def test_a_bad_transcript_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extras: str, bad: str
) -> None:
    (tmp_path / "link").symlink_to(tmp_path / "victim")
    path = {"folder": tmp_path, "missing-folder": tmp_path / "no" / "t.jsonl", "symlink": tmp_path / "link"}[bad]
    assert cli.main(["run", "t", "--root", str(tmp_path), "--transcript", str(path)]) == cli.EXIT_USAGE
    (line,) = errors(capsys)
    assert "cannot write a transcript" in line
    assert not (tmp_path / "victim").exists()


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ('{"$ref": "#"}', "$ref '#' points at the schema itself"),
        ('{"$ref": "#/$defs/gone"}', "dangles"),
        ('{"type": "string", "pattern": "(a)\\\\1"}', "needs a backtracking engine"),
        ('{"type": "number", "default": NaN}', "NaN is not JSON"),
        ("{\n  bad json\n}", "is not JSON"),
    ],
)
def test_a_bad_output_schema_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extras: str, schema: str, words: str
) -> None:
    path = tmp_path / "schema.json"
    path.write_text(schema, encoding="utf-8")
    assert cli.main(["run", "t", "--root", str(tmp_path), "--output-schema", str(path)]) == cli.EXIT_USAGE
    (line,) = errors(capsys)
    assert words in line


def test_checking_the_transcript_creates_nothing_when_the_command_exits_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extras: str
) -> None:
    transcript = tmp_path / "run.jsonl"
    assert cli.main(["run", "", "--root", str(tmp_path), "--transcript", str(transcript)]) == cli.EXIT_USAGE
    assert len(errors(capsys)) == 1
    assert not transcript.exists()


def test_the_missing_extra_is_said_once_the_inputs_are_right(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "_EXTRAS", {"llamacpp": ("shapeloop_no_such_module", "local")})
    assert cli.main(["run", "t", "--root", str(tmp_path)]) == cli.EXIT_USAGE
    (line,) = errors(capsys)
    assert "needs the 'local' extra" in line


def test_good_inputs_still_run_and_write_the_transcript(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"reason": "r", "action": "answer", "tool": "", "args": {}, "answer": "hi"}]))
    transcript = tmp_path / "run.jsonl"
    code = cli.main(["run", "t", "--root", str(tmp_path), "--script", str(script), "--transcript", str(transcript)])
    assert code == cli.EXIT_OK and capsys.readouterr().out.strip() == "hi"
    assert transcript.read_text(encoding="utf-8").count("\n") > 2
