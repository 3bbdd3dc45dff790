"""Batched calls (``batch=True``) on the scripted brain: the schema, order, lock keys, cancellation."""

from __future__ import annotations

import json
import threading
from typing import Any

import jsonschema
import pytest

from helpers import answer_step, tool_step
from shapeloop import (
    Capabilities,
    Reply,
    ScriptedBrain,
    StopReason,
    Tool,
    ToolCall,
    ToolStatus,
    extract_step,
    run_agent,
    tool,
)
from shapeloop.events import CallsMerged, RepeatNoticed, ThoughtGiven, ToolCalled, ToolReturned
from shapeloop.step import MAX_BATCH, Batch, step_schema


def calls(*pairs: tuple[str, dict[str, Any]]) -> str:
    """A batch step as a batch run asks for it."""
    return json.dumps({"calls": [{"name": name, "arguments": args} for name, args in pairs]})


def five_field_calls(*pairs: tuple[str, dict[str, Any]]) -> str:
    """A batch step in the loop's earlier shape, which the extractor still reads."""
    return json.dumps({"reason": "r", "action": "calls", "calls": [{"tool": n, "args": a} for n, a in pairs]})


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return {"colour": "red", "size": "large"}.get(key, "unknown")


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def returned(run: Any) -> list[ToolReturned]:
    return [e for e in run.events if isinstance(e, ToolReturned)]


