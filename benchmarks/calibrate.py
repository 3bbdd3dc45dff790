"""Calibrate the FitFloor policy's floor (``shapeloop.policies.fit_floor``) for a model on tune data, and
measure what a lean to answering (a bias on the step's choice, which the library no longer has)
would do.

    python -m benchmarks.calibrate --bfcl --model qwen2.5-coder-0.5b   # BFCL's tune sample (the catalogue's)
    python -m benchmarks.calibrate --model qwen2.5-coder-0.5b          # the suite's tune half
    python -m benchmarks.calibrate --again                             # chosen again from the stored fits
    python -m benchmarks.calibrate --bias --model qwen2.5-coder-0.5b   # a lean to answering, from BFCL's records

With ``--bias``, the measure is the plain loop's first step on BFCL's single-turn tune items: how far
it leaned to calling where it chose between a call and an answer (its ``decision_gap``, in logits,
which the embedded backend records). A bias ``b`` added to answering turns every first step whose
gap is below ``b`` into an answer (greedy decoding: the rest of the step is unchanged), so the same
rule as the floor's picks it (the "floor" of the result is the bias), read off the records without
loading a model. This is the evidence that the backend's old ``answer_bias`` lost at every bias.

With ``--bfcl``, the first steps are the plain loop's on BFCL's single-turn tune items, read from its
records (``measurements/bfcl/<model>/plain.jsonl``, made by ``python -m benchmarks.bfcl --sample tune
--columns plain``): the items where no offered function fits are the irrelevance categories', and the
result also says what the floor would do to BFCL's own verdicts, item by item (an irrelevance item
the plain loop called on becomes right; any other item it had right becomes wrong). A BFCL result
replaces the suite's for the catalogue: the floor is the one of the data nobody here wrote.

Without it:

Each task of the tune half runs its first step through the plain loop (``policies="plain"``: nothing
turns a call into an answer), and its fit is measured as the policy measures it,
``task_fit(brain.continuation_logprobs, task, tools)``: how much the best offered tool and the task
make each other more likely. A floor ``f`` turns the first step of every task whose fit is below ``f``
into an answer, so the first step's outcome under any floor can be read off one run's records.

Of the floors that cost at most two points of the tasks that need a tool, the chosen one abstains
most; it sits halfway between the fits on either side of it, and where several abstain as much, the
lowest is taken. The measured fits and first steps are kept with the result, so the choice can be
made again (``--again``) without the model. The floor reads the model's own numbers, not words, so
it is the same rule in any language; it is each model's own scale, so a model is calibrated alone.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from benchmarks import bfcl_data
from benchmarks.bfcl_report import RECORDS, latest, read_records, slug
from benchmarks.common import MEASUREMENTS, make_brain, write
from benchmarks.suite import ABSTAIN_KINDS, CONTEXT, AnyTask, Progress, run_task, tools_for
from benchmarks.tasks import WORKSPACE
from shapeloop import Brain, UsageError
from shapeloop.policies.base import LogProbs, LogProbsMany
from shapeloop.policies.fit_floor import fit_terms, task_fit

MAX_COST = 0.02  # the bar: at most two points on the tasks that need a tool
BFCL_ABSTAIN = frozenset({"irrelevance", "live_irrelevance"})  # BFCL's categories where no function fits
BFCL_SPLIT = "bfcl-tune"
KEPT = ("task", "kind", "first_step", "fit")  # what a measured record keeps for the choice


def fit_of(brain: Brain, task: AnyTask) -> float | None:
    """The task's fit to its best offered tool, as the FitFloor policy measures it.

    Raises:
        UsageError: the brain cannot score text (``Capabilities.logprobs``).
    """
    tools = tools_for(task, WORKSPACE)  # made, not run: the fixture is not touched
    return _fit(brain, task.prompt, [(t.name, t.description) for t in tools])


def bfcl_fit_of(brain: Brain, item: bfcl_data.Item) -> float | None:
    """A BFCL item's fit, as the policy measures it: its last user message against its functions.

    Raises:
        UsageError: the brain cannot score text (``Capabilities.logprobs``).
    """
    return _fit(brain, *_bfcl_request(item))


def bfcl_terms_of(brain: Brain, item: bfcl_data.Item) -> list[tuple[float, float | None]]:
    """Each of a BFCL item's functions' two fit terms (``fit_terms``), every function scored.

    Raises:
        UsageError: the brain cannot score text (``Capabilities.logprobs``).
    """
    scores, many = _scorers(brain)
    return fit_terms(scores, *_bfcl_request(item), many=many)


def _bfcl_request(item: bfcl_data.Item) -> tuple[str, list[tuple[str, str]]]:
    """A BFCL item's last user message and its functions, ``(name, description)``."""
    return item.turns[0][-1]["content"], [(f["name"], f.get("description", "")) for f in item.functions]


