"""The BFCL benchmark's scorer is honest: BFCL's own answers score as BFCL says, doing nothing scores
nothing, and a perturbed call is wrong. No model: a scripted brain plays the model.

The pinned ``bfcl-eval`` wheel is fetched into the shapeloop cache once (pip, PyPI); where it cannot
be had, every test here skips and says why.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from benchmarks import bfcl, bfcl_data, bfcl_run
from benchmarks.bfcl_data import Item, Pinned
from benchmarks.bfcl_score import (
    Call,
    first_value_calls,
    oracle_calls,
    parse_call,
    score_multi,
    score_single,
    unanswerable,
)

from shapeloop import (
    BackendUnavailable,
    Capabilities,
    ChecksumMismatch,
    ContextOverflow,
    Reply,
    Request,
    ScriptedBrain,
    Tool,
    ToolCall,
)

BATCH = 8  # the most calls one batch step carries (shapeloop.step.MAX_BATCH)

# BFCL's possible answers fed back through the plain loop, as (right, items), per category. Every
# failure is explained in test_oracle_through_the_loop: the answer admits no call, or BFCL's own
# answer breaks the function's schema (an enum value it does not list, a variable's name as a string
# for an array), which the loop refuses before the call is made, or the oracle's calls hold the same
# call twice (an optional value left out of both), which the loop runs once.
ORACLE_THROUGH_LOOP = {
    "simple_python": (400, 400),
    "multiple": (200, 200),
    "parallel": (197, 200),
    "parallel_multiple": (198, 200),
    "live_simple": (255, 258),
    "live_multiple": (1036, 1053),
    "live_parallel": (16, 16),
    "live_parallel_multiple": (23, 24),
    "irrelevance": (240, 240),
    "live_irrelevance": (884, 884),
    "live_relevance": (16, 16),
}
ANSWERED = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple",
            "live_parallel", "live_parallel_multiple")  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def wheel() -> bfcl_data.Bfcl:
    try:
        return bfcl_data.load()
    except Exception as exc:  # noqa: BLE001 - any failure to fetch is a reason to skip, said aloud
        pytest.skip(f"SKIPPED LOUDLY: the pinned bfcl-eval wheel could not be fetched or imported: {exc!r}")


def step_calls(calls: Sequence[Call]) -> str:
    return json.dumps({"reason": "r", "action": "calls", "calls": [{"tool": n, "args": a} for n, a in calls]})


def step_answer(text: str) -> str:
    return json.dumps({"reason": "r", "action": "answer", "tool": "", "args": {}, "answer": text})


class Oracle:
    """A scripted model that makes the given calls in each turn (8 to a step), then answers with the
    last results it was shown."""

    def __init__(self, item: Item, turn_calls: Sequence[Sequence[Call]]) -> None:
        self.item, self.turn_calls, self.turn = item, turn_calls, -1
        self.pending: list[list[Call]] = []

    def __call__(self, request: Request) -> str:
        texts = [m["content"] for m in request.messages]
        turn = max(i for i, t in enumerate(self.item.turns) if any(t[-1]["content"] in x for x in texts))
        if turn != self.turn:
            calls = list(self.turn_calls[turn])
            self.turn, self.pending = turn, [calls[i : i + BATCH] for i in range(0, len(calls), BATCH)]
        if self.pending:
            return step_calls(self.pending.pop(0))
        return step_answer(texts[-1][:500])


def oracle_brain(item: Item) -> ScriptedBrain:
    if item.multi_turn:
        assert item.answer is not None
        return ScriptedBrain(Oracle(item, [[parse_call(c, item.functions) for c in turn] for turn in item.answer]))
    if item.category == "live_relevance":  # no ground truth: any call is right; the first function, filled in
        return ScriptedBrain(Oracle(item, [[filled_call(item.functions[0])]]))
    return ScriptedBrain(Oracle(item, [oracle_calls(item)]))


def filled_call(doc: dict[str, Any]) -> Call:
    samples = {"string": "x", "integer": 1, "float": 1.0, "boolean": True, "array": [], "dict": {}, "tuple": []}
    props = doc["parameters"].get("properties", {})
    return doc["name"], {p: props[p].get("enum", [samples.get(props[p].get("type"), "x")])[0]
                         for p in doc["parameters"].get("required", [])}  # fmt: skip


def do_nothing() -> ScriptedBrain:
    return ScriptedBrain(lambda request: step_answer("I cannot do that with the functions I have."))


def same_call_twice(calls: Sequence[Call]) -> str | None:
    """Why the loop runs fewer of these calls than BFCL counts, or None: two are the same call (the
    oracle leaves an optional argument out of both where BFCL's answer allows it), which one step
    runs once."""
    keys = [json.dumps([name, args], sort_keys=True) for name, args in calls]
    return "the same call twice in one step, run once" if len(set(keys)) < len(keys) else None


def schema_breach(item: Item, calls: Sequence[Call]) -> str | None:
    """Why the loop refuses one of these calls before it is made, or None."""
    tools = {t.name: t for t in bfcl_run.single_tools(item, bfcl_run.Made())}
    for name, args in calls:
        problem = tools[name].argument_errors(args) if name in tools else f"no function {name!r}"
        if problem:
            return f"{name}: {problem}"
    return None


def test_a_wheel_that_does_not_match_its_checksum_is_refused_and_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wheel: bfcl_data.Bfcl
) -> None:
    monkeypatch.setenv("SHAPELOOP_CACHE", str(tmp_path))
    fake = Pinned(package="bfcl-eval", version="2026.3.23", filename=wheel.wheel.name, sha256="0" * 64)
    shutil.copy(wheel.wheel, tmp_path / fake.filename)
    with pytest.raises(ChecksumMismatch, match="does not match the pinned sha256"):
        bfcl_data.fetch(fake)
    assert not (tmp_path / fake.filename).exists()


def test_bfcl_types_become_json_schema() -> None:
    doc = {"type": "dict", "required": ["a"], "properties": {
        "a": {"type": "float"}, "b": {"type": "tuple", "items": {"type": "integer"}}, "c": {"type": "any"},
        "d": {"type": "dict", "properties": {"e": {"type": "float", "default": 1.0}}}}}  # fmt: skip
    assert bfcl_data.json_schema(doc) == {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "number"}, "b": {"type": "array", "items": {"type": "integer"}}, "c": {},
        "d": {"type": "object", "properties": {"e": {"type": "number", "default": 1.0}}}}}  # fmt: skip


def test_every_single_turn_function_makes_a_tool() -> None:
    for category in bfcl_data.SINGLE_TURN:
        for item in bfcl_data.items(category):
            assert all(isinstance(t, Tool) for t in bfcl_run.single_tools(item, bfcl_run.Made())), item.id


def test_first_allowed_values_pass_394_of_400_simple_python_as_the_issue_measured() -> None:
    items = bfcl_data.items("simple_python")
    failed = {i.id for i in items if not score_single(i, first_value_calls(i), answer=None, proposed=1)["valid"]}
    # a dict's allowed value is a dict of alternatives (five), and "" first for a required argument (one)
    assert failed == {f"simple_python_{n}" for n in (89, 94, 96, 200, 260, 337)}


@pytest.mark.parametrize("category", ANSWERED)
def test_the_oracle_passes_bfcls_checker_except_where_no_call_can(category: str) -> None:
    for item in bfcl_data.items(category):
        scored = score_single(item, oracle_calls(item), answer=None, proposed=1)
        assert scored["valid"] == (unanswerable(item) is None), (item.id, scored, unanswerable(item))


@pytest.mark.parametrize("category", sorted(ORACLE_THROUGH_LOOP))
def test_oracle_through_the_loop(category: str) -> None:
    right = 0
    items = bfcl_data.items(category)
    for item in items:
        record = bfcl_run.run_item(oracle_brain(item), item, "plain", max_steps=6)
        right += record["valid"]
        if not record["valid"]:
            why = unanswerable(item) or schema_breach(item, oracle_calls(item)) or same_call_twice(oracle_calls(item))
            assert why, f"{item.id} failed unexplained: {record['error_type']} {record.get('error')}"
    assert (right, len(items)) == ORACLE_THROUGH_LOOP[category]


@pytest.mark.parametrize("category", sorted(ORACLE_THROUGH_LOOP))
def test_doing_nothing_scores_nothing_except_on_irrelevance(category: str) -> None:
    items = bfcl_data.items(category)
    records = [bfcl_run.run_item(do_nothing(), item, "plain", max_steps=6) for item in items]
    right = sum(r["valid"] for r in records)
    assert right == (len(items) if "irrelevance" in category else 0)
    if "irrelevance" in category:
        assert all(r["strict_valid"] for r in records)


def test_a_call_on_an_irrelevance_item_is_wrong_by_both_rules() -> None:
    item = bfcl_data.items("irrelevance")[0]
    record = bfcl_run.run_item(ScriptedBrain(Oracle(item, [[filled_call(item.functions[0])]])), item, "plain",
                               max_steps=6)  # fmt: skip
    assert (record["valid"], record["strict_valid"]) == (False, False)
    assert record["checker_input"] == [dict([filled_call(item.functions[0])])]


def _perturbations(item: Item) -> dict[str, list[Call]]:
    (name, args), *rest = oracle_calls(item)
    doc = next(f for f in item.functions if f["name"] == name)
    props, required = doc["parameters"]["properties"], doc["parameters"]["required"]
    out: dict[str, list[Call]] = {
        "missing required": [(name, {k: v for k, v in args.items() if k != required[0]}), *rest],
        "extra argument": [(name, {**args, "colour_of_the_sky": "green"}), *rest],
    }
    integer = next((k for k in required if props[k]["type"] == "integer"), None)
    if integer:
        out["a string for an integer"] = [(name, {**args, integer: str(args[integer])}), *rest]
    enum = next((k for k in args if "enum" in props.get(k, {})), None)
    if enum:
        other = next(v for v in props[enum]["enum"] if v != args[enum])
        out["a wrong enum value"] = [(name, {**args, enum: other}), *rest]
    return out


def _perturbed_items() -> list[tuple[str, str, list[Call]]]:
    cases = []
    for category, want in (("simple_python", ("a string for an integer",)), ("live_simple", ("a wrong enum value",))):
        item = next(i for i in bfcl_data.items(category) if all(k in _perturbations(i) for k in want)
                    and unanswerable(i) is None)  # fmt: skip
        cases += [(item.id, what, calls) for what, calls in _perturbations(item).items()]
    return cases


def test_perturbed_calls_are_each_scored_wrong() -> None:
    items = {i.id: i for c in ("simple_python", "live_simple") for i in bfcl_data.items(c)}
    cases = _perturbed_items()
    assert {what for _, what, _ in cases} >= {"missing required", "extra argument", "a string for an integer",
                                              "a wrong enum value"}  # fmt: skip
    for ident, what, calls in cases:
        item = items[ident]
        assert score_single(item, oracle_calls(item), answer=None, proposed=1)["valid"], ident
        assert not score_single(item, calls, answer=None, proposed=1)["valid"], (ident, what)
        record = bfcl_run.run_item(ScriptedBrain(Oracle(item, [calls])), item, "plain", max_steps=1)
        assert not record["valid"], (ident, what, record["checker_input"])


def test_bfcls_multi_turn_ground_truth_passes_its_checker_and_nothing_fails_it() -> None:
    for item in bfcl_data.items("multi_turn_base"):
        assert item.answer is not None
        assert score_multi(item, [[turn] if turn else [] for turn in item.answer])["valid"], item.id
        assert not score_multi(item, [[] for _ in item.answer])["valid"], item.id


def test_multi_turn_through_the_loop_executes_bfcls_api_classes() -> None:
    """Played turn by turn through the loop, BFCL's calls pass BFCL's checker, except where BFCL's
    own call breaks its function's schema; doing nothing passes none."""
    right, items = 0, bfcl_data.items("multi_turn_base")
    nothing = total = 0
    for item in items:
        record = bfcl_run.run_item(oracle_brain(item), item, "plain", max_steps=8)
        right += record["valid"]
        assert item.answer is not None
        calls = [parse_call(c, item.functions) for turn in item.answer for c in turn]
        assert record["valid"] or schema_breach(item, calls), (item.id, record["error_type"], record["error"])
        if record["valid"]:  # each turn's state is the truth's, and each turn began with the truth's function
            assert record["turns_state"] == record["turns_first_tool"] == record["turns_total"] == len(item.turns)
            assert [t["state"] for t in record["turns"]] == [True] * len(item.turns)
        idle = bfcl_run.run_item(do_nothing(), item, "plain", max_steps=8)
        assert not idle["valid"]
        assert idle["turns_state"] == idle["turns_state_nothing"] == record["turns_state_nothing"]
        assert idle["turns_first_tool"] == sum(not turn for turn in item.answer)
        nothing += record["turns_state_nothing"]
        total += record["turns_total"]
    assert (right, len(items)) == (MULTI_TURN_ORACLE, 200)
    assert 0 < nothing < total / 2, (nothing, total)  # doing nothing leaves some turns' state right, not most


MULTI_TURN_ORACLE = 199


def test_bfcls_error_data_is_a_failure_and_anything_else_a_result() -> None:
    assert bfcl_run.failure('{"error": "Stock with symbol \'X\' not found."}') == "Stock with symbol 'X' not found."
    assert bfcl_run.failure("Error during execution: f() got an unexpected keyword argument 'y'") == (
        "f() got an unexpected keyword argument 'y'"
    )
    assert bfcl_run.failure('{"booking_status": false, "error": "Invalid access token"}') == "Invalid access token"
    for result in ('{"error": "x", "status": "ok"}', '{"symbol": "QUAS"}', '["error"]', "{not json", "error: x",
                   '{"error": null, "booking_status": true}', '{"error": "", "booking_status": false}'):  # fmt: skip
        assert bfcl_run.failure(result) is None, result


def _quasar_item() -> Item:
    return next(i for i in bfcl_data.items("multi_turn_base") if i.id == "multi_turn_base_104")


def test_a_failed_bfcl_call_reaches_the_model_as_an_error() -> None:
    """TradingBot answers an unknown symbol with ``{"error": ...}``: the model reads ``ERROR: ...``
    (the loop's words for a failed call), so a policy's ``view.last`` sees a failure there."""
    item = _quasar_item()
    bad = ("get_stock_info", {"symbol": "Quasar Ltd."})
    brain = ScriptedBrain(Oracle(item, [[bad], []]))
    record = bfcl_run.run_item(brain, item, "plain", max_steps=3)
    fed_back = "\n".join(m["content"] for m in brain.asked[1].messages[-2:])
    assert "ERROR: Stock with symbol 'Quasar Ltd.' not found." in fed_back
    assert record["adapter"] == bfcl_run.ADAPTER


class Counting(ScriptedBrain):
    """A scripted brain that counts tokens as a character a token, like a backend with a tokenizer."""

    def count_tokens(self, messages: Sequence[Any]) -> int:
        return sum(len(m["content"]) for m in messages)


def test_a_multi_turn_entry_keeps_its_history_within_the_window_and_cuts_visibly() -> None:
    """A window too small for the whole entry: the oldest results are cut with a marker, and BFCL's
    own calls still pass, since each turn's calls do not depend on what was cut."""
    item = next(i for i in bfcl_data.items("multi_turn_base") if len(i.turns) >= 4 and i.id.endswith("_109"))
    assert item.answer is not None
    turn_calls = [[parse_call(c, item.functions) for c in turn] for turn in item.answer]
    wide = Counting(Oracle(item, turn_calls))
    roomy = bfcl_run.run_item(wide, item, "plain", max_steps=8, context=100_000)
    tight = Counting(Oracle(item, turn_calls))
    # the functions' documentation takes about 15 000 of a 16 000 window: the record says a request may
    # overflow, and the history keeps a quarter of the window
    record = bfcl_run.run_item(tight, item, "plain", max_steps=8, context=16_000)
    assert roomy["valid"] and record["valid"]
    assert sum(t["cuts"] for t in roomy["turns"]) == 0
    assert roomy["history_budget"]["warning"] is None
    budget = record["history_budget"]
    assert "may overflow" in budget.pop("warning")
    assert budget == {"max_history_tokens": 4_000, "max_history_chars": None}
    # a window the documentation alone fills: the record says so, and the entry is still played
    small = bfcl_run.run_item(Counting(Oracle(item, turn_calls)), item, "plain", max_steps=8, context=2_000)
    assert "the system prompt alone" in small["history_budget"]["warning"] and small["valid"]
    assert sum(t["cuts"] for t in record["turns"]) > 0
    last = tight.asked[-1].messages
    assert any("cut:" in m["content"] and "to keep the conversation within its window" in m["content"] for m in last)
    assert tight.count_tokens(last) < wide.count_tokens(wide.asked[-1].messages)


def test_raw_scores_a_list_of_calls_and_an_answer() -> None:
    item = bfcl_data.items("parallel")[0]
    calls = oracle_calls(item)
    reply = json.dumps({"calls": [{"name": n, "arguments": a} for n, a in calls]})
    assert bfcl_run.run_item(ScriptedBrain([reply]), item, "raw", max_steps=1)["valid"]
    assert not bfcl_run.run_item(ScriptedBrain([reply]), bfcl_data.items("irrelevance")[0], "raw", max_steps=1)["valid"]
    answer = json.dumps({"answer": "None of these functions can do that."})
    record = bfcl_run.run_item(ScriptedBrain([answer]), bfcl_data.items("irrelevance")[0], "raw", max_steps=1)
    assert (record["valid"], record["strict_valid"]) == (True, True)


def test_the_samples() -> None:
    tune, report, screen = bfcl_data.sample("tune"), bfcl_data.sample("report"), bfcl_data.sample("screen")
    single = sum(len(v) for c, v in tune.items() if c != "multi_turn_base")
    assert single == 216 + 4 * 40
    assert all(len(tune[c]) == 40 for c in (*bfcl_data.STRIDED, *bfcl_data.FIRST))
    assert all(min(tune[c]) >= bfcl_data.HELD_OUT for c in bfcl_data.FIRST)
    assert report == {**{c: list(range(40)) for c in bfcl_data.FIRST}, "multi_turn_base": list(range(20))}
    # every kind of question is tuned on: single calls, choices among functions, non-live irrelevance
    assert set(bfcl_data.FIRST) <= set(tune)
    # four blocks of multi-turn entries, six each; none of the report's or the held-out ones
    entries = tune["multi_turn_base"]
    assert len(entries) == 24 and all(sum(e in block for e in entries) == 6 for block in bfcl_data.MULTI_TURN_BLOCKS)
    for name in ("tune", "screen", "report", "quick"):
        chosen = bfcl_data.sample(name)
        assert not set(chosen.get("multi_turn_base", [])) & set(bfcl_data.MULTI_TURN_HELD_OUT), name
        for category in bfcl_data.FIRST:
            assert not {i for i in chosen.get(category, []) if 40 <= i < bfcl_data.HELD_OUT}, (name, category)
    assert all(set(v) <= set(tune[c]) for c, v in screen.items())
    assert sum(len(v) for c, v in screen.items() if c != "multi_turn_base") == 11 * 8
    assert len(screen["multi_turn_base"]) == 8
    quick = bfcl_data.sample("quick")
    assert all(set(v) <= set(tune[c]) and len(v) == 5 for c, v in quick.items())


def test_ids_and_shards() -> None:
    assert bfcl_data.parse_ids("3,100-102,live_multiple_3-2-0") == ({3, 100, 101, 102}, {"live_multiple_3-2-0"})
    items = bfcl_data.items("parallel")[:10]
    shards = [bfcl_data.shard(items, f"{k}/3") for k in (1, 2, 3)]
    assert sorted(i.index for s in shards for i in s) == list(range(10))
    assert [i.index for i in shards[1]] == [1, 4, 7]
    with pytest.raises(ValueError, match="K/N"):
        bfcl_data.shard(items, "4/3")


def _main_with(brain: Callable[[], ScriptedBrain], monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    monkeypatch.setattr(bfcl, "make_brain", lambda *args: brain())
    bfcl.main(argv)


def test_records_are_appended_resume_skips_them_and_merge_summarises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bfcl"
    argv = ["--category", "irrelevance,live_relevance", "--limit", "2", "--columns", "plain", "--out", str(out)]
    _main_with(do_nothing, monkeypatch, argv)
    path = out / "qwen2.5-coder-0.5b" / "plain.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["id"], r["valid"]) for r in records] == [
        ("irrelevance_0", True), ("irrelevance_1", True), ("live_relevance_0-0-0", False),
        ("live_relevance_1-1-0", False)]  # fmt: skip
    assert records[0]["bfcl"]["sha256"] == bfcl_data.BFCL_WHEEL.sha256 and records[0]["checker_input"] == []

    def refuse() -> ScriptedBrain:
        raise AssertionError("--resume asked the model about an item already recorded")

    _main_with(refuse, monkeypatch, [*argv, "--resume"])
    assert len(path.read_text().splitlines()) == 4
    summary = json.loads((tmp_path / "bfcl.json").read_text())["summaries"]
    assert {(s["category"], s["split"], s["right"], s["items"]) for s in summary} == {
        ("irrelevance", "report", 2, 2), ("live_relevance", "tune", 0, 2),
        ("live_relevance", "screen", 0, 2)}  # the screen's items again, on their own  # fmt: skip
    assert "| irrelevance | 100% (2/2" in capsys.readouterr().out
    # The chart is drawn where matplotlib (the bench extra) is installed, and only there.
    has_matplotlib = importlib.util.find_spec("matplotlib") is not None
    assert (tmp_path / "bfcl.png").is_file() == has_matplotlib
    # records kept in another folder (a variant's) make their own summary, never the headline one
    headline = (tmp_path / "bfcl.json").read_text()
    shutil.copytree(out, tmp_path / "bfcl-variant")
    from benchmarks.bfcl_report import merge

    assert merge(tmp_path / "bfcl-variant") == tmp_path / "bfcl-variant.json"
    assert (tmp_path / "bfcl.json").read_text() == headline


def test_the_native_column_names_functions_without_dots_and_is_scored_as_bfcl_maps_them() -> None:
    item = next(i for i in bfcl_data.items("simple_python") if i.id == "simple_python_1")  # math.factorial
    (name, args), *_ = oracle_calls(item)
    assert name == "math.factorial"
    native = Capabilities(native_tools=True)

    def brain(called: str) -> ScriptedBrain:
        return ScriptedBrain([Reply(text="", tool_calls=(ToolCall(tool=called, args=args),)), Reply(text="120")],
                             capabilities=native)  # fmt: skip

    scripted = brain("math_factorial")
    record = bfcl_run.run_item(scripted, item, "native", max_steps=3)
    assert [t["function"]["name"] for t in scripted.asked[0].tools or []] == ["math_factorial"]
    assert (record["valid"], record["mode"], record["checker_input"]) == (True, "native", [{"math_factorial": args}])
    assert not bfcl_run.run_item(brain("math_factorial"), item, "plain", max_steps=3)["valid"]


def test_transcripts_keep_what_each_loop_run_read_and_said_and_a_rerun_replaces_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "transcripts"
    argv = ["--category", "irrelevance", "--limit", "1", "--columns", "raw,plain", "--out", str(tmp_path / "bfcl"),
            "--transcripts", str(folder)]  # fmt: skip
    for _ in range(2):
        _main_with(lambda: ScriptedBrain(lambda request: step_answer("No such function.")), monkeypatch, argv)
    written = [p.relative_to(folder).as_posix() for p in folder.rglob("*.jsonl")]
    assert written == ["qwen2.5-coder-0.5b/plain/irrelevance_0.jsonl"]  # raw's one reply is in its record
    lines = (folder / "qwen2.5-coder-0.5b/plain/irrelevance_0.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    task = bfcl_data.items("irrelevance")[0].turns[0][-1]["content"]
    messages = [e for e in entries if e["type"] == "message"]
    assert messages[1] == {"type": "message", "role": "user", "content": task}  # once: the rerun replaced it
    assert "No such function." in messages[-1]["content"] and entries[-1]["type"] == "event"
    # a multi-turn entry writes its conversation's log, the file Conversation.resume reads
    item = _quasar_item()
    path = bfcl.transcript_file(folder, "m", "plain,state-line", item.id)
    assert path == folder / "m" / "plain+state-line" / "multi_turn_base_104.jsonl"
    bfcl_run.run_item(ScriptedBrain(Oracle(item, [[("get_stock_info", {"symbol": "QUAS"})], []])), item, "plain",
                      max_steps=3, transcript=path)  # fmt: skip
    log = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["type"] for e in log].count("request") == len(item.turns) and log[0]["type"] == "request"
    with pytest.raises(SystemExit):
        bfcl.parse([*argv, "--ray"])


def test_concurrency_needs_a_brain_that_takes_requests_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--category", "irrelevance", "--limit", "4", "--columns", "plain", "--out", str(tmp_path / "bfcl"),
            "--concurrency", "3"]  # fmt: skip
    with pytest.raises(SystemExit, match="one request at a time"):
        _main_with(lambda: ScriptedBrain(lambda request: "x"), monkeypatch, argv)
    server = Capabilities(exclusive=False)
    _main_with(lambda: ScriptedBrain(lambda request: step_answer("No such function."), capabilities=server),
               monkeypatch, argv)  # fmt: skip
    lines = (tmp_path / "bfcl" / "qwen2.5-coder-0.5b" / "plain.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["id"] for line in lines) == [f"irrelevance_{n}" for n in range(4)]


def test_a_backend_failure_in_the_raw_column_is_that_items_failure() -> None:
    item = bfcl_data.items("parallel")[0]
    record = bfcl_run.run_item(
        ScriptedBrain([ContextOverflow("the prompt is too long", prompt_tokens=9000, context_window=8192)]),
        item,
        "raw",
        max_steps=1,
    )
    assert (record["valid"], record["reply"]) == (False, "ContextOverflow: the prompt is too long")
    with pytest.raises(BackendUnavailable):
        bfcl_run.run_item(ScriptedBrain([BackendUnavailable("no server")]), item, "raw", max_steps=1)


def test_the_plan_of_a_run() -> None:
    def plan(*argv: str) -> list[Item]:
        return bfcl.plan(bfcl.parse(list(argv)))

    assert len(plan("--sample", "tune")) == 376 + 24
    assert len(plan("--sample", "tune", "--category", "live_relevance")) == 16
    assert [i.index for i in plan("--category", "multi_turn_base", "--ids", "100-119")] == list(range(100, 120))
    quick = plan("--quick")
    assert [(i.category, i.index) for i in quick[:2]] == [("live_multiple", 0), ("live_multiple", 1053 // 40)]
    assert [i.category for i in quick] == ["live_multiple"] * 5 + ["live_irrelevance"] * 5 + ["parallel"] * 5
    assert len(plan("--category", "parallel,live_parallel", "--limit", "3", "--shard", "2/2")) == 3
    assert [i.index for i in plan("--sample", "tune", "--category", "simple_python")][:2] == [120, 127]
    with pytest.raises(SystemExit, match="not in the report sample"):
        plan("--sample", "report", "--category", "parallel")


def test_a_single_turn_item_is_scored_on_the_first_step_that_reached_a_tool() -> None:
    item = bfcl_data.items("parallel")[10]  # math.pythagoras twice
    right = oracle_calls(item)
    again = step_calls(right)
    # right first, then the same calls again (what qwen2.5-coder-0.5b did with NO_RESULT): the run
    # ends after the first calls ran, so the repeat is never asked for, nor scored
    brain = ScriptedBrain([again, again, step_answer("done")])
    record = bfcl_run.run_item(brain, item, "plain", max_steps=6)
    assert record["valid"] and record["steps"] == 1 and record["stop"] == "called", record
    # a first step refused before it ran (no such function) is no call: the next step is scored
    wrong = step_calls([("no_such_function", {})])
    record = bfcl_run.run_item(ScriptedBrain([wrong, again, step_answer("done")]), item, "plain", max_steps=6)
    assert record["valid"] and record["steps"] == 2, record
    # a first call that ran but is wrong is scored wrong, whatever follows
    record = bfcl_run.run_item(ScriptedBrain([step_calls(right[:1]), again]), item, "plain", max_steps=6)
    assert not record["valid"] and record["checker_input"] == [{right[0][0]: right[0][1]}], record


def test_ray_spreads_the_items_over_workers_and_writes_the_records_a_local_run_writes(tmp_path: Path) -> None:
    if importlib.util.find_spec("ray") is None:
        pytest.skip("RAY TEST SKIPPED: ray is not installed: pip install '.[cluster]'")
    if (os.cpu_count() or 1) < 2:
        pytest.skip("RAY TEST SKIPPED: the local Ray needs two CPUs for two workers to overlap")
    from overlap_server import serving

    base = ["--category", "irrelevance,live_relevance", "--limit", "2", "--columns", "raw,plain",
            "--backend", "openai", "--model", "fake"]  # fmt: skip
    with serving(hold=1) as server:
        bfcl.main([*base, "--base-url", server.url, "--out", str(tmp_path / "local" / "bfcl")])
    with serving(hold=2) as server:  # a worker per CPU of the local Ray: their requests overlap
        bfcl.main([*base, "--base-url", server.url, "--out", str(tmp_path / "ray" / "bfcl"), "--ray"])
        assert server.most_in_flight >= 2

    def records(folder: str) -> list[tuple[str, str, bool]]:
        lines = [line for f in sorted((tmp_path / folder / "bfcl" / "fake").glob("*.jsonl"))
                 for line in f.read_text().splitlines()]  # fmt: skip
        return sorted((r["column"], r["id"], r["valid"]) for r in map(json.loads, lines))

    assert records("ray") == records("local") and len(records("ray")) == 8


def test_the_ablation_pairs_items_and_applies_the_rule() -> None:
    from benchmarks import policies

    tune = bfcl_data.sample("tune")
    ids = [("live_multiple", i) for i in tune["live_multiple"][:6]] + [("parallel", i) for i in tune["parallel"][:4]]
    ids.append(("simple_python", 0))  # a report item: it never counts

    def record(model: str, column: str, where: tuple[str, int], valid: bool) -> dict[str, Any]:
        seconds = 2.0 if column == "plain" else 3.0
        return {"model": model, "column": column, "category": where[0], "index": where[1],
                "id": f"{where[0]}_{where[1]}", "valid": valid, "seconds": seconds,
                "interventions": {column: 1} if column == "x" else {}}  # fmt: skip

    small = policies.SMALL
    plain = [record(small, "plain", w, n % 3 == 0) for n, w in enumerate(ids)]
    # the policy: right on every live_multiple item, wrong on every parallel one
    policy = [record(small, "x", w, w[0] == "live_multiple") for w in ids]
    row = policies.paired(policies.tune_records(plain + policy), small, "x")
    assert row is not None and row["items"] == 10 and row["seconds_ratio"] == 1.5
    # plain is right on items 0, 3, 6 and 9 (6 and 9 are parallel ones)
    assert sorted(row["gained"]) == sorted(f"live_multiple_{i}" for i in tune["live_multiple"][:6] if i not in
                                           (tune["live_multiple"][0], tune["live_multiple"][3]))  # fmt: skip
    assert sorted(row["lost"]) == sorted(f"parallel_{i}" for i in (tune["parallel"][0], tune["parallel"][3]))
    assert row["net"] == 2 and row["by_category"]["parallel"]["lost"] == 2
    assert policies.decide(row, None) == (False, "net +2 on 10 tune items for qwen2.5-coder-0.5b (3 needed)")
    assert row["interventions"] == 10 and row["acted_on"] == 10  # one on each item
    assert row["differs_without_acting"] == []
    quiet = [{**r, "interventions": {}} if r["category"] == "parallel" else r for r in policy]
    calm = policies.paired(policies.tune_records(plain + quiet), small, "x")
    assert calm is not None and calm["lost"] == [] and calm["net"] == 4  # the policy never acted on parallel
    assert sorted(calm["differs_without_acting"]) == sorted(row["lost"])  # the verdicts differ there: noise
    raw = [{**r, "column": "raw", "interventions": None} for r in policy]
    loop = policies.paired(policies.tune_records(plain + raw), small, "plain", base="raw")
    assert loop is not None and loop["gained"] and loop["lost"]  # the loop against raw: every difference counts
    # a column is paired with the plain loop's records through its own backend only
    served = [{**r, "backend": "ollama"} for r in policy]
    assert policies.paired(policies.tune_records(plain + served), small, "x") is None
    both_ways = plain + [{**r, "backend": "ollama"} for r in plain] + served
    assert policies.paired(policies.tune_records(both_ways), small, "x")["net"] == row["net"]  # type: ignore[index]
    assert policies.decide({**row, "interventions": 0}, None) == (
        False,
        "never acted on its 10 tune items for qwen2.5-coder-0.5b: not judged",
    )
    better = {**row, "net": 4, "by_category": {"a": {"gained": 4, "lost": 0}}, "seconds_ratio": 1.2}
    assert "1.5 times the plain loop's seconds" in policies.decide({**better, "seconds_ratio": 1.5}, {"net": 1})[1]
    assert policies.decide(better, None)[0] is False  # not yet measured on the 1.5B model
    assert policies.decide(better, {"net": 0})[0] is True
    assert policies.decide(better, {"net": -1})[0] is False
    worse_somewhere = {**better, "by_category": {"a": {"gained": 7, "lost": 0}, "b": {"gained": 0, "lost": 3}}}
    assert "loses a tune category by 3" in policies.decide(worse_somewhere, {"net": 5})[1]
    built = policies.build(plain + policy, probes={"kept": True})
    assert built["default"] == [] and built["probes"] == {"kept": True}
    rows = {row["policy"]: row for row in built["policies"]}
    assert rows["x"][small]["net"] == 2 and not rows["x"]["joins_default"]
    # every shipped policy has a row, measured or not
    assert {"fit-floor", "state-line"} <= rows.keys() and rows["state-line"][small] is None
    assert all(row["in_code"] for row in rows.values() if row["policy"] != "x")
    # a multi-turn column: "plain,state-line" is the state-line row, with the turns summed beside the entries
    turns = {"plain": (5, 1, 2, 900), "plain,state-line": (5, 3, 2, 950)}
    entries = [{**record(small, column, ("multi_turn_base", index), False), "turns_total": total,
                "turns_state": state, "turns_first_tool": first, "prompt_tokens_per_step": tokens}
               for column, (total, state, first, tokens) in turns.items() for index in (100, 108)]  # fmt: skip
    rows = {row["policy"]: row for row in policies.build(entries)["policies"]}
    helped = rows["state-line"]
    assert helped["column"] == "plain,state-line" and helped[small]["items"] == 2 and helped[small]["net"] == 0
    assert helped[small]["turns"]["plain,state-line"] == {
        "entries": 2,
        "turns": 10,
        "state": 6,
        "first_function": 4,
        "median_prompt_tokens_per_step": 950,
    }
    assert helped[small]["turns"]["plain"]["state"] == 2
    assert "turns" not in row  # single-turn items have no turns to sum


def test_the_benchmarks_entry_runs_bfcl_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.__main__ import main as benchmarks_main

    monkeypatch.setattr(bfcl, "make_brain", lambda *args: do_nothing())
    benchmarks_main(["bfcl", "--category", "irrelevance", "--limit", "1", "--columns", "plain",
                     "--out", str(tmp_path / "bfcl")])  # fmt: skip
    [line] = (tmp_path / "bfcl" / "qwen2.5-coder-0.5b" / "plain.jsonl").read_text().splitlines()
    assert json.loads(line)["id"] == "irrelevance_0" and json.loads(line)["valid"]


def test_the_first_calls_wrapper_passes_the_scorer_on_so_the_fit_floor_runs() -> None:
    class Scoring(ScriptedBrain):
        def continuation_logprobs(self, prefix: str, continuation: str) -> list[float]:
            return [-1.0]

    inner = Scoring([], capabilities=Capabilities(logprobs=True))
    wrapped = bfcl_run.FirstCalls(inner, bfcl_run.Made())
    assert wrapped.continuation_logprobs("a", "b") == [-1.0] and wrapped.capabilities is inner.capabilities
    with pytest.raises(AttributeError):
        bfcl_run.FirstCalls(ScriptedBrain([]), bfcl_run.Made()).continuation_logprobs  # noqa: B018


def test_the_state_line_column_shows_bfcls_current_folder_at_each_step_and_keeps_the_verdict() -> None:
    items = [i for i in bfcl_data.items("multi_turn_base") if "GorillaFileSystem" in i.involved_classes]
    item = next(i for i in items if any(c.startswith("cd(") for turn in i.answer or [] for c in turn))
    plain = bfcl_run.run_item(oracle_brain(item), item, "plain", max_steps=8)
    brain = oracle_brain(item)
    helped = bfcl_run.run_item(brain, item, f"plain,{bfcl_run.STATE_LINE}", max_steps=8)
    lines = [m["content"] for asked in brain.asked for m in asked.messages[-1:]]
    folders = [line for line in lines if line.startswith("current folder: /")]
    assert len(folders) == len(brain.asked), lines  # every step read the line, as its last message
    assert len(set(folders)) > 1, folders  # the oracle's cd moved the folder, and the line followed
    assert "here: " in folders[0] and folders[0].split("here: ")[1] != "nothing"
    assert helped["valid"] == plain["valid"] and helped["checker_input"] == plain["checker_input"]
    # an item without a file system gets no line: the column is the plain loop
    other = next(i for i in bfcl_data.items("multi_turn_base") if "GorillaFileSystem" not in i.involved_classes)
    brain = oracle_brain(other)
    bfcl_run.run_item(brain, other, f"plain,{bfcl_run.STATE_LINE}", max_steps=8)
    assert not [m for asked in brain.asked for m in asked.messages if m["content"].startswith("current folder")]


def test_the_reports_turn_sums_name_every_adapter_version_a_loop_row_was_made_with() -> None:
    from benchmarks.bfcl_report import _turns

    row = {"turns_total": 4, "turns_state": 2, "turns_state_nothing": 1, "turns_first_tool": 3,
           "prompt_tokens_per_step": 100}  # fmt: skip
    rows = [{**row, "column": "plain"}, {**row, "column": "plain", "adapter": 2, "prompt_tokens_per_step": 300}]
    summed = _turns(rows)
    assert (
        summed["adapters"] == [1, 2] and summed["turns_state"] == 4 and summed["median_prompt_tokens_per_step"] == 200
    )
    assert "adapters" not in _turns([{**row, "column": "raw"}])  # raw is not the loop: no adapter


def test_cold_forgets_the_backends_prompt_before_each_items_run_so_columns_compare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.__main__ import main as benchmarks_main

    class Forgetful(ScriptedBrain):
        forgot = 0

        def forget_prompt(self) -> None:
            Forgetful.forgot += 1

    monkeypatch.setattr(bfcl, "make_brain", lambda *args: Forgetful(lambda request: step_answer("No.")))
    argv = ["bfcl", "--category", "irrelevance", "--limit", "2", "--columns", "plain,raw", "--out", str(tmp_path)]
    benchmarks_main(argv)
    assert Forgetful.forgot == 0, "without --cold the prompt cache is the backend's to keep"
    benchmarks_main([*argv, "--cold", "--out", str(tmp_path / "cold")])
    assert Forgetful.forgot == 4, "two items in two columns"
    with pytest.raises(SystemExit, match="embedded backend"):  # a brain with no prompt of its own to forget
        monkeypatch.setattr(bfcl, "make_brain", lambda *args: do_nothing())
        benchmarks_main([*argv, "--cold", "--out", str(tmp_path / "server")])
    with pytest.raises(SystemExit):
        benchmarks_main([*argv, "--cold", "--ray"])


def _first_requests(item: Item) -> tuple[Request, Request]:
    """The first request of the raw column and of the plain loop on ``item``."""
    raw, loop = ScriptedBrain(['{"answer": "no"}']), ScriptedBrain(['{"answer": "no"}'])
    bfcl_run.run_item(raw, item, "raw", max_steps=1)
    bfcl_run.run_item(loop, item, "plain", max_steps=1)
    return raw.asked[0], loop.asked[0]


def _without_max_items(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_max_items(v) for k, v in schema.items() if k != "maxItems"}
    if isinstance(schema, list):
        return [_without_max_items(v) for v in schema]
    return schema


@pytest.mark.parametrize(("category", "index"), [
    ("simple_python", 0), ("multiple", 1), ("live_simple", 2), ("irrelevance", 3),
    ("irrelevance", 195), ("multiple", 130),
])  # fmt: skip
def test_the_loops_first_request_is_the_raw_one(category: str, index: int) -> None:
    """By design the loop's first step sees what one raw call sees: the same system text, messages and
    schema (the loop's schema also bounds a step to MAX_BATCH calls, which greedy decoding of fewer
    calls never meets). Irrelevance 195 and multiple 130 document their functions with non-ASCII
    characters ("Forsyth–Edwards"), which both write as they are (raw once wrote them as escapes)."""
    item = bfcl_data.items(category)[index]
    assert item.index == index
    raw, loop = _first_requests(item)
    assert [dict(m) for m in loop.messages] == [dict(m) for m in raw.messages]
    assert raw.schema is not None and loop.schema is not None
    assert json.dumps(_without_max_items(loop.schema), sort_keys=True) == json.dumps(raw.schema, sort_keys=True)


def test_margins_are_read_off_the_records_as_greedy_decoding_would_turn_them() -> None:
    from benchmarks import margins

    tune = bfcl_data.sample("tune")
    wrong_call = {"category": "irrelevance", "index": tune["irrelevance"][0], "valid": False, "decision_gap": 0.4,
                  "more_gap": None, "checker_input": [{"f": {"x": 1}}]}  # fmt: skip
    item = bfcl_data.items("simple_python")[tune["simple_python"][0]]
    right = [{name: {k: v[0] for k, v in args.items() if v and v[0] != ""}} for call in item.answer
             for name, args in call.items()]  # fmt: skip
    right_call = {"category": "simple_python", "index": item.index, "valid": True, "decision_gap": 0.4,
                  "more_gap": None, "checker_input": right}  # fmt: skip
    assert margins.scored(wrong_call, 0.5, None) and not margins.scored(wrong_call, 0.3, None)
    assert not margins.scored(right_call, 0.5, None) and margins.scored(right_call, 0.3, None)
    row = next(r for r in margins.grid([wrong_call, right_call]) if (r["call_margin"], r["more_margin"]) == (0.5, None))
    assert (row["gained"], row["lost"]) == (1, 1)
    assert row["by_category"]["irrelevance"]["gained"] == 1 and row["by_category"]["simple_python"]["lost"] == 1


def test_the_margin_for_a_preset_is_the_best_one_within_the_policies_rule() -> None:
    from benchmarks import margins

    def row(margin: float, gained: int, lost: int, worst: int) -> dict[str, object]:
        return {"call_margin": margin, "more_margin": None, "gained": gained, "lost": lost,
                "worst_category_loss": worst, "by_category": {}}  # fmt: skip

    rows = [row(0.5, 9, 5, 2), row(0.75, 20, 11, 6), row(1.0, 4, 2, 0)]
    assert margins.best(rows)["call_margin"] == 0.75  # the best net, a category down by 6
    assert margins.best(rows, within_rule=True)["call_margin"] == 0.5  # net +4, no category down by more than 2
    assert margins.best([row(0.5, 3, 1, 0), row(0.75, 9, 1, 3)], within_rule=True) is None  # +2 is too few; 3 down


def test_the_functions_marked_read_only_are_bfcl_s_own_and_none_of_them_changes_state(wheel: bfcl_data.Bfcl) -> None:
    from benchmarks.bfcl_run import READ_ONLY

    files = wheel.func_doc_files.values()
    names = {doc["name"] for name in files for doc in wheel.read(f"data/multi_turn_func_doc/{name}")}
    assert names >= READ_ONLY, READ_ONLY - names
    acting = {"cd", "mv", "cp", "rm", "mkdir", "touch", "echo", "send_message", "place_order", "trading_login",
              "book_flight", "startEngine", "lockDoors", "fillFuelTank", "post_tweet", "create_ticket"}  # fmt: skip
    assert not READ_ONLY & acting


def test_the_five_field_column_asks_for_one_call_a_step_and_is_scored_as_the_calls_step_is() -> None:
    item = next(i for i in bfcl_data.items("simple_python"))
    (name, args), = oracle_calls(item)

    def five_field(request: Request) -> str:
        if any(m["role"] == "tool" or "ERROR" in m["content"] for m in request.messages[2:]):
            return step_answer("done")
        return json.dumps({"reason": "r", "action": "tool", "tool": name, "args": args, "answer": ""})

    shaped = ScriptedBrain(five_field)
    record = bfcl_run.run_item(shaped, item, bfcl_run.FIVE_FIELD, max_steps=4)
    first = shaped.asked[0].schema
    assert first is not None and "action" in json.dumps(first) and "calls" not in first.get("properties", {})
    assert record["valid"], record
    calls = ScriptedBrain([step_calls([(name, args)]), step_answer("done")])
    bfcl_run.run_item(calls, item, "plain", max_steps=4)
    assert '"action"' not in json.dumps(calls.asked[0].schema)  # the plain column asks for the calls step


def test_the_ablation_compares_seconds_only_where_both_runs_found_the_prompt_as_cached() -> None:
    from benchmarks import policies

    tune = bfcl_data.sample("tune")["live_multiple"][:3]

    def record(column: str, index: int, seconds: float, cached: int) -> dict[str, Any]:
        return {"model": policies.SMALL, "column": column, "category": "live_multiple", "index": index,
                "id": f"live_multiple_{index}", "valid": True, "seconds": seconds, "interventions": {"x": 1},
                "usage": {"prompt_tokens": 800, "cached_tokens": cached}}  # fmt: skip

    # the plain loop ran after raw (its prompt cached); the policy alone, cold, but for one item run side by side
    plain = [record("plain", tune[0], 2.0, 799), record("plain", tune[1], 2.0, 799), record("plain", tune[2], 9.0, 13)]
    policy = [record("x", tune[0], 12.0, 13), record("x", tune[1], 12.0, 13), record("x", tune[2], 10.8, 13)]
    row = policies.paired(policies.tune_records(plain + policy), policies.SMALL, "x")
    assert row is not None and row["items"] == 3 and row["seconds_items"] == 1
    assert row["seconds_ratio"] == 1.2 and row["median_seconds"] == {"x": 10.8, "plain": 9.0}
