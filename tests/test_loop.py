import dataclasses
import json
from pathlib import Path
from typing import Any, Literal

import pytest

from helpers import answer_step, tool_step
from shapeloop import (
    BackendError,
    Capabilities,
    ContextOverflow,
    Finish,
    Message,
    Mode,
    Reply,
    Request,
    ScriptedBrain,
    StopReason,
    Tool,
    ToolStatus,
    Usage,
    grounding,
    run_agent,
    step_schema,
    tool,
)
from shapeloop.errors import ToolFailure
from shapeloop.events import AnswerRejected, CallRefused, ModeChanged, RepeatNoticed, ToolReturned


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return {"colour": "red", "size": "large"}.get(key, "unknown")


@tool
def strict_lookup(key: str) -> str:
    """Look a key up; an unknown key is an error."""
    if key != "colour":
        raise ToolFailure(f"no such key {key!r} in the table")
    return "red"


def kinds(run: object) -> list[str]:
    return [e.kind for e in run.events]  # type: ignore[attr-defined]


def test_tool_then_answer_emits_events_in_this_exact_order() -> None:
    brain = ScriptedBrain([tool_step("lookup", key="colour"), answer_step("red")])
    seen: list[str] = []
    run = run_agent(brain, [lookup], "What colour?", on_event=lambda e: seen.append(e.kind))
    assert (
        kinds(run)
        == seen
        == [
            "step",
            "reply",
            "thought",
            "tool_call",
            "tool_result",
            "step",
            "reply",
            "thought",
            "answer",
            "stop",
        ]
    )
    assert run.stop is StopReason.ANSWERED and run.answer == "red" and run.steps == 2
    assert run.reason == "answered after 2 steps"


def test_tool_result_goes_back_as_the_next_user_turn() -> None:
    brain = ScriptedBrain([tool_step("lookup", key="colour"), answer_step("red")])
    run_agent(brain, [lookup], "What colour?")
    second = brain.asked[1].messages
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[-1]["content"].startswith('Result of lookup({"key": "colour"}):\nred\n\n')
    assert "The task:" not in second[-1]["content"]
    # a model whose backend asks for it gets the task's words again after the result
    restated = "red\n\nThe task: What colour?\nIf this result holds what the task asks for"
    brain = ScriptedBrain([tool_step("lookup", key="colour"), answer_step("red")])
    brain.capabilities = Capabilities(restate_task=True)
    run_agent(brain, [lookup], "What colour?")
    assert restated in brain.asked[1].messages[-1]["content"]
    # not after a failed or refused call: the task's words would send the model on after it
    brain = ScriptedBrain([tool_step("strict_lookup", key="size"), answer_step("I cannot tell.")])
    brain.capabilities = Capabilities(restate_task=True)
    run_agent(brain, [strict_lookup], "What colour?")
    after_error = brain.asked[1].messages[-1]["content"]
    assert "ERROR:" in after_error and "The task:" not in after_error
    # a long task keeps its end, where the question is
    steps = [tool_step("lookup", key="colour"), answer_step("red")]
    brain = ScriptedBrain(steps, capabilities=Capabilities(restate_task=True))
    run_agent(brain, [lookup], "x" * 9000 + " What colour is the apple?")
    assert "x … x" in brain.asked[1].messages[-1]["content"]
    assert "What colour is the apple?\nIf this result holds" in brain.asked[1].messages[-1]["content"]
    # the benchmark's variants set it for every model, or for none
    import shapeloop.prompts as prompts_module

    for setting, restate, shown in ((True, False, True), (False, True, False)):
        saved, prompts_module.RESTATE_TASK = prompts_module.RESTATE_TASK, setting
        try:
            brain = ScriptedBrain([tool_step("lookup", key="colour"), answer_step("red")])
            brain.capabilities = Capabilities(restate_task=restate)
            run_agent(brain, [lookup], "What colour?")
            assert (restated in brain.asked[1].messages[-1]["content"]) is shown
        finally:
            prompts_module.RESTATE_TASK = saved
    assert 'reply with action "answer"' in second[-1]["content"]
    assert "lookup(key): " in second[0]["content"] and "- key (string, required)" in second[0]["content"]


def test_every_sink_gets_every_event() -> None:
    a: list[object] = []
    b: list[object] = []
    run = run_agent(ScriptedBrain([answer_step("hi")]), [], "Say hi", on_event=[a.append, b.append])
    assert a == b == list(run.events)


def test_constrained_mode_sends_the_per_tool_schema() -> None:
    brain = ScriptedBrain([answer_step("x")])
    run = run_agent(brain, [lookup], "t")
    assert brain.asked[0].schema == step_schema([lookup])
    assert run.mode is Mode.CONSTRAINED


def test_flat_schema_on_request() -> None:
    brain = ScriptedBrain([answer_step("x")])
    run_agent(brain, [lookup], "t", schema="flat")
    assert brain.asked[0].schema is not None and "anyOf" not in brain.asked[0].schema


def test_a_refused_schema_switches_to_prose_without_costing_a_step() -> None:
    brain = ScriptedBrain(["Let me look. " + tool_step("lookup", key="size"), answer_step("large")], refuse_schema=True)
    run = run_agent(brain, [lookup], "How big?", max_steps=2)
    assert run.stop is StopReason.ANSWERED and run.steps == 2
    assert run.mode is Mode.PROSE
    assert all(asked.schema is None for asked in brain.asked)
    switches = [e for e in run.events if isinstance(e, ModeChanged)]
    assert len(switches) == 1 and switches[0].mode is Mode.PROSE and switches[0].step == 1


def test_prose_mode_from_the_start_sends_no_schema() -> None:
    brain = ScriptedBrain([answer_step("x")])
    run = run_agent(brain, [lookup], "t", mode="prose")
    assert brain.asked[0].schema is None and run.mode is Mode.PROSE


def test_a_cut_reply_is_not_a_shape_error_and_the_model_is_told_to_be_shorter() -> None:
    cut = Reply(text='{"reason": "very long', finish=Finish.LENGTH)
    brain = ScriptedBrain([cut, answer_step("ok")])
    run = run_agent(brain, [], "t")
    assert run.ok
    assert "cut" in kinds(run) and "unreadable" not in kinds(run)
    assert "cut off at the length limit" in brain.asked[1].messages[-1]["content"]
    assert "shorter" in brain.asked[1].messages[-1]["content"]


def test_token_budget_stops_the_run() -> None:
    usage = Usage(prompt_tokens=90, completion_tokens=20)
    brain = ScriptedBrain([Reply(text=tool_step("lookup", key="a"), usage=usage)] * 5)
    run = run_agent(brain, [lookup], "t", max_tokens=200)
    assert run.stop is StopReason.BUDGET
    assert run.steps == 2
    assert "220 tokens used of 200" in run.reason
    assert run.usage == Usage(prompt_tokens=180, completion_tokens=40)


def test_time_budget_stops_the_run() -> None:
    run = run_agent(ScriptedBrain([answer_step("x")]), [], "t", max_seconds=0)
    assert run.stop is StopReason.BUDGET and run.steps == 0 and "time budget" in run.reason


def test_ctrl_c_stops_as_interrupted_and_keeps_the_transcript(tmp_path: Path) -> None:
    brain = ScriptedBrain([tool_step("lookup", key="colour"), KeyboardInterrupt()])
    path = tmp_path / "run.jsonl"
    run = run_agent(brain, [lookup], "t", transcript_path=path)
    assert run.stop is StopReason.INTERRUPTED and "step 2" in run.reason
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[-1]["kind"] == "stop" and lines[-1]["stop"] == "interrupted"
    assert any(line.get("kind") == "tool_result" and line["text"] == "red" for line in lines)


def test_a_crash_in_the_callers_code_still_leaves_the_transcript(tmp_path: Path) -> None:
    def acceptor(text: str) -> bool:
        raise RuntimeError("checker broke")

    path = tmp_path / "run.jsonl"
    with pytest.raises(RuntimeError, match="checker broke") as info:
        run_agent(ScriptedBrain([answer_step("x")]), [], "t", accept_answer=acceptor, transcript_path=path)
    assert any(str(path) in note for note in info.value.__notes__)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[-1]["type"] == "error" and "checker broke" in lines[-1]["error"]
    assert any(line.get("role") == "assistant" for line in lines)


def test_backend_errors_stop_the_run_with_their_message() -> None:
    brain = ScriptedBrain(
        [
            ContextOverflow(
                "prompt needs 5000 tokens, window is 4096 (over by 904)",
                prompt_tokens=5000,
                context_window=4096,
            )
        ]
    )
    run = run_agent(brain, [], "t")
    assert run.stop is StopReason.BACKEND_ERROR and "over by 904" in run.reason
    run = run_agent(ScriptedBrain([BackendError("connection refused: run `ollama serve`")]), [], "t")
    assert run.stop is StopReason.BACKEND_ERROR and "ollama serve" in run.reason


def test_identical_call_with_identical_result_is_named_as_a_repeat_then_stops_as_stuck() -> None:
    brain = ScriptedBrain([tool_step("lookup", key="colour")] * 5)
    run = run_agent(brain, [lookup], "t", stuck_limit=2)
    results = [e for e in run.events if isinstance(e, ToolReturned)]
    assert [r.status for r in results] == [ToolStatus.OK, ToolStatus.REPEAT, ToolStatus.REPEAT]
    assert run.stop is StopReason.STUCK and run.steps == 3
    assert 'lookup({"key": "colour"}) was called 3 times' in run.reason
    note = brain.asked[2].messages[-1]["content"]
    # the model has the result: the step after the repeat must answer (a scripted brain ignores that)
    assert "same call 2 times" in note and 'Reply with action "answer" now' in note
    assert _actions(brain.asked[2].schema) == ["answer"]
    assert _actions(brain.asked[1].schema) == ["tool", "answer"]
    assert [e.times for e in run.events if isinstance(e, RepeatNoticed)] == [2]


def test_a_failed_call_made_again_is_named_and_its_tool_kept_out_but_the_model_may_answer_or_call() -> None:
    from shapeloop.errors import ToolFailure

    @tool
    def flaky(key: str) -> str:
        """Always fails."""
        raise ToolFailure("no such key")

    brain = ScriptedBrain([tool_step("flaky", key="a")] * 2 + [tool_step("lookup", key="colour"), answer_step("red")])
    run = run_agent(brain, [flaky, lookup], "t", stuck_limit=2)
    assert run.answer == "red"
    note = brain.asked[2].messages[-1]["content"]
    assert "will not help" in note and "call a different tool" in note
    assert set(_actions(brain.asked[2].schema)) == {"tool", "answer"}
    assert _variant_tools(brain.asked[2].schema) == {"lookup"}