def _fit(brain: Brain, task: str, tools: Sequence[tuple[str, str]]) -> float | None:
    scores, many = _scorers(brain)
    return task_fit(scores, task, tools, many=many)


def _scorers(brain: Brain) -> tuple[LogProbs, LogProbsMany | None]:
    """The brain's text scorers (one continuation, several after one prefix), refused where it has none."""
    scores = getattr(brain, "continuation_logprobs", None)
    if not brain.capabilities.logprobs or scores is None:
        raise UsageError(f"{type(brain).__name__} cannot score text: the fit floor is calibrated on a brain "
                         "with Capabilities(logprobs=True), such as the embedded backend")  # fmt: skip
    return scores, getattr(brain, "continuations_logprobs", None)


def measure(brain: Brain, tasks: Sequence[AnyTask], progress: Progress | None = None) -> list[dict[str, Any]]:
    """Each task's first step through the plain loop, and its fit."""
    records = []
    for task in tasks:
        record = run_task(brain, task, mode="constrained", max_steps=1, policies="plain")
        records.append({**{key: record[key] for key in KEPT if key in record}, "fit": fit_of(brain, task)})
        if progress:
            progress.step(task.name)
    return records


def bfcl_measure(brain: Brain, model: str, records_folder: Path = RECORDS, *,
                 show: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """Each single-turn tune item the plain loop has a record of: its first step there, BFCL's verdict,
    and its fit, measured as the policy measures it (the item's last user message, its functions)."""
    plain = {r["id"]: r for r in latest(read_records(records_folder / slug(model)))
             if r["column"] == "plain" and r["model"] == model}  # fmt: skip
    wanted = {c: set(ids) for c, ids in bfcl_data.sample("tune").items() if c != "multi_turn_base"}
    chosen = [i for c, ids in wanted.items() for i in bfcl_data.items(c) if i.index in ids and i.id in plain]
    if not chosen:
        raise UsageError(f"no plain-loop records of BFCL's tune items for {model} in {records_folder}: run "
                         f"python -m benchmarks.bfcl --sample tune --columns plain --model {model} first")  # fmt: skip
    measured = []
    progress = Progress(len(chosen), label=f"fits {model}") if show else None
    for item in chosen:
        fit = bfcl_fit_of(brain, item)
        record = plain[item.id]
        measured.append({"task": item.id, "kind": item.category, "fit": fit, "valid": bool(record["valid"]),
                         "first_step": "tool" if record["stop"] == "called" else "answer"})  # fmt: skip
        if progress:
            progress.step(item.id)
    return measured


def bias_measure(model: str, records_folder: Path = RECORDS) -> list[dict[str, Any]]:
    """Each single-turn tune item the plain loop has a record of, with how far its first step leaned
    to calling (``decision_gap``: the calling logit minus the answering one, where the embedded
    backend chose): no model is loaded, the gaps are in the records."""
    plain = {r["id"]: r for r in latest(read_records(records_folder / slug(model)))
             if r["column"] == "plain" and r["model"] == model}  # fmt: skip
    wanted = {c: set(ids) for c, ids in bfcl_data.sample("tune").items() if c != "multi_turn_base"}
    chosen = [i for c, ids in wanted.items() for i in bfcl_data.items(c) if i.index in ids and i.id in plain]
    measured = [{"task": i.id, "kind": i.category, "gap": plain[i.id].get("decision_gap"),
                 "valid": bool(plain[i.id]["valid"]),
                 "first_step": "tool" if plain[i.id]["stop"] == "called" else "answer"} for i in chosen]  # fmt: skip
    if not any(r["gap"] is not None for r in measured):
        raise UsageError(f"no plain-loop record of BFCL's tune items for {model} in {records_folder} measured its "
                         "decision gap: run python -m benchmarks.bfcl --sample tune --columns plain --model "
                         f"{model} on the embedded backend first")  # fmt: skip
    return measured


def verdicts(records: Sequence[dict[str, Any]], floor: float | None, key: str = "fit") -> dict[str, Any]:
    """BFCL's verdicts with ``floor`` against the plain loop's: an item turned into an answer is right
    on irrelevance and wrong elsewhere; the items gained and lost."""
    gained = [r["task"] for r in records if unfit(r, floor, key) and r["kind"] in BFCL_ABSTAIN and not r["valid"]]
    lost = [r["task"] for r in records if unfit(r, floor, key) and r["kind"] not in BFCL_ABSTAIN and r["valid"]]
    return {"items": len(records), "gained": gained, "lost": lost, "net": len(gained) - len(lost)}


def unfit(record: dict[str, Any], floor: float | None, key: str = "fit") -> bool:
    """Whether the record's measure (``key``: its fit, or its lean to calling) is below ``floor``."""
    value = record.get(key)
    return floor is not None and value is not None and value < floor


def outcomes(
    records: Sequence[dict[str, Any]],
    floor: float | None,
    abstain_kinds: Collection[str] = ABSTAIN_KINDS,
    key: str = "fit",
) -> dict[str, Any]:
    """How the first steps of these records would go with ``floor``: the share of tasks where no tool
    fits that answer, and the tasks that need a tool whose call becomes an answer."""
    abstain = [r for r in records if r["kind"] in abstain_kinds]
    needs_tool = [r for r in records if r["kind"] not in abstain_kinds and r["kind"] != "escape"]

    def answers(r: dict[str, Any]) -> bool:
        return r["first_step"] == "answer" or unfit(r, floor, key)

    lost = [r["task"] for r in needs_tool if r["first_step"] == "tool" and answers(r)]
    return {
        "floor": floor,
        "abstention": round(sum(answers(r) for r in abstain) / (len(abstain) or 1), 3),
        "tool_tasks_turned_to_answers": len(lost),
        "cost": round(len(lost) / (len(needs_tool) or 1), 3),
        "lost": lost,
    }


def floors(records: Sequence[dict[str, Any]], key: str = "fit") -> list[float | None]:
    """No floor, and a floor halfway between each two neighbouring values of ``key``."""
    fits = sorted({r[key] for r in records if r.get(key) is not None})
    return [None, *(round((low + high) / 2, 3) for low, high in itertools.pairwise(fits))]


def calibrate(
    records: Sequence[dict[str, Any]], abstain_kinds: Collection[str] = ABSTAIN_KINDS, key: str = "fit"
) -> dict[str, Any]:
    """The floor that abstains most within ``MAX_COST`` (the lowest of those that abstain as much);
    ``key`` names the measure it is a floor of (``fit``; ``gap`` for the answer bias)."""
    table = [outcomes(records, floor, abstain_kinds, key) for floor in floors(records, key)]
    kept = [row for row in table if row["cost"] <= MAX_COST]
    chosen = max(kept, key=lambda row: (row["abstention"], -(row["floor"] if row["floor"] is not None else -1e9)))
    return {"floor": chosen["floor"], "max_cost": MAX_COST, "abstention": chosen["abstention"],
            "cost": chosen["cost"], "table": [row for row in table if row["cost"] <= 2 * MAX_COST],
            "records": len(records), f"with_{key}": sum(r.get(key) is not None for r in records)}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calibrate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--model", action="append", default=[], help="a catalogue model to calibrate (repeatable)")
    parser.add_argument("--again", action="store_true", help="choose again from the fits calibration.json keeps")
    parser.add_argument("--bfcl", action="store_true", help="on BFCL's tune items (the plain loop's records)")
    parser.add_argument("--bias", action="store_true", help="a lean to answering, from the plain loop's BFCL records")
    parser.add_argument("--out", type=Path, default=MEASUREMENTS, help="folder of calibration.json")
    parser.add_argument("--threads", type=int, help="the embedded backend's CPU threads (default: every core)")
    args = parser.parse_args(argv)
    if not args.model and not args.again:
        parser.error("name a model (--model NAME) or choose again from the stored fits (--again)")
    earlier = args.out / "calibration.json"
    kept: list[dict[str, Any]] = json.loads(earlier.read_text())["results"] if earlier.exists() else []
    results = []
    if args.again:
        results += [again(r) for r in kept if r.get("measured")]
    if args.model and args.bias:
        for name in args.model:
            results.append(again({"model": name, "split": BFCL_SPLIT, "calibrates": "answer_bias",
                                  "policies": "plain", "measured": bias_measure(name),
                                  "source": f"measurements/bfcl/{slug(name)}/plain.jsonl (first steps and their "
                                  "decision gaps)"}))  # fmt: skip
    elif args.model and args.bfcl:
        for name in args.model:
            brain = make_brain("llamacpp", name, None, 8192, args.threads)
            try:
                measured = bfcl_measure(brain, name, show=True)
            finally:
                brain.close()
            results.append(again({"model": name, "split": BFCL_SPLIT, "policies": "plain", "measured": measured,
                                  "source": f"measurements/bfcl/{slug(name)}/plain.jsonl (first steps), "
                                  "fits measured by python -m benchmarks.calibrate --bfcl"}))  # fmt: skip
    elif args.model:
        from benchmarks.__main__ import choose

        tasks = choose(False, "tune")
        progress = Progress(len(tasks) * len(args.model), label="calibrate")
        for name in args.model:
            brain = make_brain("llamacpp", name, None, CONTEXT, args.threads)
            measured = measure(brain, tasks, progress)
            results.append({"model": name, "split": "tune", "policies": "plain", **calibrate(measured),
                            "measured": measured})  # fmt: skip
    for found in results:
        print(found["model"], _calibrates(found), found["floor"], "abstention", found["abstention"],
              "cost", found["cost"])  # fmt: skip
    # a model calibrated again on the same data replaces its earlier result; the others stay
    mine = {(r["model"], r.get("split"), _calibrates(r)) for r in results}
    merged = [r for r in kept if (r["model"], r.get("split"), _calibrates(r)) not in mine] + results
    write("calibration", {"benchmark": "calibration", "results": merged}, args.out)


def again(result: dict[str, Any]) -> dict[str, Any]:
    """A result's floor chosen from its measured fits (BFCL's: with the verdicts it would change)."""
    if result.get("split") != BFCL_SPLIT:
        return {**result, **calibrate(result["measured"])}
    key = "gap" if _calibrates(result) == "answer_bias" else "fit"
    chosen = calibrate(result["measured"], BFCL_ABSTAIN, key)
    return {**result, **chosen, "verdicts": verdicts(result["measured"], chosen["floor"], key)}


def _calibrates(result: dict[str, Any]) -> str:
    """What a result calibrates: ``fit_floor`` (the results before the answer bias say nothing) or ``answer_bias``."""
    return str(result.get("calibrates", "fit_floor"))


def catalogue_floors(results: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """The floor the catalogue keeps for each model: BFCL's where the model has one, else the suite's
    (a lean to answering's result is not a floor)."""
    floors: dict[str, float | None] = {}
    for result in sorted(results, key=lambda r: r.get("split") == BFCL_SPLIT):
        if _calibrates(result) == "fit_floor":
            floors[result["model"]] = result.get("floor")
    return floors


if __name__ == "__main__":
    main()
