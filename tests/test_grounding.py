"""A made-up id is not run: the model is told where an id has to come from."""

import json
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import answer_step, tool_step
from shapeloop import ScriptedBrain, StopReason, ToolStatus, run_agent, tool
from shapeloop.events import ToolReturned
from shapeloop.grounding import described_in, holds_value, result_words, taken_from
from shapeloop.ids import is_id_name, made_up_ids

EMPLOYEES = {"Ana Ruiz": "E-2071"}
BALANCES = {"E-2071": 12}
ran: list[str] = []


@tool
def find_employee(name: str) -> str:
    """Find an employee by name.

    Args:
        name: the employee's full name.
    """
    return f"{name}: employee id {EMPLOYEES[name]}" if name in EMPLOYEES else f"no employee named {name!r}"


@tool
def leave_balance(employee_id: str, kind: Literal["annual", "sick"] = "annual") -> str:
    """Leave days an employee has left.

    Args:
        employee_id: the employee's id, e.g. from find_employee.
        kind: which leave.
    """
    ran.append(employee_id)
    return f"{BALANCES.get(employee_id, 0)} {kind} days left"


@pytest.mark.parametrize(
    ("name", "is_id"),
    [("id", True), ("user_id", True), ("order_ids", True), ("trackId", True), ("customerID", True),
     ("uuid", True), ("ID", True), ("paid", False), ("valid", False), ("video", False), ("idea", False),
     ("kid", False), ("width", False)],
)  # fmt: skip
def test_id_parameters_are_told_apart_by_name(name: str, is_id: bool) -> None:
    assert is_id_name(name) is is_id


def test_an_id_must_appear_in_what_was_seen() -> None:
    schema = {"properties": {"track_id": {"type": "integer"}, "tag": {"type": "string"}}}
    assert made_up_ids(schema, {"track_id": 77104, "tag": "x"}, "Blinding Lights: track 77104") == []
    # a whole number, not a piece of a longer one; text regardless of case
    assert made_up_ids(schema, {"track_id": 7710}, "track 77104") == [("track_id", 7710)]
    assert made_up_ids({"properties": {"sku_id": {}}}, {"sku_id": "ab-9"}, "the SKU is AB-9") == []


def test_nested_ids_are_checked_and_enums_and_defaults_are_not() -> None:
    schema = {
        "properties": {
            "items": {"type": "array", "items": {"properties": {"product_id": {"type": "string"}}}},
            "region_id": {"enum": ["eu-1", "us-2"]},
            "account_id": {"type": "string", "default": "main"},
        }
    }
    args = {"items": [{"product_id": "P-1"}, {"product_id": "P-404"}], "region_id": "eu-1", "account_id": "main"}
    assert made_up_ids(schema, args, "order P-1 please") == [("items[1].product_id", "P-404")]


def test_the_loop_does_not_run_a_call_with_a_made_up_id() -> None:
    ran.clear()
    brain = ScriptedBrain(
        [
            tool_step("leave_balance", employee_id="E-12345"),  # invented
            tool_step("find_employee", name="Ana Ruiz"),
            tool_step("leave_balance", employee_id="E-2071"),  # from the result
            answer_step("Ana Ruiz has 12 annual days left."),
        ]
    )
    run = run_agent(brain, [find_employee, leave_balance], "How many leave days does Ana Ruiz have left?")
    assert run.stop is StopReason.ANSWERED and run.answer == "Ana Ruiz has 12 annual days left."
    assert ran == ["E-2071"]  # the invented id never reached the tool
    first = next(e for e in run.events if isinstance(e, ToolReturned))
    assert first.status is ToolStatus.ERROR
    assert "the employee_id given appears nowhere in the task or in any result" in first.text
    assert "E-12345" not in first.text  # quoted, the made-up value would pass the check next time
    assert "First call a tool that finds it" in brain.asked[1].messages[-1]["content"]
    # the tool is kept out of the next step, until another call is made
    assert [_variant_tools(a.schema) for a in brain.asked[:3]] == [
        {"find_employee", "leave_balance"}, {"find_employee"}, {"find_employee", "leave_balance"},
    ]  # fmt: skip


def test_tools_refused_for_made_up_ids_one_after_another_all_stay_out_until_a_call_runs() -> None:
    @tool
    def contact(employee_id: str) -> str:
        """An employee's email address."""
        ran.append("contact " + employee_id)
        return "ana@example.com"

    ran.clear()
    brain = ScriptedBrain([
        tool_step("leave_balance", employee_id="E-12345"),
        tool_step("contact", employee_id="E-12345"),
        tool_step("find_employee", name="Ana Ruiz"),
        answer_step("E-2071"),  # questioned: both tools take the id this result gives
        answer_step("E-2071"),
    ])  # fmt: skip
    run = run_agent(brain, [find_employee, leave_balance, contact], "Ana Ruiz's leave and email?")
    assert run.answer == "E-2071" and ran == []
    assert [_variant_tools(a.schema) for a in brain.asked[:4]] == [
        {"find_employee", "leave_balance", "contact"},
        {"find_employee", "contact"},
        {"find_employee"},  # both refused tools stay out
        {"find_employee", "leave_balance", "contact"},  # a call ran: all are offered again
    ]  # fmt: skip