def test_repeats_are_counted_per_call_and_the_count_is_true() -> None:
    a, b = tool_step("lookup", key="colour"), tool_step("lookup", key="size")
    brain = ScriptedBrain([a, b, a, b, a, answer_step("never")])
    run = run_agent(brain, [lookup], "t", stuck_limit=2)
    # after a, b, a, b each call has repeated once: not stuck; the fifth call is a's second repeat
    assert run.stop is StopReason.STUCK and run.steps == 5
    assert 'lookup({"key": "colour"}) was called 3 times' in run.reason


def test_a_call_whose_result_changes_is_not_a_repeat() -> None:
    counter = iter(range(100))

    @tool
    def tick() -> str:
        """Tick."""
        return str(next(counter))

    run = run_agent(ScriptedBrain([tool_step("tick")] * 4), [tick], "t", max_steps=4)
    assert run.stop is StopReason.MAX_STEPS
    assert all(e.status is ToolStatus.OK for e in run.events if isinstance(e, ToolReturned))


def test_a_repeated_error_counts_as_a_repeat() -> None:
    run = run_agent(ScriptedBrain([tool_step("missing")] * 3), [lookup], "t")
    assert run.stop is StopReason.STUCK and "missing({}) was called 3 times" in run.reason


def test_identical_unreadable_replies_stop_as_barren() -> None:
    brain = ScriptedBrain(["I cannot do that."] * 5)
    run = run_agent(brain, [lookup], "t", stuck_limit=2)
    assert run.stop is StopReason.BARREN and run.steps == 3
    assert "3 times in a row" in run.reason


def test_identical_empty_answers_stop_as_barren() -> None:
    empty = json.dumps({"reason": "done", "action": "answer", "tool": "", "args": {}, "answer": ""})
    brain = ScriptedBrain([empty] * 5)
    run = run_agent(brain, [], "t")
    assert run.stop is StopReason.BARREN and "empty-answer" in run.reason
    assert "answer was empty" in brain.asked[1].messages[-1]["content"]


def test_barren_count_resets_when_a_tool_runs_and_differs_per_reply() -> None:
    brain = ScriptedBrain(
        ["junk", "junk", tool_step("lookup", key="colour"), "junk", "junk", "other", answer_step("red")]
    )
    run = run_agent(brain, [lookup], "t", stuck_limit=2)
    assert run.ok and run.steps == 7


def test_the_acceptor_objection_reaches_the_model_and_costs_a_step() -> None:
    brain = ScriptedBrain([answer_step("Please provide the requested shape"), answer_step("red")])
    verdicts: list[str] = []

    def accept(text: str) -> bool | str:
        verdicts.append(text)
        return True if text == "red" else "that is not a colour"

    run = run_agent(brain, [], "t", accept_answer=accept)
    assert run.ok and run.answer == "red" and run.steps == 2
    assert verdicts == ["Please provide the requested shape", "red"]
    assert "not accepted: that is not a colour" in brain.asked[1].messages[-1]["content"]
    assert "rejection" in kinds(run)


def test_an_acceptor_returning_false_gets_a_plain_objection_and_repeats_go_barren() -> None:
    brain = ScriptedBrain([answer_step("no")] * 4)
    run = run_agent(brain, [], "t", accept_answer=lambda text: False)
    assert run.stop is StopReason.BARREN and "rejected-answer" in run.reason
    assert "was not accepted" in brain.asked[1].messages[-1]["content"]


def test_max_steps_stop_names_the_limit() -> None:
    brain = ScriptedBrain([tool_step("lookup", key=str(i)) for i in range(5)])
    run = run_agent(brain, [lookup], "t", max_steps=3)
    assert run.stop is StopReason.MAX_STEPS and run.steps == 3 and "max_steps=3" in run.reason


def test_a_scripted_function_receives_the_request_with_plain_dict_messages() -> None:
    seen: list[Request] = []

    def fn(request: Request) -> str:
        seen.append(request)
        return answer_step(f"{len(request.messages)} messages")

    run = run_agent(ScriptedBrain(fn), [], "count")
    assert run.answer == "2 messages"
    assert seen[0].messages[1] == {"role": "user", "content": "count"}
    assert seen[0].schema == step_schema([]) and seen[0].tools is None


def test_a_plain_callable_is_a_brain_and_gets_the_schema() -> None:
    schemas: list[object] = []

    def fn(messages: list[Message], schema: object) -> str:
        schemas.append(schema)
        return answer_step("plain")

    run = run_agent(fn, [], "t")
    assert run.answer == "plain" and schemas == [step_schema([])]


def test_an_object_with_an_old_style_ask_is_refused_with_what_to_do() -> None:
    class Old:
        def ask(self, messages: object, schema: object) -> str:
            return ""

    with pytest.raises(TypeError, match=r"subclass shapeloop\.BaseBrain"):
        run_agent(Old(), [], "t")


def test_history_continues_a_conversation() -> None:
    first = run_agent(ScriptedBrain([answer_step("red")]), [], "What colour?")
    brain = ScriptedBrain([answer_step("yes")])
    run_agent(brain, [], "Are you sure?", history=first.messages)
    roles = [m["role"] for m in brain.asked[0].messages]
    assert roles == ["system", "user", "assistant", "user"]
    assert brain.asked[0].messages[-1]["content"] == "Next task: Are you sure?"


def test_bad_arguments_are_caller_errors() -> None:
    with pytest.raises(ValueError, match="task"):
        run_agent(ScriptedBrain([]), [], "  ")
    with pytest.raises(ValueError, match="max_steps"):
        run_agent(ScriptedBrain([]), [], "t", max_steps=0)
    with pytest.raises(TypeError, match="a brain is"):
        run_agent(object(), [], "t")  # type: ignore[arg-type]


def test_a_scripted_brain_that_runs_out_stops_as_backend_error() -> None:
    run = run_agent(ScriptedBrain([tool_step("lookup", key="colour")]), [lookup], "t")
    assert run.stop is StopReason.BACKEND_ERROR and "ran out of replies" in run.reason


def test_run_to_dict_is_json() -> None:
    run = run_agent(
        ScriptedBrain([Reply(text=answer_step("x"), usage=Usage(prompt_tokens=3, completion_tokens=2))]),
        [],
        "t",
    )
    data = json.loads(json.dumps(run.to_dict()))
    assert data["stop"] == "answered" and data["usage"]["total_tokens"] == 5
    assert data["events"][-1]["kind"] == "stop"


def _variant_tools(schema: object) -> set[str]:
    assert isinstance(schema, dict)
    return {v["properties"]["tool"]["const"] for v in schema.get("anyOf", [schema])} - {""}


def test_after_a_repeated_call_the_next_step_may_not_call_that_tool_again() -> None:
    other = tool(name="other")(lambda: "x")
    brain = ScriptedBrain([tool_step("lookup", key="colour"), tool_step("lookup", key="colour"), answer_step("red")])
    run = run_agent(brain, [lookup, other], "What colour?")
    assert run.answer == "red"
    schemas = [_variant_tools(a.schema) for a in brain.asked]
    # the repeat returned the same good result: the next step answers (no tool at all); a failed
    # call made again keeps only its own tool out (below)
    assert schemas == [{"lookup", "other"}, {"lookup", "other"}, set()]


def test_an_answer_that_repeats_a_failed_calls_error_is_refused_and_fed_back() -> None:
    brain = ScriptedBrain([
        tool_step("strict_lookup", key="nope"),
        answer_step("ERROR: no such key 'nope'"),
        answer_step("The tool has no key nope (no such key), so I cannot say."),
    ])  # fmt: skip
    run = run_agent(brain, [strict_lookup], "What colour?")
    assert run.steps == 3 and run.answer is not None and run.answer.startswith("The tool has no key")
    assert "an error is not an answer" in brain.asked[2].messages[-1]["content"]
    rejected = [e for e in run.events if isinstance(e, AnswerRejected)]
    assert [e.objection for e in rejected] == ["the answer repeats a failed call's error"]


def test_an_answer_quoting_a_failed_result_without_its_prefix_is_refused_too() -> None:
    brain = ScriptedBrain([tool_step("strict_lookup", key="nope"), answer_step("no such key 'nope' in the table"),
                           answer_step("I cannot find it.")])  # fmt: skip
    assert run_agent(brain, [strict_lookup], "What colour?").answer == "I cannot find it."


def test_an_answer_passing_on_a_refusal_stands_and_the_model_is_told_not_to_retry(tmp_path: Path) -> None:
    from shapeloop import workspace_tools

    (tmp_path / "notes.txt").write_text("hello\n")
    message = (
        "'../../etc/passwd' leads out of the workspace: no tool here can reach it, so tell the user it cannot be done"
    )
    brain = ScriptedBrain([tool_step("read_file", path="../../etc/passwd"), answer_step(message)])
    run = run_agent(brain, workspace_tools(tmp_path), "Read ../../etc/passwd and give me its first line.")
    assert run.answer == message and run.steps == 2
    returned = [e for e in run.events if isinstance(e, ToolReturned)]
    assert [e.status.value for e in returned] == ["denied"] and returned[0].text == f"DENIED: {message}"
    feedback = brain.asked[1].messages[-1]["content"]
    assert "That call was refused: do not make it again." in feedback
    # the raw prefix is accepted as well: it tells the user what happened
    brain = ScriptedBrain([tool_step("read_file", path="/etc/hostname"), answer_step("DENIED: outside")])
    assert run_agent(brain, workspace_tools(tmp_path), "Read /etc/hostname").answer == "DENIED: outside"


def test_a_call_refused_again_with_the_same_refusal_is_answered_next(tmp_path: Path) -> None:
    from shapeloop import workspace_tools

    task = "Read /etc/hostname and tell me what it says."
    script = [tool_step("read_file", path="/etc/hostname"), tool_step("read_file", path="/etc/hostname"),
              answer_step("I cannot read /etc/hostname: it is outside the workspace.")]  # fmt: skip
    brain = ScriptedBrain(list(script))
    run = run_agent(brain, workspace_tools(tmp_path), task)
    assert run.ok and run.steps == 3
    assert _actions(brain.asked[2].schema) == ["answer"]
    assert 'Reply with action "answer" now' in brain.asked[2].messages[-1]["content"]
    # a refusal made once leaves every choice open, and so does the setting turned off
    assert _actions(brain.asked[1].schema) != ["answer"]
    # a refusal that names what to try instead is not the end: /notes.txt meant notes.txt
    (tmp_path / "notes.txt").write_text("hello\n")
    brain = ScriptedBrain([tool_step("read_file", path="/notes.txt"), tool_step("read_file", path="/notes.txt"),
                           tool_step("read_file", path="notes.txt"), answer_step("hello")])  # fmt: skip
    run = run_agent(brain, workspace_tools(tmp_path), "What does /notes.txt say?")
    assert run.answer == "hello" and _actions(brain.asked[2].schema) != ["answer"]
    import shapeloop.loop as loop_module

    saved, loop_module.REFUSAL_ANSWERS = loop_module.REFUSAL_ANSWERS, False
    try:
        brain = ScriptedBrain(list(script))
        run_agent(brain, workspace_tools(tmp_path), task)
        assert _actions(brain.asked[2].schema) != ["answer"]
    finally:
        loop_module.REFUSAL_ANSWERS = saved


