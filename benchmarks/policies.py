"""The policy ablation: each policy's BFCL column against the plain loop, paired on the same items,
and the decisions by the rules (:data:`RULE`: the default for every model; :data:`PRESET_RULE`: on
for one model alone, the catalogue's ``preset``); writes ``measurements/policies.json`` from the
BFCL records.

    python -m benchmarks.bfcl --sample tune --columns raw,plain --policies fit-floor --resume
    python -m benchmarks.policies                 # measurements/policies.json from measurements/bfcl/

A policy's column is any column of the records that is not ``raw``, ``plain``, ``default`` or
``native`` (``--policies fit-floor`` writes the column ``fit-floor``). Only the tune sample counts
(the report categories never choose anything), only items both columns ran through the same backend
with the same multi-turn adapter (``adapter`` in a record: a column measured before the adapter
changed is paired with the plain loop's records of its own version), and only items the policy acted
on count as gained or lost (where it never acted, the run is the plain loop's, and a verdict that
differs is the backend's noise: the embedded backend evaluates a prompt prefix from its cache in
other batches, which can flip a greedy choice; those items are listed apart). Seconds compare only
on items whose two runs found the prompt as cached (``seconds_items``): a column run right after raw
finds raw's prompt in the cache, one run alone or with ``--cold`` does not. The file's ``probes``
(one-off first-step experiments, written by hand with their scripts' description) are kept from
the file as it was, and so are the rows of policies the records no longer measure (``earlier``: an
earlier round's tune sample, its records moved aside), each with the date it was built.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks import bfcl_data
from benchmarks.bfcl_report import RECORDS, read_records
from benchmarks.bfcl_run import FIVE_FIELD
from benchmarks.common import MEASUREMENTS
from shapeloop.policies import StateLine, available

OUT = MEASUREMENTS / "policies.json"
SMALL, LARGE = "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"
BASE = "plain"
NOT_POLICIES = {"raw", "plain", "default", "native"}
MAX_COST = 1.3
MAX_ENTRY_COST = 1.5  # a multi-turn entry's median seconds against the plain loop's, for either model (issue 46)
MIN_NET, MAX_CATEGORY_LOSS = 3, 2  # gained less lost, at least; a category's loss, at most
RULE = (
    f"A policy joins the default when, paired on the same tune items, it gains at least {MIN_NET} items more than "
    f"it loses for qwen2.5-coder-0.5b, loses no tune category by more than {MAX_CATEGORY_LOSS} items, does not lose on "
    f"qwen2.5-coder-1.5b, its median seconds a first step are at most {MAX_COST} times the plain loop's, and a "
    f"multi-turn entry's at most {MAX_ENTRY_COST} times, for either model."
)
PRESET_RULE = (
    f"A policy that does not join the default is on for one model alone (the catalogue's preset) when, on that "
    f"model's paired tune items, it gains at least {MIN_NET} items more than it loses, loses no tune category by "
    f"more than {MAX_CATEGORY_LOSS} items, its median seconds a first step are at most {MAX_COST} times the plain "
    f"loop's, and it ran on the model's multi-turn tune entries at most {MAX_ENTRY_COST} times their seconds."
)


# what keeps a policy out of every preset although BFCL's tune figures are within the rule: evidence
# from outside BFCL (the project's suite, a live server), named so that it can be checked again
VETOES: Mapping[str, str] = {}


def tune_records(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of items in the tune sample (single-turn and multi-turn)."""
    chosen = {c: set(i) for c, i in bfcl_data.sample("tune").items()}
    return [r for r in records if r["index"] in chosen.get(r["category"], set())]


