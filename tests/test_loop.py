import json
from pathlib import Path
from typing import Any

import pytest

from helpers import answer_step, call_step, lean_answer, tool_step
from shapeloop import (
    BackendError,
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
    run_agent,
    step_schema,
    tool,
)
from shapeloop.errors import ToolFailure
from shapeloop.events import ModeChanged, RepeatNoticed, ToolReturned
from shapeloop.step import MAX_HOLD, fallback_schemas, flat_schema, held_answer, hold_for


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
    run_agent(brain, [lookup], "What colour?", batch=False)
    second = brain.asked[1].messages
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[-1]["content"].startswith('Result of lookup({"key": "colour"}):\nred\n\n')
    assert "The task:" not in second[-1]["content"]
    assert 'reply with action "answer"' in second[-1]["content"]
    assert "lookup(key): " in second[0]["content"] and "- key (string, required)" in second[0]["content"]


def test_by_default_the_results_go_back_as_the_next_user_turn_and_the_functions_as_json() -> None:
    brain = ScriptedBrain([call_step("lookup", key="colour"), lean_answer("red")])
    run = run_agent(brain, [lookup], "What colour?")
    assert run.answer == "red"
    second = brain.asked[1].messages
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    results = 'Results of 1 call, in the order you made them:\n\n[1] lookup({"key": "colour"}):\nred'
    assert second[-1]["content"].startswith(results)
    assert 'reply with {"answer": "..."} now' in second[-1]["content"]
    assert second[0]["content"].startswith("You can call these functions:\n" + json.dumps(
        {"name": "lookup", "description": "Look a key up."}
    )[:-1])  # fmt: skip
    assert "lookup(key): " not in second[0]["content"] and '"reason"' not in second[0]["content"]


def test_every_sink_gets_every_event() -> None:
    a: list[object] = []
    b: list[object] = []
    run = run_agent(ScriptedBrain([answer_step("hi")]), [], "Say hi", on_event=[a.append, b.append])
    assert a == b == list(run.events)


def test_constrained_mode_sends_the_per_tool_schema() -> None:
    brain = ScriptedBrain([lean_answer("x")])
    run = run_agent(brain, [lookup], "t")
    assert brain.asked[0].schema == step_schema([lookup], batch=True)
    assert run.mode is Mode.CONSTRAINED
    brain = ScriptedBrain([answer_step("x")])
    run = run_agent(brain, [lookup], "t", batch=False)
    assert brain.asked[0].schema == step_schema([lookup])
    assert run.mode is Mode.CONSTRAINED


def test_flat_schema_on_request() -> None:
    brain = ScriptedBrain([answer_step("x")])
    run_agent(brain, [lookup], "t", schema="flat", batch=False)
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


def test_a_cut_answer_is_told_to_be_a_shorter_answer_not_fewer_calls() -> None:
    for batch, text in ((True, '{"answer": "The MBTI is a'), (False, '{"reason": "r", "action": "answer", "tool": "')):
        brain = ScriptedBrain([Reply(text=text, finish=Finish.LENGTH), answer_step("ok")])
        run_agent(brain, [lookup], "t", batch=batch)
        told = brain.asked[1].messages[-1]["content"]
        assert "give a shorter answer" in told and "fewer calls" not in told, told
    brain = ScriptedBrain([Reply(text='{"calls": [{"name": "lookup", "arg', finish=Finish.LENGTH), answer_step("ok")])
    run_agent(brain, [lookup], "t", batch=True)
    assert "make fewer calls at once" in brain.asked[1].messages[-1]["content"]


def test_the_retry_of_a_cut_reply_holds_the_answer_to_about_half_its_length_in_the_grammar() -> None:
    # a greedy model asked the same question again writes the same runaway answer: the schema must differ
    cut = Reply(
        text='{"reason": "r", "action": "answer", "tool": "", "args": {}, "answer": "' + "la " * 300,
        finish=Finish.LENGTH,
    )
    brain = ScriptedBrain([cut, answer_step("ok")])
    run = run_agent(brain, [lookup], "t", batch=False)
    assert run.ok
    answers = [v["properties"]["answer"] for v in brain.asked[1].schema["anyOf"]]
    held = [a for a in answers if a.get("type") == "string"]
    assert held and all(a["maxLength"] == hold_for(len(cut.text)) for a in held)
    assert len(cut.text) // 4 < hold_for(len(cut.text)) <= len(cut.text) // 2
    assert all(a == {"const": ""} for a in answers if a not in held)  # a tool's variant keeps its empty answer
    assert "maxLength" not in brain.asked[0].schema["anyOf"][-1]["properties"]["answer"]


def test_the_hold_has_few_sizes_and_a_ceiling() -> None:
    assert [hold_for(n) for n in (1, 2, 5, 130, 131, 100_000)] == [1, 1, 2, 64, 64, MAX_HOLD]
    assert len({hold_for(n) for n in range(1, 20_000)}) == MAX_HOLD.bit_length()


def test_a_cut_batch_reply_is_retried_with_a_held_answer_and_the_next_whole_reply_lifts_the_hold() -> None:
    cut = Reply(text='{"answer": "' + "x" * 100, finish=Finish.LENGTH)
    brain = ScriptedBrain([cut, '{"calls": [{"name": "lookup", "arguments": {"key": "a"}}]}', '{"answer": "done"}'])
    run = run_agent(brain, [lookup], "t", batch=True)
    assert run.ok and run.answer == "done"
    lean = [v for v in brain.asked[1].schema["anyOf"] if list(v["properties"]) == ["answer"]]
    assert lean[0]["properties"]["answer"]["maxLength"] == hold_for(len(cut.text))
    later = [v for v in brain.asked[2].schema["anyOf"] if list(v["properties"]) == ["answer"]]
    assert "maxLength" not in later[0]["properties"]["answer"]