def test_the_batch_variant_constrains_each_call_by_its_tools_schema() -> None:
    schema = step_schema([lookup, add], batch=True)
    good = calls(("lookup", {"key": "colour"}), ("add", {"a": 1, "b": 2}))
    jsonschema.validate(json.loads(good), schema)
    for bad in (
        calls(("lookup", {"a": 1, "b": 2})),  # another tool's arguments
        calls(("add", {"a": "one", "b": 2})),
        calls(("nope", {})),
        calls(),
        calls(*[("lookup", {"key": "colour"})] * (MAX_BATCH + 1)),
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(json.loads(bad), schema)
    assert "calls" not in json.dumps(step_schema([lookup, add]))
    # a batch run's calls are a list, one call a list of one: no single-call variant beside it, and
    # no reason or action: {"calls": [...]} or {"answer": ...}
    assert [list(v["properties"]) for v in schema["anyOf"]] == [["calls"], ["answer"]]
    jsonschema.validate({"answer": "red"}, schema)
    for other in (tool_step("lookup", key="colour"), five_field_calls(("lookup", {"key": "colour"})),
                  answer_step("red"), '{"answer": ""}'):  # fmt: skip
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(json.loads(other), schema)


def test_a_batch_run_reads_both_shapes_and_a_plain_run_no_lean_one() -> None:
    for text in (calls(("lookup", {"key": "colour"})), five_field_calls(("lookup", {"key": "colour"}))):
        step = extract_step(text, batch=True).step
        assert isinstance(step, Batch) and [(c.tool, c.args) for c in step.calls] == [("lookup", {"key": "colour"})]
    answer = extract_step('{"answer": "red"}', batch=True).step
    assert answer is not None and not isinstance(answer, Batch) and (answer.action, answer.answer) == ("answer", "red")
    # outside a batch run an object of one key is never a step: a trailing {"answer": 2} is junk
    assert extract_step('{"answer": "red"}').step is None
    assert extract_step(tool_step("lookup", key="size") + ' {"answer": 2}').step.tool == "lookup"  # type: ignore[union-attr]
    run = run_agent(ScriptedBrain([calls(("lookup", {"key": "size"})), '{"answer": "large"}']), [lookup], "size?",
                    batch=True)  # fmt: skip
    assert (run.stop, run.answer) == (StopReason.ANSWERED, "large")


def test_a_batch_is_read_from_prose() -> None:
    pairs = (("lookup", {"key": "colour"}), ("add", {"a": 1, "b": 2}))
    for found in (extract_step("I will do both: " + calls(*pairs), batch=True),
                  extract_step("I will do both: " + five_field_calls(*pairs))):  # fmt: skip
        assert isinstance(found.step, Batch) and [c.tool for c in found.step.calls] == ["lookup", "add"]


def test_results_come_back_in_the_models_order_each_with_its_call() -> None:
    step = calls(("lookup", {"key": "size"}), ("add", {"a": 2, "b": 3}), ("lookup", {"key": "colour"}))
    brain = ScriptedBrain([step, answer_step("large, 5, red")])
    run = run_agent(brain, [lookup, add], "Three things: the size, 2 plus 3, the colour.", batch=True)
    assert run.ok and run.steps == 2
    assert [str(e.call) for e in run.events if isinstance(e, ToolCalled)] == [
        'lookup({"key": "size"})', 'add({"a": 2, "b": 3})', 'lookup({"key": "colour"})'
    ]  # fmt: skip
    assert [(str(e.call), e.text) for e in returned(run)] == [
        ('lookup({"key": "size"})', "large"), ('add({"a": 2, "b": 3})', "5"), ('lookup({"key": "colour"})', "red")
    ]  # fmt: skip
    feedback = brain.asked[1].messages[-1]["content"]
    assert feedback.startswith("Results of 3 calls, in the order you made them:\n\n")
    assert (
        '[1] lookup({"key": "size"}):\nlarge\n\n[2] add({"a": 2, "b": 3}):\n5\n\n[3] lookup({"key": "colour"}):\nred'
        in (feedback)
    )
    prompt = brain.asked[0].messages[0]["content"]
    assert '{"calls": [{"name": "<function name>", "arguments": {...}}, ...]}' in prompt and '"reason"' not in prompt
    assert '{"name": "lookup", "description": "Look a key up.", "parameters": {' in prompt  # the tools as JSON
    # no prose line after the batch prompt's own words: it sent qwen2.5-coder-0.5b's integers running on
    assert "no other text before or after it" not in prompt
    assert feedback.endswith("\nThe task: Three things: the size, 2 plus 3, the colour.")


def test_the_task_follows_a_batch_with_a_good_result_only() -> None:
    failed = calls(("nope", {}), ("add", {"a": "x", "b": 1}))
    brain = ScriptedBrain([failed, answer_step("I cannot.")])
    run_agent(brain, [lookup, add], "Add two and three.", batch=True)
    assert "The task:" not in brain.asked[1].messages[-1]["content"]
    brain = ScriptedBrain([calls(("nope", {}), ("add", {"a": 2, "b": 3})), answer_step("5")])
    run_agent(brain, [lookup, add], "Add two and three.", batch=True)
    assert brain.asked[1].messages[-1]["content"].endswith("\nThe task: Add two and three.")


def _rendezvous() -> tuple[Tool, Tool, list[str]]:
    """Two tools: ``wait`` returns whether ``signal`` ran while it waited. Only concurrency lets it."""
    arrived = threading.Event()
    log: list[str] = []

    def wait(path: str) -> str:
        log.append(f"wait {path}")
        return "overlapped" if arrived.wait(timeout=0.3) else "alone"

    def signal(path: str) -> str:
        log.append(f"signal {path}")
        arrived.set()
        return "signalled"

    return tool(wait), tool(signal), log


def test_calls_without_a_lock_key_run_concurrently() -> None:
    wait, signal, _ = _rendezvous()
    brain = ScriptedBrain([calls(("wait", {"path": "a"}), ("signal", {"path": "b"})), answer_step("done")])
    run = run_agent(brain, [wait, signal], "t", batch=True)
    assert [e.text for e in returned(run)] == ["overlapped", "signalled"]


def test_calls_that_share_a_lock_key_run_one_after_another_in_the_models_order() -> None:
    wait, signal, log = _rendezvous()
    shared = [Tool(name=t.name, description=t.description, parameters=t.parameters, fn=t.fn, lock_key="disk")
              for t in (wait, signal)]  # fmt: skip
    brain = ScriptedBrain([calls(("wait", {"path": "a"}), ("signal", {"path": "b"})), answer_step("done")])
    run = run_agent(brain, shared, "t", batch=True)
    assert [e.text for e in returned(run)] == ["alone", "signalled"]
    assert log == ["wait a", "signal b"]


def test_a_lock_key_of_the_arguments_serialises_calls_on_one_path_only() -> None:
    wait, signal, _ = _rendezvous()
    per_path = [
        Tool(name=t.name, description=t.description, parameters=t.parameters, fn=t.fn, lock_key=lambda a: a["path"])
        for t in (wait, signal)
    ]
    same = calls(("wait", {"path": "x"}), ("signal", {"path": "x"}))
    other = calls(("wait", {"path": "y"}), ("signal", {"path": "z"}))
    run = run_agent(ScriptedBrain([same, answer_step("done")]), per_path, "t", batch=True)
    assert [e.text for e in returned(run)] == ["alone", "signalled"]
    wait, signal, _ = _rendezvous()
    per_path = [
        Tool(name=t.name, description=t.description, parameters=t.parameters, fn=t.fn, lock_key=lambda a: a["path"])
        for t in (wait, signal)
    ]
    run = run_agent(ScriptedBrain([other, answer_step("done")]), per_path, "t", batch=True)
    assert [e.text for e in returned(run)] == ["overlapped", "signalled"]


def test_the_tool_decorator_takes_a_lock_key() -> None:
    @tool(lock_key=lambda args: args["path"])
    def write(path: str) -> str:
        """Write."""
        return path

    assert write.lock({"path": "a.txt"}) == "a.txt" and tool(lock_key="db")(write.fn).lock({}) == "db"


def test_one_refusal_denies_that_call_and_cancels_the_rest_of_the_batch() -> None:
    ran: list[str] = []

    @tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(f"delete {path}")
        return "deleted"

    @tool
    def read(path: str) -> str:
        """Read a file."""
        ran.append(f"read {path}")
        return "text"

    asked: list[str] = []

    def approve(call: ToolCall) -> bool | str:
        asked.append(call.args["path"])
        return True if call.args["path"] == "tmp.txt" else "not that one"

    step = calls(("read", {"path": "a"}), ("delete", {"path": "tmp.txt"}), ("delete", {"path": "keep.txt"}),
                 ("delete", {"path": "never-asked.txt"}))  # fmt: skip
    brain = ScriptedBrain([step, answer_step("cancelled")])
    run = run_agent(brain, [delete, read], "t", batch=True, approve=approve)
    assert ran == [] and asked == ["tmp.txt", "keep.txt"]
    statuses = [ToolStatus.CANCELLED, ToolStatus.CANCELLED, ToolStatus.DENIED, ToolStatus.CANCELLED]
    assert [e.status for e in returned(run)] == statuses
    feedback = brain.asked[1].messages[-1]["content"]
    assert feedback.count("CANCELLED: ") == 3
    assert "[3] delete" in feedback and "DENIED: delete was not approved (not that one). Do not retry it" in feedback
    assert "The other 3 calls of this step did not run." in feedback
    assert 'the batch was cancelled because delete({"path": "keep.txt"}) was not approved (not that one)' in feedback


def test_a_bad_call_in_a_batch_is_its_own_error_and_the_others_run() -> None:
    step = calls(("lookup", {"key": "colour"}), ("nope", {}), ("add", {"a": "x", "b": 1}))
    run = run_agent(ScriptedBrain([step, answer_step("red")]), [lookup, add], "t", batch=True)
    assert [e.status for e in returned(run)] == [ToolStatus.OK, ToolStatus.ERROR, ToolStatus.ERROR]
    assert returned(run)[0].text == "red" and "no tool named 'nope'" in returned(run)[1].text


def test_repeats_are_counted_per_call_within_batches() -> None:
    step = calls(("lookup", {"key": "colour"}), ("add", {"a": 1, "b": 1}))
    varied = calls(("lookup", {"key": "colour"}), ("add", {"a": 2, "b": 2}))
    brain = ScriptedBrain([step, varied, step, answer_step("x")])
    run = run_agent(brain, [lookup, add], "t", batch=True, stuck_limit=2)
    assert run.stop is StopReason.STUCK
    assert run.reason.startswith('lookup({"key": "colour"}) was called 3 times with the same result each time')
    assert [e.what for e in run.events if isinstance(e, RepeatNoticed)] == ['lookup({"key": "colour"})']
    last = returned(run)[-2:]
    assert [(str(e.call), e.repeats) for e in last] == [('lookup({"key": "colour"})', 2), ('add({"a": 1, "b": 1})', 1)]
    assert "(Note: you made this same call 2 times" in brain.asked[2].messages[-1]["content"]


def test_a_batch_in_a_run_without_batch_is_feedback_not_a_crash() -> None:
    batch = five_field_calls(("lookup", {"key": "colour"}))
    brain = ScriptedBrain([batch, tool_step("lookup", key="colour"), answer_step("red")])
    run = run_agent(brain, [lookup], "t", mode="prose", batch=False)
    assert run.ok and run.steps == 3
    assert "This run takes one call a step" in brain.asked[1].messages[-1]["content"]


def test_native_calls_of_one_reply_run_as_a_batch_when_batch_is_on() -> None:
    wait, signal, _ = _rendezvous()
    native = Reply(
        text="", tool_calls=(ToolCall(tool="wait", args={"path": "a"}), ToolCall(tool="signal", args={"path": "b"}))
    )
    brain = ScriptedBrain([native, "done"], capabilities=Capabilities(native_tools=True))
    run = run_agent(brain, [wait, signal], "t", mode="native", batch=True)
    assert run.ok and [e.text for e in returned(run)] == ["overlapped", "signalled"]
    assert brain.asked[1].messages[-1]["content"].startswith("Results of 2 calls")


@tool
def submit(answer: str) -> str:
    """Submit an answer for grading."""
    return "graded"


def test_an_answer_inside_a_calls_arguments_is_part_of_the_call_not_the_step() -> None:
    call = '{"calls": [{"name": "submit", "arguments": {"answer": "42"}}]}'
    for reply in (f"I will submit it.\n{call}", f"{call} done", f'draft {{"answer": "no"}} then {call}'):
        step = extract_step(reply, batch=True).step
        assert isinstance(step, Batch) and step.calls[0].args == {"answer": "42"}, reply
    run = run_agent(ScriptedBrain([f"I will submit it.\n{call}", '{"answer": "ok"}']), [submit], "Submit 42",
                    batch=True, mode="prose", policies=())  # fmt: skip
    assert [str(e.call) for e in run.events if isinstance(e, ToolCalled)] == ['submit({"answer": "42"})']
    assert run.answer == "ok"
    # an answer after the call is still the last step
    step = extract_step(f'{call} and then {{"answer": "final"}}', batch=True).step
    assert step is not None and not isinstance(step, Batch) and step.answer == "final"


def test_a_near_miss_lean_step_is_explained_in_the_lean_shapes_terms() -> None:
    found = extract_step('{"calls": [{"name": "lookup", "args": {"key": "size"}}]}', batch=True)
    assert found.step is None and "calls.0.arguments: Field required" in (found.error or "")
    assert "tool" not in (found.error or "")
    empty = extract_step('{"calls": []}', batch=True)
    assert empty.step is None and "at least 1" in (empty.error or "")
    many = extract_step(calls(*[("lookup", {"key": "size"})] * (MAX_BATCH + 1)), batch=True)
    assert many.step is None and f"at most {MAX_BATCH}" in (many.error or "")


def test_a_batch_step_with_no_tools_is_asked_for_an_answer_in_the_lean_shape() -> None:
    brain = ScriptedBrain(['{"answer": "hi"}'])
    run = run_agent(brain, [], "Say hi.", batch=True)
    assert run.answer == "hi"
    prompt = brain.asked[0].messages[0]["content"]
    assert '{"answer": "..."}' in prompt and '"reason"' not in prompt and "five fields" not in prompt


def test_a_call_written_twice_in_one_step_runs_once_and_the_model_is_told() -> None:
    ran: list[dict[str, Any]] = []

    @tool
    def note(text: str) -> str:
        """Keep a note."""
        ran.append({"text": text})
        return f"kept {text}"

    brain = ScriptedBrain([
        calls(("note", {"text": "a"}), ("note", {"text": "b"}), ("note", {"text": "a"}), ("note", {"text": "a"})),
        json.dumps({"answer": "done"}),
    ])  # fmt: skip
    run = run_agent(brain, [note], "Note a and b.", batch=True)
    assert run.stop is StopReason.ANSWERED
    assert sorted(ran, key=str) == [{"text": "a"}, {"text": "b"}]  # distinct calls run concurrently
    merged = [e for e in run.events if isinstance(e, CallsMerged)]
    assert [(e.call.args["text"], e.times) for e in merged] == [("a", 3)]
    fed = brain.asked[1].messages[-1]["content"]
    assert "Results of 2 calls" in fed and "you wrote this same call 3 times in one step; it ran once" in fed
    assert fed.count("ran once") == 1  # only the merged call carries the note


def test_the_same_call_with_its_arguments_in_another_order_is_the_same_call() -> None:
    brain = ScriptedBrain([
        json.dumps({"calls": [{"name": "add", "arguments": {"a": 1, "b": 2}},
                              {"name": "add", "arguments": {"b": 2, "a": 1}}]}),
        json.dumps({"answer": "3"}),
    ])  # fmt: skip
    run = run_agent(brain, [add], "Add 1 and 2.", batch=True)
    assert len([e for e in run.events if isinstance(e, ToolCalled)]) == 1
    assert [e.times for e in run.events if isinstance(e, CallsMerged)] == [2]


def test_batch_is_the_default_step_shape() -> None:
    brain = ScriptedBrain([json.dumps({"answer": "hello"})])
    run = run_agent(brain, [add], "Say hello.")
    assert run.answer == "hello"
    schema = brain.asked[0].schema
    assert schema is not None and "calls" in json.dumps(schema) and "reason" not in json.dumps(schema)
    assert brain.asked[0].messages[0]["content"].startswith("You can call these functions:")


def test_a_single_refused_call_of_the_default_step_is_denied_as_in_the_five_field_step() -> None:
    @tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return "deleted"

    for batch in (True, False):
        step = calls(("delete", {"path": "a"})) if batch else tool_step("delete", path="a")
        brain = ScriptedBrain([step, json.dumps({"answer": "no"}) if batch else answer_step("no")])
        run = run_agent(brain, [delete], "t", batch=batch, approve=lambda call: "not today")
        assert [e.status for e in returned(run)] == [ToolStatus.DENIED], batch
        fed = brain.asked[1].messages[-1]["content"]
        assert "DENIED: delete was not approved (not today). Do not retry it" in fed and "CANCELLED" not in fed


def test_a_calls_step_shows_no_empty_thought() -> None:
    run = run_agent(ScriptedBrain([calls(("lookup", {"key": "colour"})), json.dumps({"answer": "red"})]), [lookup], "t")
    assert not [e for e in run.events if isinstance(e, ThoughtGiven)]


def test_an_approver_that_raises_refuses_that_call_and_the_run_goes_on() -> None:
    @tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return "deleted"

    def approve(call: ToolCall) -> bool:
        raise RuntimeError("the dialog crashed")

    brain = ScriptedBrain([calls(("delete", {"path": "a"})), json.dumps({"answer": "not deleted"})])
    run = run_agent(brain, [delete], "t", approve=approve)
    assert run.answer == "not deleted" and [e.status for e in returned(run)] == [ToolStatus.DENIED]
    assert "the approver failed: RuntimeError: the dialog crashed" in brain.asked[1].messages[-1]["content"]
