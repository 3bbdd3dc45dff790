"""A call whose number, date, time or name nothing the model was given writes is refused before it runs;
an optional argument whose enum value the task names is required."""

from typing import Any, Literal

import pytest

from helpers import answer_step, tool_step
from shapeloop import AnswerRejected, CallRefused, ScriptedBrain, StopReason, ToolCalled, run_agent, tool
from shapeloop.grounding import named_required
from shapeloop.values import held_to_written, made_up_values

ran: list[tuple[str, str]] = []


@tool
def days_between(start_date: str, end_date: str, inclusive: bool = False) -> str:
    """Days from one date to another.

    Args:
        start_date: first date, YYYY-MM-DD.
        end_date: second date, YYYY-MM-DD.
        inclusive: count both ends.
    """
    ran.append((start_date, end_date))
    return f"{start_date} to {end_date}: some days"


@tool
def bpm_to_ms(bpm: float) -> str:
    """Milliseconds per beat at a tempo.

    Args:
        bpm: beats per minute.
    """
    return f"{60000 / bpm:.0f} ms"


DATES = {"properties": {"start": {"type": "string"}, "end": {"type": "string"}}, "required": ["start", "end"]}
NUMBER = {"properties": {"n": {"type": "number"}}, "required": ["n"]}


def _variant_tools(schema: object) -> set[str]:
    assert isinstance(schema, dict)
    return {v["properties"]["tool"]["const"] for v in schema.get("anyOf", [schema])} - {""}


def _actions(schema: Any) -> list[str]:
    return [v["properties"]["action"]["const"] for v in schema.get("anyOf", [schema])]


@pytest.mark.parametrize(
    ("seen", "value"),
    [
        ("between March 3rd 2024 and July 14th 2024", "2024-03-03"),
        ("from 3 March 2024", "2024-03-03"),
        ("on the 3rd of March, 2024", "2024-03-03"),
        ("starting 2024-03-03", "2024-03-03"),
        ("due 03/03/2024", "2024-03-03"),
        ("due 3.3.24", "2024-03-03"),
        ("on Mar. 3", "2024-03-03"),  # no year written: the model may pick one
        ("meet at 2:30 pm", "14:30"),
        ("meet at 9am", "09:00"),
        ("at 14h30", "14:30"),
        ("at noon", "12:00"),
        ("on April 8th 2025 at 2:30 pm", "2025-04-08T14:30:00"),
        ('{"start": "2024-05-02T15:00:00Z"}', "2024-05-02T15:00:00Z"),  # copied from a result, seconds and all
        ("at 7.30pm", "19:30"),
        ("2024/05/02", "2024-05-02"),
        ("from May 2-5, 2024", "2024-05-05"),  # a range: both its ends
        ("2–5 May 2024", "2024-05-02"),
        ("Today is 2024-05-02. Book it for tomorrow.", "2024-05-03"),  # near a written date, said relative
    ],
)
def test_a_date_or_time_written_in_another_common_form_is_given(seen: str, value: str) -> None:
    schema = {"properties": {"when": {"type": "string"}}, "required": ["when"]}
    assert made_up_values(schema, {"when": value}, seen) == []


@pytest.mark.parametrize(
    ("seen", "value"),
    [
        ("Set an alarm for 7am tomorrow.", "2023-04-15"),
        ("between March 3rd 2024 and July 14th 2024", "2024-03-04"),
        ("in March 2025", "2024-03-03"),  # the day and the year are the model's own
        ("meet at 2:30 pm", "02:30"),
        ("on April 8th 2025 at 2:30 pm", "2025-04-08T15:30:00"),
    ],
)
def test_a_date_or_time_nothing_writes_is_made_up(seen: str, value: str) -> None:
    schema = {"properties": {"when": {"type": "string"}}, "required": ["when"]}
    assert made_up_values(schema, {"when": value}, seen) == [("when", value)]