def test_a_tool_step_that_names_no_tool_is_a_shape_error_with_its_own_message() -> None:
    brain = ScriptedBrain([tool_step(""), answer_step("red")])
    run = run_agent(brain, [lookup], "Colour?")
    assert run.ok and kinds(run)[:3] == ["step", "reply", "unreadable"]
    assert "tool_call" not in kinds(run)
    feedback = brain.asked[1].messages[-1]["content"]
    assert 'the action is "tool" but "tool" names no tool (the tools are: lookup)' in feedback
    assert "Result of" not in feedback


def _actions(schema: Any) -> list[str]:
    return [v["properties"]["action"]["const"] for v in schema.get("anyOf", [schema])]


def test_after_an_answer_that_repeats_an_error_the_next_step_must_call_a_tool() -> None:
    brain = ScriptedBrain([
        tool_step("strict_lookup", key="nope"),
        answer_step("ERROR: no such key 'nope'"),
        tool_step("strict_lookup", key="colour"),
        answer_step("red"),
    ])  # fmt: skip
    run = run_agent(brain, [strict_lookup, lookup], "What colour?")
    assert run.answer == "red"
    assert [_actions(a.schema) for a in brain.asked] == [
        ["tool", "tool", "answer"], ["tool", "tool", "answer"], ["tool", "tool"], ["tool", "tool", "answer"],
    ]  # fmt: skip
    assert "Call a tool again" in brain.asked[2].messages[-1]["content"]
    # with one tool the answer-less schema is that tool's variant alone, $defs kept
    one = ScriptedBrain([tool_step("strict_lookup", key="nope"), answer_step("ERROR: no such key"), answer_step("x")])
    run_agent(one, [strict_lookup], "What colour?")
    assert _actions(one.asked[2].schema) == ["tool"]


def test_an_answer_copied_from_the_worked_example_is_refused_unless_the_task_is_about_it() -> None:
    brain = ScriptedBrain([
        tool_step("lookup", key="colour"),
        answer_step("A kilo of apples costs 2.40 EUR."),
        answer_step("The colour is red."),
    ])  # fmt: skip
    run = run_agent(brain, [lookup], "What colour?")
    assert run.answer == "The colour is red." and run.steps == 3
    rejected = [e.objection for e in run.events if isinstance(e, AnswerRejected)]
    assert rejected == ["the answer was copied from the prompt's worked example"]
    assert "comes from the example in the instructions" in run.messages[5]["content"]  # kept in the transcript
    # a task, a result or the caller's instructions that speak of apples make the same words an answer
    for task, system in (("Apples are 2.40 EUR a kilo. What does a kilo cost?", None),
                         ("Price?", "We sell apples at 2.40 EUR.")):  # fmt: skip
        run = run_agent(ScriptedBrain([answer_step("A kilo of apples costs 2.40 EUR.")]), [lookup], task, system=system)
        assert run.ok, run.reason
    # without tools there is no example in the prompt, so nothing to copy
    assert run_agent(ScriptedBrain([answer_step("Apples, 2.40.")]), [], "Fruit?").ok


def test_the_worked_example_is_withdrawn_from_the_prompt_once_an_answer_copies_it(tmp_path: Path) -> None:
    copies = ("A kilo of apples costs 2.40 EUR.", "The result gives the price.")  # the example, its reason
    for copied in copies:
        brain = ScriptedBrain(
            [tool_step("lookup", key="colour"), answer_step(copied), answer_step("The colour is red.")]
        )
        transcript = tmp_path / f"{len(copied)}.jsonl"
        run = run_agent(brain, [lookup], "What colour?", transcript_path=transcript)
        assert run.answer == "The colour is red." and run.steps == 3, copied
        # the step is asked again without the example, and without the copy and the feedback on it
        assert "Example, with a made-up tool" in brain.asked[1].messages[0]["content"]
        again = brain.asked[2].messages
        assert "Example, with a made-up tool" not in again[0]["content"] and "Tools:" in again[0]["content"]
        assert [m["role"] for m in again] == ["system", "user", "assistant", "user"]
        assert again[1:] == brain.asked[1].messages[1:]
        # the transcript keeps everything, and notes the new prompt
        entries = [json.loads(line) for line in transcript.read_text().splitlines()]
        changed = [e for e in entries if e["type"] == "system_prompt"]
        assert len(changed) == 1 and changed[0]["step"] == 2 and changed[0]["content"] == again[0]["content"]
        assert sum(copied in m["content"] for m in run.messages if m["role"] == "assistant") == 1
    # once a run: after it, the example's words may be an answer ("apples" for a task on apple)
    brain = ScriptedBrain([answer_step("Apples."), answer_step("Apples.")])
    run = run_agent(brain, [lookup], "What is the plural of 'apple'?")
    assert run.answer == "Apples." and run.steps == 2
    # turned off, the prompt stays as it was
    import shapeloop.loop as loop_module

    saved, loop_module.WITHDRAW_EXAMPLE = loop_module.WITHDRAW_EXAMPLE, False
    try:
        brain = ScriptedBrain([tool_step("lookup", key="colour"), answer_step(copies[0]), answer_step("red")])
        assert run_agent(brain, [lookup], "What colour?").ok
        assert brain.asked[2].messages[0]["content"] == brain.asked[0].messages[0]["content"]
        assert len(brain.asked[2].messages) == len(brain.asked[1].messages) + 2
    finally:
        loop_module.WITHDRAW_EXAMPLE = saved


def test_a_tool_kept_out_after_a_repeat_stays_out_through_a_refused_answer_until_the_next_call() -> None:
    other = tool(name="other")(lambda: "x")
    brain = ScriptedBrain([
        tool_step("lookup", key="colour"), tool_step("lookup", key="colour"),  # a repeat: lookup kept out
        answer_step(""),  # refused (empty): lookup stays out
        tool_step("other"),  # a call: lookup is offered again
        answer_step("red"),
    ])  # fmt: skip
    run = run_agent(brain, [lookup, other], "What colour?")
    assert run.answer == "red"
    assert [_variant_tools(a.schema) for a in brain.asked] == [
        {"lookup", "other"},
        {"lookup", "other"},
        set(),
        {"other"},
        {"lookup", "other"},
    ]  # fmt: skip  (right after the repeat the step must answer; once refused, only lookup stays out)


def test_an_answer_that_repeats_the_loops_own_words_is_refused() -> None:
    brain = ScriptedBrain([
        tool_step("lookup", key="colour"),
        tool_step("lookup", key="colour"),  # the same result again: the next step must answer
        answer_step("You have what it gives."),  # the earlier feedback's words: not refused now (not said)
    ])  # fmt: skip
    run = run_agent(brain, [lookup], "What colour?")
    assert run.ok  # that sentence is no longer in the feedback, so it is not the loop's words
    feedback = brain.asked[2].messages[-1]["content"]
    for copied in ("The result gives the price", feedback.split("\n\n")[-1].split(". ")[0]):
        brain = ScriptedBrain([tool_step("lookup", key="colour"), tool_step("lookup", key="colour"),
                               answer_step(copied), answer_step("It is red.")])  # fmt: skip
        run = run_agent(brain, [lookup], "What colour?")
        assert run.answer == "It is red." and run.steps == 4, copied
        rejected = [e.objection for e in run.events if isinstance(e, AnswerRejected)]
        assert rejected == ["the answer repeats the loop's own instructions"]
        assert any("repeats words of the instructions" in m["content"] for m in run.messages)


def test_the_loops_words_may_be_an_answer_when_the_task_or_a_result_gives_them_or_too_short() -> None:
    # every word of the answer in the task: the task asked for them
    task = "Say this back to me: the result gives the price"
    assert run_agent(ScriptedBrain([answer_step("The result gives the price.")]), [lookup], task).ok
    # three words are too few to call a copy ("call a tool" is a fair answer to "what next?")
    assert run_agent(ScriptedBrain([answer_step("Call a tool.")]), [lookup], "What next?").ok


@tool
def find_employee(name: str) -> str:
    """Find an employee by name."""
    return f"{name}: employee id E-30418, department Sales"


@tool
def get_leave_balance(employee_id: str) -> str:
    """An employee's leave days left."""
    return "17.5 days" if employee_id == "E-30418" else "no such employee"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 4 C"


def test_an_answer_right_after_a_result_that_an_uncalled_tool_takes_is_questioned_once() -> None:
    brain = ScriptedBrain([
        tool_step("find_employee", name="Jonas Berg"),
        answer_step("Jonas Berg's employee id is E-30418."),  # questioned: get_leave_balance takes it
        tool_step("get_leave_balance", employee_id="E-30418"),
        answer_step("Jonas Berg has 17.5 days left."),
    ])  # fmt: skip
    tools = [find_employee, get_leave_balance, get_weather]
    run = run_agent(brain, tools, "How many leave days does Jonas Berg have left?")
    assert run.answer == "Jonas Berg has 17.5 days left." and run.steps == 4
    rejected = [e.objection for e in run.events if isinstance(e, AnswerRejected)]
    assert rejected == ["not yet called, and taking a value the last result gives: get_leave_balance (employee_id)"]
    feedback = brain.asked[2].messages[-1]["content"]
    assert "Do not answer yet. Call get_leave_balance with the employee_id from the last result now" in feedback
    # the step after the question calls that tool, nothing else; then everything is offered again
    assert [_variant_tools(a.schema) for a in brain.asked] == [
        {"find_employee", "get_leave_balance", "get_weather"},
        {"find_employee", "get_leave_balance", "get_weather"},
        {"get_leave_balance"},
        {"find_employee", "get_leave_balance", "get_weather"},
    ]  # fmt: skip
    assert _actions(brain.asked[2].schema) == ["tool"]


def test_the_chain_step_may_offer_the_answer_too_or_everything() -> None:
    import shapeloop.checks as checks_module

    script = [tool_step("find_employee", name="Jonas Berg"), answer_step("E-30418"), answer_step("E-30418")]
    saved = checks_module.CHAIN_STEP
    try:
        cases = (("choose", {"get_leave_balance"}, ["tool", "answer"]),
                 ("open", {"find_employee", "get_leave_balance"}, ["tool", "tool", "answer"]))  # fmt: skip
        for setting, tools, actions in cases:
            checks_module.CHAIN_STEP = setting  # type: ignore[assignment]
            brain = ScriptedBrain(list(script))
            run = run_agent(brain, [find_employee, get_leave_balance], "Jonas Berg's leave?")
            assert run.answer == "E-30418" and run.steps == 3
            assert _variant_tools(brain.asked[2].schema) == tools and _actions(brain.asked[2].schema) == actions
            assert "give your answer again" in brain.asked[2].messages[-1]["content"]
    finally:
        checks_module.CHAIN_STEP = saved


