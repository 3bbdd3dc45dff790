import json

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from shapeloop import Step, Tool, flat_schema, step_schema, tool


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return path


@tool
def count(n: int, unit: str = "lines") -> str:
    """Count things."""
    return str(n)


def test_step_requires_every_field() -> None:
    with pytest.raises(ValidationError):
        Step.model_validate({"reason": "r", "action": "tool"})
    with pytest.raises(ValidationError):
        Step.model_validate({"reason": "r", "action": "tool", "tool": "t", "args": {}, "answer": "", "x": 1})
    with pytest.raises(ValidationError):
        Step.model_validate({"reason": "r", "action": "jump", "tool": "t", "args": {}, "answer": ""})


def test_flat_schema_requires_all_five_reason_first() -> None:
    schema = flat_schema()
    assert list(schema["properties"]) == ["reason", "action", "tool", "args", "answer"]
    assert schema["required"] == ["reason", "action", "tool", "args", "answer"]
    assert schema["additionalProperties"] is False
    jsonschema.validate({"reason": "r", "action": "tool", "tool": "x", "args": {}, "answer": ""}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"reason": "r", "action": "tool"}, schema)


def test_per_tool_schema_has_a_variant_per_tool_and_one_answer() -> None:
    schema = step_schema([read_file, count])
    variants = schema["anyOf"]
    assert len(variants) == 3
    for variant in variants:
        assert next(iter(variant["properties"])) == "reason"
        assert variant["required"] == ["reason", "action", "tool", "args", "answer"]
        assert variant["additionalProperties"] is False
    assert [v["properties"]["tool"]["const"] for v in variants] == ["read_file", "count", ""]
    assert variants[0]["properties"]["args"]["properties"]["path"]["type"] == "string"
    assert variants[0]["properties"]["answer"] == {"const": ""}


def test_per_tool_schema_accepts_right_steps_and_rejects_crossed_ones() -> None:
    schema = step_schema([read_file, count])
    ok = [
        {"reason": "r", "action": "tool", "tool": "read_file", "args": {"path": "a"}, "answer": ""},
        {"reason": "r", "action": "tool", "tool": "count", "args": {"n": 3}, "answer": ""},
        {"reason": "r", "action": "answer", "tool": "", "args": {}, "answer": "red"},
    ]
    for step in ok:
        jsonschema.validate(step, schema)
    bad = [
        # an invented answer beside a tool call (qwen2.5-coder-0.5b did this)
        {"reason": "r", "action": "tool", "tool": "read_file", "args": {"path": "a"}, "answer": "red"},
        # one tool's arguments under another tool's name
        {"reason": "r", "action": "tool", "tool": "count", "args": {"path": "a"}, "answer": ""},
        {"reason": "r", "action": "tool", "tool": "read_file", "args": {}, "answer": ""},
        {"reason": "r", "action": "answer", "tool": "", "args": {}, "answer": ""},
        {"reason": "r", "action": "answer", "tool": "read_file", "args": {}, "answer": "x"},
        {"reason": "r", "action": "tool", "tool": "nope", "args": {}, "answer": ""},
    ]
    for step in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(step, schema)


def test_no_tools_gives_the_answer_variant_alone() -> None:
    schema = step_schema([])
    assert "anyOf" not in schema
    assert schema["properties"]["action"] == {"const": "answer"}


def test_reason_bound_applies_to_every_variant() -> None:
    schema = step_schema([read_file], max_reason_chars=50)
    assert all(v["properties"]["reason"]["maxLength"] == 50 for v in schema["anyOf"])
    assert flat_schema(max_reason_chars=9)["properties"]["reason"]["maxLength"] == 9


class Point(BaseModel):
    x: int
    y: int


def test_defs_of_nested_models_are_hoisted_and_refs_still_resolve() -> None:
    @tool
    def plot(p: Point, q: Point) -> str:
        """Plot."""
        return "ok"

    dotted = Tool(
        name="math.factorial",
        description="n!",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        fn=lambda n: str(n),
    )
    schema = step_schema([plot, dotted])
    assert "plot__Point" in schema["$defs"]
    good = {
        "reason": "r",
        "action": "tool",
        "tool": "plot",
        "args": {"p": {"x": 1, "y": 2}, "q": {"x": 0, "y": 0}},
        "answer": "",
    }
    jsonschema.validate(good, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "args": {"p": {"x": "one", "y": 2}, "q": {"x": 0, "y": 0}}}, schema)
    jsonschema.validate(
        {"reason": "r", "action": "tool", "tool": "math.factorial", "args": {"n": 5}, "answer": ""}, schema
    )


_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))
_values = st.one_of(
    _json_scalars,
    st.lists(_json_scalars, max_size=2),
    st.dictionaries(st.text(max_size=3), _json_scalars, max_size=2),
)
_candidates = st.fixed_dictionaries(
    {},
    optional={
        "reason": _values,
        "action": st.one_of(st.sampled_from(["tool", "answer", "other"]), _values),
        "tool": _values,
        "args": _values,
        "answer": _values,
        "extra": _values,
    },
)


@given(_candidates)
def test_flat_schema_and_step_model_agree(candidate: dict[str, object]) -> None:
    try:
        jsonschema.validate(candidate, flat_schema())
        schema_ok = True
    except jsonschema.ValidationError:
        schema_ok = False
    try:
        Step.model_validate(candidate)
        model_ok = True
    except ValidationError:
        model_ok = False
    assert schema_ok == model_ok, json.dumps(candidate)