@pytest.mark.parametrize(
    ("seen", "value", "made_up"),
    [
        ("Convert 5 km to miles.", 5, False),
        ("$2,500 at 4.5% a year", 2500, False),
        ("$2,500 at 4.5% a year", 0.045, False),  # a rate as a fraction
        ("solve x**2 - 4x - 6 = 0", -4, False),  # the sign is written apart
        ("solve x**2 - 4x - 6 = 0", 1, False),  # the coefficient nobody writes
        ("squats 5x5 at 100kg", 100, False),
        ("scale it by three", 3, False),
        ("Play some jazz.", 120, True),
        ("Play some jazz from 1959.", 195, True),  # a whole number, not a piece of one
        ("Order pizza for two.", 2.5, True),
        ("Wait 5 minutes.", 300, False),  # worked out by a unit the task names
        ("Average of 100,200,300", 200, False),  # a list as much as one number
        ("a budget of 1.5 million", 1_500_000, False),
        ("launched at 20 m/s", 20, False),  # not 20 million
        ("twenty-five people", 25, False),
        ("Play it loud.", 10**400, True),  # too long for a float: no crash, made up
    ],
)
def test_a_number_must_be_written(seen: str, value: float, made_up: bool) -> None:
    assert (made_up_values(NUMBER, {"n": value}, seen) == [("n", value)]) is made_up


def test_only_required_arguments_numbers_and_dates_are_questioned() -> None:
    schema = {
        "properties": {
            "city": {"type": "string"},
            "unit": {"enum": [1, 2]},
            "guests": {"type": "integer", "default": 2},
            "order_id": {"type": "integer"},
            "nights": {"type": "integer"},
            "stay": {"type": "object", "properties": {"check_in": {"type": "string"}, "rooms": {"type": "integer"}}},
        },
        "required": ["city", "unit", "guests", "order_id", "stay"],
    }
    args: dict[str, Any] = {"city": "Rome", "unit": 2, "guests": 2, "order_id": 99123, "nights": 7,
                            "stay": {"check_in": "2023-09-15", "rooms": 3}}  # fmt: skip
    # text, an enum, the default, an id (its own check) and an optional argument pass; nested values do not
    assert made_up_values(schema, args, "Book a table in Rome.") == [("stay.check_in", "2023-09-15"), ("stay.rooms", 3)]


NAMED = {
    "properties": {
        "team": {"type": "string"},
        "company": {"type": "string"},
        "query": {"type": "string"},
        "file_path": {"type": "string"},
        "league": {"enum": ["Premier League", "La Liga"]},
        "unit": {"type": "string"},
        "note": {"type": "string"},
    },
    "required": ["team", "company", "query", "file_path", "league", "unit"],
}


@pytest.mark.parametrize(
    ("seen", "team", "made_up"),
    [
        ("Who won the 2018 FIFA World Cup?", "FC Barcelona", True),  # a name nothing writes
        ("Who won the 2018 FIFA World Cup?", "France", True),
        ("How is barcelona doing?", "FC Barcelona", False),  # one of its words is written, in any case
        ("Standings for the Tigers?", "Tiger", False),  # without plural s
        ("Where does Tomás Ortega play?", "Tomas Ortega", False),  # without accents
        ("Who won the 2018 FIFA World Cup?", "GB", False),  # a code: rewritten too freely to check
        ("Who won the 2018 FIFA World Cup?", "france", False),  # no capital: not taken for a name
        ("Who won the 2018 FIFA World Cup?", "The Team That Won It All", False),  # five words: a sentence
        ("Who won?", "Li", True),  # a short name too
        ("Who is Ng?", "Andrew Ng", False),
        ("How did Man Utd do?", "Manchester United", False),  # a word it begins with
        ("How are the spidermen?", "Spider-Men", False),  # its letters run together
        ("Results for NYC?", "New York", False),  # its initials, with one more letter
        ("Results for LA?", "Los Angeles", False),
        ("The last results?", "Los Angeles", True),  # not initials inside a word
        ("Weather in Tromso?", "Tromsø", False),  # letters NFKD leaves whole
        ("東京の天気は？", "Tokyo", False),  # another script: not compared
    ],
)
def test_a_name_must_be_written(seen: str, team: str, made_up: bool) -> None:
    args = {"team": team, "company": "NVDA", "query": "q", "file_path": "p", "league": "La Liga", "unit": "x"}
    assert (made_up_values(NAMED, args, seen) == [("team", team)]) is made_up


