"""Typed final answers (``output_type=``) on the scripted brain: the schema, each mode, the feedback."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic takes typing.TypedDict only from Python 3.12

from helpers import call_step, lean_answer, tool_step
from shapeloop import Capabilities, Mode, Reply, ScriptedBrain, StopReason, ToolCall, run_agent, step_schema, tool
from shapeloop.cli import main
from shapeloop.events import AnswerRejected
from shapeloop.step import ANSWER_DEFS, fallback_schemas, flat_schema


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Item(BaseModel):
    name: str
    due: datetime.date


class Todo(BaseModel):
    owner: str
    priority: Priority
    items: list[Item]


@dataclasses.dataclass
class City:
    name: str
    population: int


class Colour(TypedDict):
    name: str
    hex: str


COLOUR_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "hex": {"type": "string", "pattern": "^#[0-9a-f]{6}$"}},
    "required": ["name", "hex"],
}
GOOD_TODO = {"owner": "Ana", "priority": "high", "items": [{"name": "ship", "due": "2026-12-01"}]}


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return "owner: Ana; priority: high; ship by 2026-12-01"


def answer(value: Any, reason: str = "done") -> str:
    return json.dumps({"reason": reason, "action": "answer", "tool": "", "args": {}, "answer": value})


def test_the_answer_variant_carries_the_output_schema_with_its_defs_hoisted_and_objects_closed() -> None:
    schema = step_schema([read_file], answer_schema=Todo.model_json_schema())
    answer_variant = schema["anyOf"][-1]["properties"]["answer"]
    assert answer_variant["properties"]["priority"] == {"$ref": f"#/$defs/{ANSWER_DEFS}Priority"}
    assert set(schema["$defs"]) == {f"{ANSWER_DEFS}Item", f"{ANSWER_DEFS}Priority"}
    assert answer_variant["additionalProperties"] is False
    assert schema["$defs"][f"{ANSWER_DEFS}Item"]["additionalProperties"] is False
    jsonschema.validate(json.loads(answer(GOOD_TODO)), schema)
    for bad in ({**GOOD_TODO, "priority": "urgent"}, {**GOOD_TODO, "extra": 1}, "Ana, high"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(json.loads(answer(bad)), schema)


def test_closing_leaves_alone_what_a_schema_says_and_the_parts_of_an_all_of() -> None:
    loose = {
        "type": "object",
        "properties": {"properties": {"type": "object", "additionalProperties": {"type": "integer"}}},
        "allOf": [{"properties": {"a": {"type": "string"}}}],
    }
    closed = step_schema([], answer_schema=loose)["properties"]["answer"]
    assert closed["additionalProperties"] is False
    assert closed["properties"]["properties"] == loose["properties"]["properties"]  # a field named "properties"
    assert "additionalProperties" not in closed["allOf"][0]


def test_fallbacks_keep_the_typed_answer_and_a_plain_run_falls_back_to_the_flat_schema() -> None:
    assert fallback_schemas(step_schema([read_file])) == [flat_schema()]
    kept, opened = fallback_schemas(step_schema([read_file], answer_schema=Todo.model_json_schema()))
    jsonschema.validate(json.loads(answer(GOOD_TODO)), kept)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(answer({"owner": "Ana"})), kept)
    jsonschema.validate(json.loads(answer({"owner": "Ana"})), opened)
    # a tool whose arguments could not be compiled is still a call, with any object for arguments
    jsonschema.validate(json.loads(tool_step("read_file", anything=[1])), kept)


@pytest.mark.parametrize(
    ("output_type", "value", "expected"),
    [
        (Todo, GOOD_TODO, Todo.model_validate(GOOD_TODO)),
        (City, {"name": "Oslo", "population": 700000}, City(name="Oslo", population=700000)),
        (Colour, {"name": "teal", "hex": "#008080"}, {"name": "teal", "hex": "#008080"}),
        (COLOUR_SCHEMA, {"name": "teal", "hex": "#008080"}, {"name": "teal", "hex": "#008080"}),
    ],
    ids=["pydantic", "dataclass", "typeddict", "json-schema"],
)
def test_each_kind_of_output_type_gives_the_object_and_its_json(output_type: Any, value: Any, expected: Any) -> None:
    brain = ScriptedBrain([answer(value)])
    run = run_agent(brain, [], "Extract it.", output_type=output_type)
    assert run.ok, run.reason
    assert run.output == expected and type(run.output) is type(expected)
    assert json.loads(run.answer or "") == value
    assert run.to_dict()["output"] == value


def test_constrained_mode_sends_the_typed_schema_and_prompts_with_it() -> None:
    brain = ScriptedBrain([tool_step("read_file", path="todo.txt"), answer(GOOD_TODO)])
    run = run_agent(brain, [read_file], "Extract the todo.", output_type=Todo, batch=False)
    assert run.ok and run.mode is Mode.CONSTRAINED
    assert isinstance(run.output, Todo) and run.output.items[0].due == datetime.date(2026, 12, 1)
    sent = brain.asked[0].schema
    assert sent == step_schema([read_file], answer_schema=Todo.model_json_schema())
    system = brain.asked[0].messages[0]["content"]
    assert '"answer" is not text' in system and '"priority":{"$ref":"#/$defs/Priority"}' in system


def test_by_default_the_calls_step_sends_the_typed_schema_and_prompts_with_it() -> None:
    brain = ScriptedBrain([call_step("read_file", path="todo.txt"), lean_answer(GOOD_TODO)])
    run = run_agent(brain, [read_file], "Extract the todo.", output_type=Todo)
    assert run.ok and run.mode is Mode.CONSTRAINED
    assert isinstance(run.output, Todo) and run.output.items[0].due == datetime.date(2026, 12, 1)
    sent = brain.asked[0].schema
    assert sent == step_schema([read_file], answer_schema=Todo.model_json_schema(), batch=True)
    assert [list(v["properties"]) for v in sent["anyOf"]] == [["calls"], ["answer"]]
    system = brain.asked[0].messages[0]["content"]
    assert system.startswith("You can call these functions:")
    assert '"answer" is not text' in system and '"priority":{"$ref":"#/$defs/Priority"}' in system


def test_prose_mode_validates_the_extracted_step_against_the_output_type() -> None:
    replies = [
        "Sure! " + answer({"owner": "Ana", "priority": "soon", "items": []}) + " Hope that helps.",
        "Fixed: " + answer(GOOD_TODO),
    ]
    brain = ScriptedBrain(replies, refuse_schema=True)
    run = run_agent(brain, [], "Extract the todo.", output_type=Todo)
    assert run.ok and run.mode is Mode.PROSE and run.steps == 2
    assert run.output == Todo.model_validate(GOOD_TODO)
    feedback = brain.asked[1].messages[-1]["content"]
    assert "priority: Input should be 'low' or 'high'" in feedback


def test_native_mode_reads_the_final_text_as_the_typed_answer() -> None:
    brain = ScriptedBrain(
        [Reply(text="", tool_calls=(ToolCall(tool="read_file", args={"path": "todo.txt"}),)), json.dumps(GOOD_TODO)],
        capabilities=Capabilities(native_tools=True),
    )
    run = run_agent(brain, [read_file], "Extract the todo.", mode="native", output_type=Todo)
    assert run.ok and run.mode is Mode.NATIVE, run.reason
    assert run.output == Todo.model_validate(GOOD_TODO)


def test_a_validation_failure_is_fed_back_with_each_field_path_and_costs_a_step() -> None:
    bad = {"owner": "Ana", "priority": "high", "items": [{"name": "ship", "due": "next week"}, {"due": "2026-12-02"}]}
    brain = ScriptedBrain([answer(bad), answer(GOOD_TODO)])
    run = run_agent(brain, [], "Extract the todo.", output_type=Todo)
    assert run.ok and run.steps == 2
    feedback = brain.asked[1].messages[-1]["content"]
    assert feedback.startswith("Your answer does not match the required schema:\n")
    assert "- items.0.due: Input should be a valid date" in feedback
    assert "- items.1.name: Field required" in feedback
    rejected = [e for e in run.events if isinstance(e, AnswerRejected)]
    assert len(rejected) == 1 and json.loads(rejected[0].text) == bad
    assert "items.1.name: Field required" in rejected[0].objection


def test_json_schema_failures_name_the_path_too() -> None:
    brain = ScriptedBrain([answer({"name": "teal", "hex": "teal"}), answer({"name": "teal", "hex": "#008080"})])
    run = run_agent(brain, [], "Colour?", output_type=COLOUR_SCHEMA)
    assert run.ok
    assert "- hex: 'teal' does not match '^#[0-9a-f]{6}$'" in brain.asked[1].messages[-1]["content"]


def test_identical_failures_are_barren_even_when_the_reason_changes() -> None:
    bad = {"owner": "Ana"}
    brain = ScriptedBrain([answer(bad, reason=f"attempt {n}") for n in range(5)])
    run = run_agent(brain, [], "Extract the todo.", output_type=Todo, stuck_limit=2)
    assert run.stop is StopReason.BARREN and run.steps == 3
    assert "same invalid-answer reply 3 times" in run.reason


def test_different_failures_are_not_barren() -> None:
    brain = ScriptedBrain([answer({"owner": f"A{n}"}) for n in range(4)])
    run = run_agent(brain, [], "Extract the todo.", output_type=Todo, stuck_limit=2, max_steps=4)
    assert run.stop is StopReason.MAX_STEPS


def test_the_acceptor_receives_the_validated_object_and_its_objection_goes_back() -> None:
    seen: list[Any] = []

    def accept(todo: Todo) -> bool | str:
        seen.append(todo)
        return True if len(todo.items) > 1 else "there are two items in the file"

    two = {**GOOD_TODO, "items": [*GOOD_TODO["items"], {"name": "test", "due": "2026-12-02"}]}
    brain = ScriptedBrain([answer(GOOD_TODO), answer(two)])
    run = run_agent(brain, [], "Extract the todo.", output_type=Todo, accept_answer=accept)
    assert run.ok and run.steps == 2
    assert all(isinstance(todo, Todo) for todo in seen) and seen[1] == Todo.model_validate(two)
    assert "there are two items in the file" in brain.asked[1].messages[-1]["content"]


def test_a_typed_answer_written_as_a_json_string_is_read() -> None:
    run = run_agent(ScriptedBrain([answer(json.dumps(GOOD_TODO))]), [], "Extract.", output_type=Todo)
    assert run.output == Todo.model_validate(GOOD_TODO)


def test_an_untyped_run_asks_for_text_when_the_answer_is_an_object() -> None:
    brain = ScriptedBrain([answer({"colour": "teal"}), answer("teal")])
    run = run_agent(brain, [], "Colour?")
    assert run.ok and run.output == run.answer == "teal"
    assert "Your answer must be text" in brain.asked[1].messages[-1]["content"]


def test_bad_output_types_are_refused_with_what_to_use() -> None:
    with pytest.raises(ValueError, match="not a valid JSON schema"):
        run_agent(ScriptedBrain([]), [], "t", output_type={"type": "objekt"})

    class Plain:
        pass

    with pytest.raises(TypeError, match="use a pydantic model, a dataclass, a TypedDict or a JSON schema dict"):
        run_agent(ScriptedBrain([]), [], "t", output_type=Plain)


def test_cli_output_schema_prints_the_answer_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "ws").mkdir()
    schema = tmp_path / "colour.json"
    schema.write_text(json.dumps(COLOUR_SCHEMA))
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([answer({"name": "teal", "hex": "#008080"})]))
    argv = ["run", "Colour?", "--root", str(tmp_path / "ws"), "--script", str(replies)]
    assert main([*argv, "--output-schema", str(schema)]) == 0
    assert json.loads(capsys.readouterr().out) == {"name": "teal", "hex": "#008080"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read --output-schema"),
        ("{not json", "is not JSON"),
        ("[1, 2]", "must hold a JSON schema (an object), not a list"),
        ('{"type": "objekt"}', "not a valid JSON schema"),
    ],
)
def test_cli_bad_output_schema_is_one_line_and_exit_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    (tmp_path / "ws").mkdir()
    schema = tmp_path / "schema.json"
    if content is not None:
        schema.write_text(content)
    script = tmp_path / "script.json"
    script.write_text("[]")  # a real script, so the schema is the only bad input
    argv = ["run", "t", "--root", str(tmp_path / "ws"), "--script", str(script), "--output-schema", str(schema)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("shapeloop: error: ") and message in err and err.count("\n") == 1


def test_the_openai_compatible_backend_sends_the_typed_schema_as_response_format() -> None:
    import httpx

    from shapeloop.backends.openai import OpenAIBrain

    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.read()))
        content = lean_answer({"name": "teal", "hex": "#008080"})
        return httpx.Response(200, json={"choices": [{"message": {"content": content}, "finish_reason": "stop"}]})

    with OpenAIBrain("m", transport=httpx.MockTransport(handler)) as brain:
        run = run_agent(brain, [read_file], "Colour?", output_type=Colour)
    assert run.output == {"name": "teal", "hex": "#008080"}
    expected = step_schema([read_file], answer_schema=schema_of(Colour), batch=True)  # the default step
    assert sent[0]["response_format"]["json_schema"]["schema"] == expected


def test_the_ollama_backend_sends_the_typed_schema_as_format() -> None:
    pytest.importorskip("ollama", reason="the ollama client is not installed: pip install '.[ollama]'")
    from fake_ollama import running
    from shapeloop.backends.ollama import OllamaBrain

    with running() as server:
        server.script = [{"content": lean_answer(GOOD_TODO)}]
        run = run_agent(OllamaBrain("m", host=server.url), [read_file], "Extract.", output_type=Todo)
        assert run.output == Todo.model_validate(GOOD_TODO)
        expected = step_schema([read_file], answer_schema=Todo.model_json_schema(), batch=True)  # the default step
        assert server.requests[0]["format"] == expected


def schema_of(output_type: Any) -> dict[str, Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(output_type).json_schema()


def test_the_runs_plain_data_holds_the_output_as_json_or_the_text() -> None:
    typed = run_agent(ScriptedBrain([answer(GOOD_TODO)]), [], "Extract.", output_type=Todo)
    assert typed.to_dict()["output"] == GOOD_TODO and json.loads(typed.to_dict()["answer"]) == GOOD_TODO
    plain = run_agent(ScriptedBrain([answer("teal")]), [], "Colour?")
    assert plain.to_dict()["output"] == plain.to_dict()["answer"] == "teal"
    assert run_agent(ScriptedBrain([]), [], "t").to_dict()["output"] is None


def test_a_brain_of_flat_schemas_gets_open_arguments_and_the_typed_answer() -> None:
    from shapeloop import SchemaSupport

    for batch, reply in ((True, lean_answer(GOOD_TODO)), (False, answer(GOOD_TODO))):
        brain = ScriptedBrain([reply], capabilities=Capabilities(schema=SchemaSupport.FLAT))
        run = run_agent(brain, [read_file], "Extract.", output_type=Todo, batch=batch)
        assert run.output == Todo.model_validate(GOOD_TODO)
        full = step_schema([read_file], answer_schema=Todo.model_json_schema(), batch=batch)
        assert brain.asked[0].schema == fallback_schemas(full)[0]
        # the arguments are opened (a flat backend takes no per-tool variants), the typed answer kept
        assert '"const": "read_file"' not in json.dumps(brain.asked[0].schema)
        assert '"priority"' in json.dumps(brain.asked[0].schema)


def test_the_test_brain_writes_a_valid_typed_answer_for_the_callers_acceptor() -> None:
    from shapeloop.doubles import TestBrain

    seen: list[Todo] = []

    def accept(todo: Todo) -> bool:
        seen.append(todo)
        return True

    run = run_agent(TestBrain(), [read_file], "Extract.", output_type=Todo, accept_answer=accept)
    assert run.ok, run.reason
    assert isinstance(run.output, Todo) and seen == [run.output] and run.output.priority is Priority.LOW


def test_the_test_brain_writes_dates_in_their_format() -> None:
    from shapeloop.doubles import TestBrain

    run = run_agent(TestBrain(), [], "Extract.", output_type=Item)
    assert run.ok and run.output == Item(name="a", due=datetime.date(2000, 1, 1)), run.reason