def test_a_made_up_id_made_again_is_refused_again() -> None:
    ran.clear()
    script = [tool_step("leave_balance", employee_id="E-12345"), tool_step("leave_balance", employee_id="E-12345"),
              answer_step("I need the employee's id.")]  # fmt: skip
    run = run_agent(ScriptedBrain(script), [leave_balance], "How many leave days does Ana Ruiz have left?")
    assert ran == [] and run.answer == "I need the employee's id."


def _variant_tools(schema: object) -> set[str]:
    assert isinstance(schema, dict)
    return {v["properties"]["tool"]["const"] for v in schema.get("anyOf", [schema])} - {""}


def test_an_id_given_in_the_task_runs_and_the_check_can_be_turned_off() -> None:
    ran.clear()
    script = [tool_step("leave_balance", employee_id="E-2071"), answer_step("12")]
    run_agent(ScriptedBrain(script), [leave_balance], "Leave days left for employee E-2071?")
    assert ran == ["E-2071"]
    script = [tool_step("leave_balance", employee_id="E-999"), answer_step("0")]
    run_agent(ScriptedBrain(script), [leave_balance], "Leave days left for Bob?", ground_ids=False)
    assert ran == ["E-2071", "E-999"]


def test_the_first_step_is_marked_in_the_request_and_later_ones_count_results() -> None:
    brain = ScriptedBrain([tool_step("find_employee", name="Ana Ruiz"), answer_step("E-2071")])
    run_agent(brain, [find_employee], "Ana Ruiz's id?")
    assert [request.results for request in brain.asked] == [0, 1]


def test_an_example_id_in_the_tools_documentation_does_not_ground_it_but_the_callers_words_do() -> None:
    @tool
    def balance(employee_id: str) -> str:
        """Leave days left.

        Args:
            employee_id: the employee's id, e.g. E-12345.
        """
        ran.append(employee_id)
        return "12"

    ran.clear()
    script = [tool_step("balance", employee_id="E-12345"), answer_step("I need the id.")]
    run_agent(ScriptedBrain(script), [balance], "Leave days for Ana?")
    assert ran == []
    script = [tool_step("balance", employee_id="E-12345"), answer_step("12")]
    run_agent(ScriptedBrain(script), [balance], "Leave days for Ana?", system="Ana's employee id is E-12345.")
    assert ran == ["E-12345"]


def test_after_a_failed_call_another_tools_result_reminds_the_model_to_call_it_again() -> None:
    ran.clear()
    brain = ScriptedBrain([
        tool_step("leave_balance", employee_id="E-12345"),  # made up: refused
        tool_step("find_employee", name="Ana Ruiz"),
        tool_step("leave_balance", employee_id="E-2071"),
        answer_step("12 days."),
    ])  # fmt: skip
    run_agent(brain, [find_employee, leave_balance], "How many leave days does Ana Ruiz have left?")
    after_find = brain.asked[2].messages[-1]["content"]
    assert "Earlier, your call to leave_balance failed" in after_find
    assert "call leave_balance again with it now" in after_find
    # said once: the next result has the usual feedback
    assert "Earlier" not in brain.asked[3].messages[-1]["content"]
    assert ran == ["E-2071"]


def test_no_reminder_when_the_failed_calls_error_named_the_tool_that_was_then_called() -> None:
    from shapeloop.errors import ToolFailure

    @tool
    def show_folder(path: str) -> str:
        """List a folder."""
        raise ToolFailure(f"{path!r} is a file: read it with open_file")

    @tool
    def open_file(path: str) -> str:
        """Read a file."""
        return "otter\nbadger"

    brain = ScriptedBrain([tool_step("show_folder", path="a.txt"), tool_step("open_file", path="a.txt"),
                           answer_step("2 animals.")])  # fmt: skip
    run_agent(brain, [show_folder, open_file], "How many animals are in a.txt?")
    after_read = brain.asked[2].messages[-1]["content"]
    # the read was the fix the error asked for: sending the model back to show_folder would undo it
    assert "Earlier" not in after_read and "show_folder" not in after_read
    assert 'reply with action "answer" now' in after_read