def test_only_a_required_argument_that_takes_a_name_is_questioned() -> None:
    args = {"team": "Arsenal", "company": "Nvidia Corp", "query": "Top Players", "file_path": "Reports/Q3.pdf",
            "league": "La Liga", "unit": "Celsius", "note": "Made Up Note"}  # fmt: skip
    # a query, a path, an enum, a setting ("unit") and the optional note pass; the company does not
    assert made_up_values(NAMED, args, "Arsenal's next match?") == [("company", "Nvidia Corp")]
    # a name from an earlier result is given
    assert made_up_values(NAMED, args, "Arsenal's next match?\nResult: Nvidia, 131.38 USD") == []
    import shapeloop.values as values_module

    saved, values_module.NAMES = values_module.NAMES, False
    try:
        assert made_up_values(NAMED, args, "Arsenal's next match?") == []
    finally:
        values_module.NAMES = saved


def test_a_call_with_a_made_up_name_is_refused_and_the_model_may_answer() -> None:
    @tool
    def get_team_standing(team: str) -> str:
        """A football team's place in its league table."""
        ran.append(team)
        return "1st"

    ran.clear()
    brain = ScriptedBrain([tool_step("get_team_standing", team="FC Barcelona"), answer_step("France won it.")])
    run = run_agent(brain, [get_team_standing], "Who won the 2018 FIFA World Cup?")
    assert run.answer == "France won it." and ran == []
    assert [e.objection for e in run.events if isinstance(e, CallRefused)] == [
        'written nowhere in the task or the results: team "FC Barcelona"'
    ]


def test_an_enum_or_default_behind_a_ref_or_an_any_of_is_not_questioned() -> None:
    schema = {
        "$defs": {
            "Speed": {"enum": [33, 45]},
            "Options": {"properties": {"volume": {"type": "integer", "default": 11}}},
        },
        "properties": {
            "speed": {"$ref": "#/$defs/Speed"},
            "rpm": {"anyOf": [{"enum": [33, 45]}, {"type": "null"}]},
            "opts": {"$ref": "#/$defs/Options"},
        },
        "required": ["speed", "rpm", "opts"],
    }
    assert made_up_values(schema, {"speed": 45, "rpm": 45, "opts": {"volume": 11}}, "Play the record.") == []
    assert made_up_values(schema, {"speed": 45, "rpm": 45, "opts": {"volume": 12}}, "Play it.") == [("opts.volume", 12)]


def test_a_value_from_an_earlier_answer_in_the_conversation_is_given() -> None:
    ran.clear()
    history = [
        {"role": "user", "content": "How many days in the offer?"},
        {"role": "assistant", "content": "About 25."},
    ]
    brain = ScriptedBrain([tool_step("bpm_to_ms", bpm=25), answer_step("2400 ms")])
    run = run_agent(brain, [bpm_to_ms], "Use that as the tempo.", history=history)  # type: ignore[arg-type]
    assert run.ok and not [e for e in run.events if isinstance(e, CallRefused)]


def test_a_value_from_an_earlier_result_is_given() -> None:
    schema = {"properties": {"lat": {"type": "number"}}, "required": ["lat"]}
    assert made_up_values(schema, {"lat": 41.1579}, "Porto\nPorto, Portugal: latitude 41.1579") == []
    assert made_up_values(schema, {"lat": 38.77}, "What time is it in Porto?") == [("lat", 38.77)]


