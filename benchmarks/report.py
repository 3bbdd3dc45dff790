"""measurements/suite.md: the current tables in plain Markdown, and a PNG chart of task success by
model and mode, written from the JSON files the benchmarks leave in ``measurements/``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _load(folder: Path, name: str) -> dict[str, Any] | None:
    path = folder / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def write(folder: Path) -> Path:
    """Write ``suite.md`` (and ``success.png`` when matplotlib is installed) in ``folder``."""
    parts = ["# Measurements", "", "Written by `python -m benchmarks` (and `python -m benchmarks.decoding`); "
             "every figure below comes from the JSON files beside this page, which also hold the raw records, "
             "the date, the machine and each model's sha256.", ""]  # fmt: skip
    suite = _load(folder, "suite")
    if suite:
        parts += _suite(folder, suite)
    schemas = _load(folder, "schemas")
    if schemas:
        rows = [[s["model"], s["schema"], f"{s['success_rate']:.0%}", f"{s['wrong_tool_rate']:.1%}",
                 f"{s['bad_argument_rate']:.1%}"] for s in schemas["summaries"]]  # fmt: skip
        parts += ["## Per-tool schema vs flat schema (tool tasks, constrained)", "",
                  _table(["model", "schema", "success", "wrong tool", "bad arguments"], rows), ""]  # fmt: skip
    required = _load(folder, "required")
    if required:
        rows = [[r["model"], name, s["tool_steps"], s["verbless"], f"{s['verbless_rate_of_tool_steps']:.0%}"]
                for r in required["results"] for name, s in r["summary"].items()]  # fmt: skip
        parts += ["## Required vs optional fields (first step of each tool task)", "",
                  _table(["model", "schema", "tool steps", "action with no tool", "rate"], rows), ""]  # fmt: skip
    extraction = _load(folder, "extraction")
    if extraction:
        rows = [[name, f"{m['constructed_correct']}/{m['constructed_cases']}",
                 f"{m['recorded_valid_step']}/{m['recorded_replies']}", m["throughput_mb_per_s"],
                 m.get("hard_case_mb_per_s", "-"), m.get("worst_case_mb_per_s", "-")]
                for name, m in extraction["methods"].items()]  # fmt: skip
        parts += ["## Extraction", "", _table(["method", "hard cases right", "recorded prose replies read",
                                               "MB/s", "MB/s, 18 KB hard case", "MB/s, slowest 200 KB input"],
                                              rows), ""]  # fmt: skip
    repeats = _load(folder, "repeats")
    if repeats:
        rows = [[r["model"], name, s["runs"], s["mean_steps"], ", ".join(f"{k} {v}" for k, v in s["stops"].items()),
                 s["stuck_stops_naming_a_call_with_its_count"]]
                for r in repeats["results"] for name, s in r["summary"].items()]  # fmt: skip
        parts += ["## Repeat detection", "", _table(["model", "setting", "runs", "mean steps", "stops",
                                                     "stuck stops naming the call"], rows), ""]  # fmt: skip
    decoding = _load(folder, "decoding")
    if decoding:
        rows = []
        for r in decoding["results"]:
            s = r["speed"]["summary"]
            rows.append([r["model"]["name"], s["free"]["median_tokens_per_second"],
                         s["llama.cpp-grammar"]["median_seconds"], s["llama.cpp-grammar"]["median_tokens_per_second"],
                         s["llguidance"]["median_seconds"], s["llguidance"]["median_tokens_per_second"],
                         s["llguidance"]["median_decode_calls"], s["llguidance"]["median_tokens"],
                         r["speed"]["fast_seconds_over_grammar"], r["speed"]["fast_effective_rate_over_free"],
                         r["cache"]["reused"]["median_evaluated_per_step"],
                         r["cache"]["not_reused"]["median_evaluated_per_step"]])  # fmt: skip
        parts += ["## Decoding (embedded backend)", "", _table(
            ["model", "free tok/s", "grammar s/step", "grammar tok/s", "fast s/step", "fast effective tok/s",
             "fast decode calls/step", "step tokens", "fast / grammar time", "fast rate / free rate",
             "prompt tokens evaluated per step (cache reused)", "(cache not reused)"], rows), ""]  # fmt: skip
    parts += typed_section(folder)
    out = folder / "suite.md"
    out.write_text("\n".join(parts))
    return out


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _suite(folder: Path, suite: dict[str, Any]) -> list[str]:
    """The headline table (loop vs raw baseline, per half), the kinds, and how runs ended."""
    settings = suite.get("settings", {})
    title = f"## Task suite ({suite['tasks']} tasks; run took {suite['seconds'] / 60:.0f} min"
    if "policies" in settings:
        title += f"; policies {settings['policies']})"
    else:  # a run made before the policies, when a variant patched the loop
        title += f"; variant {settings['variant']})" if settings.get("variant", "shipped") != "shipped" else ")"
    parts = [
        title,
        "",
        "Loop = `run_agent`, constrained. Raw = the same model asked once, no loop, one constrained "
        "call with every tool's JSON in the prompt (it cannot see a result, so it can only finish tasks that "
        "need no tool). First call: the right tool and arguments at step 1 on function-calling tasks. "
        "Abstention: no tool called on tasks where none fits or none is needed.",
        "",
    ]
    summaries = suite["summaries"]
    models = list(dict.fromkeys(s["model"] for s in summaries))
    for split in ("test", "tune"):
        rows = []
        for model in models:
            mine = {s["method"]: s for s in summaries if s["model"] == model and s["split"] == split}
            loop, raw = mine.get("constrained"), mine.get("raw")
            if loop is None:
                continue
            rows.append([model, loop["tasks"], _pct(loop["success_rate"]), _pct(raw and raw["success_rate"]),
                         _pct(loop["first_call_rate"]), _pct(raw and raw["first_call_rate"]),
                         _pct(loop["abstention_rate"]), _pct(raw and raw["abstention_rate"]),
                         loop["median_prompt_tokens"], loop["max_prompt_tokens"], loop["mean_steps"],
                         loop["mean_seconds"]])  # fmt: skip
        if rows:
            parts += [f"### {split.capitalize()} half", "", _table(
                ["model", "tasks", "loop success", "raw success", "loop first call", "raw first call",
                 "loop abstention", "raw abstention", "prompt tokens (median)", "prompt tokens (max)",
                 "mean steps", "s / task"], rows), ""]  # fmt: skip
    parts += _kinds(summaries, models)
    rows = [[s["model"], s["split"], s["method"], ", ".join(f"{k} {v}" for k, v in sorted(s["stops"].items())),
             _pct(s["valid_step_rate"]), s["no_tool_tasks_that_called_a_tool"],
             ", ".join(f"{k} {v}" for k, v in sorted(s.get("interventions", {}).items())) or "-"]
            for s in summaries if s["split"] != "all"]  # fmt: skip
    parts += ["### How runs ended", "", _table(["model", "half", "method", "stops", "valid steps",
                                                "abstention tasks with a tool call", "policy interventions"],
                                               rows), ""]  # fmt: skip
    if _chart(folder, suite):
        parts += ["![task success by model, loop vs raw baseline](success.png)", ""]
    return parts


def _kinds(summaries: list[dict[str, Any]], models: list[str]) -> list[str]:
    rows = []
    for model in models:
        mine = {s["method"]: s for s in summaries if s["model"] == model and s["split"] == "test"}
        loop, raw = mine.get("constrained"), mine.get("raw") or {}
        if loop is None:
            continue
        for kind, rate in loop["success_by_kind"].items():
            first = loop["first_call_by_kind"].get(kind)
            raw_first = raw.get("first_call_by_kind", {}).get(kind)
            rows.append([model, kind, _pct(rate), _pct(raw.get("success_by_kind", {}).get(kind)), _pct(first),
                         _pct(raw_first)])  # fmt: skip
    if not rows:
        return []
    return [
        "### By kind (test half)",
        "",
        _table(["model", "kind", "loop success", "raw success", "loop first step right", "raw first step right"], rows),
        "",
    ]


def _chart(folder: Path, suite: dict[str, Any]) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    split = "test" if any(s["split"] == "test" for s in suite["summaries"]) else "tune"
    summaries = [s for s in suite["summaries"] if s["split"] == split]
    if not summaries:
        return False
    models = list(dict.fromkeys(s["model"] for s in summaries))
    modes = list(dict.fromkeys(s["method"] for s in summaries))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        rates = [
            next((s["success_rate"] for s in summaries if s["model"] == m and s["method"] == mode), 0) for m in models
        ]
        ax.bar([x + i * width for x in range(len(models))], [r * 100 for r in rates], width, label=mode)
    ax.set_xticks([x + width * (len(modes) - 1) / 2 for x in range(len(models))], models)
    ax.set_ylabel("tasks succeeded (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"Task suite, {split} half: success by model, loop vs raw baseline")
    ax.legend()
    fig.tight_layout()
    fig.savefig(folder / "success.png", dpi=100)
    plt.close(fig)
    return True


def typed_section(folder: Path) -> list[str]:
    """The lines for ``typed.json`` (``python -m benchmarks.typed``): typed records and batched calls."""
    typed = _load(folder, "typed")
    if not typed:
        return []
    header = ["model", "setting", "tasks", "success", "valid answer", "mean steps", "mean tool calls",
              "steps with 2+ calls", "rejected answers", "mean tokens", "s / task"]  # fmt: skip
    parts = []
    for task_set, title in (("typed", "Typed answers: records extracted from a file (output_type=)"),
                            ("batch", "Batched calls: questions needing 2 to 4 independent reads")):  # fmt: skip
        rows = [[s["model"], s["config"], s["tasks"], f"{s['success_rate']:.0%}", f"{s['valid_rate']:.0%}",
                 s["mean_steps"], s["mean_tool_calls"], s["batch_steps"], s["rejected_answers"], s["mean_tokens"],
                 s["mean_seconds"]] for s in typed["summaries"] if s["set"] == task_set]  # fmt: skip
        if rows:
            parts += [f"## {title}", "", _table(header, rows), ""]
    return parts
