from helpers import answer_step, tool_step
from shapeloop import Capabilities, Mode, Reply, ScriptedBrain, StopReason, ToolCall, ToolStatus, Usage, run_agent, tool
from shapeloop.events import ModeChanged, RepeatNoticed, ToolReturned
from shapeloop.router import RouterBrain

NATIVE = Capabilities(native_tools=True)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return {"colour": "red"}.get(key, "unknown")


@tool(needs_approval=True)
def act(what: str) -> str:
    """Act."""
    return f"did {what}"


def native_call(name: str, **args: object) -> Reply:
    return Reply(text="", tool_calls=(ToolCall(tool=name, args=args),))


def switches(run: object) -> list[tuple[Mode, str]]:
    return [(e.mode, e.reason) for e in run.events if isinstance(e, ModeChanged)]  # type: ignore[attr-defined]


def test_native_mode_runs_native_calls_and_takes_text_as_the_answer() -> None:
    brain = ScriptedBrain([native_call("lookup", key="colour"), Reply(text="It is red.")], capabilities=NATIVE)
    run = run_agent(brain, [lookup], "Colour?", mode="native")
    assert run.ok and run.answer == "It is red." and run.mode is Mode.NATIVE and run.steps == 2
    assert brain.asked[0].tools == [lookup.spec()]
    assert brain.asked[0].tools[0]["function"]["name"] == "lookup"
    # the call is kept in the record in the step's shape: by default the calls step
    assert brain.asked[1].messages[2]["content"] == '{"calls": [{"name": "lookup", "arguments": {"key": "colour"}}]}'
    assert [e.kind for e in run.events] == [  # a native call and a plain-text answer carry no thought to show
        "step", "reply", "tool_call", "tool_result", "step", "reply", "answer", "stop",
    ]  # fmt: skip
    brain = ScriptedBrain([native_call("lookup", key="colour"), Reply(text="It is red.")], capabilities=NATIVE)
    run = run_agent(brain, [lookup], "Colour?", mode="native", batch=False)
    assert run.ok and run.answer == "It is red." and run.steps == 2
    assert '"tool": "lookup"' in brain.asked[1].messages[2]["content"]  # the five-field step's shape


def test_native_mode_steps_down_when_the_backend_has_no_tool_api() -> None:
    brain = ScriptedBrain([tool_step("lookup", key="colour"), answer_step("red")])
    run = run_agent(brain, [lookup], "Colour?", mode="native")
    assert run.ok and run.mode is Mode.CONSTRAINED and run.steps == 2
    assert switches(run) == [(Mode.CONSTRAINED, "the backend has no native tool calls")]
    assert run.events[0] == ModeChanged(step=0, mode=Mode.CONSTRAINED, reason="the backend has no native tool calls")
    assert brain.asked[0].schema is not None


def test_native_mode_steps_down_twice_to_prose() -> None:
    brain = ScriptedBrain(["Sure: " + answer_step("red")], refuse_schema=True)
    run = run_agent(brain, [lookup], "Colour?", mode="native")
    assert run.ok and run.mode is Mode.PROSE and run.steps == 1
    assert [m for m, _ in switches(run)] == [Mode.CONSTRAINED, Mode.PROSE]


def test_a_model_that_answers_without_calling_falls_back_to_constrained() -> None:
    brain = ScriptedBrain(
        [Reply(text="probably red"), tool_step("lookup", key="colour"), answer_step("red")], capabilities=NATIVE
    )
    run = run_agent(brain, [lookup], "Colour?", mode="native")
    assert run.ok and run.mode is Mode.CONSTRAINED and run.steps == 2
    assert switches(run) == [(Mode.CONSTRAINED, "the model answered without calling a tool")]


def test_loop_behaviours_hold_in_native_mode() -> None:
    # repeats, approval and the acceptor work the same with native calls
    script = [native_call("act", what="x"), native_call("lookup", key="k"), native_call("lookup", key="k"),
              Reply(text="nope"), Reply(text="red")]  # fmt: skip
    brain = ScriptedBrain(script, capabilities=NATIVE)
    run = run_agent(
        brain, [lookup, act], "t", mode="native", accept_answer=lambda a: a == "red" or "wrong", batch=False
    )
    statuses = [e.status for e in run.events if isinstance(e, ToolReturned)]
    assert statuses == [ToolStatus.DENIED, ToolStatus.OK, ToolStatus.REPEAT]
    assert run.ok and run.answer == "red" and "rejection" in [e.kind for e in run.events]


def test_a_server_that_ignores_the_schema_is_detected_and_read_as_prose() -> None:
    brain = ScriptedBrain(["I will look it up. " + tool_step("lookup", key="colour"), answer_step("red")])
    run = run_agent(brain, [lookup], "Colour?")
    assert run.ok and run.mode is Mode.PROSE and run.steps == 2
    assert switches(run) == [(Mode.PROSE, "the backend ignored the schema: the reply was not a JSON object")]
    assert brain.asked[0].schema is not None and brain.asked[1].schema is None


def test_repeat_hook_fires_before_the_stuck_limit() -> None:
    seen: list[RepeatNoticed] = []
    brain = ScriptedBrain([tool_step("lookup", key="colour")] * 4)
    run = run_agent(brain, [lookup], "t", stuck_limit=3, on_repeat=seen.append)
    assert run.stop is StopReason.STUCK
    assert [e.times for e in seen] == [2, 3]


def test_router_escalates_on_the_first_repeat_and_the_fallback_finishes() -> None:
    local = ScriptedBrain([tool_step("lookup", key="colour")] * 5)
    remote = ScriptedBrain([answer_step("red")])
    router = RouterBrain(local, remote, escalate_after=1)
    run = run_agent(router, [lookup], "Colour?", stuck_limit=2)
    assert run.ok and run.answer == "red" and run.steps == 3
    assert len(local.asked) == 2 and len(remote.asked) == 1
    assert [r.repeats for r in local.asked + remote.asked] == [0, 0, 1]


def test_routing_is_per_run_so_the_next_run_starts_on_the_primary() -> None:
    local = ScriptedBrain([tool_step("lookup", key="colour")] * 2 + [answer_step("red")])
    remote = ScriptedBrain([answer_step("red")])
    router = RouterBrain(local, remote, escalate_after=1)
    assert run_agent(router, [lookup], "Colour?", stuck_limit=2).ok
    second = run_agent(router, [lookup], "Colour again?")
    assert second.ok and len(local.asked) == 3 and len(remote.asked) == 1


def test_a_set_aside_native_reply_still_counts_its_tokens() -> None:
    spent = Usage(prompt_tokens=10, completion_tokens=2)
    brain = ScriptedBrain([Reply(text="probably red", usage=spent), Reply(text=answer_step("red"), usage=spent)],
                          capabilities=NATIVE)  # fmt: skip
    run = run_agent(brain, [lookup], "Colour?", mode="native")
    assert run.ok and run.usage == Usage(prompt_tokens=20, completion_tokens=4)


def test_a_router_declares_what_both_of_its_brains_can_do() -> None:
    from shapeloop import SchemaSupport

    native, flat = (
        ScriptedBrain([], capabilities=NATIVE),
        ScriptedBrain([], capabilities=Capabilities(schema=SchemaSupport.FLAT)),
    )
    assert RouterBrain(native, native).capabilities == NATIVE
    assert RouterBrain(native, flat).capabilities == Capabilities(schema=SchemaSupport.FLAT, native_tools=False)