def test_an_empty_reply_cut_at_the_limit_is_a_cut_not_an_ignored_schema() -> None:
    # a thinking model can spend every token before the reply: nothing came back, and the schema stands
    brain = ScriptedBrain([Reply(text="", finish=Finish.LENGTH), answer_step("ok")])
    run = run_agent(brain, [lookup], "t")
    assert run.ok and run.mode is Mode.CONSTRAINED and "cut" in kinds(run)
    assert not [e for e in run.events if isinstance(e, ModeChanged)]


def test_a_typed_answer_is_never_held_so_the_retry_can_still_answer() -> None:
    typed = {"type": "string", "minLength": 200}
    cut = Reply(text='{"reason": "r", "action": "answer", "tool": "", "args": {}, "answer": "' + "a" * 240,
                finish=Finish.LENGTH)  # fmt: skip
    brain = ScriptedBrain([cut, answer_step("b" * 200)])
    run = run_agent(brain, [lookup], "t", output_type=typed, batch=False)
    assert run.ok
    answer = next(v for v in brain.asked[1].schema["anyOf"] if v["properties"]["action"] == {"const": "answer"})
    assert "maxLength" not in answer["properties"]["answer"]
    # a held untyped schema falls back as an untyped one does (flat), not as a typed one
    plain = step_schema([lookup])
    assert fallback_schemas(held_answer(plain, 8)) == fallback_schemas(plain) == [flat_schema()]


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
    run = run_agent(brain, [lookup], "t", stuck_limit=2, batch=False)
    results = [e for e in run.events if isinstance(e, ToolReturned)]
    assert [r.status for r in results] == [ToolStatus.OK, ToolStatus.REPEAT, ToolStatus.REPEAT]
    assert run.stop is StopReason.STUCK and run.steps == 3
    assert 'lookup({"key": "colour"}) was called 3 times' in run.reason
    note = brain.asked[2].messages[-1]["content"]
    # the plain loop names the repeat and its count; the step still offers the tool and the answer
    assert "same call 2 times" in note and "Calling it again will not help" in note
    assert _actions(brain.asked[2].schema) == ["tool", "answer"]
    assert [e.times for e in run.events if isinstance(e, RepeatNoticed)] == [2]


def test_by_default_too_an_identical_call_is_named_as_a_repeat_then_stops_as_stuck() -> None:
    brain = ScriptedBrain([call_step("lookup", key="colour")] * 5)
    run = run_agent(brain, [lookup], "t", stuck_limit=2)
    results = [e for e in run.events if isinstance(e, ToolReturned)]
    assert [r.status for r in results] == [ToolStatus.OK, ToolStatus.REPEAT, ToolStatus.REPEAT]
    assert run.stop is StopReason.STUCK and run.steps == 3
    assert 'lookup({"key": "colour"}) was called 3 times' in run.reason
    note = brain.asked[2].messages[-1]["content"]
    assert "you made this same call 2 times and got this same result each time" in note
    assert [list(v["properties"]) for v in brain.asked[2].schema["anyOf"]] == [["calls"], ["answer"]]
    assert [e.times for e in run.events if isinstance(e, RepeatNoticed)] == [2]


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

    run = run_agent(ScriptedBrain(fn), [], "count", batch=False)
    assert run.answer == "2 messages"
    assert seen[0].messages[1] == {"role": "user", "content": "count"}
    assert seen[0].schema == step_schema([]) and seen[0].tools is None


def test_a_plain_callable_is_a_brain_and_gets_the_schema() -> None:
    schemas: list[object] = []

    def fn(messages: list[Message], schema: object) -> str:
        schemas.append(schema)
        return lean_answer("plain")

    run = run_agent(fn, [], "t")
    assert run.answer == "plain" and schemas == [step_schema([], batch=True)]


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


def _reason_patterns(schema: Any) -> set[str]:
    return {v["properties"]["reason"].get("pattern") for v in schema.get("anyOf", [schema])} - {None}


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


def _arguments(schema: Any, name: str) -> dict[str, Any]:
    variant = next(v for v in schema.get("anyOf", [schema]) if v["properties"]["tool"].get("const") == name)
    return variant["properties"]["args"]["properties"]  # type: ignore[no-any-return]


def test_a_file_that_names_another_keeps_read_file_offered_after_a_repeat(tmp_path: Any) -> None:
    from shapeloop import workspace_tools

    for name, text in (("a.txt", "The answer is in b.txt"), ("b.txt", "The answer is in c.txt"), ("c.txt", "42")):
        (tmp_path / name).write_text(text)
    steps = [tool_step("read_file", path="a.txt"), tool_step("read_file", path="a.txt"),
             tool_step("read_file", path="b.txt"), tool_step("read_file", path="c.txt"), answer_step("42")]  # fmt: skip
    brain = ScriptedBrain(steps)
    run = run_agent(brain, [workspace_tools(tmp_path)[0]], "Follow a.txt to the answer.", batch=False)
    assert run.answer == "42"
    assert _variant_tools(brain.asked[3].schema) == {"read_file"}  # not held: it is the offered tool