def test_odd_schemas_and_arguments_do_not_raise() -> None:
    assert made_up_values({}, {"n": 3}, "") == []
    assert made_up_values({"required": "n", "properties": {}}, {"n": 3}, "") == []
    odd = {"required": ["n"], "properties": {"n": "?"}}
    assert made_up_values(odd, {"n": [[3, True], None]}, "") == [("n[0][0]", 3)]
    assert made_up_values(NUMBER, {}, "") == []


def test_a_call_with_made_up_dates_is_refused_before_it_runs_and_the_model_may_answer() -> None:
    ran.clear()
    brain = ScriptedBrain([
        tool_step("days_between", start_date="2023-04-15", end_date="2023-04-16"),
        answer_step("I cannot set alarms: there is no tool for that."),
    ])  # fmt: skip
    run = run_agent(brain, [days_between, bpm_to_ms], "Set an alarm for 7am tomorrow.")
    assert run.stop is StopReason.ANSWERED and ran == []
    assert not [e for e in run.events if isinstance(e, ToolCalled)]
    refused = [e for e in run.events if isinstance(e, CallRefused)]
    assert [(e.call.tool, e.objection) for e in refused] == [
        ("days_between", 'written nowhere in the task or the results: start_date "2023-04-15", end_date "2023-04-16"')
    ]
    feedback = run.transcript.messages[3]["content"]
    assert (
        "Not run: the task does not give the start_date and end_date that days_between needs, and a value" in feedback
        and "2023" not in feedback
    )
    # the refused tool is kept out of the next constrained step
    assert [_variant_tools(a.schema) for a in brain.asked] == [{"days_between", "bpm_to_ms"}, {"bpm_to_ms"}]


def test_an_answer_may_pass_on_the_refusals_finding() -> None:
    said = "Not run: the task does not give the bpm that bpm_to_ms needs, and a value cannot be made up."
    brain = ScriptedBrain([tool_step("bpm_to_ms", bpm=120), answer_step(said)])
    run = run_agent(brain, [bpm_to_ms], "Play some jazz.")
    assert run.ok and run.steps == 2


def test_a_long_stretch_of_the_loops_words_is_a_copy_even_when_the_answer_goes_on_differently() -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise ValueError("the disk is gone")

    copied = "Your answer repeats the error of a failed call, and an error is not an answer, so"
    brain = ScriptedBrain([tool_step("broken"), answer_step("ERROR: the disk is gone"), answer_step(copied),
                           answer_step("The disk is gone, so nothing was read.")])  # fmt: skip
    run = run_agent(brain, [broken], "Read it.")
    rejected = [e.objection for e in run.events if isinstance(e, AnswerRejected)]
    assert rejected[-1] == "the answer repeats the loop's own instructions"
    assert run.ok and run.steps == 4


def test_a_refused_tool_comes_back_once_a_call_runs_and_given_values_run() -> None:
    ran.clear()
    brain = ScriptedBrain([
        tool_step("days_between", start_date="2024-01-01", end_date="2024-07-14"),  # the start is made up
        tool_step("bpm_to_ms", bpm=120),
        tool_step("days_between", start_date="2024-03-03", end_date="2024-07-14"),
        answer_step("133 days"),
    ])  # fmt: skip
    run = run_agent(brain, [days_between, bpm_to_ms], "Days from March 3rd 2024 to July 14th 2024? Also 120 bpm.")
    assert run.ok and ran == [("2024-03-03", "2024-07-14")]
    assert [_variant_tools(a.schema) for a in brain.asked][1:3] == [{"bpm_to_ms"}, {"days_between", "bpm_to_ms"}]


def test_the_same_refused_call_again_and_again_stops_as_barren() -> None:
    step = tool_step("bpm_to_ms", bpm=120)
    run = run_agent(ScriptedBrain([step] * 5), [bpm_to_ms], "Play some jazz.", mode="prose")
    assert run.stop is StopReason.BARREN and "made-up-value reply 3 times" in run.reason


