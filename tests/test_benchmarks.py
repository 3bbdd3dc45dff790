"""The benchmark suite: its acceptors, its extraction cases, its policies specs, the fit floor's
calibration, and a --quick run on a real model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from benchmarks import extraction
from benchmarks.__main__ import all_tasks, choose, splits
from benchmarks.suite import run_task, summarise
from benchmarks.tasks import QUICK, TASKS, WORKSPACE, number, says, yes_no

from helpers import answer_step, call_step, lean_answer, need_model, tool_step
from overlap_server import serving
from shapeloop import Capabilities, Request, ScriptedBrain, UsageError, policies

ROOT = Path(__file__).resolve().parent.parent


def test_the_suite_has_120_tasks_of_every_kind_and_a_quick_slice() -> None:
    tasks = all_tasks()
    assert len(tasks) >= 120 and len({t.name for t in tasks}) == len(tasks)
    kinds = {t.kind for t in tasks}
    assert kinds == {"read", "find", "count", "compare", "follow", "write", "escape", "no_tool",
                     "call", "choose", "nested", "irrelevant", "multi"}  # fmt: skip
    assert set(QUICK) <= {t.name for t in TASKS}
    assert {t.kind for t in choose(True, "all")} >= {"read", "call", "irrelevant", "multi"}


def test_tune_and_test_halves_split_every_kind_evenly_and_do_not_overlap() -> None:
    tasks = all_tasks()
    halves = splits(tasks)
    assert set(halves.values()) == {"tune", "test"}
    tune, test = choose(False, "tune"), choose(False, "test")
    assert not {t.name for t in tune} & {t.name for t in test} and len(tune) + len(test) == len(tasks)
    for kind in {t.kind for t in tasks}:
        counts = [sum(1 for t in half if t.kind == kind) for half in (tune, test)]
        assert abs(counts[0] - counts[1]) <= 1, (kind, counts)


def test_checkers_match_whole_words_and_whole_numbers_never_substrings() -> None:
    no = yes_no("no")
    assert not no("It is snowing in Oslo.", WORKSPACE)  # the old substring check passed this
    assert not says("no")("It is snowing in Oslo.", WORKSPACE)
    assert no("No, they name different cities.", WORKSPACE) and not no("Yes, no doubt.", WORKSPACE)
    assert not number(23)("1234", WORKSPACE) and not number(3)("3.2.1", WORKSPACE) and number(10)("10.0", WORKSPACE)
    assert not says("3.2")("Version 3.2.1", WORKSPACE) and says("3.2.1")("Version 3.2.1.", WORKSPACE)
    assert says("ines")("Inés Alvarez", WORKSPACE) and not says("ines")("Ineson", WORKSPACE)


def test_a_find_task_s_path_is_found_only_where_no_other_file_is_named() -> None:
    port = next(t for t in TASKS if t.name == "find-port").check
    assert port("It is config/settings.ini.", WORKSPACE) and port("settings.ini", WORKSPACE)
    listing = ("ERROR: there is no file 'notes/server_port.txt'; the workspace has: animals.txt, "
               "config/settings.ini, log/app.log, readme.md")  # fmt: skip
    assert not port(listing, WORKSPACE), "a listing of every file (a tool's error) names the file by chance"
    assert not port("log/app.log", WORKSPACE) and not port("settings.ini.bak", WORKSPACE)


def test_acceptors_accept_right_answers_and_refuse_wrong_ones() -> None:
    assert number(709000)("About 709,000 people.", WORKSPACE) and not number(709000)("709 people", WORKSPACE)
    assert says("teal")("The colour is TEAL.", WORKSPACE) and not says("teal")("red", WORKSPACE)
    right = {"colour": "It names teal.", "count-todo": "3 lines", "bigger-city": "Oslo is bigger", "sum-csv": "10"}
    for task in TASKS:
        if task.name in right:
            assert task.check(right[task.name], WORKSPACE), task.name
            assert not task.check("I do not know", WORKSPACE), task.name


def test_the_fixture_workspace_holds_what_the_tasks_ask_about() -> None:
    assert "teal" in (WORKSPACE / "colour.txt").read_text()
    assert (WORKSPACE / "notes" / "pointer.txt").read_text().strip().endswith("data/secret.txt")
    assert len((WORKSPACE / "notes" / "todo.txt").read_text().splitlines()) == 3


def test_our_extractor_reads_every_constructed_case_and_first_to_last_does_not() -> None:
    cases = extraction.constructed()
    ours = [extraction.ours(reply) == expected for _, reply, expected in cases]
    naive = [extraction.naive(reply) == expected for _, reply, expected in cases]
    assert all(ours), [name for (name, _, _), ok in zip(cases, ours, strict=True) if not ok]
    assert sum(naive) < len(cases) / 2


@pytest.mark.live
def test_quick_run_writes_complete_well_formed_results(tmp_path: Path) -> None:
    need_model("smollm2-135m")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "bench [" in done.stderr  # the progress bar
    for name in ("suite", "schemas", "required", "extraction", "repeats"):
        data = json.loads((tmp_path / f"{name}.json").read_text())
        assert data["date"] and data["machine"]["cores"] and data["shapeloop"]
        assert data["models"][0]["name"] == "smollm2-135m" and len(data["models"][0]["sha256"]) == 64
    suite = json.loads((tmp_path / "suite.json").read_text())
    quick = choose(True, "all")
    # the loop in constrained and prose mode, and the raw baseline, on every task of the slice
    assert len(suite["records"]) == 3 * len(quick) and suite["seconds"] > 0
    assert {r["mode"] for r in suite["records"]} == {"constrained", "prose", "raw"}
    assert {r["split"] for r in suite["records"]} <= {"tune", "test"}
    for summary in suite["summaries"]:
        assert 0 <= summary["success_rate"] <= 1 and summary["stops"]
        if summary["split"] == "all":
            assert sum(summary["stops"].values()) == len(quick)
    firsts = [r for r in suite["records"] if r["family"] == "functions"]
    assert firsts and all(isinstance(r["first_ok"], bool) for r in firsts)
    for record in suite["records"]:
        assert {"task", "kind", "split", "success", "first_ok", "stop", "steps", "tokens", "prompt_tokens",
                "seconds", "tool_calls"} <= set(record)  # fmt: skip
    assert json.loads((tmp_path / "extraction.json").read_text())["methods"]["shapeloop"]["constructed_cases"] >= 10
    readme = (tmp_path / "suite.md").read_text()
    assert "## Task suite" in readme and "smollm2-135m" in readme and "raw first call" in readme


def test_runs_made_apart_merge_into_the_run_made_at_once(tmp_path: Path) -> None:
    """Split the committed run by model, merge the parts back: the same records and figures."""
    from benchmarks.merge import merge

    whole = json.loads((ROOT / "measurements" / "suite.json").read_text())
    names = sorted({r["model"] for r in whole["records"]})
    parts = []
    for name in names:
        part = {**whole, "records": [r for r in whole["records"] if r["model"] == name]}
        parts.append(tmp_path / f"{name}.json")
        parts[-1].write_text(json.dumps(part))
    merged = json.loads(merge(parts, tmp_path / "out").read_text())
    whole = json.loads(merge([ROOT / "measurements" / "suite.json"], tmp_path / "whole").read_text())
    assert len(merged["records"]) == len(whole["records"])
    key = lambda s: (s["model"], s["split"], s["method"])  # noqa: E731
    assert sorted(merged["summaries"], key=key) == sorted(whole["summaries"], key=key)
    assert (tmp_path / "out" / "suite.md").is_file()
    other = {**whole, "settings": {**whole["settings"], "max_steps": 99}}
    parts[-1].write_text(json.dumps(other))
    with pytest.raises(SystemExit, match="other settings"):
        merge(parts, tmp_path / "refused")


def test_a_merge_judges_answers_again_by_the_checks_as_they_are_now() -> None:
    """A mended checker reaches runs made before it; what a run did (its stop, its calls) stands."""
    from benchmarks.__main__ import all_tasks
    from benchmarks.merge import rejudged

    tasks = {t.name: t for t in all_tasks()}
    base = {"model": "m", "schema": "per_tool", "split": "test", "stop": "answered", "tool_calls": 1}
    right = {**base, "mode": "constrained", "task": "flight-status", "answer": "It is not on time today.",
             "success": False}  # fmt: skip
    assert rejudged(right, tasks["flight-status"])["success"] is True
    assert rejudged({**right, "stop": "max_steps"}, tasks["flight-status"])["success"] is False
    assert rejudged({**right, "answer": "It is not delayed."}, tasks["flight-status"])["success"] is False
    # a call on a task that needs none is a failure, whatever the answer; a raw answer does only those tasks
    capital = {**base, "mode": "constrained", "task": "capital", "answer": "Paris.", "success": True}
    assert rejudged(capital, tasks["capital"])["success"] is False
    assert rejudged({**capital, "tool_calls": 0}, tasks["capital"])["success"] is True
    assert rejudged({**right, "mode": "raw", "tool_calls": 0}, tasks["flight-status"])["success"] is False
    assert rejudged({**capital, "mode": "raw", "tool_calls": 0}, tasks["capital"])["success"] is True
    # a write task's check reads the files its run wrote: its record stands
    wrote = {**base, "mode": "constrained", "task": "append-todo", "answer": "", "success": True}
    assert rejudged(wrote, tasks["append-todo"]) == wrote


def test_the_committed_run_agrees_with_the_checks_as_they_are_now() -> None:
    """Every committed success is what the current checkers say of its answer: a checker changed
    without the figures judged again fails here."""
    from benchmarks.__main__ import all_tasks
    from benchmarks.merge import rejudged

    tasks = {t.name: t for t in all_tasks()}
    suite = json.loads((ROOT / "measurements" / "suite.json").read_text())
    stale = [(r["model"], r["mode"], r["task"]) for r in suite["records"]
             if rejudged(r, tasks[r["task"]])["success"] != r["success"]]  # fmt: skip
    assert stale == []


def test_calibration_picks_a_fit_floor_halfway_between_the_fits_on_either_side() -> None:
    from benchmarks.calibrate import calibrate

    def record(kind: str, fit: float, first_step: str = "tool") -> dict[str, object]:
        return {"task": f"{kind}{fit}", "kind": kind, "first_step": first_step, "fit": fit}

    # 50 tool tasks with fits from -0.5 up; abstention tasks at -1.5, -0.9 (below every tool task),
    # -0.2 (among them), and 0.4, which answers by itself
    records = [record("call", -0.5 + i / 10) for i in range(50)]
    records += [record("irrelevant", -1.5), record("no_tool", -0.9), record("irrelevant", -0.2),
                record("irrelevant", 0.4, first_step="answer")]  # fmt: skip
    found = calibrate(records)  # type: ignore[arg-type]
    # -0.7 (halfway between -0.9 and -0.5) catches two at no cost; a floor one fit higher costs a tool
    # task and wins nothing, and the next win (-0.2) would cost four
    assert found["floor"] == -0.7 and found["abstention"] == 0.75 and found["cost"] == 0.0
    assert found["with_fit"] == len(records)
    row = next(r for r in found["table"] if r["floor"] == -0.45)
    assert row["lost"] == ["call-0.5"] and row["abstention"] == 0.75
    # no fit below the tool tasks: no floor is worth its cost
    assert calibrate([r for r in records if r["fit"] > -0.6])["floor"] is None  # type: ignore[index]


class _Scorer(ScriptedBrain):
    """A brain that scores every text alike (so the fit-floor policy measures each task, and every fit
    is 0) and, once the run has a result, answers; before, it reads colour.txt."""

    def __init__(self, floor: float = 0.5) -> None:
        calibration = (("fit_floor", floor), ("call_margin", -100.0))  # a margin every lean clears
        super().__init__(self._reply, capabilities=Capabilities(logprobs=True, margins=True, calibration=calibration))
        self.scored = 0

    def _reply(self, request: Request) -> str:
        # the benchmark runs the default step ({"calls"} or {"answer"}); a five-field schema gets its shape
        schema = request.schema or {}
        variants = [v["properties"] for v in schema.get("anyOf", [schema])]
        five = any("action" in v for v in variants)
        offered = {v["action"].get("const", "tool") if "action" in v else "tool" if "calls" in v else "answer"
                   for v in variants}  # fmt: skip
        if request.results or "tool" not in offered:  # a step shaped to answer only gets an answer
            return answer_step("It names teal.") if five else lean_answer("It names teal.")
        return tool_step("read_file", path="colour.txt") if five else call_step("read_file", path="colour.txt")

    def continuation_logprobs(self, prefix: str, continuation: str) -> list[float]:
        self.scored += 1
        return [-1.0, -1.0]


def test_calibration_measures_each_tasks_fit_as_the_policy_does_on_a_plain_first_step() -> None:
    from benchmarks.calibrate import fit_of, measure

    tasks = [t for t in all_tasks() if t.name in ("colour", "capital")]
    brain = _Scorer()
    measured = measure(brain, tasks)
    assert [(r["task"], r["first_step"], r["fit"]) for r in measured] == [("colour", "tool", 0.0),
                                                                         ("capital", "tool", 0.0)]  # fmt: skip
    assert brain.scored > 0
    with pytest.raises(UsageError, match="cannot score text"):
        fit_of(ScriptedBrain([]), tasks[0])


@pytest.mark.parametrize("spec", [*policies.available(), "default,fit-floor", "plain,fit-floor,-fit-floor"])
def test_every_policies_spec_runs_a_task_and_its_record_says_which_ran(spec: str) -> None:
    """A benchmark variant is a preset plus or minus a policy: each one the library names runs here."""
    task = next(t for t in all_tasks() if t.name == "colour")
    record = run_task(_Scorer(), task, mode="constrained", max_steps=3, policies=spec)
    assert record["policies"] == spec
    # a ModelPreset stands for the brain's own preset, and this brain declares none
    assert record["policies_ran"] == [p.name for p in policies.resolve(spec) if not isinstance(p, policies.ModelPreset)]
    assert set(record["interventions"]) <= set(record["policies_ran"])
    assert record["stop"] == "answered" and record["success"], record


def test_a_task_runs_with_the_step_shape_asked_for_and_its_record_says_which() -> None:
    task = next(t for t in all_tasks() if t.name == "colour")
    calls, five = _Scorer(), _Scorer()
    record = run_task(calls, task, mode="constrained", max_steps=3, policies="plain")
    assert record["step"] == "calls" and record["success"]
    assert "calls" in json.dumps(calls.asked[0].schema) and "action" not in json.dumps(calls.asked[0].schema)
    record = run_task(five, task, mode="constrained", max_steps=3, policies="plain", batch=False)
    assert record["step"] == "five-field" and record["success"], record
    assert "action" in json.dumps(five.asked[0].schema)


def test_a_policy_that_intervenes_is_counted_in_the_record_and_the_summary() -> None:
    task = next(t for t in all_tasks() if t.name == "colour")
    record = run_task(_Scorer(floor=0.5), task, mode="constrained", max_steps=3, policies="plain,fit-floor")
    # every fit is 0, below the floor: the first step may only answer
    assert record["interventions"] == {"fit-floor": 1} and record["first_intervention"].startswith("fit-floor.")
    assert record["first_step"] == "answer" and record["tool_calls"] == 0
    plain = run_task(_Scorer(), task, mode="constrained", max_steps=3, policies="plain")
    assert plain["interventions"] == {} and plain["first_intervention"] is None and plain["first_step"] == "tool"
    summary = summarise([{**record, "split": "tune"}, {**plain, "split": "tune"}])
    assert summary["interventions"] == {"fit-floor": 1} and summary["median_seconds"] is not None


def test_the_benchmark_takes_policies_records_them_and_refuses_an_unknown_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.__main__ import main

    with serving(hold=1) as server:
        main(["--quick", "--backend", "openai", "--base-url", server.url, "--model", "fake", "--no-raw",
              "--policies", "plain", "--task", "colour", "--task", "capital", "--out", str(tmp_path)])  # fmt: skip
    suite = json.loads((tmp_path / "suite.json").read_text())
    assert suite["settings"]["policies"] == "plain" and "variant" not in suite["settings"]
    assert suite["records"] and {r["policies"] for r in suite["records"]} == {"plain"}
    assert "policies plain" in (tmp_path / "suite.md").read_text()
    with pytest.raises(SystemExit):
        main(["--policies", "default,no-such-policy", "--out", str(tmp_path)])
    assert "unknown policy 'no-such-policy'" in capsys.readouterr().err


def test_runs_with_other_policies_do_not_merge(tmp_path: Path) -> None:
    from benchmarks.merge import merge

    whole = json.loads((ROOT / "measurements" / "suite.json").read_text())
    parts = []
    for index, spec in enumerate(("plain", "default,fit-floor")):
        parts.append(tmp_path / f"{index}.json")
        parts[-1].write_text(json.dumps({**whole, "settings": {**whole["settings"], "policies": spec}}))
    with pytest.raises(SystemExit, match=r"other settings \(policies\)"):
        merge(parts, tmp_path / "refused")


def test_the_catalogue_fit_floors_are_the_calibrated_ones() -> None:
    from benchmarks.calibrate import catalogue_floors

    from shapeloop import models

    calibration = json.loads((ROOT / "measurements" / "calibration.json").read_text())
    floors = catalogue_floors(calibration["results"])
    for name, entry in models.CATALOGUE.items():
        assert entry.fit_floor == floors.get(name), name


def _two_tune_items_each(tmp_path: Path) -> tuple[list[Any], Path]:
    """The first two tune items of live_irrelevance and of parallel, and an empty records folder for
    qwen2.5-coder-0.5b; skipped, loudly, without the pinned BFCL wheel."""
    from benchmarks import bfcl_data

    try:
        bfcl_data.load()
    except Exception as exc:  # noqa: BLE001 - no wheel, no BFCL items: said aloud
        pytest.skip(f"SKIPPED LOUDLY: the pinned bfcl-eval wheel could not be fetched or imported: {exc!r}")
    tune = bfcl_data.sample("tune")
    chosen = [i for c in ("live_irrelevance", "parallel") for i in bfcl_data.items(c) if i.index in tune[c][:2]]
    folder = tmp_path / "qwen2.5-coder-0.5b"
    folder.mkdir()
    return chosen, folder


def test_bfcl_calibration_reads_the_plain_loops_first_steps_and_says_what_a_floor_changes(tmp_path: Path) -> None:
    """Fits measured on BFCL's tune items beside the plain loop's records; a floor above every fit
    turns each first step into an answer: right on irrelevance, wrong elsewhere, item by item."""
    from benchmarks.calibrate import BFCL_ABSTAIN, again, bfcl_measure, verdicts

    chosen, folder = _two_tune_items_each(tmp_path)
    lines = [{"id": i.id, "category": i.category, "index": i.index, "column": "plain", "model": "qwen2.5-coder-0.5b",
              "backend": "llamacpp", "valid": n % 2 == 0, "stop": "called" if n % 2 == 0 else "answered"}
             for n, i in enumerate(chosen)]  # fmt: skip
    (folder / "plain.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    brain = _Scorer()
    measured = bfcl_measure(brain, "qwen2.5-coder-0.5b", tmp_path)
    assert [(r["task"], r["fit"], r["first_step"]) for r in measured] == [
        (line["id"], 0.0, "tool" if line["valid"] else "answer") for line in lines
    ]
    assert brain.scored > 0
    assert verdicts(measured, None) == {"items": 4, "gained": [], "lost": [], "net": 0}
    wrong_irrelevance = [r["task"] for r in measured if r["kind"] in BFCL_ABSTAIN and not r["valid"]]
    right_elsewhere = [r["task"] for r in measured if r["kind"] not in BFCL_ABSTAIN and r["valid"]]
    assert verdicts(measured, 0.5) == {"items": 4, "gained": wrong_irrelevance, "lost": right_elsewhere, "net": 0}
    assert wrong_irrelevance and right_elsewhere
    result = again({"model": "m", "split": "bfcl-tune", "measured": measured})
    assert result["floor"] is None and result["verdicts"]["net"] == 0  # every fit is alike: no floor pays
    with pytest.raises(UsageError, match="no plain-loop records"):
        bfcl_measure(brain, "qwen2.5-coder-1.5b", tmp_path)


def test_a_lean_to_answering_is_read_off_the_plain_loops_decision_gaps(tmp_path: Path) -> None:
    """A bias above a first step's gap turns it into an answer: the bias that pays is chosen by the
    floor's rule from the records alone; records that measured no gap are refused."""
    from benchmarks.calibrate import again, bias_measure

    chosen, folder = _two_tune_items_each(tmp_path)
    # irrelevance items called (wrong) with small gaps; parallel items called right with large ones
    gaps = {"live_irrelevance": [0.5, 1.0], "parallel": [3.0, 4.0]}
    lines = [{"id": i.id, "category": i.category, "index": i.index, "column": "plain", "model": "qwen2.5-coder-0.5b",
              "backend": "llamacpp", "valid": i.category == "parallel", "stop": "called",
              "decision_gap": gaps[i.category][n % 2]} for n, i in enumerate(chosen)]  # fmt: skip
    (folder / "plain.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    measured = bias_measure("qwen2.5-coder-0.5b", tmp_path)
    assert sorted(r["gap"] for r in measured) == [0.5, 1.0, 3.0, 4.0]
    result = again({"model": "m", "split": "bfcl-tune", "calibrates": "answer_bias", "measured": measured})
    assert result["floor"] == 2.0, "halfway between the gaps either side: both irrelevance items answer, no call lost"
    assert result["verdicts"]["net"] == 2 and result["verdicts"]["lost"] == []
    for line in lines:
        line["decision_gap"] = None
    (folder / "plain.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(UsageError, match="measured its decision gap"):
        bias_measure("qwen2.5-coder-0.5b", tmp_path)


def test_a_multi_turn_entry_s_block_is_read_off_its_index_and_other_items_have_none() -> None:
    from benchmarks.policies import bfcl_block

    assert [bfcl_block(f"multi_turn_base_{n}") for n in (0, 49, 50, 108, 150, 199)] == [
        "file system", "file system", "vehicle control", "trading bot", "travel booking", "travel booking",
    ]  # fmt: skip
    assert bfcl_block("live_simple_3-1-0") is None and bfcl_block("multi_turn_base_x") is None


def test_a_rebuilt_policies_file_keeps_an_earlier_round_s_rows_the_records_no_longer_measure() -> None:
    from benchmarks.policies import LARGE, SMALL, earlier_rows

    before = {"date": "2026-12-05", "policies": [
        {"policy": "lookup-hint", SMALL: {"net": 0}, LARGE: {"net": 3}},
        {"policy": "recovery", SMALL: {"net": 0}, LARGE: None},
        {"policy": "tool-cut", SMALL: None, LARGE: None},
    ], "earlier": [{"policy": "older", SMALL: {"net": 1}, "built": "2026-11-30"}]}  # fmt: skip
    built = {"policies": [{"policy": "recovery", SMALL: {"net": 2}, LARGE: None}, {"policy": "lookup-hint"}]}
    kept = earlier_rows(before, built)
    assert [(row["policy"], row["built"]) for row in kept] == [("lookup-hint", "2026-12-05"), ("older", "2026-11-30")]


def test_a_veto_keeps_a_policy_that_wins_on_bfcl_out_with_its_reason() -> None:
    from benchmarks import bfcl_data
    from benchmarks.policies import LARGE, SMALL, build

    tune = bfcl_data.sample("tune")["irrelevance"][:4]

    def record(model: str, column: str, index: int) -> dict[str, object]:
        return {"model": model, "column": column, "category": "irrelevance", "index": index,
                "id": f"irrelevance_{index}", "valid": column == "x", "seconds": 2.0,
                "interventions": {"x": 1} if column == "x" else {}}  # fmt: skip

    records = [record(model, column, i) for model in (SMALL, LARGE) for column in ("plain", "x") for i in tune]
    free = next(r for r in build(records)["policies"] if r["policy"] == "x")
    assert free["joins_default"] and free[SMALL]["net"] == 4 and free[LARGE]["net"] == 4
    held = next(r for r in build(records, vetoes={"x": "it lost on the suite"})["policies"] if r["policy"] == "x")
    assert not held["joins_default"] and held["why"].endswith("1.5b; kept out: it lost on the suite")
    unmeasured = next(r for r in build([])["policies"] if r["policy"] == "abstain")
    assert unmeasured[SMALL] is None and "not measured" in unmeasured["why"]


def test_a_policy_whose_multi_turn_entries_cost_too_much_for_either_model_stays_out() -> None:
    from benchmarks import bfcl_data
    from benchmarks.policies import LARGE, MAX_ENTRY_COST, SMALL, build

    single = bfcl_data.sample("tune")["irrelevance"][:4]
    entries = bfcl_data.sample("tune")["multi_turn_base"][:2]

    def record(model: str, column: str, category: str, index: int, seconds: float) -> dict[str, object]:
        return {"model": model, "column": column, "category": category, "index": index,
                "id": f"{category}_{index}", "valid": column == "x" and category == "irrelevance",
                "seconds": seconds, "interventions": {"x": 1} if column == "x" else {}}  # fmt: skip

    def built(slow: float) -> dict[str, object]:
        records = [record(model, column, "irrelevance", i, 2.0)
                   for model in (SMALL, LARGE) for column in ("plain", "x") for i in single]  # fmt: skip
        records += [record(model, column, "multi_turn_base", i, 100 * (slow if (model, column) == (LARGE, "x") else 1))
                    for model in (SMALL, LARGE) for column in ("plain", "x") for i in entries]  # fmt: skip
        return next(r for r in build(records)["policies"] if r["policy"] == "x")

    cheap = built(MAX_ENTRY_COST)
    assert cheap["joins_default"] and cheap[SMALL]["seconds_ratio"] == 1.0, "entries are not first steps"
    slow = built(2.2)
    assert not slow["joins_default"] and slow[LARGE]["entry_seconds_ratio"] == 2.2
    assert f"2.2 times the plain loop's seconds for {LARGE}" in slow["why"]


def test_a_policy_that_wins_for_one_model_only_is_that_models_preset_once_its_entries_are_measured() -> None:
    from benchmarks import bfcl_data
    from benchmarks.policies import LARGE, MAX_ENTRY_COST, SMALL, build

    single = bfcl_data.sample("tune")["irrelevance"][:4]
    entries = bfcl_data.sample("tune")["multi_turn_base"][:2]

    def record(model: str, column: str, category: str, index: int, seconds: float) -> dict[str, object]:
        wins = column == "x" and category == "irrelevance"
        return {"model": model, "column": column, "category": category, "index": index,
                "id": f"{category}_{index}", "valid": wins if model == SMALL else column == "plain",
                "seconds": seconds, "interventions": {"x": 1} if column == "x" else {}}  # fmt: skip

    def built(entry_cost: float | None) -> dict[str, object]:
        records = [record(model, column, "irrelevance", i, 2.0)
                   for model in (SMALL, LARGE) for column in ("plain", "x") for i in single]  # fmt: skip
        if entry_cost is not None:
            records += [record(SMALL, column, "multi_turn_base", i, 100 * (entry_cost if column == "x" else 1))
                        for column in ("plain", "x") for i in entries]  # fmt: skip
        whole = build(records)
        row = next(r for r in whole["policies"] if r["policy"] == "x")
        assert not row["joins_default"], "it loses every item for the 1.5B model"
        assert whole["presets"][SMALL] == (["x"] if SMALL in row["preset_for"] else [])
        assert whole["presets"][LARGE] == [] and "net -4" in row["preset_why"][LARGE]
        return row

    assert built(MAX_ENTRY_COST)["preset_for"] == [SMALL]
    unmeasured = built(None)
    assert unmeasured["preset_for"] == [] and "not yet run on its multi-turn" in unmeasured["preset_why"][SMALL]
    costly = built(MAX_ENTRY_COST + 0.1)
    assert costly["preset_for"] == []
    assert f"1.6 times the plain loop's seconds for {SMALL}" in costly["preset_why"][SMALL]


def test_the_catalogue_presets_are_the_policies_the_measurements_put_on_for_each_model() -> None:
    from benchmarks.policies import LARGE, OUT, SMALL

    from shapeloop.models import CATALOGUE

    decided = json.loads(OUT.read_text(encoding="utf-8"))["presets"]
    assert {m: list(CATALOGUE[m].preset) for m in (SMALL, LARGE)} == decided, "rerun python -m benchmarks.policies"