def test_taken_from_finds_the_required_parameter_a_result_names() -> None:
    def schema(*required: str) -> dict[str, object]:
        properties = {name: {"type": "string"} for name in required}
        return {"type": "object", "properties": properties, "required": list(required)}

    def taken(parameters: dict[str, object], text: str) -> str | None:
        return taken_from(parameters, result_words(text))

    assert taken(schema("employee_id"), "Jonas Berg: employee id E-30418") == "employee_id"
    assert taken(schema("trackId"), "track 77104: Blinding Lights") == "trackId"
    assert taken(schema("order_id"), "orders of maria, newest first: 48213") == "order_id"  # plural
    assert taken(schema("latitude", "longitude"), "Porto: latitude 41.15, longitude -8.62") == "latitude"
    assert taken(schema("número_cliente"), "número 7, cliente 12") == "número_cliente"  # any script
    # every meaningful word of the name must be there, and a name of generic words only names nothing
    assert taken(schema("molar_mass"), "the mass is 180 g") is None
    assert taken(schema("id"), "id 5") is None
    assert taken(schema("city"), "Bergen: 8 C, rain") is None
    # one-letter pieces name nothing ("It's" holds an "s")
    assert taken(schema("s"), "It's 4 o'clock") is None
    # optional parameters do not count
    optional = {"type": "object", "properties": {"city": {"type": "string"}}}
    assert taken(optional, "the city of Bergen") is None


def test_taken_from_needs_one_of_an_enum_parameters_values_in_the_result() -> None:
    # "league matches" names the word, not a league: get_team_standing is no next step after a
    # player's statistics (qwen2.5-coder-1.5b was sent to it with the player as the team)
    league = {"type": "string", "enum": ["premier_league", "la_liga"]}
    standing = {"type": "object", "properties": {"team": {"type": "string"}, "league": league},
                "required": ["league", "team"]}  # fmt: skip
    stats = "Erling Haaland, 2022-23: 36 goals, 8 assists in 35 league matches"
    assert taken_from(standing, result_words(stats), stats) is None
    written = "Arsenal play in the premier_league, 2nd"
    assert taken_from(standing, result_words(written), written) == "league"
    country = {"type": "object", "properties": {"country": {"const": "NO"}}, "required": ["country"]}
    assert taken_from(country, result_words("country: SE, 7"), "country: SE, 7") is None
    assert taken_from(country, result_words("country: NO, 7"), "country: NO, 7") == "country"


def test_holds_value_matches_whole_values_only() -> None:
    assert holds_value("Jonas: employee id E-30418", "E-30418")
    assert not holds_value("Jonas: employee id E-30418", "E-3")
    assert not holds_value("Jonas: employee id E-10418", "E-1")
    assert holds_value("order 48213 (2024)", 48213) and not holds_value("order 148213", 48213)
    assert not holds_value("page 1.5", 1) and holds_value("page 1 of 3", 1)
    assert not holds_value("anything", True) and not holds_value("anything", "  ")


def test_asked_only_leaves_out_the_optional_arguments_nothing_asks_for() -> None:
    from shapeloop.grounding import asked_only

    parameters = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"enum": ["celsius", "fahrenheit"], "default": "celsius"},
            "days_ahead": {"type": "integer", "default": 0},
        },
        "required": ["city"],
    }

    def kept(text: str) -> list[str]:
        return list(asked_only(parameters, result_words(text), text)["properties"])

    assert kept("Weather in Oslo?") == ["city"]
    assert kept("Weather in Oslo in Fahrenheit?") == ["city", "unit"]  # an enum value written
    assert kept("Weather in Oslo two days ahead?") == ["city", "days_ahead"]  # every word of the name
    assert kept("Weather in Oslo, a day from now?") == ["city"]  # "ahead" is not there
    assert asked_only(parameters, result_words("unit days ahead"), "unit days ahead") is parameters


def test_the_constrained_step_offers_an_optional_argument_once_the_task_or_a_result_asks_for_it() -> None:
    @tool(optional_when_named=True)
    def read(path: str, offset: int = 0) -> str:
        """Read a file."""
        return "first part; read with offset=100 reads on" if offset == 0 else "second part"

    brain = ScriptedBrain([tool_step("read", path="a.txt"), answer_step("first part, second part")])
    run_agent(brain, [read], "What does a.txt say?")
    args = [a.schema["anyOf"][0]["properties"]["args"]["properties"] for a in brain.asked]  # type: ignore[index]
    assert [list(a) for a in args] == [["path"], ["path", "offset"]]
    # a tool not built so offers every argument from the start
    plain = ScriptedBrain([answer_step("x")])
    run_agent(plain, [tool(read.fn, name="read")], "What does a.txt say?")
    assert list(plain.asked[0].schema["anyOf"][0]["properties"]["args"]["properties"]) == ["path", "offset"]  # type: ignore[index]
    # turned off: every argument is offered from the start
    import shapeloop.offer as offer_module

    saved, offer_module.ASKED_ONLY = offer_module.ASKED_ONLY, False
    try:
        brain = ScriptedBrain([answer_step("x")])
        run_agent(brain, [read], "What does a.txt say?")
        assert list(brain.asked[0].schema["anyOf"][0]["properties"]["args"]["properties"]) == ["path", "offset"]  # type: ignore[index]
    finally:
        offer_module.ASKED_ONLY = saved