def test_ground_values_off_runs_the_call() -> None:
    ran.clear()
    brain = ScriptedBrain([tool_step("days_between", start_date="2023-04-15", end_date="2023-04-16"), answer_step("1")])
    run = run_agent(brain, [days_between], "Set an alarm.", ground_values=False)
    assert run.ok and ran == [("2023-04-15", "2023-04-16")]


def test_a_batch_with_a_made_up_value_runs_none_of_its_calls() -> None:
    ran.clear()
    brain = ScriptedBrain([
        '{"reason": "both", "action": "calls", "calls": ['
        '{"tool": "days_between", "args": {"start_date": "2024-03-03", "end_date": "2024-07-14"}},'
        '{"tool": "bpm_to_ms", "args": {"bpm": 90}}]}',
        answer_step("cannot"),
    ])  # fmt: skip
    run = run_agent(brain, [days_between, bpm_to_ms], "Days from 2024-03-03 to 2024-07-14?", batch=True)
    assert run.ok and ran == []
    assert [e.call.tool for e in run.events if isinstance(e, CallRefused)] == ["bpm_to_ms"]


def test_an_optional_enum_argument_the_task_names_is_required() -> None:
    @tool
    def hash_text(text: str, algorithm: Literal["md5", "sha256", "crc32"] = "sha256") -> str:
        """Hash a text.

        Args:
            text: the text.
            algorithm: the hash.
        """
        return f"{algorithm}({text})"

    brain = ScriptedBrain([tool_step("hash_text", text="a", algorithm="crc32"), answer_step("done")])
    run_agent(brain, [hash_text], "What's the crc32 checksum of 'a'?")
    first = brain.asked[0].schema
    assert first is not None
    args = next(v for v in first["anyOf"] if v["properties"]["tool"]["const"] == "hash_text")["properties"]["args"]
    assert args["required"] == ["text", "algorithm"]
    # its default, or no value named, leaves it optional
    assert named_required(hash_text.parameters, "the sha256 of 'a'") is hash_text.parameters
    assert named_required(hash_text.parameters, "hash 'a'") is hash_text.parameters


@tool
def geocode(city: str) -> str:
    """Latitude and longitude of a city."""
    return f"{city}: latitude 41.1579, longitude -8.6291"


@tool
def get_timezone(latitude: float, longitude: float) -> str:
    """Time zone at a point given by its coordinates."""
    return "Europe/Lisbon"


@tool
def geo_distance(lat1: float, lon1: float) -> str:
    """Distance from a point given by latitude and longitude.

    Args:
        lat1: latitude of the point.
        lon1: longitude of the point.
    """
    return "0 km"


def test_after_a_refused_value_a_tool_that_gives_it_is_named_and_called_next() -> None:
    brain = ScriptedBrain([
        tool_step("get_timezone", latitude=38.77, longitude=-82.42),  # made up
        tool_step("geocode", city="Porto"),
        tool_step("get_timezone", latitude=41.1579, longitude=-8.6291),
        answer_step("Europe/Lisbon"),
    ])  # fmt: skip
    run = run_agent(brain, [get_timezone, geocode, geo_distance], "which time zone is porto in?")
    assert run.answer == "Europe/Lisbon" and run.steps == 4
    feedback = brain.asked[1].messages[-1]["content"]
    assert feedback.endswith("Call geocode first to get it.")  # geo_distance takes a latitude, it gives none
    assert _variant_tools(brain.asked[1].schema) == {"geocode"} and _actions(brain.asked[1].schema) == ["tool"]
    # no tool gives a bpm: the refusal says its finding only, and the next step may answer
    brain = ScriptedBrain([tool_step("bpm_to_ms", bpm=120), answer_step("I cannot play music.")])
    run = run_agent(brain, [bpm_to_ms, geocode], "Play some jazz.")
    assert run.answer == "I cannot play music." and brain.asked[1].messages[-1]["content"].endswith("made up.")


