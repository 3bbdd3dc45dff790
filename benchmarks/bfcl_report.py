"""BFCL's records: where they go, reading them back, and what is built from them (``bfcl.json``,
the table, the chart)."""

from __future__ import annotations

import contextlib
import json
import re
import statistics
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks import bfcl_data
from benchmarks.bfcl_data import BFCL_WHEEL, CATEGORIES
from benchmarks.common import MEASUREMENTS, model_info, write

RECORDS = MEASUREMENTS / "bfcl"


def slug(text: str) -> str:
    """A file-name-safe form of a model or column name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "+", text).strip("+") or "_"


def records_file(out: Path, model: str, column: str, shard: str | None) -> Path:
    """Where a column's records go: one file per model and column (and shard)."""
    suffix = f".{shard.replace('/', 'of')}" if shard else ""
    return out / slug(model) / f"{slug(column)}{suffix}.jsonl"


def read_records(folder: Path) -> Iterator[dict[str, Any]]:
    """Every record under ``folder``, file by file, in the order written; a torn last line is skipped."""
    for path in sorted(folder.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                yield json.loads(line)


def done_ids(out: Path, model: str, column: str) -> set[str]:
    """The items a model and column already have a record for, in any shard."""
    folder = out / slug(model)
    if not folder.is_dir():
        return set()
    return {r["id"] for r in read_records(folder) if r.get("column") == column and r.get("model") == model}


def latest(records: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last record of each (model, backend, column, item): a rerun replaces the earlier one."""
    by_key = {(r["model"], r.get("backend"), r["column"], r["id"]): r for r in records}
    return list(by_key.values())


def split_of(record: dict[str, Any], samples: dict[str, dict[str, set[int]]]) -> str:
    """``tune`` or ``report`` when the item is in that sample, else ``other``."""
    for name, chosen in samples.items():
        if record["index"] in chosen.get(record["category"], set()):
            return name
    return "other"


def summarise(records: Sequence[dict[str, Any]], samples: dict[str, dict[str, set[int]]]) -> list[dict[str, Any]]:
    """Accuracy, seconds and tokens per (model, backend, column, split, category)."""
    groups: dict[tuple[str, str, str, str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["model"], r.get("backend", ""), r["column"], split_of(r, samples), r["category"]),
                          []).append(r)  # fmt: skip
    out = []
    for (model, backend, column, split, category), rows in sorted(groups.items()):
        tokens = [r["usage"]["total_tokens"] for r in rows if r.get("usage")]
        strict = [r["strict_valid"] for r in rows if "strict_valid" in r]
        out.append({
            "model": model, "backend": backend, "column": column, "split": split, "category": category,
            "items": len(rows), "right": sum(bool(r["valid"]) for r in rows),
            "accuracy": round(sum(bool(r["valid"]) for r in rows) / len(rows), 4),
            "strict_accuracy": round(sum(strict) / len(strict), 4) if strict else None,
            "mean_seconds": round(sum(r["seconds"] for r in rows) / len(rows), 2),
            "mean_tokens": round(sum(tokens) / len(tokens), 1) if tokens else None,
            "ids": sorted((r["id"] for r in rows), key=lambda i: (len(i), i)),
            **_turns(rows),
        })  # fmt: skip
    return out


def _turns(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Multi-turn rows' turn counts: turns whose state matched the truth's (and doing nothing's),
    turns whose first call named the truth's function, the median prompt tokens a step, and the
    adapter versions the loop's rows were made with (raw's have none)."""
    checked = [r for r in rows if "turns_state" in r]
    if not checked:
        return {}
    per_step = [r["prompt_tokens_per_step"] for r in checked if r.get("prompt_tokens_per_step")]
    adapters = sorted({r.get("adapter", 1) for r in checked if r["column"] != "raw"})  # version 1 wrote none
    return {key: sum(r[key] for r in checked)
            for key in ("turns_total", "turns_state", "turns_state_nothing", "turns_first_tool")} | {
        "median_prompt_tokens_per_step": statistics.median(per_step) if per_step else None,
        **({"adapters": adapters} if adapters else {})}  # fmt: skip


def merge(folder: Path = RECORDS) -> Path:
    """Build ``<folder>.json`` beside ``folder`` (``measurements/bfcl.json`` for the default records)
    from every record under it: summaries per ``tune`` and ``report`` sample, and again per ``screen``
    (a part of the tune sample). Records kept elsewhere (``--out measurements/bfcl-x``) make their own
    ``bfcl-x.json``, never the headline one."""
    records = latest(read_records(folder))
    samples = {n: {c: set(v) for c, v in bfcl_data.sample(n).items()} for n in ("tune", "report")}
    tune_ids = {c: [bfcl_data.items(c)[i].id for i in v] for c, v in bfcl_data.sample("tune").items()}
    models = sorted({r["model"] for r in records})
    # the screen sample is part of the tune one: its figures again, on its items alone, so that
    # columns measured on the screen only are compared on the same items
    screen = {c: set(v) for c, v in bfcl_data.sample("screen").items()}
    on_screen = [r for r in records if r["index"] in screen.get(r["category"], set())]
    summaries = summarise(records, samples) + summarise(on_screen, {"screen": screen})
    chart([s for s in summaries if s["split"] != "screen"], folder.parent / f"{folder.name}.png")
    return write(folder.name, {
        "benchmark": "bfcl", "bfcl": {"package": BFCL_WHEEL.package, "version": BFCL_WHEEL.version,
                                      "sha256": BFCL_WHEEL.sha256},
        "models": [model_info(m) for m in models], "records_folder": str(folder.relative_to(MEASUREMENTS.parent))
        if folder.is_relative_to(MEASUREMENTS.parent) else str(folder),
        "tune_sample": tune_ids, "summaries": summaries,
    }, folder.parent)  # fmt: skip


def table(records: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """Accuracy per category and column, as a Markdown table."""
    categories = [c for c in CATEGORIES if any(r["category"] == c for r in records)]
    lines = ["| category | " + " | ".join(columns) + " |", "| --- |" + " --- |" * len(columns)]
    for category in categories:
        cells = []
        for column in columns:
            rows = [r for r in records if r["category"] == category and r["column"] == column]
            right = sum(bool(r["valid"]) for r in rows)
            cell = f"{100 * right / len(rows):.0f}% ({right}/{len(rows)}, {_mean(rows):.1f} s)" if rows else "-"
            strict = [r["strict_valid"] for r in rows if "strict_valid" in r]
            turns = _turns(rows)
            if turns:
                cell += (f"; state {turns['turns_state']}/{turns['turns_total']} turns (doing nothing "
                         f"{turns['turns_state_nothing']}), first function {turns['turns_first_tool']}")  # fmt: skip
            cells.append(cell + (f", strict {sum(strict)}/{len(strict)}" if strict else ""))
        lines.append(f"| {category} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _mean(rows: Sequence[dict[str, Any]]) -> float:
    return sum(float(r["seconds"]) for r in rows) / len(rows)


def chart(summaries: Sequence[dict[str, Any]], path: Path) -> bool:
    """Accuracy per category, a bar for each model and column, on the report sample (the held-out
    headline; else the tune sample, else what there is), the policy columns left out where the
    standing ones (raw, native, plain, default) ran; False where matplotlib is not installed or
    nothing was measured."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    split = next((n for n in ("report", "tune", "other") if any(s["split"] == n for s in summaries)), None)
    chosen = [s for s in summaries if s["split"] == split]
    standing = [s for s in chosen if s["column"] in {"raw", "native", "plain", "default"}]
    chosen = standing or chosen
    if not chosen:
        return False
    categories = [c for c in CATEGORIES if any(s["category"] == c for s in chosen)]
    bars = list(dict.fromkeys((s["model"], s["column"]) for s in chosen))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(categories) + 2), 4))
    width = 0.8 / len(bars)
    for i, (model, column) in enumerate(bars):
        values = [next((100 * s["accuracy"] for s in chosen if (s["model"], s["column"], s["category"])
                        == (model, column, c)), 0.0) for c in categories]  # fmt: skip
        ax.bar([x + i * width for x in range(len(categories))], values, width, label=f"{model} {column}")
    ax.set_xticks([x + width * (len(bars) - 1) / 2 for x in range(len(categories))], categories, rotation=30,
                  ha="right")  # fmt: skip
    ax.set_ylabel("right (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"BFCL through shapeloop, {split} sample: accuracy by category")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