def test_named_inputs_pairs_a_path_url_or_email_parameter_with_what_the_task_writes() -> None:
    from shapeloop.grounding import named_inputs

    path = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    found = {
        task: named_inputs(path, task)
        for task in (
            "Who is the maintainer named in readme.md?",
            "what's first in notes/todo.txt",
            "Read ../../../etc/passwd and tell me its first line.",
            "Read /etc/hostname please",
            "see ~/notes.txt!",
            "I have 3.5 apples, e.g. two",
            "speed in km/h, or 1/2 of it",
            "price: 2.40 EUR.",
        )
    }
    assert list(found.values()) == [
        [("path", "readme.md")],
        [("path", "notes/todo.txt")],
        [("path", "../../../etc/passwd")],
        [("path", "/etc/hostname")],
        [("path", "~/notes.txt")],
        [],
        [],
        [],
    ]
    email = {"properties": {"to": {"type": "string", "format": "email"}}, "required": ["to"]}
    assert named_inputs(email, "mail ana.b@example.com. thanks") == [("to", "ana.b@example.com")]
    url = {"properties": {"page_url": {"type": "string"}}, "required": ["page_url"]}
    assert named_inputs(url, "open https://example.org/a?b=1.") == [("page_url", "https://example.org/a?b=1")]
    # optional, an enum, or not text: not a named input
    assert named_inputs({"properties": {"path": {"type": "string"}}, "required": []}, "read a.txt") == []
    enum = {"properties": {"path": {"type": "string", "enum": ["a.txt"]}}, "required": ["path"]}
    assert named_inputs(enum, "read a.txt") == []
    number = {"properties": {"path": {"type": "integer"}}, "required": ["path"]}
    assert named_inputs(number, "read a.txt") == []


def test_declines_reads_an_answer_that_says_the_task_cannot_be_done() -> None:
    from shapeloop.grounding import declines

    assert declines("I cannot delete files with these tools.")
    assert declines("Sorry, I don't have access to your calendar.")
    assert declines("That is not possible with the tools I have.")
    assert not declines("The maintainer is Ines Alvarez.")
    assert not declines("Cannonball run: 3 laps.")


def test_asks_how_many_reads_a_task_that_wants_a_number() -> None:
    from shapeloop.prompts import asks_how_many

    assert asks_how_many("How many ERROR lines does log/app.log have?")
    assert asks_how_many("Count the animals in animals.txt.")
    assert asks_how_many("I'd like to know how many users haven't logged in.")  # apostrophes are not quotes
    assert not asks_how_many("How much does the free plan cost?")  # "It's free" is an answer
    assert not asks_how_many("Which animal comes first?")
    assert not asks_how_many('Translate "how many" into French.')
    assert not asks_how_many("Give the account count of the report.")


def test_layout_patterns_hold_a_text_argument_to_the_date_or_time_layout_its_description_writes() -> None:
    import jsonschema

    from shapeloop.grounding import layout_patterns

    parameters = {
        "type": "object",
        "properties": {
            "date": {"type": "string", "description": "the date, YYYY-MM-DD."},
            "start": {"type": "string", "description": "local start time, HH:MM (24-hour)"},
            "stay": {"type": "object", "properties": {"until": {"type": "string", "description": "DD/MM/YYYY"}}},
            "days": {"type": "array", "items": {"type": "string", "description": "each YYYY-MM-DD"}},
            "given": {"type": "string", "format": "date", "description": "YYYY-MM-DD"},  # its own format stays
            "clock": {"type": "string", "description": "hh:mm am/pm"},  # a 12-hour layout: not digits only
            "name": {"type": "string", "description": "who, e.g. MM"},
        },
        "required": ["date"],
    }
    held = layout_patterns(parameters)
    assert held is not parameters and parameters["properties"]["date"].get("pattern") is None  # not changed
    good = {"date": "1789-07-14", "start": "14:30", "stay": {"until": "14/07/1789"}, "days": ["1789-07-14"],
            "given": "1789-07-14", "clock": "2:30 pm", "name": "MM"}  # fmt: skip
    jsonschema.validate(good, held)
    for field, bad in (("date", "14 July 1789"), ("start", "2:30 PM"), ("stay", {"until": "1789-07-14"}),
                       ("days", ["July 14"])):  # fmt: skip
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**good, field: bad}, held)
    assert [name for name, schema in held["properties"].items() if "pattern" in schema] == ["date", "start"]
    plain = {"type": "object", "properties": {"city": {"type": "string", "description": "a city"}}}
    assert layout_patterns(plain) is plain