def test_gives_reads_a_tools_name_and_description_against_its_own_parameters() -> None:
    from shapeloop.grounding import gives

    assert gives("geocode", "Latitude and longitude of a city.", geocode.parameters, "latitude")
    assert not gives("geo_distance", "Distance between points given by latitude and longitude.",
                     geo_distance.parameters, "latitude")  # fmt: skip
    assert gives("findEmployee", "Find an employee by name.", {"properties": {"name": {}}}, "employee_id")
    assert not gives("geocode", "Latitude and longitude of a city.", geocode.parameters, "bpm")
    assert not gives("geocode", "Latitude and longitude of a city.", geocode.parameters, "id")  # no words left
    # a short word is in too many names: day_of_week does not give add_days' days
    assert not gives("day_of_week", "The day of the week of a date.", {"properties": {"date": {}}}, "days")


HELD = {
    "properties": {
        "date": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$", "description": "the day, YYYY-MM-DD"},
        "start_time": {"type": "string", "pattern": "^\\d{2}:\\d{2}$"},
        "when": {"type": "string", "format": "date"},
        "stay": {"type": "object", "properties": {"until": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}}},
        "note": {"type": "string"},
        "booking_id": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"},
        "later": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"},
    },
    "required": ["date", "start_time", "when", "stay", "note", "booking_id"],
}


def _enums(parameters: Any) -> dict[str, Any]:
    properties = parameters["properties"]
    return {
        "date": properties["date"].get("enum"),
        "start_time": properties["start_time"].get("enum"),
        "when": properties["when"].get("enum"),
        "until": properties["stay"]["properties"]["until"].get("enum"),
    }


def test_a_date_or_time_argument_is_held_to_what_the_conversation_writes() -> None:
    seen = "Schedule it on April 8th 2025 at 2:30 pm, or 14 July 1789 at noon."
    held = held_to_written(HELD, seen)
    assert _enums(held) == {
        "date": ["1789-07-14", "2025-04-08"],
        "start_time": ["12:00", "14:30"],
        "when": ["1789-07-14", "2025-04-08"],
        "until": ["1789-07-14", "2025-04-08"],
    }
    assert "pattern" not in held["properties"]["date"] and "format" not in held["properties"]["when"]
    assert held["properties"]["date"]["description"] == "the day, YYYY-MM-DD"
    # what every value the check takes is, it takes; anything else it refuses
    for date in held["properties"]["date"]["enum"]:
        assert made_up_values(HELD, {"date": date}, seen) == []
    assert made_up_values(HELD, {"date": "1478-07-14"}, seen) == [("date", "1478-07-14")]
    # an id, free text, and an argument the tool does not require stay as they are; the schema given is not changed
    for name in ("note", "booking_id", "later"):
        assert held["properties"][name] == HELD["properties"][name]
    assert "enum" not in HELD["properties"]["date"]
    # a date and a time together, in the layout the pattern takes
    moment = {"properties": {"at": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}$"}},
              "required": ["at"]}  # fmt: skip
    assert held_to_written(moment, "on 2025-04-08 at 9am")["properties"]["at"]["enum"] == ["2025-04-08T09:00"]


@pytest.mark.parametrize(
    "seen",
    [
        "Nothing dated here.",
        "Book it for tomorrow, 2025-04-08 was too early.",  # relative: a date near the written one passes too
        "On March 3rd, or 2025-04-08.",  # no year: any year passes
    ],
)
def test_dates_are_left_open_where_the_check_takes_more_than_can_be_listed(seen: str) -> None:
    held = held_to_written(HELD, seen)
    assert _enums(held)["date"] is None and _enums(held)["when"] is None
    assert held["properties"]["date"]["pattern"] == HELD["properties"]["date"]["pattern"]


def test_a_time_is_held_though_the_dates_are_open() -> None:
    held = held_to_written(HELD, "tomorrow at 7.30pm")
    assert _enums(held) == {"date": None, "start_time": ["19:30"], "when": None, "until": None}
    assert held_to_written(HELD, "No time written.") is HELD


