"""Benchmarks at scale: ``--concurrency`` against a loopback server, and the Ray sweep on a local Ray
(``num_cpus=2``, never a remote address), whose JSON has the schema of a local run's."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from benchmarks import cluster
from benchmarks.__main__ import choose, main
from benchmarks.suite import run_suite

from helpers import need_model
from overlap_server import serving
from shapeloop import Capabilities, ScriptedBrain, UsageError
from shapeloop.backends.openai import OpenAIBrain

ROOT = Path(__file__).resolve().parent.parent
FILES = ("suite", "schemas", "required", "repeats", "extraction")
# maps whose keys are outcomes or policies, not fields
DATA_KEYED = {"stops", "success_by_kind", "first_call_by_kind", "interventions"}


def need_ray() -> None:
    if importlib.util.find_spec("ray") is None:
        pytest.skip("RAY TEST SKIPPED: ray is not installed: pip install '.[cluster]'")


def shape(value: Any, path: str = "", out: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """Every field path in a JSON value, with the types seen there (lists merged over their items; a
    null adds the path but no type, as a field that is null in one run may hold a number in another)."""
    out = {} if out is None else out
    types = out.setdefault(path, set())
    if isinstance(value, dict):
        types.add("object")
        if path.rsplit(".", 1)[-1] not in DATA_KEYED:
            for key, item in value.items():
                shape(item, f"{path}.{key}", out)
    elif isinstance(value, list):
        types.add("array")
        for item in value:
            shape(item, f"{path}[]", out)
    elif value is not None:
        types.add("number" if isinstance(value, int | float) and not isinstance(value, bool) else type(value).__name__)
    return out


def differences(mine: Any, theirs: Any) -> list[str]:
    """Fields one value has and the other lacks, and fields whose types cannot agree."""
    a, b = shape(mine), shape(theirs)
    out = [f"only in one: {path}" for path in sorted(a.keys() ^ b.keys())]
    return out + [f"{path}: {a[path]} vs {b[path]}" for path in sorted(a.keys() & b.keys())
                  if a[path] and b[path] and not a[path] & b[path]]  # fmt: skip


def assert_same_schema(local: Path, other: Path) -> None:
    for name in FILES:
        mine, theirs = (json.loads((folder / f"{name}.json").read_text()) for folder in (local, other))
        assert differences(mine, theirs) == [], name


def test_the_schema_check_sees_a_missing_or_retyped_field() -> None:
    record = {"records": [{"task": "a", "steps": 2, "tokens": None}], "stops": {"answered": 1}}
    assert differences(record, {"records": [{"task": "b", "steps": 3, "tokens": 5}], "stops": {"stuck": 1}}) == []
    assert differences(record, {"records": [{"task": "a", "steps": "2", "tokens": None}], "stops": {}}) == [
        ".records[].steps: {'number'} vs {'str'}"
    ]
    assert differences(record, {"records": [{"task": "a", "tokens": None}], "stops": {}}) == [
        "only in one: .records[].steps"
    ]


def test_concurrent_suite_gives_run_suites_records_in_its_order_with_requests_in_flight_together() -> None:
    tasks = choose(True, "all")
    with serving(hold=4) as server, OpenAIBrain("fake", base_url=server.url) as brain:
        at_once = cluster.suite_at_once(brain, tasks, mode="constrained", concurrency=4)
        assert server.most_in_flight == 4
    with serving(hold=1) as server, OpenAIBrain("fake", base_url=server.url) as brain:
        one_by_one = run_suite(brain, tasks, mode="constrained")
    assert [r["task"] for r in at_once] == [t.name for t in tasks]
    for fast, slow in zip(at_once, one_by_one, strict=True):
        assert {**fast, "seconds": 0} == {**slow, "seconds": 0}


def test_concurrency_refuses_a_brain_that_holds_one_model_and_says_to_use_a_server_or_ray() -> None:
    suite_runner, _ = cluster.runners(2)
    brain = ScriptedBrain([], capabilities=Capabilities(exclusive=True))
    with pytest.raises(UsageError, match=r"--concurrency needs a server.*--ray"):
        suite_runner(brain, choose(True, "all"), mode="constrained")
    assert cluster.runners(1) == (run_suite, cluster.run_raw_suite)
    with pytest.raises(UsageError, match="at least 1"):
        cluster.runners(0)


def test_the_sweep_plan_is_models_times_modes_times_tasks_in_a_local_runs_order() -> None:
    tasks = choose(True, "all")
    flat = [t for t in tasks if t.kind == "read"]
    sweep = cluster.Sweep(names=["a", "b"], backend="openai", base_url=None, policies="plain", tasks=tasks,
                          flat_tasks=flat, looping=flat[:1], extras=True, raw=True)  # fmt: skip
    items = cluster.plan(sweep)
    per_model = 3 * len(tasks) + len(flat) + 2
    assert len(items) == 2 * per_model and [i.index for i in items] == list(range(len(items)))
    first = items[:per_model]
    assert {i.model for i in first} == {"a"}
    assert [i.args[1:] for i in first[: len(tasks)]] == [("constrained", "per_tool", 8, "plain", True)] * len(tasks)
    five = cluster.plan(dataclasses.replace(sweep, batch=False))
    assert {i.args[-1] for i in five if i.method == "loop"} == {False}, "the step shape reaches every loop run"
    assert [i.method for i in first[-len(tasks) - 2 :]] == ["raw"] * len(tasks) + ["required", "repeats"]


def test_a_ray_sweep_of_quick_writes_the_same_json_schema_as_a_local_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    need_ray()
    with serving(hold=1) as server:
        base = ["--quick", "--backend", "openai", "--base-url", server.url, "--model", "fake"]
        main([*base, "--concurrency", "2", "--out", str(tmp_path / "local")])
    with serving(hold=2) as server:  # two workers: their first requests must be in flight together
        base = ["--quick", "--backend", "openai", "--base-url", server.url, "--model", "fake"]
        main([*base, "--ray", "--ray-cpus", "2", "--out", str(tmp_path / "ray")])
        assert server.most_in_flight == 2
    assert "bench [########################]" in capsys.readouterr().err  # one bar, filled, across the workers
    assert_same_schema(tmp_path / "local", tmp_path / "ray")
    local, spread = (json.loads((tmp_path / d / "suite.json").read_text()) for d in ("local", "ray"))
    assert [(r["task"], r["mode"]) for r in local["records"]] == [(r["task"], r["mode"]) for r in spread["records"]]
    assert spread["settings"]["ray"] == "" and local["settings"]["concurrency"] == 2


@pytest.mark.live
def test_a_ray_sweep_of_quick_on_a_real_model_matches_a_local_runs_schema(tmp_path: Path) -> None:
    need_model("smollm2-135m")
    need_ray()
    for folder, extra in (("local", []), ("ray", ["--ray", "--ray-cpus", "2"])):
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks", "--quick", "--out", str(tmp_path / folder), *extra],
            cwd=ROOT, capture_output=True, text=True, timeout=1200,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
    assert_same_schema(tmp_path / "local", tmp_path / "ray")


def test_the_scale_benchmark_turns_a_levels_runs_into_rates() -> None:
    from benchmarks import scale

    rows = [{"completion_tokens": 30, "prompt_tokens": 70, "steps": 2, "success": True},
            {"completion_tokens": 10, "prompt_tokens": 90, "steps": 3, "success": False}]  # fmt: skip
    measured = scale.level(2, 30.0, rows)
    assert measured["tasks_per_minute"] == 4.0 and measured["steps"] == 5 and measured["succeeded"] == 1
    assert measured["completion_tokens_per_second"] == 1.33 and measured["total_tokens_per_second"] == 6.67