def test_named_inputs_leaves_out_what_only_looks_like_a_file_and_keeps_whole_names() -> None:
    from shapeloop.grounding import named_inputs

    path = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    for task in ("Is Node.js single-threaded?", "visit google.com", "Mr.Smith said so", "print(sys.argv)",
                 "Thanks.Can you help", "Python 3.x", "version 3.2.1", "api.met.no says"):  # fmt: skip
        assert named_inputs(path, task) == [], task
    assert named_inputs(path, "unpack archive.tar.gz") == [("path", "archive.tar.gz")]
    assert named_inputs(path, "open 'meeting notes.txt' now") == [("path", "meeting notes.txt")]
    assert named_inputs(path, "READ REPORT.PDF") == [("path", "REPORT.PDF")]
    # the name's last word says what it takes: an email body is not an address
    body = {"properties": {"email_body": {"type": "string"}}, "required": ["email_body"]}
    assert named_inputs(body, "write to a@b.com") == []


def test_layout_patterns_take_the_whole_layout_and_leave_choices_alone() -> None:
    from shapeloop.grounding import layout_patterns

    def pattern(description: str) -> str | None:
        held = layout_patterns({"properties": {"x": {"type": "string", "description": description}}})
        return held["properties"]["x"].get("pattern")

    assert pattern("YYYY-MM-DD HH:MM") == r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$"
    assert pattern("yyyy-MM-dd HH:mm:ss") == r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$"
    assert pattern("YYYY-MM-DDTHH:MM:SSZ") == r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$"
    for free in ("YYYY-MM-DD or 'today'", "DD-MM-YYYY or YYYY-MM-DD", "hh:mm am/pm", "UTC+HH:MM", "D/M/YYYY"):
        assert pattern(free) is None, free
    nullable = {"properties": {"x": {"type": ["string", "null"], "description": "YYYY-MM-DD"}}}
    assert layout_patterns(nullable)["properties"]["x"]["pattern"] == r"^\d{4}-\d{2}-\d{2}$"


def test_an_id_argument_is_held_to_one_word_for_the_constrained_step() -> None:
    import jsonschema

    from shapeloop.ids import id_patterns

    parameters = {
        "type": "object",
        "properties": {
            "hotel_id": {"type": "string"},
            "trackId": {"type": "string"},
            "order_ids": {"type": "array", "items": {"type": "string"}},
            "stay": {"type": "object", "properties": {"room_id": {"type": "string"}}},
            "user_id": {"type": "integer"},  # a number has no spaces to hold back
            "uuid": {"type": "string", "format": "uuid"},  # its own format stays
            "kind_id": {"type": "string", "enum": ["a b", "c"]},  # the schema's own values stay
            "name": {"type": "string"},
        },
        "required": ["hotel_id"],
    }
    held = id_patterns(parameters)
    assert "pattern" not in parameters["properties"]["hotel_id"]  # the tool's schema is not changed
    good = {"hotel_id": "H-8812", "trackId": "6rqhFgbbKwnb9MLmUQDhG6", "order_ids": ["A-1", "B-2"],
            "stay": {"room_id": "R#12"}, "user_id": 7, "kind_id": "a b", "name": "Gion Garden Inn"}  # fmt: skip
    jsonschema.validate(good, held)
    # a whole line of a result, an id with a quote in it, a list item with a space: refused
    for field, bad in (("hotel_id", "H-8812 Gion Garden Inn 41,200 JPY"), ("trackId", 'a"b'),
                       ("order_ids", ["A-1", "B 2"]), ("stay", {"room_id": "R 12"})):  # fmt: skip
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**good, field: bad}, held)
    patterned = [name for name, schema in held["properties"].items() if "pattern" in schema]
    assert patterned == ["hotel_id", "trackId"]
    plain = {"type": "object", "properties": {"city": {"type": "string"}}}
    assert id_patterns(plain) is plain


def test_an_id_held_to_one_word_has_no_space_of_any_kind() -> None:
    import re

    from shapeloop.ids import ID_PATTERN

    spaced_out = (
        "H-8812\u00a0Gion",
        "H-8812\tGion",
        "H-8812\nGion",
        "H 8812",
        "H\u20098812",
        "H\u30008812",
        "H\u202f8812",
        "H\u205f8812",
        "H\u16808812",
        "H\x858812",
    )
    for spaced in spaced_out:
        assert re.fullmatch(ID_PATTERN, spaced) is None, repr(spaced)
    for plain in ("H-8812", "E-30418", "6rqhFgbbKwnb9MLmUQDhG6", "æøå-12", "a/b:c#d"):
        assert re.fullmatch(ID_PATTERN, plain), plain