def test_a_conversation_that_writes_many_dates_leaves_the_argument_open() -> None:
    log = "\n".join(f"2026-11-{day:02d} 10:{minute:02d} INFO tick" for day in range(1, 29) for minute in (0, 30))
    held = held_to_written(HELD, log)
    assert _enums(held)["date"] is not None and len(_enums(held)["date"]) == 28  # 28 days: listed
    assert _enums(held)["start_time"] == ["10:00", "10:30"]
    moment = {"properties": {"at": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}$"}},
              "required": ["at"]}  # fmt: skip
    assert "enum" not in held_to_written(moment, log)["properties"]["at"]  # 56 pairs: too many to list
    longer = log + "\n" + "\n".join(f"2025-01-{day:02d} INFO tock" for day in range(1, 10))
    assert _enums(held_to_written(HELD, longer))["date"] is None  # 37 days: left open


def test_only_an_argument_held_to_a_date_or_time_layout_is_held_to_written_values() -> None:
    loose = {
        "properties": {
            "filename": {"type": "string", "pattern": "^[^/\\\\]+$"},  # a date matches it too
            "phone": {"type": "string", "pattern": "^[0-9+ -]+$"},
            "when": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$|^now$"},  # a choice beside the layout
            "loose": {"type": "string", "pattern": "\\d{4}-\\d{2}-\\d{2}"},  # unanchored: more than a date
            "stamp": {"type": "string", "pattern": "^\\d{2}:\\d{2}:\\d{2}$"},  # seconds: any pass the check
        },
        "required": ["filename", "phone", "when", "loose", "stamp"],
    }
    seen = "Save the report for 2024-05-02 at 14:30:45 as report.txt and text it to 555-0100."
    assert held_to_written(loose, seen) is loose


def test_written_values_keep_a_null_and_a_default_the_check_passes_and_no_two_digit_year_is_forced() -> None:
    nullable = {
        "properties": {
            "day": {"type": ["string", "null"], "format": "date"},
            "start": {"type": "string", "pattern": "^\\d{2}:\\d{2}$", "default": "09:00"},
        },
        "required": ["day", "start"],
    }
    held = held_to_written(nullable, "on 2024-05-02 at 2:30 pm")["properties"]
    assert held["day"]["enum"] == ["2024-05-02", None] and "type" not in held["day"]  # the enum says it
    assert held["start"]["enum"] == ["14:30", "09:00"]
    # "4/7/85" reads as 2085 to the check: no date is listed, so 1985 can still be written
    born = held_to_written(nullable, "Patient born 4/7/85, seen at 2:30 pm")["properties"]
    assert "enum" not in born["day"] and born["start"]["enum"] == ["14:30", "09:00"]


def test_an_argument_with_values_of_its_own_keeps_them() -> None:
    own = {
        "properties": {
            "day": {"type": "string", "format": "date", "enum": ["2024-01-01", "2024-12-31"]},
            "at": {"type": "string", "pattern": "^\\d{2}:\\d{2}$", "const": "12:00"},
            "dotted": {"type": "string", "pattern": "^\\d{4}.\\d{2}.\\d{2}$"},  # "." is any character
        },
        "required": ["day", "at", "dotted"],
    }
    assert held_to_written(own, "on 2024-05-02 at 2:30 pm") is own


def test_the_day_of_the_week_is_no_relative_date() -> None:
    held = held_to_written(HELD, "On which day of the week did 14 July 1789 fall?")
    assert _enums(held)["date"] == ["1789-07-14"]
    assert _enums(held_to_written(HELD, "The week after 14 July 1789?"))["date"] is None
    # the check reads the phrase the same way: it takes the written date and no date near it
    day_of_week = {"type": "object", "properties": {"date": {"type": "string"}}, "required": ["date"]}
    asked = "On which day of the week did 14 July 1789 fall?"
    assert made_up_values(day_of_week, {"date": "1789-07-14"}, asked) == []
    assert made_up_values(day_of_week, {"date": "1789-07-15"}, asked) == [("date", "1789-07-15")]
    assert made_up_values(day_of_week, {"date": "1789-07-15"}, "The day after 14 July 1789, next week?") == []


