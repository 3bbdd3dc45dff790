"""A run's options in one object (issue 48): RunSettings is built and checked once, shared by runs, and
run_agent, Conversation and run_many all take it; their keyword arguments build it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from helpers import answer_step, tool_step
from shapeloop import (
    Conversation,
    Mode,
    Request,
    RunSettings,
    ScriptedBrain,
    StopReason,
    run_agent,
    run_many,
    tool,
)
from shapeloop.events import Event, RunStopped
from shapeloop.policies import DEFAULT, LookupHint, StateLine


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def test_settings_are_frozen_and_their_defaults_are_a_runs() -> None:
    settings = RunSettings()
    assert settings.max_steps == 12 and settings.mode is Mode.CONSTRAINED and settings.policies == DEFAULT
    assert settings.batch is True and settings.tool_timeout == 60.0 and settings.on_event == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.max_steps = 3  # type: ignore[misc]


def test_values_are_kept_in_one_form_so_a_generator_is_read_once() -> None:
    seen: list[Event] = []
    settings = RunSettings(
        mode="prose", on_event=(sink for sink in [seen.append]), allow_tools=(n for n in ["lookup"]),
        policies=[StateLine(lambda: "here")],
    )  # fmt: skip
    assert settings.mode is Mode.PROSE and settings.allow_tools == ("lookup",)
    assert isinstance(settings.policies, tuple) and settings.sinks == (seen.append,)
    for _ in range(2):  # one object serves two runs: the generators were read once, when it was made
        run_agent(ScriptedBrain([answer_step("x")]), [lookup], "t", settings=settings)
    assert sum(isinstance(e, RunStopped) for e in seen) == 2
    assert RunSettings(on_event=seen.append).sinks == (seen.append,)


@pytest.mark.parametrize(
    ("fields", "error", "words"),
    [
        ({"max_steps": 0}, ValueError, "max_steps and stuck_limit must be at least 1"),
        ({"stuck_limit": 0}, ValueError, "max_steps and stuck_limit must be at least 1"),
        ({"max_steps": True}, TypeError, "max_steps takes a whole number, not True"),
        ({"max_result_chars": 0}, ValueError, "max_result_chars must be at least 1"),
        ({"max_seconds": -1}, ValueError, "max_seconds must be 0 or more"),
        ({"tool_timeout": 0}, ValueError, "tool_timeout must be more than 0 seconds"),
        ({"mode": "fast"}, ValueError, "mode must be one of constrained, prose, native, not 'fast'"),
        ({"schema": "wide"}, ValueError, "schema must be per_tool or flat, not 'wide'"),
        ({"allow_tools": "lookup"}, TypeError, r"write allow_tools=\['lookup'\]"),
        ({"policies": "default"}, TypeError, r"resolve\('default'\)"),
        ({"policies": LookupHint()}, TypeError, r"not one: write policies=\[LookupHint\(...\)\]"),
        ({"policies": ["fit-floor"]}, TypeError, "Policy objects"),
        ({"on_event": 3}, TypeError, "on_event takes a callable that takes an event, or several, not 3"),
        ({"on_event": [print, "log.jsonl"]}, TypeError, "on_event takes a callable"),
    ],
)
def test_a_bad_value_is_refused_when_the_settings_are_made(fields: dict[str, Any], error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        RunSettings(**fields)
    with pytest.raises(error, match=words):  # derived settings are checked as new ones are
        RunSettings().replace(**fields)
    brain = ScriptedBrain([answer_step("x")])
    with pytest.raises(error, match=words):  # and the keywords of each entry point build the same object
        run_agent(brain, [lookup], "t", **fields)
    with pytest.raises(error, match=words):
        Conversation(brain, [lookup], **fields)
    with pytest.raises(ValueError, match=f"job 1: .*{words}"):
        run_many(
            [{"brain": brain, "tools": [lookup], "task": "t"}, {"brain": brain, "tools": [], "task": "t", **fields}]
        )
    assert brain.asked == []  # nothing ran


def test_a_misspelled_option_names_the_nearest_field() -> None:
    with pytest.raises(
        TypeError, match=r"run_agent got option\(s\) .*: max_step \(max_step: did you mean max_steps\?\)"
    ):
        run_agent(ScriptedBrain([]), [], "t", max_step=3)
    with pytest.raises(TypeError, match="did you mean system"):
        RunSettings().replace(sytem="Be brief.")
    with pytest.raises(TypeError, match="Conversation got option"):
        Conversation(ScriptedBrain([]), [], history=[])  # the conversation gives each run its history
    with pytest.raises(TypeError, match="settings takes a RunSettings, not a dict"):
        run_agent(ScriptedBrain([]), [], "t", settings={"max_steps": 3})  # type: ignore[arg-type]


def test_replace_derives_new_settings_and_leaves_the_old_ones() -> None:
    base = RunSettings(max_steps=4, system="Be brief.")
    short = base.replace(max_steps=1)
    assert (base.max_steps, short.max_steps, short.system) == (4, 1, "Be brief.")
    assert base.replace() == base


def test_run_agent_takes_settings_and_a_keyword_beside_them_wins() -> None:
    settings = RunSettings(max_steps=1, system="Answer in French.")
    looping = [tool_step("lookup", key=str(n)) for n in range(5)]
    run = run_agent(ScriptedBrain(looping), [lookup], "t", settings=settings)
    assert run.stop is StopReason.MAX_STEPS and run.steps == 1
    brain = ScriptedBrain([*looping[:2], answer_step("done")])
    run = run_agent(brain, [lookup], "t", settings=settings, max_steps=3)
    assert run.ok and run.steps == 3
    assert "Answer in French." in brain.asked[0].messages[0]["content"]  # the fields not named stay


def test_a_conversation_holds_one_settings_object_and_each_request_runs_with_it() -> None:
    prompts: list[str] = []

    def reply(request: Request) -> str:
        prompts.append(request.messages[0]["content"])
        return answer_step("ok")

    settings = RunSettings(system="Answer in French.", policies=())
    talk = Conversation(ScriptedBrain(reply), [lookup], settings=settings, max_steps=2)
    assert talk.settings == settings.replace(max_steps=2)
    for request in ("One?", "Two?"):
        assert talk.ask(request).run.policies == ()
    assert len(prompts) == 2 and all("Answer in French." in p for p in prompts)


def test_run_many_jobs_share_one_settings_object() -> None:
    settings = RunSettings(max_steps=1, mode="prose")
    jobs = [{"brain": ScriptedBrain([answer_step(f"a{n}")]), "tools": [lookup], "task": "t", "settings": settings}
            for n in range(3)]  # fmt: skip
    jobs.append({"brain": ScriptedBrain([tool_step("lookup", key="k")]), "tools": [lookup], "task": "t",
                 "settings": settings})  # fmt: skip
    runs = run_many(jobs, concurrency=2)
    assert [run.answer for run in runs[:3]] == ["a0", "a1", "a2"]
    assert runs[3].stop is StopReason.MAX_STEPS and all(run.mode is Mode.PROSE for run in runs)


@pytest.mark.parametrize("name", sorted(RunSettings.fields()))
def test_every_field_is_an_option_of_every_entry_point(name: str) -> None:
    # a new option is one field: run_agent, Conversation, run_many's jobs and opening_prompt take it
    from shapeloop.agent import opening_prompt

    value = getattr(RunSettings(), name)
    given = {name: value}
    brain = ScriptedBrain([answer_step("x")] * 3)
    assert run_agent(brain, [lookup], "t", **given).ok
    assert Conversation(brain, [lookup], **given).ask("t").ok
    (run,) = run_many([{"brain": brain, "tools": [lookup], "task": "t", **given}])
    assert run.ok
    assert opening_prompt([lookup], **given) == opening_prompt([lookup])


def test_a_reason_bound_with_the_calls_step_is_refused_saying_what_to_pass() -> None:
    with pytest.raises(ValueError, match="pass batch=False with it"):
        RunSettings(max_reason_chars=40)
    assert RunSettings(max_reason_chars=40, batch=False).max_reason_chars == 40


def test_conversation_options_is_kept_for_a_release_as_a_deprecated_view_of_its_settings() -> None:
    from shapeloop import Conversation, ScriptedBrain

    talk = Conversation(ScriptedBrain([]), [], max_steps=3, policies=())
    with pytest.warns(DeprecationWarning, match="read Conversation.settings"):
        options = talk.options
    assert options["max_steps"] == 3 and options["policies"] == ()