def test_an_id_may_be_a_phrase_the_conversation_quotes() -> None:
    import re

    import jsonschema

    from shapeloop.ids import ID_PATTERN, id_patterns, quoted

    parameters = {"type": "object", "properties": {"sheet_id": {"type": "string"}, "note": {"type": "string"},
                  "user_ids": {"type": "array", "items": {"type": "string"}}}, "required": ["sheet_id"]}  # fmt: skip
    said = "Share the sheet \"Q3 Budget (v2.1)\" with ‘Ana Lopez’. I'm sure it's fine: 'Team A|B', «Équipe B»."
    assert quoted(said) == ("Q3 Budget (v2.1)", "Ana Lopez", "Team A|B", "Équipe B")
    widened = id_patterns(parameters, quoted(said))
    for good in ("Q3 Budget (v2.1)", "Ana Lopez", "Team A|B", "Équipe B", "H-8812"):
        jsonschema.validate({"sheet_id": good, "user_ids": [good]}, widened)
    # nothing else with a space: not a phrase the text only holds, nor one its characters would match
    for bad in ("Q3 Budget", "Q3 Budget (v2x1)", "m sure it", "Team A", "H-8812 Gion Garden Inn", "H-8812\u202fGion"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"sheet_id": bad}, widened)
    assert "pattern" not in widened["properties"]["note"]  # not an id
    assert id_patterns(parameters, quoted('the sheet "Q3" please')) == id_patterns(parameters)  # no space
    # a pattern of the caller's own is never widened, even the one-word pattern itself
    own = {"type": "object", "properties": {"sheet_id": {"type": "string", "pattern": ID_PATTERN}}}
    assert id_patterns(own, quoted(said)) is own
    # what a grammar engine could not take is left out: "^", "[" and "]", a quote, a backslash
    held = id_patterns(parameters, quoted('a "b ^c", "d [e]", "f \\ g" and "x y"'))["properties"]["sheet_id"]
    assert held["pattern"].endswith("|x y)$") and "(?:" not in held["pattern"]
    assert re.fullmatch(held["pattern"], "x y") and not re.fullmatch(held["pattern"], "b ^c")


def test_quoted_phrases_pair_whole_and_skip_what_echoes_the_model() -> None:
    from shapeloop.ids import quoted

    # one long value does not shift the pairs after it; an inch mark opens nothing
    long = "x " * 40
    row = f'[{{"id": "Q3 Budget", "description": "{long}", "rows": 3}}, {{"id": "Team A", "rows": 5}}]'
    assert quoted(row) == ("Q3 Budget", "Team A")
    assert quoted(f'The doc "{long}" is in "Q3 Budget".') == ("Q3 Budget",)
    assert quoted('Order a 6" and 7" pipe') == ()
    # an error quotes the model's own made-up value back: not a phrase the conversation gave
    assert quoted("Open 'Q3 Budget'.\nERROR: KeyError: 'Third Quarter Budget'") == ("Q3 Budget",)
    # many quoted: the first few (the task's) and the newest stay
    listing = 'Share "Q3 Budget".\n' + "\n".join(f'"Sheet {n}"' for n in range(30))
    kept = quoted(listing)
    assert kept[0] == "Q3 Budget" and kept[-1] == "Sheet 29" and "Sheet 10" not in kept and len(kept) == 16


@pytest.mark.parametrize("engine", ["llama.cpp", "llguidance"])
def test_both_grammar_engines_take_a_widened_id_pattern(engine: str) -> None:
    from shapeloop import Tool
    from shapeloop.ids import id_patterns, quoted
    from shapeloop.step import step_schema

    parameters = {"type": "object", "properties": {"sheet_id": {"type": "string"}}, "required": ["sheet_id"]}
    said = 'Share "Q3 Budget (v2.1)", “Team A|B”, "a*b {c} d$ e+f?" and "x / y-z" with Ana.'
    held = id_patterns(parameters, quoted(said))
    schema = step_schema([Tool(name="share", description="Share a sheet.", parameters=held, fn=lambda sheet_id: "")])
    if engine == "llama.cpp":
        grammar = pytest.importorskip("llama_cpp.llama_grammar", reason="llama-cpp-python is not installed")
        rule = next(line for line in grammar.json_schema_to_gbnf(json.dumps(schema)).splitlines() if "Budget" in line)
        assert '"Q3 Budget" " " [(] "v" "2" [.] "1" [)]' in rule  # each character as itself
    else:
        llguidance = pytest.importorskip("llguidance", reason="llguidance is not installed")
        grammar = llguidance.LLMatcher.grammar_from_json_schema(schema)
        assert llguidance.LLMatcher.validate_grammar(grammar) == ""


@pytest.mark.parametrize("engine", ["llama.cpp", "llguidance"])
def test_both_grammar_engines_take_a_led_reason(engine: str) -> None:
    from shapeloop.step import led, step_schema

    for bound in (None, 40):
        schema = led(step_schema([], max_reason_chars=bound), "The result says")
        if engine == "llama.cpp":
            grammar = pytest.importorskip("llama_cpp.llama_grammar", reason="llama-cpp-python is not installed")
            rules = grammar.json_schema_to_gbnf(json.dumps(schema))
            reason = next(line for line in rules.splitlines() if line.startswith("reason ::="))
            assert reason.startswith('reason ::= "\\"" "The result say" "s" ')
            assert '[^\\x00-\\x1f"\\\\]' in rules  # no quote, backslash or control character
            assert (reason.count("reason-1") == 25) is (bound is not None)  # 40 less the lead's 15
        else:
            llguidance = pytest.importorskip("llguidance", reason="llguidance is not installed")
            grammar = llguidance.LLMatcher.grammar_from_json_schema(schema)
            assert llguidance.LLMatcher.validate_grammar(grammar) == ""
    with pytest.raises(ValueError, match="words and spaces"):
        led(step_schema([]), "The (result)")