def every_version(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last record of each item in each column, for each multi-turn adapter version it ran at
    (:func:`~benchmarks.bfcl_report.latest` keeps only the newest, as the report should)."""
    by_key = {(r["model"], r.get("backend"), r["column"], r["id"], r.get("adapter")): r for r in records}
    return list(by_key.values())


def _newest(records: Sequence[dict[str, Any]], model: str, column: str) -> dict[str, dict[str, Any]]:
    """``column``'s records for ``model`` by item, each category at the newest adapter version it ran."""
    mine = [r for r in records if r["model"] == model and r["column"] == column]
    top: dict[str, int] = {}
    for r in mine:
        top[r["category"]] = max(top.get(r["category"], 0), r.get("adapter") or 0)
    return {r["id"]: r for r in mine if (r.get("adapter") or 0) == top[r["category"]]}


def _match(
    records: Sequence[dict[str, Any]], model: str, base: str, mine: Mapping[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """For each of ``mine``'s items, ``base``'s record through the same backend and at the same
    adapter version; ``raw``, which the adapter does not touch, matches any version."""
    return {
        r["id"]: r
        for r in records
        if r["model"] == model and r["column"] == base and r["id"] in mine
        and r.get("backend") == mine[r["id"]].get("backend")
        and (base == "raw" or r.get("adapter") == mine[r["id"]].get("adapter"))
    }  # fmt: skip


def paired(records: Sequence[dict[str, Any]], model: str, column: str, base: str = BASE) -> dict[str, Any] | None:
    """``column`` against ``base`` for ``model`` on the items both ran (at the same adapter version):
    the items gained and lost (all and per category) and the median seconds of each; None where they
    share no item. Only an item the policy acted on can be gained or lost: one where it never acted
    and the verdicts still differ is listed apart (``differs_without_acting``), as the backend's noise."""
    mine = _newest(records, model, column)
    theirs = _match(records, model, base, mine)
    both = sorted(mine.keys() & theirs.keys())
    if not both:
        return None
    # where the policy never acted it changed nothing: a verdict that differs there is the backend's
    # own noise (a prefix evaluated from the prompt cache in other batches can flip a greedy choice)
    # (the plain loop against raw is not a policy: every difference counts)
    acted = {i for i in both if column == BASE or sum((mine[i].get("interventions") or {}).values()) > 0}
    differs = [i for i in both if bool(mine[i]["valid"]) != bool(theirs[i]["valid"])]
    gained = [i for i in differs if i in acted and mine[i]["valid"]]
    lost = [i for i in differs if i in acted and not mine[i]["valid"]]
    categories: dict[str, dict[str, int]] = {}
    for ident in both:
        row = categories.setdefault(mine[ident]["category"], {"items": 0, "gained": 0, "lost": 0, column: 0, base: 0})
        row["items"] += 1
        row["gained"] += ident in gained
        row["lost"] += ident in lost
        row[column] += bool(mine[ident]["valid"])
        row[base] += bool(theirs[ident]["valid"])
    blocks: dict[str, dict[str, int]] = {}
    for ident in both:
        if (block := bfcl_block(ident)) is not None:
            row = blocks.setdefault(block, {"entries": 0, "gained": 0, "lost": 0, column: 0, base: 0})
            row["entries"] += 1
            row["gained"] += ident in gained
            row["lost"] += ident in lost
            row[column] += bool(mine[ident]["valid"])
            row[base] += bool(theirs[ident]["valid"])
    turns = {name: _turn_sums(records, both) for name, records in ((column, mine), (base, theirs))}
    # seconds compare only where both runs found the prompt as cached (a column run right after raw
    # finds raw's prompt in the cache, one run alone or --cold does not)
    timed = [i for i in both if _warm(mine[i]) == _warm(theirs[i]) and bfcl_block(i) is None]
    entries = [i for i in both if bfcl_block(i) is not None]  # a whole conversation: compared apart
    return {
        "model": model, "column": column, "base": base, "items": len(both),
        "interventions": sum(sum((mine[i].get("interventions") or {}).values()) for i in both),
        "acted_on": len(acted), "differs_without_acting": [i for i in differs if i not in acted],
        **({"turns": turns} if all(turns.values()) else {}),
        "right": {column: sum(bool(mine[i]["valid"]) for i in both), base: sum(bool(theirs[i]["valid"]) for i in both)},
        "gained": gained, "lost": lost, "net": len(gained) - len(lost), "by_category": categories,
        **({"by_block": blocks} if blocks else {}),
        "median_seconds": {column: _median(mine, timed), base: _median(theirs, timed)}, "seconds_items": len(timed),
        "seconds_ratio": _ratio(_median(mine, timed), _median(theirs, timed)),
        **({"entry_seconds": {column: _median(mine, entries), base: _median(theirs, entries)},
            "entry_seconds_ratio": _ratio(_median(mine, entries), _median(theirs, entries))} if entries else {}),
    }  # fmt: skip


BLOCKS = ((0, "file system"), (50, "vehicle control"), (100, "trading bot"), (150, "travel booking"))
"""BFCL's multi-turn entries come in blocks of 50, each on one set of API classes."""


def bfcl_block(ident: str) -> str | None:
    """The block of a ``multi_turn_base`` entry (``multi_turn_base_41``: the file system); None for
    any other item."""
    head, _, number = ident.rpartition("_")
    if head != "multi_turn_base" or not number.isdigit():
        return None
    return [name for start, name in BLOCKS if int(number) >= start][-1]


def _gain(measured: Mapping[str, Any], model: str) -> str | None:
    """Why one model's paired row gains too little (net, or a tune category lost), or None."""
    net, items = measured["net"], measured["items"]
    worst = max((row["lost"] - row["gained"] for row in measured["by_category"].values()), default=0)
    if net < MIN_NET:
        return f"net {net:+d} on {items} tune items for {model} ({MIN_NET} needed)"
    if worst > MAX_CATEGORY_LOSS:
        return f"loses a tune category by {worst} items for {model} ({MAX_CATEGORY_LOSS} at most)"
    return None


def _step_cost(measured: Mapping[str, Any]) -> str | None:
    """Where one model's first steps cost more than :data:`MAX_COST` times the plain loop's: how much."""
    ratio = measured.get("seconds_ratio")
    if ratio is not None and ratio > MAX_COST:
        return f"a first step takes {ratio} times the plain loop's seconds ({MAX_COST} at most)"
    return None


def _entry_cost(measured: Mapping[str, Any] | None) -> str | None:
    """Where one model's multi-turn entries cost more than :data:`MAX_ENTRY_COST` times the plain
    loop's: how much, and for which model."""
    entry = (measured or {}).get("entry_seconds_ratio")
    if measured is not None and entry is not None and entry > MAX_ENTRY_COST:
        return (f"a multi-turn entry takes {entry} times the plain loop's seconds for {measured['model']} "
                f"({MAX_ENTRY_COST} at most)")  # fmt: skip
    return None


def decide(small: Mapping[str, Any] | None, large: Mapping[str, Any] | None) -> tuple[bool, str]:
    """Whether a policy joins the default by :data:`RULE`, and why, in words."""
    if small is None:
        return False, "not measured on qwen2.5-coder-0.5b's tune items: it cannot join"
    if small.get("interventions") == 0:
        return False, f"never acted on its {small['items']} tune items for qwen2.5-coder-0.5b: not judged"
    if (short := _gain(small, SMALL)) is not None:
        return False, short
    for cost in (_step_cost(small), _entry_cost(small), _entry_cost(large)):
        if cost is not None:
            return False, f"net {small['net']:+d} on {small['items']} tune items for {SMALL}, but {cost}: opt-in"
    if large is None:
        return False, f"net {small['net']:+d} for qwen2.5-coder-0.5b, but not yet measured on qwen2.5-coder-1.5b"
    if large["net"] < 0:
        return False, f"net {small['net']:+d} for qwen2.5-coder-0.5b but {large['net']:+d} for qwen2.5-coder-1.5b"
    return True, f"net {small['net']:+d} for qwen2.5-coder-0.5b, {large['net']:+d} for qwen2.5-coder-1.5b"


def decide_preset(measured: Mapping[str, Any] | None, model: str) -> tuple[bool, str]:
    """Whether a policy is on for ``model`` alone by :data:`PRESET_RULE` (``measured``: its
    :func:`paired` row for that model), and why, in words: :func:`decide`'s bounds on one model. A
    preset changes every conversation the model holds, so a policy never run on the model's
    multi-turn entries is not judged."""
    if measured is None:
        return False, f"not measured on {model}'s tune items"
    if measured.get("interventions") == 0:
        return False, f"never acted on {model}'s {measured['items']} tune items"
    if (short := _gain(measured, model)) is not None:
        return False, short
    net, items = measured["net"], measured["items"]
    ratio, entry = measured.get("seconds_ratio"), measured.get("entry_seconds_ratio")
    if (cost := _step_cost(measured)) is not None:
        return False, f"net {net:+d} on {items} tune items for {model}, but {cost}"
    if entry is None:
        return False, f"net {net:+d} for {model}, but not yet run on its multi-turn tune entries"
    if (cost := _entry_cost(measured)) is not None:
        return False, f"net {net:+d} on {items} tune items for {model}, but {cost}"
    return True, f"net {net:+d} on {items} tune items for {model}; a first step {ratio}x, an entry {entry}x"


def build(records: Sequence[dict[str, Any]], probes: Any = None, vetoes: Mapping[str, str] = VETOES) -> dict[str, Any]:
    """The ablation record: each policy column's rows and decision (a policy in ``vetoes`` kept out
    with its reason), and the loop against raw."""
    tune = tune_records(records)
    # each shipped policy by its name, measured or not (StateLine needs the caller's function: no builder);
    # the five-field step is a step shape, not a policy, and ships as batch=False
    shipped = (set(available()) - {"plain", "default", "small-model"}) | {StateLine(str).name, FIVE_FIELD}
    columns = {policy_name(c): c for c in sorted({r["column"] for r in tune} - NOT_POLICIES)}
    rows = []
    for policy in sorted(columns.keys() | shipped):
        column = columns.get(policy, policy)
        small, large = paired(tune, SMALL, column), paired(tune, LARGE, column)
        joins, why = decide(small, large)
        presets = {} if joins else {model: decide_preset(measured, model)
                                    for model, measured in ((SMALL, small), (LARGE, large))}  # fmt: skip
        if policy in vetoes:
            joins, why = False, f"{why}; kept out: {vetoes[policy]}" if joins else why
            presets = {model: (False, f"{said}; kept out: {vetoes[policy]}" if on else said)
                       for model, (on, said) in presets.items()}  # fmt: skip
        rows.append({"policy": policy, "column": column, SMALL: small, LARGE: large, "joins_default": joins,
                     "why": why, "preset_for": [model for model, (on, _) in presets.items() if on],
                     "preset_why": {model: said for model, (_, said) in presets.items()},
                     "in_code": policy in shipped})  # fmt: skip
    loop_vs_raw = {model: paired(tune, model, BASE, base="raw") for model in (SMALL, LARGE)}
    return {
        "date": datetime.date.today().isoformat(), "rule": RULE, "preset_rule": PRESET_RULE, "base": BASE,
        "source": "measurements/bfcl/<model>/<column>.jsonl, the tune sample's items (python -m benchmarks.policies)",
        "default": [row["policy"] for row in rows if row["joins_default"]],
        "presets": {model: [row["policy"] for row in rows if model in row["preset_for"]] for model in (SMALL, LARGE)},
        "policies": rows, "plain_vs_raw": loop_vs_raw, "probes": probes,
    }  # fmt: skip


def _turn_sums(records: Mapping[str, dict[str, Any]], ids: Sequence[str]) -> dict[str, Any] | None:
    """Over multi-turn items: turns in all, turns whose state matched the truth's, turns whose first
    call named the truth's function, and the median prompt tokens a step; None for single-turn."""
    rows = [records[i] for i in ids if "turns_state" in records[i]]
    if not rows:
        return None
    per_step = [r["prompt_tokens_per_step"] for r in rows if r.get("prompt_tokens_per_step")]
    return {"entries": len(rows), "turns": sum(r["turns_total"] for r in rows),
            "state": sum(r["turns_state"] for r in rows), "first_function": sum(r["turns_first_tool"] for r in rows),
            "median_prompt_tokens_per_step": statistics.median(per_step) if per_step else None}  # fmt: skip


def policy_name(column: str) -> str:
    """A column's policy set as the row names it: ``plain,state-line`` is ``state-line`` (the plain
    loop is no policy at all)."""
    return ",".join(word for word in column.split(",") if word != BASE) or BASE


def _warm(record: Mapping[str, Any]) -> bool:
    """Whether a run found most of its prompt tokens in the prompt cache (a record without usage: yes)."""
    usage = record.get("usage") or {}
    prompt = usage.get("prompt_tokens") or 0
    return not prompt or (usage.get("cached_tokens") or 0) * 2 >= prompt


def _median(records: Mapping[str, dict[str, Any]], ids: Sequence[str]) -> float | None:
    seconds = [records[i]["seconds"] for i in ids if isinstance(records[i].get("seconds"), int | float)]
    return round(statistics.median(seconds), 2) if seconds else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def earlier_rows(before: Mapping[str, Any], built: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows of the file as it was for policies the records now measure on neither model (an
    earlier round's tune sample, whose records were moved aside): kept under ``earlier``, each with
    the date it was built. A row that the records measure again is replaced by the new measurement
    (its earlier figures stay in the file's history)."""
    now = {row["policy"] for row in built["policies"] if row.get(SMALL) or row.get(LARGE)}
    kept = [{**row, "built": row.get("built", before.get("date"))} for row in before.get("policies", [])
            if (row.get(SMALL) or row.get(LARGE)) and row["policy"] not in now]  # fmt: skip
    kept += [row for row in before.get("earlier", []) if row["policy"] not in now | {r["policy"] for r in kept}]
    return kept


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.policies", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--records", type=Path, default=RECORDS, help="the BFCL records (default measurements/bfcl)")
    parser.add_argument("--out", type=Path, default=OUT, help="where to write (default measurements/policies.json)")
    args = parser.parse_args(argv)
    before = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
    built = build(every_version(read_records(args.records)), before.get("probes"))
    built["earlier"] = earlier_rows(before, built)
    args.out.write_text(json.dumps(built, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for row in built["policies"]:
        where = "joins the default" if row["joins_default"] else "stays out" if row["in_code"] else "not in the code"
        print(f"{row['policy']}: {where} ({row['why']})")
        for model in row["preset_for"]:
            print(f"  on for {model} alone ({row['preset_why'][model]})")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
