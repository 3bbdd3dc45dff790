"""The tool documentation the model reads: every description, type, enum, default, format and nested field."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from helpers import answer_step, lean_answer
from shapeloop import ScriptedBrain, Tool, run_agent, tool
from shapeloop.prompts import system_prompt
from shapeloop.tooldoc import outline, render_tools


@tool
def roots(a: float, b: float, c: float, root_type: Literal["real", "all"] = "all") -> str:
    """Find the roots of a quadratic equation ax^2 + bx + c = 0.

    Args:
        a: coefficient of x^2.
        b: coefficient of x.
        c: the constant term.
        root_type: 'real' for real roots only, 'all' for complex ones too.
    """
    return ""


class Address(BaseModel):
    street: str = Field(description="street and number")
    city: str


@tool
def ship(to: Address, items: list[str], express: bool = False) -> str:
    """Ship items to an address."""
    return ""


ORDER = Tool(
    name="shop.order",
    description="Place an order.",
    parameters={
        "type": "object",
        "properties": {
            "lines": {
                "type": "array",
                "description": "what to buy",
                "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"},
                        "quantity": {"type": "integer", "minimum": 1, "description": "how many"},
                    },
                    "required": ["sku", "quantity"],
                },
            },
            "deliver_on": {"type": "string", "format": "date", "description": "the delivery day"},
            "currency": {"type": "string", "enum": ["EUR", "USD"], "default": "EUR"},
        },
        "required": ["lines"],
    },
    fn=lambda **kw: "",
)


def test_a_typed_function_shows_its_docstring_arguments_enum_and_default() -> None:
    text = outline(roots)
    head = "roots(a, b, c, root_type): Find the roots of a quadratic equation ax^2 + bx + c = 0."
    assert text.splitlines()[0] == head
    assert "  - a (number, required): coefficient of x^2." in text
    assert (
        '  - root_type (string, optional, one of "real", "all", default "all"): '
        "'real' for real roots only, 'all' for complex ones too." in text
    )


def test_nested_objects_from_pydantic_refs_and_arrays_show_their_fields() -> None:
    text = outline(ship)
    assert "  - to (object, required)" in text
    assert "    - street (string, required): street and number" in text
    assert "    - city (string, required)" in text
    assert "  - items (array of string, required)" in text
    assert "  - express (boolean, optional, default false)" in text


def test_a_hand_written_schema_shows_array_items_formats_patterns_bounds_and_enums() -> None:
    text = outline(ORDER)
    assert text.splitlines()[0] == "shop.order(lines, deliver_on, currency): Place an order."
    assert "  - lines (array of object, required): what to buy" in text
    assert "    - sku (string, required, pattern ^[A-Z]{3}-\\d+$)" in text
    assert "    - quantity (integer, required, at least 1): how many" in text
    assert "  - deliver_on (string, optional, format date): the delivery day" in text
    assert '  - currency (string, optional, one of "EUR", "USD", default "EUR")' in text


def test_a_self_referencing_schema_renders_without_looping() -> None:
    node = Tool(
        name="tree",
        description="Walk a tree.",
        parameters={
            "type": "object",
            "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}},
            "properties": {"root": {"$ref": "#/$defs/Node"}},
        },
        fn=lambda **kw: "",
    )
    text = outline(node)
    assert text.count("child (object, optional)") >= 2 and len(text.splitlines()) < 12


def test_json_style_gives_each_tool_as_given() -> None:
    text = render_tools([ORDER], "json")
    assert '"name": "shop.order"' in text and '"pattern": "^[A-Z]{3}-\\\\d+$"' in text and '"default": "EUR"' in text


def test_the_system_prompt_carries_every_tools_documentation_and_an_answer_only_from_a_result() -> None:
    prompt = system_prompt([roots, ORDER], prose=False)
    assert outline(roots) in prompt and outline(ORDER) in prompt
    assert "snowing" not in prompt
    # the example's answer states what its example result says, after that result
    lines = prompt.splitlines()
    result = next(i for i, line in enumerate(lines) if line.startswith("Result of get_price"))
    answer = next(i for i, line in enumerate(lines) if '"action": "answer"' in line)
    assert result < answer and "2.40 EUR" in lines[result] and "2.40 EUR" in lines[answer]


def test_the_model_is_asked_with_the_documentation() -> None:
    brain = ScriptedBrain([answer_step("done")])
    run_agent(brain, [roots], "Roots of x^2 - 1?", batch=False)
    assert 'default "all"' in brain.asked[0].messages[0]["content"]
    # the default step gives the functions as JSON, the documentation with them
    brain = ScriptedBrain([lean_answer("done")])
    run_agent(brain, [roots], "Roots of x^2 - 1?")
    assert render_tools([roots], "json") in brain.asked[0].messages[0]["content"]
    assert '"default": "all"' in brain.asked[0].messages[0]["content"]