def test_a_led_reason_keeps_the_backends_length_bound_in_its_pattern() -> None:
    from shapeloop.backends.llamacpp import bound_reason
    from shapeloop.step import led, step_schema

    text = '[^\\x00-\\x1f"\\\\]'
    reason = bound_reason(led(step_schema([]), "The result says"), 240)["properties"]["reason"]
    assert reason == {"type": "string", "pattern": f"^The result says{text}{{0,225}}$", "maxLength": 240}
    # a bound shorter than the lead drops the lead, from the step's bound or the backend's
    assert led(step_schema([], max_reason_chars=5), "The result says")["properties"]["reason"] == {
        "type": "string", "maxLength": 5
    }  # fmt: skip
    assert bound_reason(led(step_schema([]), "The result says"), 5)["properties"]["reason"] == {
        "type": "string", "maxLength": 5
    }  # fmt: skip
    # a reason that is not led keeps its own pattern
    plain = {"type": "string", "pattern": "^a+$"}
    assert bound_reason({"properties": {"reason": plain}}, 9)["properties"]["reason"] == {**plain, "maxLength": 9}


@given(st.text(alphabet=st.sampled_from(list("ab \"'`“”„«»‘’\\\n.é")), max_size=300))
def test_quoted_phrases_are_written_in_the_text_and_fit_an_id(text: str) -> None:
    from shapeloop.ids import quoted

    for phrase in quoted(text):
        assert phrase in text and len(phrase) <= 60 and " " in phrase
        assert not set(phrase) & set("\"'`“”„«»‘’\\\n")


def test_described_in_reads_what_a_parameters_description_says_a_result_gives() -> None:
    def schema(**described: str) -> dict[str, object]:
        properties = {name: {"type": "string", "description": text} for name, text in described.items()}
        return {"type": "object", "properties": properties, "required": list(described)}

    # the head of the description: "latitude" where the name says only "lat1"
    distance = schema(lat1="latitude of the first point", lon1="longitude of the first point")
    assert described_in(distance, "Guayaquil, Ecuador: latitude -2.171, longitude -79.9224") == "lat1"
    assert described_in(distance, "Guayaquil, Ecuador: 8 C, rain") is None
    # a unit after "in" that the result writes right after a number
    moles = schema(grams="mass in grams", molar_mass="molar mass in g/mol")
    assert described_in(moles, "C6H12O6: 180.156 g/mol") == "molar_mass"
    assert described_in(moles, "g/mol is the unit") is None  # no number before it
    assert described_in(moles, "C6H12O6: 180.156 g/molecule") is None  # a longer word
    # a code given as an example, standing whole in the result, case and all
    money = schema(amount="the amount in the source currency", from_currency="ISO 4217 code, e.g. USD")
    assert described_in(money, "NVDA: 131.38 USD") == "from_currency"
    assert described_in(money, "NVDA: 131.38 usd") is None
    assert described_in(money, "NVDA: 131.38 USDT") is None
    # "in the source currency" gives no unit; a lower-case example is a word, not a code
    assert described_in(money, "131.38 the") is None
    assert described_in(schema(text='the text to look for, e.g. "timeout"'), "timeout = 30") is None
    # optional parameters, those with fixed values and those without a description take nothing
    optional = {"type": "object", "properties": {"lat": {"type": "number", "description": "latitude"}}}
    assert described_in(optional, "latitude 4") is None
    fixed = {"type": "object", "required": ["unit"],
             "properties": {"unit": {"enum": ["km", "mi"], "description": "distance in km"}}}  # fmt: skip
    assert described_in(fixed, "12 km") is None
    bare = {"type": "object", "required": ["latitude"], "properties": {"latitude": {"type": "number"}}}
    assert described_in(bare, "latitude 4") is None


def test_described_in_passes_over_common_heads_numbers_as_units_and_odd_schemas() -> None:
    def schema(**described: str) -> dict[str, object]:
        properties = {name: {"type": "string", "description": text} for name, text in described.items()}
        return {"type": "object", "properties": properties, "required": list(described)}

    # "in 4 digits" gives no unit, and a head that any dated result writes names nothing
    assert described_in(schema(year="Year in 4 digits"), "founded in 2024") is None
    assert described_in(schema(when="Date of the meeting"), "meeting date 2024-05-01, 3 people") is None
    assert described_in(schema(share="the share in %"), "growth: 12 %") == "share"
    # the example's lead word in any case, with a comma after it
    for described in ("ISO 4217 code, e.g., USD", "ISO 4217 code. E.g. USD", "ISO 4217 code e.g. USD"):
        assert described_in(schema(code=described), "NVDA: 131.38 USD") == "code", described
    odd = {"type": "object", "properties": {"a": {"description": "latitude"}}, "required": [["a"], 3, "a"]}
    assert described_in(odd, "latitude 4") == "a"


