"""The typed-answer and batch benchmark: its checkers, its fixture files, and a quick live run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks import report, typed

from helpers import need_model

ROOT = Path(__file__).resolve().parent.parent


WRONG = {
    "order": ("status", "pending"), "contact": ("role", "designer"), "meeting": ("room", "B3"),
    "invoice": ("total", 400), "settings": ("tls", False), "shelf": ("books", []),
}  # fmt: skip


@pytest.mark.parametrize("task", typed.EXTRACTS, ids=lambda t: t.name)
def test_each_record_is_valid_checks_true_and_a_changed_field_checks_false(task: typed.Extract) -> None:
    assert task.check(task.output_type.model_validate(task.expected))
    key, value = WRONG[task.name]
    assert not task.check(task.output_type.model_validate({**task.expected, key: value}))
    assert not task.check(None)


def test_the_checker_ignores_case_spacing_and_list_order_only() -> None:
    shelf = next(t for t in typed.EXTRACTS if t.name == "shelf")
    books = list(reversed(shelf.expected["books"]))
    books[0] = {**books[0], "title": "  EMMA "}
    assert shelf.check(typed.Shelf.model_validate({"books": books}))
    assert not shelf.check(typed.Shelf.model_validate({"books": books[:2]}))


def test_the_fixture_files_hold_every_expected_value() -> None:
    def leaves(value: object) -> list[object]:
        if isinstance(value, dict):
            return [leaf for v in value.values() for leaf in leaves(v)]
        if isinstance(value, list):
            return [leaf for v in value for leaf in leaves(v)]
        return [value]

    for task in typed.EXTRACTS:
        path = next(word for word in task.prompt.split() if word.endswith(".txt"))
        text = (typed.WORKSPACE / path).read_text().casefold()
        for leaf in leaves(task.expected):
            shown = {True: "yes", False: "no"}.get(leaf, leaf) if isinstance(leaf, bool) else leaf
            assert str(shown).casefold() in text, (task.name, leaf)


@pytest.mark.parametrize(
    ("name", "right", "wrong"),
    [
        ("sum-sensors", "The sum is 42.", "The sum is 142, or 4.2."),
        ("paints", "Ochre and cobalt.", "Ochre."),
        ("biggest-town", "Brenna has the most.", "Brenna, then Aldby."),
        ("three-days", "Water the ferns, renew the parking permit, call the plumber.", "Water the ferns."),
        ("fewest-boxes", "Linden (95 boxes).", "Marsh"),
    ],
)
def test_question_checkers_accept_the_right_answer_and_refuse_a_wrong_one(name: str, right: str, wrong: str) -> None:
    question = next(q for q in typed.QUESTIONS if q.name == name)
    assert question.check(right) and not question.check(wrong)
    assert question.reads == question.prompt.count(".txt")


def test_merging_replaces_a_models_configuration_and_keeps_the_rest(tmp_path: Path) -> None:
    def record(model: str, task_set: str, success: bool) -> dict[str, object]:
        return {"model": model, "set": task_set, "config": "c", "success": success, "valid": True, "steps": 2,
                "tool_calls": 1, "batch_steps": 0, "rejected_answers": 0, "tokens": 10, "seconds": 1.0}  # fmt: skip

    old = {"records": [record("a", "typed", False), record("b", "typed", True)]}
    merged = typed.merge(old, [record("a", "typed", True)], {"a": {"name": "a"}})
    assert sorted((r["model"], r["success"]) for r in merged["records"]) == [("a", True), ("b", True)]
    (tmp_path / "typed.json").write_text(json.dumps(merged))
    lines = "\n".join(report.typed_section(tmp_path))
    assert "## Typed answers" in lines and "| a | c | 1 | 100% |" in lines


@pytest.mark.live
def test_quick_run_writes_records_and_summaries(tmp_path: Path) -> None:
    need_model("smollm2-135m")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.typed", "--quick", "--model", "smollm2-135m", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads((tmp_path / "typed.json").read_text())
    assert len(data["records"]) == 8 and data["machine"]["cores"]
    configs = {(s["set"], s["config"]) for s in data["summaries"]}
    assert configs == {("typed", "constrained"), ("typed", "prose"), ("batch", "batch"), ("batch", "one call a step")}