def test_the_chain_question_is_asked_once_and_only_where_a_result_names_what_a_tool_takes() -> None:
    # the same answer given again is accepted
    brain = ScriptedBrain([tool_step("find_employee", name="Jonas Berg"), answer_step("E-30418"),
                           answer_step("E-30418")])  # fmt: skip
    run = run_agent(brain, [find_employee, get_leave_balance], "What is Jonas Berg's employee id?")
    assert run.answer == "E-30418" and run.steps == 2 + 1
    # no tool takes what the result gives (get_weather takes a city: the result says no "city")
    brain = ScriptedBrain([tool_step("find_employee", name="Jonas Berg"), answer_step("E-30418")])
    assert run_agent(brain, [find_employee, get_weather], "Jonas Berg's id?").steps == 2
    # a tool already called with another value is named (its result was for something else)
    brain = ScriptedBrain([tool_step("get_leave_balance", employee_id="E-1"), tool_step("find_employee", name="Jonas"),
                           answer_step("no such employee"), answer_step("no such employee")])  # fmt: skip
    assert run_agent(brain, [find_employee, get_leave_balance], "Leave of Jonas?").steps == 4
    # a tool already called with a value this result gives is not
    brain = ScriptedBrain([tool_step("get_leave_balance", employee_id="E-30418"),
                           tool_step("find_employee", name="Jonas Berg"), answer_step("17.5 days")])  # fmt: skip
    assert run_agent(brain, [find_employee, get_leave_balance], "Leave of E-30418, and whose?").steps == 3
    # turned off
    import shapeloop.checks as checks_module

    saved, checks_module.CHAIN_CHECK = checks_module.CHAIN_CHECK, False
    try:
        brain = ScriptedBrain([tool_step("find_employee", name="Jonas Berg"), answer_step("E-30418")])
        assert run_agent(brain, [find_employee, get_leave_balance], "Jonas Berg's id?").steps == 2
    finally:
        checks_module.CHAIN_CHECK = saved


_STAFF_ID = {"type": "string", "pattern": r"^E-\d{5}$", "description": "employee id"}


def _staff_tool(name: str, description: str, fn: Any) -> Tool:
    parameters = {"type": "object", "properties": {"employee_id": _STAFF_ID}, "required": ["employee_id"]}
    return Tool(name=name, description=description, parameters=parameters, fn=fn)