def test_text_copied_from_its_parameters_own_example_is_made_up_unless_the_task_writes_it() -> None:
    def schema(description: str, **extra: Any) -> dict[str, Any]:
        return {"properties": {"text": {"type": "string", "description": description, **extra}}, "required": ["text"]}

    search = schema('the text to look for, e.g. "timeout".')
    task = "How many lines does notes/todo.txt have?"
    assert made_up_values(search, {"text": "timeout"}, task) == [("text", "timeout")]
    assert made_up_values(search, {"text": "Timeout "}, task) == [("text", "Timeout ")]  # case and space aside
    assert made_up_values(search, {"text": "timeout"}, "Which lines mention the timeout?") == []
    assert made_up_values(search, {"text": "TODO"}, task) == []  # not the example: text is not checked
    # every way of writing an example, and a list of examples in the schema
    for described in ("e.g. timeout", "for example 'timeout'", "such as `timeout`", "for instance: “timeout”"):
        assert made_up_values(schema(described), {"text": "timeout"}, task), described
    assert made_up_values(schema("the text", examples=["timeout"]), {"text": "timeout"}, task)
    # codes are written from the task in other forms ("iron" is Fe, "dollars" USD): never refused
    for code in ("Fe", "USD", "E-12345", "2021-22", "BA 117"):
        assert made_up_values(schema(f"a code, e.g. {code}"), {"text": code}, "iron, in dollars") == [], code
    # a path's example may be a real file
    path = {"properties": {"path": {"type": "string", "description": 'e.g. "notes/todo.txt"'}}, "required": ["path"]}
    assert made_up_values(path, {"path": "notes/todo.txt"}, "What is on my list?") == []


def test_a_call_copying_its_parameters_example_is_refused_and_the_setting_turns_it_off() -> None:
    import shapeloop.values as values_module

    @tool
    def search_files(text: str) -> str:
        """Lines holding a text.

        Args:
            text: the text to look for, e.g. "timeout".
        """
        return f"no line holds {text!r}"

    script = [tool_step("search_files", text="timeout"), answer_step("There are none.")]
    run = run_agent(ScriptedBrain(list(script)), [search_files], "How many lines does notes/todo.txt have?")
    assert [e.objection for e in run.events if isinstance(e, CallRefused)] == [
        'written nowhere in the task or the results: text "timeout"'
    ]
    assert not any(isinstance(e, ToolCalled) for e in run.events)
    saved, values_module.EXAMPLES = values_module.EXAMPLES, False
    try:
        run = run_agent(ScriptedBrain(list(script)), [search_files], "How many lines does notes/todo.txt have?")
        assert not any(isinstance(e, CallRefused) for e in run.events)
    finally:
        values_module.EXAMPLES = saved


def test_the_example_check_leaves_settings_alone_and_reads_whole_unquoted_examples() -> None:
    def one(name: str, description: str) -> dict[str, Any]:
        return {"properties": {name: {"type": "string", "description": description}}, "required": [name]}

    task = "What's the weather in Oslo?"
    for name, example in (("unit", "celsius"), ("format", "json"), ("language", "English"), ("sortOrder", "newest")):
        assert made_up_values(one(name, f"e.g. {example}"), {name: example}, task) == [], name
    # an example written without quotes is the phrase up to the punctuation after it
    phrase = one("text", "what to look for, such as error messages")
    assert made_up_values(phrase, {"text": "error"}, "Which log lines show failures?") == []
    assert made_up_values(phrase, {"text": "error messages"}, "Which log lines show failures?")
    # codes in quotes stay codes
    for code in ("NVDA", "BA 117"):
        assert made_up_values(one("text", f'e.g. "{code}"'), {"text": code}, task) == [], code