def test_an_id_is_unsourced_where_nothing_given_writes_a_number_or_a_word_of_its_examples_shape() -> None:
    from shapeloop.ids import unsourced

    def one(name: str, **schema: Any) -> dict[str, Any]:
        return {"type": "object", "properties": {name: schema}, "required": [name]}

    coded = one("employee_id", type="string", description='employee id, e.g. "E-12345".')
    assert unsourced(coded, "What is the email of Priya Raman's manager?") == "employee_id"
    assert unsourced(coded, "for the 12 of them") == "employee_id", "12 is not shaped like E-12345"
    for written in ("E-30418 Priya Raman", "(E-30418)", "Look up #E-9.", '{"employee_id":"E-30418"}', "id=E-30418",
                    "**E-30418**", "E-30418's boss"):  # fmt: skip
        assert unsourced(coded, written) is None, written
    # the first example with a digit is the one read
    later = one("customer_id", type="string", description="the id (e.g. from find_customer), e.g. C-42")
    assert unsourced(later, "Who is Ana?") == "customer_id" and unsourced(later, "customer C-7") is None
    numbered = one("track_id", type="integer", description="the track id from search_songs.")
    assert unsourced(numbered, "whats the bpm of blinding lights") == "track_id"
    assert unsourced(numbered, "77104 Blinding Lights") is None
    # a text id with no example of digits may be any word; an optional, fixed or defaulted one is no matter
    assert unsourced(one("user_id", type="string", description="the user's handle"), "add alice") is None
    assert unsourced(one("user_id", type="string", description="e.g. alice"), "add bob") is None
    assert unsourced(one("id", type="integer", enum=[1, 2]), "none") is None
    assert unsourced(one("id", type="integer", default=1), "none") is None
    assert unsourced({"properties": {"track_id": {"type": "integer"}}}, "none") is None
    assert unsourced(one("name", type="integer"), "none") is None, "not an id by its name"


def test_an_id_is_shown_by_a_word_that_fits_its_pattern_or_its_examples_exact_shape() -> None:
    from shapeloop.ids import shown_in

    def one(name: str, **schema: Any) -> dict[str, Any]:
        return {"type": "object", "properties": {name: schema}, "required": [name]}

    patterned = one("employee_id", type="string", pattern=r"^E-\d{5}$", description="the employee")
    manager = "manager of E-20931: Tomás Ortega (E-11802)"
    assert shown_in(patterned, manager) == ("employee_id", ["E-20931", "E-11802"])
    assert shown_in(patterned, "manager: E-123 (too short)") is None
    # a pattern is searched for, as JSON Schema says: unanchored, it may stand inside a word
    assert shown_in(one("ref_id", type="string", pattern=r"R\d"), "see xR7y") == ("ref_id", ["xR7y"])
    # no pattern: the exact shape of the documented example with a digit, which has a letter
    example = one("employee_id", type=["string", "null"], description="employee id, e.g. E-12345")
    assert shown_in(example, manager) == ("employee_id", ["E-20931", "E-11802"])
    for unlike in ("12 employees, none named", "UTF-8 text", "COVID-19 leave", "E-123 is short"):
        assert shown_in(example, unlike) is None, unlike
    assert shown_in(one("station_id", type="string", description="e.g. 10384"), "Oslo: 8 C, 10384") is None
    # a pattern that could take long on a word (a quantified group) is not run: the example judges
    slow = one("slug_id", type="string", pattern=r"^([A-Za-z0-9]+-?)*$", description="e.g. ab-12")
    assert shown_in(slow, "x9 a3f9c2d81b7e4a6f0c_bak cd-34") == ("slug_id", ["cd-34"]), "the pattern takes x9"
    # as is one Python cannot read
    odd = one("order_id", type="string", pattern=r"^\p{Lu}-\d+$", description="order id, e.g. O-10")
    assert shown_in(odd, "order O-77 shipped") == ("order_id", ["O-77"])
    # words without a digit, ids with neither a pattern nor an example, integer and non-id parameters
    assert shown_in(one("team_id", type="string", pattern="^[A-Z]+$"), "team ARS plays") is None
    assert shown_in(one("user_id", type="string", description="the handle"), "user 42") is None
    assert shown_in(one("track_id", type="integer", description="e.g. T77104"), "track T77104") is None
    assert shown_in(one("code", type="string", pattern=r"^E-\d{5}$"), manager) is None, "not an id by its name"
    assert shown_in(patterned, "E-" + "1" * 70) is None, "longer than any id"