_FIND_STAFF = Tool(name="findEmployee", description="Find an employee by name; gives the employee id.",
                   parameters={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
                   fn=lambda name: f"{name}: employee id E-20931")  # fmt: skip
_MANAGER = _staff_tool("getManager", "Who an employee reports to.",
                       lambda employee_id: f"manager of {employee_id}: Tomás Ortega (E-11802)")  # fmt: skip
_CONTACT = _staff_tool("getContact", "An employee's work email and phone.",
                       lambda employee_id: f"{employee_id}: t.ortega@corp.example")  # fmt: skip


def test_a_tool_named_before_is_named_again_after_a_new_result_the_task_asks_for() -> None:
    tools = [_FIND_STAFF, _MANAGER, _CONTACT]
    task = "What is the email address of Priya Raman's manager?"
    brain = ScriptedBrain([
        tool_step("findEmployee", name="Priya Raman"),
        answer_step("Priya Raman is E-20931."),  # names getManager and getContact
        tool_step("getManager", employee_id="E-20931"),
        answer_step("Tomás Ortega (E-11802)."),  # names getContact again, with the id no call has used
        tool_step("getContact", employee_id="E-11802"),
        answer_step("t.ortega@corp.example"),
    ])  # fmt: skip
    run = run_agent(brain, tools, task)
    assert run.answer == "t.ortega@corp.example" and run.steps == 6
    rejected = [e.objection for e in run.events if isinstance(e, AnswerRejected)]
    assert rejected == [
        "not yet called, and taking a value the last result gives: getManager (employee_id), getContact (employee_id)",
        "not yet called, and taking a value the last result gives: getContact (employee_id)",
    ]
    assert 'Call getContact with employee_id "E-11802" now' in brain.asked[4].messages[-1]["content"]
    assert _variant_tools(brain.asked[4].schema) == {"getContact"}
    # a task that asks for nothing getContact does: the manager's name stands
    script = [tool_step("findEmployee", name="Priya Raman"), answer_step("E-20931"),
              tool_step("getManager", employee_id="E-20931"), answer_step("Tomás Ortega.")]  # fmt: skip
    run = run_agent(ScriptedBrain(list(script)), tools, "Who is Priya Raman's manager?")
    assert run.answer == "Tomás Ortega." and run.steps == 4
    # nor where the manager's result says "employee id" (getContact's parameter by its name)
    said = _staff_tool("getManager", "Who an employee reports to.",
                       lambda employee_id: "manager: Tomás Ortega, employee id E-11802")  # fmt: skip
    run = run_agent(ScriptedBrain(list(script)), [_FIND_STAFF, said, _CONTACT], "Who is Priya Raman's manager?")
    assert run.answer == "Tomás Ortega." and run.steps == 4
    # nor after the manager's lookup is made again: the repeat offers no getContact, only the answer
    brain = ScriptedBrain([*script[:3], tool_step("getManager", employee_id="E-20931"), answer_step("Tomás Ortega.")])
    run = run_agent(brain, [_FIND_STAFF, said, _CONTACT], "Who is Priya Raman's manager?")
    assert run.answer == "Tomás Ortega." and _actions(brain.asked[4].schema) == ["answer"]
    # nor where the new result writes no id that no call has used
    vacant = _staff_tool("getManager", "Who an employee reports to.",
                         lambda employee_id: f"employee id {employee_id}: no manager on record")  # fmt: skip
    brain = ScriptedBrain([*script[:3], answer_step("She has no manager on record.")])
    run = run_agent(brain, [_FIND_STAFF, vacant, _CONTACT], task)
    assert run.answer == "She has no manager on record." and run.steps == 4
    # named once a run (the variant "chain-once"): the manager's name stands for the email too
    import shapeloop.checks as checks_module

    saved, checks_module.CHAIN_AGAIN = checks_module.CHAIN_AGAIN, False
    try:
        run = run_agent(ScriptedBrain(list(script)), tools, task)
        assert run.answer == "Tomás Ortega." and run.steps == 4
    finally:
        checks_module.CHAIN_AGAIN = saved
    # never named twice for the same result: the same answer given again stands
    brain = ScriptedBrain([tool_step("findEmployee", name="Priya Raman"), answer_step("E-20931"),
                           answer_step("E-20931")])  # fmt: skip
    assert run_agent(brain, tools, task).steps == 3


def test_a_result_ties_an_id_by_its_pattern_where_the_task_asks_for_the_tool_and_the_id_is_new() -> None:
    tools = [_MANAGER, _CONTACT]
    script = [tool_step("getManager", employee_id="E-20931"), answer_step("Tomás Ortega (E-11802)."),
              tool_step("getContact", employee_id="E-11802"), answer_step("t.ortega@corp.example")]  # fmt: skip
    # "E-11802" fits getContact's pattern, though the result never says "employee id"
    brain = ScriptedBrain(list(script))
    run = run_agent(brain, tools, "What is the email address of E-20931's manager?")
    assert run.answer == "t.ortega@corp.example" and run.steps == 4
    assert 'Call getContact with employee_id "E-11802" now' in brain.asked[2].messages[-1]["content"]
    # a task that does not ask for what getContact does: the answer stands
    run = run_agent(ScriptedBrain(list(script)), tools, "Who is E-20931's manager?")
    assert run.answer == "Tomás Ortega (E-11802)." and run.steps == 2
    # two ids no call has used: the tool is named, no id is chosen for the model
    managers = _staff_tool("getManager", "Who an employee reports to.",
                           lambda employee_id: "managers: E-11802 and E-11803")  # fmt: skip
    brain = ScriptedBrain(list(script))
    run_agent(brain, [managers, _CONTACT], "What is the email address of E-20931's manager?")
    assert "Call getContact with the employee_id from the last result now" in brain.asked[2].messages[-1]["content"]
    # only the id a call has used: nothing new to take, the answer stands
    nobody = _staff_tool("getManager", "Who an employee reports to.",
                         lambda employee_id: f"manager of {employee_id}: an outside contractor")  # fmt: skip
    brain = ScriptedBrain([tool_step("getManager", employee_id="E-20931"), answer_step("An outside contractor.")])
    run = run_agent(brain, [nobody, _CONTACT], "What is the email address of E-20931's manager?")
    assert run.answer == "An outside contractor." and run.steps == 2


def test_the_chain_question_reads_what_a_parameters_description_says_a_result_gives() -> None:
    molar_mass = Tool(name="molar_mass", description="Molar mass of a formula.",
                      parameters={"type": "object", "properties": {"formula": {"type": "string"}},
                                  "required": ["formula"]},
                      fn=lambda formula: f"{formula}: 180.156 g/mol")  # fmt: skip
    moles = Tool(name="grams_to_moles", description="Moles from a mass and a molar mass.",
                 parameters={"type": "object", "required": ["grams", "molar_mass"],
                             "properties": {"grams": {"type": "number", "description": "mass in grams"},
                                            "molar_mass": {"type": "number", "description": "in g/mol"}}},
                 fn=lambda grams, molar_mass: f"{grams / molar_mass:.4f} mol")  # fmt: skip
    task = "How many moles are in 50 g of glucose (C6H12O6)?"
    brain = ScriptedBrain([tool_step("molar_mass", formula="C6H12O6"), answer_step("180.156 moles."),
                           tool_step("grams_to_moles", grams=50, molar_mass=180.156),
                           answer_step("0.2775 mol.")])  # fmt: skip
    run = run_agent(brain, [molar_mass, moles], task)
    assert run.answer == "0.2775 mol." and run.steps == 4
    rejected = [e.objection for e in run.events if isinstance(e, AnswerRejected)]
    assert rejected == ["not yet called, and taking a value the last result gives: grams_to_moles (molar_mass)"]
    assert _variant_tools(brain.asked[2].schema) == {"grams_to_moles"}
    # a task that asks for what the tool called does, and nothing the other does: the answer stands
    brain = ScriptedBrain([tool_step("molar_mass", formula="C6H12O6"), answer_step("180.156 g/mol.")])
    assert run_agent(brain, [molar_mass, moles], "What is the molar mass of glucose (C6H12O6)?").steps == 2
    # a task word that the result already gives asks for nothing more: "temperature" after a result
    # that says it, where another tool's description names it too
    weather = Tool(name="get_weather", description="Current weather for a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                   fn=lambda city: f"{city}: temperature 8 C")  # fmt: skip
    convert = Tool(name="convert_temperature", description="Celsius to Fahrenheit.",
                   parameters={"type": "object", "required": ["celsius"],
                               "properties": {"celsius": {"type": "number", "description": "temperature in C"}}},
                   fn=lambda celsius: f"{celsius * 1.8 + 32:g} F")  # fmt: skip
    brain = ScriptedBrain([tool_step("get_weather", city="Oslo"), answer_step("It is 8 C.")])
    assert run_agent(brain, [weather, convert], "What is the temperature in Oslo right now?").steps == 2
    # by the parameters' names alone (the variant "chain-by-name"), the answer stands
    import shapeloop.checks as checks_module

    saved, checks_module.CHAIN_DESCRIBED = checks_module.CHAIN_DESCRIBED, False
    try:
        brain = ScriptedBrain([tool_step("molar_mass", formula="C6H12O6"), answer_step("180.156 moles.")])
        assert run_agent(brain, [molar_mass, moles], task).steps == 2
    finally:
        checks_module.CHAIN_DESCRIBED = saved


def test_the_chain_question_never_points_to_a_tool_that_acts() -> None:
    @tool(needs_approval=True)
    def fire_employee(employee_id: str) -> str:
        """Fire an employee."""
        return "done"

    brain = ScriptedBrain([tool_step("find_employee", name="Jonas Berg"), answer_step("E-30418")])
    run = run_agent(brain, [find_employee, fire_employee], "Jonas Berg's id?")
    assert run.answer == "E-30418" and run.steps == 2


def test_the_chain_question_is_not_asked_where_it_cannot_help() -> None:
    tools = [find_employee, get_leave_balance]
    task = "What is Jonas Berg's employee id?"
    # no step left to act on it: the answer stands
    brain = ScriptedBrain([tool_step("find_employee", name="Jonas Berg"), answer_step("E-30418")])
    run = run_agent(brain, tools, task, max_steps=2)
    assert run.answer == "E-30418" and run.stop is StopReason.ANSWERED

    # a result that holds no value ("no such employee") gives nothing to take
    @tool
    def find_person(name: str) -> str:
        """Find an employee by name."""
        return "no employee by that name"

    brain = ScriptedBrain([tool_step("find_person", name="Jonas"), answer_step("There is no such employee.")])
    assert run_agent(brain, [find_person, get_leave_balance], task).steps == 2

    # the step had to answer (a repeat with the same result): the answer is not questioned
    brain = ScriptedBrain([tool_step("find_employee", name="Jonas Berg"), tool_step("find_employee", name="Jonas Berg"),
                           answer_step("E-30418")])  # fmt: skip
    assert run_agent(brain, tools, task).steps == 3


def test_a_typed_answer_is_questioned_by_the_chain_check_without_failing() -> None:
    from pydantic import BaseModel

    class Employee(BaseModel):
        employee: str

    reply = json.dumps({"reason": "r", "action": "answer", "tool": "", "args": {}, "answer": {"employee": "E-30418"}})
    brain = ScriptedBrain([tool_step("find_employee", name="Jonas Berg"), reply, reply])
    run = run_agent(brain, [find_employee, get_leave_balance], "Jonas Berg's id?", output_type=Employee)
    assert run.output == Employee(employee="E-30418") and run.steps == 3
    rejected = [e for e in run.events if isinstance(e, AnswerRejected)]
    assert len(rejected) == 1 and "E-30418" in rejected[0].text


def test_the_callers_objection_may_be_taken_up_word_for_word() -> None:
    wanted = "No refund is possible for this order."

    def accept(text: str) -> bool | str:
        return text == wanted or f"answer exactly: {wanted}"

    brain = ScriptedBrain([answer_step("Maybe."), answer_step(wanted)])
    run = run_agent(brain, [lookup], "Can I get a refund?", accept_answer=accept)
    assert run.answer == wanted


def test_refusals_and_answers_in_other_scripts_are_not_taken_for_copies() -> None:
    for answer in ("No tool fits the task.", "I cannot do the task.", "Невозможно: the call failed or was refused"):
        assert run_agent(ScriptedBrain([answer_step(answer)]), [lookup], "Book me a flight.").answer == answer


@tool
def read_file(path: str) -> str:
    """Read a text file."""
    return "maintainer: Ines Alvarez" if path == "readme.md" else f"ERROR: no file {path}"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return "sent"


def test_an_answer_before_any_call_to_a_task_naming_a_file_is_taken_back_once_for_a_call() -> None:
    brain = ScriptedBrain([
        answer_step("The maintainer is @johndoe."),  # made up: the file was never read
        tool_step("read_file", path="readme.md"),
        answer_step("Ines Alvarez maintains it."),
    ])  # fmt: skip
    run = run_agent(brain, [read_file, get_weather], "Who is the maintainer named in readme.md?")
    assert run.answer == "Ines Alvarez maintains it." and run.steps == 3
    rejected = [e.objection for e in run.events if isinstance(e, AnswerRejected)]
    assert rejected == ["given before any call, though the task names what a tool reads: read_file (path 'readme.md')"]
    # the answer is taken back unsaid: the step is asked again on the same messages, with a call
    # to that tool as the only choice; the transcript keeps the answer
    assert brain.asked[1].messages == brain.asked[0].messages
    assert any("@johndoe" in m["content"] for m in run.messages)
    assert _variant_tools(brain.asked[1].schema) == {"read_file"} and _actions(brain.asked[1].schema) == ["tool"]
    assert _variant_tools(brain.asked[2].schema) == {"read_file", "get_weather"}

    # asking the user for the file is not declining: the loop can read it
    brain = ScriptedBrain([answer_step("I need the contents of readme.md."), tool_step("read_file", path="readme.md"),
                           answer_step("Ines Alvarez.")])  # fmt: skip
    assert run_agent(brain, [read_file], "Who is the maintainer named in readme.md?").steps == 3

    # asked once: the same answer given again stands
    brain = ScriptedBrain([answer_step("It is Ines."), answer_step("It is Ines.")])
    run = run_agent(brain, [read_file], "Who is named in notes/team.txt?")
    assert run.answer == "It is Ines." and run.steps == 2


def test_the_unread_question_is_not_asked_where_nothing_is_unread_or_the_answer_declines() -> None:
    tools = [read_file, get_weather]
    cases = [
        ("What is the weather in Oslo?", "It is 4 C."),  # no file named
        ("Delete /data/reports/q3.pdf.", "I cannot delete files with these tools."),  # declines
        ("e.g. what is 2.5 times 2?", "5"),  # an abbreviation and a number, not files
    ]
    for task, answer in cases:
        run = run_agent(ScriptedBrain([answer_step(answer)]), tools, task)
        assert run.answer == answer and run.steps == 1, task
    # after a call, another question is asked (left_unread, below), not this one
    brain = ScriptedBrain([tool_step("get_weather", city="Oslo"), answer_step("Oslo: 4 C"), answer_step("4 C")])
    run = run_agent(brain, tools, "Weather in Oslo, then notes.txt?")
    assert [e.objection for e in run.events if isinstance(e, AnswerRejected)] == [
        "no call has taken what the task names: read_file (path 'notes.txt')"
    ]
    # an email address the task gives, for a tool that acts: not asked (it would act on the user's behalf)
    brain = ScriptedBrain([answer_step("Done.")])
    assert run_agent(brain, [send_email], "Write to ana@example.com: hello").steps == 1
    # no step left to act on it
    assert run_agent(ScriptedBrain([answer_step("Ines")]), tools, "Who is in readme.md?", max_steps=1).ok
    # turned off
    import shapeloop.checks as checks_module

    saved, checks_module.UNREAD_CHECK = checks_module.UNREAD_CHECK, False
    try:
        assert run_agent(ScriptedBrain([answer_step("Ines")]), tools, "Who is in readme.md?").steps == 1
    finally:
        checks_module.UNREAD_CHECK = saved


def test_an_answer_after_calls_that_left_a_named_file_unread_is_questioned_once_for_a_call() -> None:
    # qwen2.5-coder-0.5b read city_a.txt alone and answered "Yes" to "Do city_a.txt and city_b.txt
    # name the same city?"
    task = "Do city_a.txt and city_b.txt name the same city? Answer yes or no."
    brain = ScriptedBrain([tool_step("read_file", path="./city_a.txt"), answer_step("Yes"),
                           tool_step("read_file", path="city_b.txt"), answer_step("No")])  # fmt: skip
    run = run_agent(brain, [read_file, get_weather, send_email], task)
    assert run.answer == "No" and run.steps == 4
    rejected = [e.objection for e in run.events if isinstance(e, AnswerRejected)]
    assert rejected == ["no call has taken what the task names: read_file (path 'city_b.txt')"]
    assert brain.asked[2].messages[-1]["content"] == (
        "The task names 'city_b.txt', and no call has taken it yet. Call read_file with path 'city_b.txt'."
    )
    assert _variant_tools(brain.asked[2].schema) == {"read_file"} and _actions(brain.asked[2].schema) == ["tool"]

    # every value left is named, the call for the first
    brain = ScriptedBrain([tool_step("read_file", path="a.txt"), answer_step("Same."),
                           tool_step("read_file", path="b.txt"), answer_step("Same.")])  # fmt: skip
    run_agent(brain, [read_file], "Compare a.txt, b.txt and /var/log/syslog.")
    assert brain.asked[2].messages[-1]["content"] == (
        "The task names 'b.txt', '/var/log/syslog', and no call has taken them yet. Call read_file with path 'b.txt'."
    )

    # asked once a run: the same answer after another call stands
    brain = ScriptedBrain([tool_step("get_weather", city="Oslo"), answer_step("Yes"),
                           tool_step("get_weather", city="Bergen"), answer_step("Yes")])  # fmt: skip
    assert run_agent(brain, [read_file, get_weather], task).answer == "Yes"


def test_the_left_unread_question_is_not_asked_where_every_named_file_was_taken() -> None:
    tools = [read_file, get_weather, send_email]
    cases = [
        # a call took each, as written or as a path that ends with it, by any tool
        ("Compare notes/a.txt and b.txt.", [("read_file", "a.txt"), ("read_file", "sub/b.txt")], "Same."),
        ("Does README.md name Ines?", [("read_file", "readme.md")], "Yes."),
        # the answer declines or asks for what it lacks
        ("Compare a.txt and b.txt.", [("read_file", "a.txt")], "I cannot read b.txt."),
        ("Compare a.txt and b.txt.", [("read_file", "a.txt")], "Please provide b.txt."),
        # nothing named that a tool reads
        ("What is the weather in Oslo?", [("get_weather", "Oslo")], "4 C"),
    ]
    for task, calls, answer in cases:
        steps = [tool_step(name, **({"path": value} if name == "read_file" else {"city": value}))
                 for name, value in calls]  # fmt: skip
        run = run_agent(ScriptedBrain([*steps, answer_step(answer)]), tools, task)
        assert run.answer == answer and run.steps == len(calls) + 1, task

    # taken inside a list, a nested object or a query; written with backslashes; a URL's fragment
    read_files = tool(name="read_files")(lambda paths: "x")
    run_sql = tool(name="run_sql")(lambda query: "x")
    grep = tool(name="grep")(lambda options: "x")
    taken = [
        ("Compare a.txt and b.txt.", "read_files", {"paths": ["a.txt", "b.txt"]}),
        ("Compare a.txt and b.txt.", "grep", {"options": {"file": "a.txt", "also": ["b.txt"]}}),
        ("Sum sales.csv.", "run_sql", {"query": "SELECT sum(x) FROM 'sales.csv'"}),
        ("Read data\\report.txt.", "read_file", {"path": "data/report.txt"}),
        ("Fetch https://a.example/guide/#install", "fetch_page", {"url": "https://a.example/guide/"}),
    ]
    fetch_page = tool(name="fetch_page")(lambda url: "x")
    for task, name, args in taken:
        brain = ScriptedBrain([json.dumps({"reason": "r", "action": "tool", "tool": name, "args": args,
                                           "answer": ""}), answer_step("Done.")])  # fmt: skip
        run = run_agent(brain, [*tools, read_files, run_sql, grep, fetch_page], task)
        assert run.answer == "Done." and run.steps == 2, task
    # a file the task keeps from being read
    for task in ("Without opening secrets.env, tell me the port in config.yaml.",
                 "Read notes.txt; only if it is empty, read data.csv instead."):  # fmt: skip
        brain = ScriptedBrain([tool_step("read_file", path="config.yaml" if "config" in task else "notes.txt"),
                               answer_step("Port 80.")])  # fmt: skip
        assert run_agent(brain, tools, task).steps == 2, task

    # a tool that takes more than the value is not made to take it alone (a message needs a body)
    @tool
    def email_customer(customer_email: str, body: str) -> str:
        """Email a customer."""
        raise AssertionError("never called")

    brain = ScriptedBrain([tool_step("get_weather", city="Oslo"), answer_step("Not shipped; nobody told.")])
    assert run_agent(brain, [get_weather, email_customer], "If Oslo is dry, tell ana@example.com.").steps == 2

    # a tool that acts is never the call asked for: the email address is for send_report alone
    @tool
    def send_report(customer_email: str) -> str:
        """Send the report."""
        return "sent"

    assert grounding.written_inputs(send_report.parameters, "to ana@example.com") == [
        ("customer_email", ["ana@example.com"])
    ]
    brain = ScriptedBrain([tool_step("get_weather", city="Oslo"), answer_step("Sent.")])
    assert run_agent(brain, [*tools, send_report], "Mail the Oslo weather to ana@example.com").steps == 2
    # turned off
    import shapeloop.checks as checks_module

    saved, checks_module.LEFT_UNREAD_CHECK = checks_module.LEFT_UNREAD_CHECK, False
    try:
        brain = ScriptedBrain([tool_step("read_file", path="a.txt"), answer_step("Yes")])
        assert run_agent(brain, tools, "Compare a.txt and b.txt.").steps == 2
    finally:
        checks_module.LEFT_UNREAD_CHECK = saved


def test_a_result_that_points_to_one_file_questions_an_answer_and_the_next_step_reads_it(tmp_path: Path) -> None:
    from shapeloop import workspace_tools

    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "pointer.txt").write_text("The answer you want is in data/secret.txt\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "secret.txt").write_text("marmalade\n")
    task = "notes/pointer.txt says where the answer is. What is it?"
    brain = ScriptedBrain([
        tool_step("read_file", path="notes/pointer.txt"),
        answer_step("The answer you want is in data/secret.txt"),  # questioned: it points to a file
        tool_step("read_file", path="data/secret.txt"),
        answer_step("marmalade"),
    ])  # fmt: skip
    run = run_agent(brain, workspace_tools(tmp_path), task)
    assert run.answer == "marmalade" and run.steps == 4
    rejected = [e.objection for e in run.events if isinstance(e, AnswerRejected)]
    assert rejected == ["not yet called, and taking a value the last result gives: read_file (path)"]
    assert _variant_tools(brain.asked[2].schema) == {"read_file"} and _actions(brain.asked[2].schema) == ["tool"]


def test_a_result_naming_a_file_already_used_or_many_files_points_nowhere(tmp_path: Path) -> None:
    from shapeloop import workspace_tools

    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("x\n")
    tools = workspace_tools(tmp_path, write=True)
    # the file just written: a call already used it
    brain = ScriptedBrain([tool_step("append_note", path="a.txt", text="hi"), answer_step("Done.")])
    assert run_agent(brain, tools, "Add hi to a.txt", approve=lambda call: True).steps == 2
    # a listing names many files: not a pointer to one
    brain = ScriptedBrain([tool_step("list_files"), answer_step("a.txt and b.txt")])
    assert run_agent(brain, tools, "Which files are there?").steps == 2


def test_an_answer_without_yes_or_no_to_a_task_that_asks_for_one_is_questioned_once() -> None:
    task = "Does the table hold a colour? Answer yes or no."
    brain = ScriptedBrain([tool_step("lookup", key="colour"), answer_step("The colour is red."),
                           answer_step("Yes, it holds red.")])  # fmt: skip
    run = run_agent(brain, [lookup], task)
    assert run.answer == "Yes, it holds red." and run.steps == 3
    rejected = [e.objection for e in run.events if isinstance(e, AnswerRejected)]
    assert rejected == ["the task asks for yes or no"]
    assert "starting with Yes or No" in brain.asked[2].messages[-1]["content"]
    # once a run: the same answer again stands; an answer with "no" stands at once
    brain = ScriptedBrain([answer_step("red"), answer_step("red")])
    assert run_agent(brain, [lookup], "Is it red? yes or no").steps == 2
    assert run_agent(ScriptedBrain([answer_step("No, there is no wolf.")]), [lookup], task).steps == 1
    # a task that does not ask for yes or no
    assert run_agent(ScriptedBrain([answer_step("red")]), [lookup], "Which colour?").steps == 1


def test_an_answer_without_a_number_to_a_task_that_asks_how_many_is_questioned_once_then_answers() -> None:
    task = "How many colours does the table hold?"
    brain = ScriptedBrain([tool_step("lookup", key="colour"), answer_step("The colour red."),
                           answer_step("It holds 1 colour.")])  # fmt: skip
    run = run_agent(brain, [lookup], task)
    assert run.answer == "It holds 1 colour." and run.steps == 3
    assert [e.objection for e in run.events if isinstance(e, AnswerRejected)] == ["the task asks how many"]
    assert "with the number" in brain.asked[2].messages[-1]["content"]
    assert _actions(brain.asked[2].schema) == ["answer"]  # after a result, the next step answers
    # once a run; digits, number words and a declining answer stand at once; other tasks are not asked
    assert run_agent(ScriptedBrain([answer_step("red"), answer_step("red")]), [lookup], task).steps == 2
    for answer in ("3 colours.", "There are no colours.", "Twelve.", "I cannot count them with this tool."):
        assert run_agent(ScriptedBrain([answer_step(answer)]), [lookup], task).steps == 1, answer
    assert run_agent(ScriptedBrain([answer_step("red")]), [lookup], "Which colour?").steps == 1
    assert run_agent(ScriptedBrain([answer_step("red")]), [lookup], 'What does "how many" mean here?').steps == 1
    # quantity words, an honest "does not say", an answer asking for what it lacks, and a yes/no task
    for answer in ("A couple.", "Nobody.", "All of them.", "The table does not say.", "I need the table's name."):
        assert run_agent(ScriptedBrain([answer_step(answer)]), [lookup], task).steps == 1, answer
    # the digits of a date or an id are not a count: the file's lines given back are questioned
    for answer in ("2026-11-01 ERROR disk full\n2026-11-01 INFO retry", "See E-30418."):
        assert run_agent(ScriptedBrain([answer_step(answer), answer_step("2")]), [lookup], task).steps == 2, answer
    yes_no = "Is there a limit on how many colours it holds? Answer yes or no."
    assert run_agent(ScriptedBrain([answer_step("Yes.")]), [lookup], yes_no).steps == 1


def test_an_answer_that_speaks_of_the_results_and_says_nothing_of_them_is_questioned_once_then_answers() -> None:
    task = "Which colour does the table hold?"
    talk = "The result does not give the colour the table holds."
    brain = ScriptedBrain([tool_step("lookup", key="colour"), answer_step(talk), answer_step("Red.")])
    run = run_agent(brain, [lookup], task)
    assert run.answer == "Red." and run.steps == 3
    objection = "the answer speaks of the results and says nothing the task did not"
    assert [e.objection for e in run.events if isinstance(e, AnswerRejected)] == [objection]
    assert "the words and numbers the results give" in brain.asked[2].messages[-1]["content"]
    assert _actions(brain.asked[2].schema) == ["answer"]
    # once a run: the same talk again stands
    brain = ScriptedBrain([tool_step("lookup", key="colour"), answer_step(talk), answer_step(talk)])
    assert run_agent(brain, [lookup], task).answer == talk
    # an answer forced after a repeated call is asked too
    same = "The result is the same as the previous call."
    brain = ScriptedBrain([tool_step("lookup", key="colour"), tool_step("lookup", key="colour"),
                           answer_step(same), answer_step("Red.")])  # fmt: skip
    run = run_agent(brain, [lookup], task)
    assert run.answer == "Red." and [e.objection for e in run.events if isinstance(e, AnswerRejected)] == [objection]
    # it stands at once: with a word or a number the task does not hold, when it declines, with no
    # talk of results, and before any result
    for answer in ("The result says the colour is red.", "The result lists 2 colours.", "The output is empty.",
                   "I cannot tell from the result.", "I could not find it in the result.",
                   "The table does not give the colour."):  # fmt: skip
        brain = ScriptedBrain([tool_step("lookup", key="colour"), answer_step(answer)])
        assert run_agent(brain, [lookup], task).steps == 2, answer
    # nor to a question that a yes or a no answers, whose answer may be all its words
    for closed in ("Was the colour in the result red?", "Look it up. Is the table's result red?"):
        brain = ScriptedBrain([tool_step("lookup", key="colour"), answer_step("The result was red.")])
        assert run_agent(brain, [lookup], closed).steps == 2, closed
    assert run_agent(ScriptedBrain([answer_step(talk)]), [lookup], task).steps == 1
    import shapeloop.checks as checks_module

    saved, checks_module.RESULTS_TALK_CHECK = checks_module.RESULTS_TALK_CHECK, False
    try:
        brain = ScriptedBrain([tool_step("lookup", key="colour"), answer_step(talk)])
        assert run_agent(brain, [lookup], task).answer == talk
    finally:
        checks_module.RESULTS_TALK_CHECK = saved


def test_an_answer_the_step_has_to_give_after_a_good_result_has_its_reason_led_by_what_the_result_says() -> None:
    lead = '^The result says[^\\x00-\\x1f"\\\\]*$'
    script = [tool_step("lookup", key="colour"), tool_step("lookup", key="colour"),
              answer_step("Red.", reason="The result says red")]  # fmt: skip
    brain = ScriptedBrain(script)
    assert run_agent(brain, [lookup], "Which colour?").answer == "Red."
    reasons = [_reason_patterns(asked.schema) for asked in brain.asked]
    assert reasons == [set(), set(), {lead}]  # only the step that has to answer
    # after a failed call made again, the step answers without a lead
    brain = ScriptedBrain([tool_step("strict_lookup", key="size"), tool_step("strict_lookup", key="size"),
                           answer_step("There is no size.")])  # fmt: skip
    run_agent(brain, [strict_lookup], "Which size?")
    assert _actions(brain.asked[2].schema) == ["answer"] and _reason_patterns(brain.asked[2].schema) == set()
    import shapeloop.loop as loop_module

    saved, loop_module.ANSWER_LEAD = loop_module.ANSWER_LEAD, False
    try:
        brain = ScriptedBrain(script)
        run_agent(brain, [lookup], "Which colour?")
        assert _reason_patterns(brain.asked[2].schema) == set()
    finally:
        loop_module.ANSWER_LEAD = saved


def _reason_patterns(schema: Any) -> set[str]:
    return {v["properties"]["reason"].get("pattern") for v in schema.get("anyOf", [schema])} - {None}


def test_the_constrained_step_holds_a_documented_date_layout_and_the_tool_keeps_its_own_schema() -> None:
    @tool
    def day_of_week(date: str) -> str:
        """The day of the week of a date.

        Args:
            date: the date, YYYY-MM-DD.
        """
        return "a Tuesday"

    pattern = '"pattern": "^\\\\d{4}-\\\\d{2}-\\\\d{2}$"'
    # values not checked: the layout alone
    brain = ScriptedBrain([tool_step("day_of_week", date="1789-07-14"), answer_step("A Tuesday.")])
    assert run_agent(brain, [day_of_week], "Weekday of 14 July 1789?", ground_values=False).ok
    assert all(pattern in json.dumps(asked.schema) for asked in brain.asked)
    assert "pattern" not in json.dumps(day_of_week.parameters)
    # values checked: the dates the task writes, which the check takes, and no other
    brain = ScriptedBrain([tool_step("day_of_week", date="1789-07-14"), answer_step("A Tuesday.")])
    assert run_agent(brain, [day_of_week], "Weekday of 14 July 1789?").ok
    assert '"enum": ["1789-07-14"]' in json.dumps(brain.asked[0].schema)
    assert pattern not in json.dumps(brain.asked[0].schema)
    # no date written: the layout, and the check
    brain = ScriptedBrain([tool_step("day_of_week", date="1789-07-14"), answer_step("I cannot tell.")])
    run = run_agent(brain, [day_of_week], "What weekday was the storming of the Bastille?")
    assert pattern in json.dumps(brain.asked[0].schema) and any(isinstance(e, CallRefused) for e in run.events)
    import shapeloop.offer as offer_module

    saved, offer_module.LAYOUT_PATTERNS = offer_module.LAYOUT_PATTERNS, False
    try:
        brain = ScriptedBrain([answer_step("A Tuesday.")])
        assert run_agent(brain, [day_of_week], "Weekday of 14 July 1789?", ground_values=False).ok
        assert pattern not in json.dumps(brain.asked[0].schema)
    finally:
        offer_module.LAYOUT_PATTERNS = saved
    saved, offer_module.WRITTEN_CHOICES = offer_module.WRITTEN_CHOICES, False
    try:
        brain = ScriptedBrain([tool_step("day_of_week", date="1789-07-14"), answer_step("A Tuesday.")])
        assert run_agent(brain, [day_of_week], "Weekday of 14 July 1789?").ok
        assert pattern in json.dumps(brain.asked[0].schema) and "enum" not in json.dumps(brain.asked[0].schema)
    finally:
        offer_module.WRITTEN_CHOICES = saved


def test_the_written_dates_offered_follow_the_conversation_step_by_step() -> None:
    @tool
    def find_event(name: str) -> str:
        """Find an event by name."""
        return "event_id EV-7, the launch, on 2025-12-25"

    @tool
    def weekday(event_id: str, date: str) -> str:
        """The weekday of an event.

        Args:
            event_id: the event.
            date: its date, YYYY-MM-DD.
        """
        return "a Thursday"

    steps = [tool_step("find_event", name="launch"), answer_step("EV-7"), answer_step("A Thursday.")]
    brain = ScriptedBrain(steps)
    run_agent(brain, [find_event, weekday], "Which weekday is the launch? It was moved from 2025-04-08.")
    assert '"enum": ["2025-04-08"]' in json.dumps(brain.asked[0].schema)
    # the result writes another date: the next steps offer both (the chain question's step too)
    for asked in brain.asked[1:]:
        assert '"enum": ["2025-04-08", "2025-12-25"]' in json.dumps(asked.schema)
    assert _variant_tools(brain.asked[2].schema) == {"weekday"}  # the chain question: call it


def test_the_constrained_step_holds_an_id_to_one_word_and_the_tool_keeps_its_own_schema() -> None:
    @tool
    def get_hotel(hotel_id: str) -> str:
        """A hotel's details."""
        return f"{hotel_id}: free cancellation"

    brain = ScriptedBrain([tool_step("get_hotel", hotel_id="H-8812"), answer_step("Free cancellation.")])
    assert run_agent(brain, [get_hotel], "Can I cancel at hotel H-8812?").ok
    offered = json.dumps(brain.asked[0].schema)
    assert '"hotel_id": {"type": "string", "pattern": ' in offered and "pattern" not in json.dumps(get_hotel.parameters)
    # a hotel the task quotes may be written with its spaces, from the first step on
    brain = ScriptedBrain([tool_step("get_hotel", hotel_id="Gion Garden Inn"), answer_step("Free cancellation.")])
    assert run_agent(brain, [get_hotel], 'Can I cancel at "Gion Garden Inn"?').ok
    assert "|Gion Garden Inn)$" in json.dumps(brain.asked[0].schema)
    import shapeloop.offer as offer_module

    saved, offer_module.ID_PATTERNS = offer_module.ID_PATTERNS, False
    try:
        brain = ScriptedBrain([answer_step("Free cancellation.")])
        run_agent(brain, [get_hotel], "Can I cancel at hotel H-8812?")
        assert "pattern" not in json.dumps(brain.asked[0].schema)
    finally:
        offer_module.ID_PATTERNS = saved


def test_a_tool_whose_id_nothing_given_could_fill_is_left_out_until_a_result_gives_one() -> None:
    @tool
    def find_employee(name: str) -> str:
        """Find an employee by name."""
        return f"E-20931 {name}"

    @tool
    def get_manager(employee_id: str) -> str:
        """An employee's manager.

        Args:
            employee_id: employee id, e.g. E-12345
        """
        return "E-30418 Ola Nordmann"

    @tool
    def get_post(post_id: int) -> str:
        """A post by its number."""
        return "Hello"

    tools = [find_employee, get_manager, get_post]
    steps = [tool_step("find_employee", name="Priya Raman"), tool_step("get_manager", employee_id="E-20931")]
    brain = ScriptedBrain([*steps, answer_step("Ola Nordmann")])
    assert run_agent(brain, tools, "Who is Priya Raman's manager?").answer == "Ola Nordmann"
    # no digit in the task: neither the text id shaped like "E-12345" nor the number can be filled yet
    assert _variant_tools(brain.asked[0].schema) == {"find_employee"}
    # the result writes "E-20931" (and a number): both are offered from then on
    assert _variant_tools(brain.asked[1].schema) == {"find_employee", "get_manager", "get_post"}
    # a task that writes an id of the example's shape, or a number, offers them at once
    brain = ScriptedBrain([answer_step("Ola Nordmann")])
    run_agent(brain, tools, "Who manages E-20931, and what is post 7?")
    assert _variant_tools(brain.asked[0].schema) == {"find_employee", "get_manager", "get_post"}
    # a number is not an id of the shape "E-12345"
    brain = ScriptedBrain([answer_step("Ola Nordmann")])
    run_agent(brain, tools, "Who manages the 3 of them?")
    assert _variant_tools(brain.asked[0].schema) == {"find_employee", "get_post"}
    # where every tool needs an id, the step may only answer (and say what it needs)
    brain = ScriptedBrain([answer_step("Which employee id?")])
    assert run_agent(brain, [get_manager], "Who is my manager?").answer == "Which employee id?"
    assert _variant_tools(brain.asked[0].schema) == set()
    import shapeloop.loop as loop_module

    saved, loop_module.ID_SOURCES = loop_module.ID_SOURCES, False
    try:
        brain = ScriptedBrain([answer_step("Ola Nordmann")])
        run_agent(brain, tools, "Who is Priya Raman's manager?")
        assert _variant_tools(brain.asked[0].schema) == {"find_employee", "get_manager", "get_post"}
    finally:
        loop_module.ID_SOURCES = saved
    # nor with the id check turned off
    brain = ScriptedBrain([answer_step("Ola Nordmann")])
    run_agent(brain, tools, "Who is Priya Raman's manager?", ground_ids=False)
    assert _variant_tools(brain.asked[0].schema) == {"find_employee", "get_manager", "get_post"}


def test_a_question_never_makes_the_next_step_call_a_tool_that_acts_and_needs_room_to_help() -> None:
    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        return "deleted"

    # the task names a file, but the only tool that takes it deletes: the answer stands
    run = run_agent(ScriptedBrain([answer_step("It sets up your shell.")]), [delete_file], "What is ~/.bashrc for?")
    assert run.answer == "It sets up your shell." and run.steps == 1
    # a question that makes the next step call needs a call and an answer left
    brain = ScriptedBrain([answer_step("Ines")])
    run = run_agent(brain, [read_file], "Who is named in readme.md?", max_steps=2)
    assert run.answer == "Ines" and run.steps == 1


def test_a_yes_or_no_question_after_a_result_makes_the_next_step_answer_and_spares_typed_or_declining_answers() -> None:
    task = "Does the table hold a colour? Answer yes or no."
    brain = ScriptedBrain([tool_step("lookup", key="colour"), answer_step("red"), answer_step("Yes.")])
    assert run_agent(brain, [lookup], task).answer == "Yes."
    assert _variant_tools(brain.asked[2].schema) == set() and _actions(brain.asked[2].schema) == ["answer"]
    for answer in ("I cannot tell without the table.", "Nope.", "Yep, red."):
        assert run_agent(ScriptedBrain([answer_step(answer)]), [lookup], task).steps == 1, answer
    run = run_agent(ScriptedBrain([answer_step(True)]), [lookup], task, output_type=bool)
    assert run.output is True and run.steps == 1


def test_the_chain_question_for_a_pointer_names_the_value_to_take() -> None:
    @tool
    def open_note(path: str) -> str:
        """Open a note."""
        return "See notes/two.txt for the answer." if path == "notes/one.txt" else "42"

    brain = ScriptedBrain([tool_step("open_note", path="notes/one.txt"), answer_step("See notes/two.txt."),
                           tool_step("open_note", path="notes/two.txt"), answer_step("42")])  # fmt: skip
    assert run_agent(brain, [open_note], "What does notes/one.txt lead to?").answer == "42"
    assert 'Call open_note with path "notes/two.txt" now' in brain.asked[2].messages[-1]["content"]


def test_acts_reads_a_tools_name_for_a_verb_that_changes_something() -> None:
    from shapeloop import Tool
    from shapeloop.checks import acts

    def named(name: str, needs_approval: bool = False) -> Tool:
        return Tool(name=name, description="", parameters={"type": "object", "properties": {}}, fn=lambda: "",
                    needs_approval=needs_approval)  # fmt: skip

    for name in ("delete_file", "sendEmail", "files.write", "book_hotel", "create_event", "disable_account",
                 "lock_account", "terminate_instance", "notify_employee", "grant_leave"):  # fmt: skip
        assert acts(named(name)), name
    for name in ("get_order", "get_book", "read_file", "add_vat", "users.posts", "search_flights",
                 "get_lock_status", "fire_risk", "find_grant"):  # fmt: skip
        assert not acts(named(name)), name
    assert acts(named("lookup", needs_approval=True))


def test_a_call_made_again_for_the_same_result_leads_to_the_tool_that_takes_its_value_not_to_an_answer() -> None:
    tools = [find_employee, get_leave_balance]
    task = "How many leave days does Jonas Berg have left?"
    script = [tool_step("find_employee", name="Jonas Berg"), tool_step("find_employee", name="Jonas Berg"),
              tool_step("get_leave_balance", employee_id="E-30418"), answer_step("17.5 days")]  # fmt: skip
    brain = ScriptedBrain(script)
    run = run_agent(brain, tools, task)
    assert run.answer == "17.5 days" and run.steps == 4
    third = brain.asked[2]
    assert _variant_tools(third.schema) == {"get_leave_balance"} and set(_actions(third.schema)) == {"tool", "answer"}
    assert "call get_leave_balance with the employee_id from this result now" in third.messages[-1]["content"]
    # the result may be the answer: the step may give it
    brain = ScriptedBrain([*script[:2], answer_step("E-30418")])
    assert run_agent(brain, tools, "What is Jonas Berg's employee id?").answer == "E-30418"
    # the repeated tool stays out one step past the offered call: made a third time, it stopped the
    # run as stuck
    held = [*script[:3], tool_step("get_weather", city="Oslo"), answer_step("17.5 days")]
    brain = ScriptedBrain(held)
    assert run_agent(brain, [*tools, get_weather], task + " He works in Oslo.").steps == 5
    assert _variant_tools(brain.asked[3].schema) == {"get_leave_balance", "get_weather"}
    assert _variant_tools(brain.asked[4].schema) == {"find_employee", "get_leave_balance", "get_weather"}

    # never a tool that acts, by its name
    @tool
    def disable_account(employee_id: str) -> str:
        """Disable an employee's account."""
        return "disabled"

    brain = ScriptedBrain([*script[:2], answer_step("Sales")])
    run_agent(brain, [find_employee, disable_account], "Which department is Jonas Berg in?")
    assert _actions(brain.asked[2].schema) == ["answer"]
    # turned off, or with no tool left to take it, the repeat makes the next step answer, as before
    import shapeloop.checks as checks_module

    saved, checks_module.CHAIN_ON_REPEAT = checks_module.CHAIN_ON_REPEAT, False
    try:
        brain = ScriptedBrain([*script[:2], answer_step("E-30418")])
        run_agent(brain, tools, task)
        assert _actions(brain.asked[2].schema) == ["answer"]
    finally:
        checks_module.CHAIN_ON_REPEAT = saved
    brain = ScriptedBrain([*script[:2], answer_step("E-30418")])
    run_agent(brain, [find_employee], "Jonas Berg's employee id?")
    assert _actions(brain.asked[2].schema) == ["answer"]


def test_an_answer_the_step_had_to_give_is_still_asked_for_the_number_the_task_wants() -> None:
    script = [tool_step("lookup", key="colour"), tool_step("lookup", key="colour"),
              answer_step("Red."), answer_step("1 colour.")]  # fmt: skip
    brain = ScriptedBrain(script)
    run = run_agent(brain, [lookup], "How many colours does the table hold?")
    assert run.answer == "1 colour." and run.steps == 4
    assert _actions(brain.asked[2].schema) == _actions(brain.asked[3].schema) == ["answer"]
    assert [e.objection for e in run.events if isinstance(e, AnswerRejected)] == ["the task asks how many"]


def test_a_name_the_tools_choices_offered_is_no_name_made_up() -> None:
    @tool
    def find_customer(customer: str) -> str:
        """Find a customer's account."""
        return f"{customer}: account 7"

    task = "Look up our biggest customer."
    step = [tool_step("find_customer", customer="Acme Corp"), answer_step("Account 7.")]
    run = run_agent(ScriptedBrain(step), [find_customer], task)
    assert [e.objection for e in run.events if isinstance(e, CallRefused)] == [
        'written nowhere in the task or the results: customer "Acme Corp"'
    ]
    offered = dataclasses.replace(find_customer, choices=lambda said: {"customer": ["Acme Corp", "Bolt AS"]})
    run = run_agent(ScriptedBrain(step), [offered], task)
    assert run.answer == "Account 7." and not [e for e in run.events if isinstance(e, CallRefused)]


def _arguments(schema: Any, name: str) -> dict[str, Any]:
    variant = next(v for v in schema.get("anyOf", [schema]) if v["properties"]["tool"].get("const") == name)
    return variant["properties"]["args"]["properties"]  # type: ignore[no-any-return]


def test_a_tools_choices_hold_its_argument_in_the_constrained_step_only() -> None:
    @tool
    def open_sheet(sheet: str, note: str, colour: Literal["red", "blue"]) -> str:
        """Open a sheet."""
        return sheet

    said: list[str] = []

    def sheets(text: str) -> dict[str, list[str]]:
        said.append(text)
        return {"sheet": ["Q3 Budget", "Roster", "Q3 Budget"], "colour": ["green"], "missing": ["x"]}

    held = dataclasses.replace(open_sheet, choices=sheets)
    brain = ScriptedBrain([tool_step("open_sheet", sheet="Roster", note="n", colour="red"), answer_step("Opened.")])
    run = run_agent(brain, [held], "Open the roster.", system="Sheets are named by the user.")
    assert run.ok
    offered = _arguments(brain.asked[0].schema, "open_sheet")
    assert offered["sheet"]["enum"] == ["Q3 Budget", "Roster"] and "enum" not in offered["note"]
    assert offered["colour"]["enum"] == ["red", "blue"]  # the tool's own enum is kept
    assert "enum" not in json.dumps(held.parameters["properties"]["sheet"])  # the call is checked against its own
    # the choices read the user's words (the caller's and the task's), not the results
    assert said[-1].endswith("Sheets are named by the user.\nOpen the roster.") and "Result" not in said[-1]
    import shapeloop.offer as offer_module

    saved, offer_module.TOOL_CHOICES = offer_module.TOOL_CHOICES, False
    try:
        brain = ScriptedBrain([answer_step("ok")])
        run_agent(brain, [held], "Open the roster.")
        assert "enum" not in json.dumps(_arguments(brain.asked[0].schema, "open_sheet")["sheet"])
    finally:
        offer_module.TOOL_CHOICES = saved


def test_a_file_that_names_another_keeps_read_file_offered_after_a_repeat(tmp_path: Any) -> None:
    from shapeloop import workspace_tools

    for name, text in (("a.txt", "The answer is in b.txt"), ("b.txt", "The answer is in c.txt"), ("c.txt", "42")):
        (tmp_path / name).write_text(text)
    steps = [tool_step("read_file", path="a.txt"), tool_step("read_file", path="a.txt"),
             tool_step("read_file", path="b.txt"), tool_step("read_file", path="c.txt"), answer_step("42")]  # fmt: skip
    brain = ScriptedBrain(steps)
    run = run_agent(brain, [workspace_tools(tmp_path)[0]], "Follow a.txt to the answer.")
    assert run.answer == "42"
    assert _variant_tools(brain.asked[3].schema) == {"read_file"}  # not held: it is the offered tool


def test_a_tools_choices_are_kept_to_what_its_own_schema_takes_and_must_be_lists() -> None:
    parameters = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$", "maxLength": 3}},
                  "required": ["code"]}  # fmt: skip
    from shapeloop import Tool

    coded = Tool(name="coded", description="Code.", parameters=parameters, fn=lambda code: code)
    brain = ScriptedBrain([answer_step("ok")])
    run_agent(brain, [dataclasses.replace(coded, choices=lambda said: {"code": ["abcd", "ABC", "ABCD"]})], "Go.")
    assert _arguments(brain.asked[0].schema, "coded")["code"]["enum"] == ["ABC"]
    brain = ScriptedBrain([answer_step("ok")])
    run_agent(brain, [dataclasses.replace(coded, choices=lambda said: {"code": ["abcd"]})], "Go.")
    assert "enum" not in _arguments(brain.asked[0].schema, "coded")["code"]  # none fits: left open
    for bad in ({"code": "ABC"}, None, ["ABC"]):
        with pytest.raises(TypeError, match="tool 'coded': choices must return a mapping"):
            chosen = dataclasses.replace(coded, choices=lambda said, bad=bad: bad)
            run_agent(ScriptedBrain([answer_step("ok")]), [chosen], "Go.")


def test_the_tools_may_be_shown_those_sharing_the_tasks_words_first() -> None:
    import shapeloop.loop as loop_module

    @tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return f"{city}: 8 C"

    @tool
    def get_forecast(city: str) -> str:
        """Daily forecast for a city, starting tomorrow."""
        return f"{city} tomorrow: 11 C"

    @tool
    def forecast_by_station(station_id: str) -> str:
        """Tomorrow's forecast at a weather station.

        Args:
            station_id: the station's id, e.g. ST-1042.
        """
        return "ok"

    tools = [get_weather, forecast_by_station, get_forecast]
    task = "what's the high in bergen tomorrow? see notes/tomorrow.txt"

    def shown() -> list[str]:
        brain = ScriptedBrain([answer_step("11 C")])
        run_agent(brain, tools, task)
        prompt = brain.asked[0].messages[0]["content"]
        return sorted((t.name for t in tools), key=lambda name: prompt.index(name + "("))

    assert shown() == ["get_weather", "forecast_by_station", "get_forecast"], "as given, by default"
    saved, loop_module.TOOL_ORDER = loop_module.TOOL_ORDER, "shared-words"
    try:
        # get_forecast shares "tomorrow"; the station's tool shares it too, but no station id is given
        assert shown() == ["get_forecast", "get_weather", "forecast_by_station"]
    finally:
        loop_module.TOOL_ORDER = saved
