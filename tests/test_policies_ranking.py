"""ToolRanking and StateLine (issue 33): the tools a step offers, ranked in any language; the cut, its
note and its escape; the state line; on hand-built views and through run_agent."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from helpers import answer_step, tool_step
from shapeloop import Message, PolicyIntervened, Request, ScriptedBrain, Tool, ToolCall, ToolStatus, run_agent
from shapeloop.events import ToolCalled, ToolReturned
from shapeloop.policies import CallOutcome, RunView, StepShape
from shapeloop.policies.ranking import ToolRanking, grams
from shapeloop.policies.state import StateLine


def make(name: str, doc: str, *params: str) -> Tool:
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in params}, "required": list(params)}
    return Tool(name=name, description=doc, parameters=schema, fn=lambda **args: f"{name} done")


ENGLISH = [
    make("ls", "List the files and folders in the current directory."),
    make("cd", "Change the current directory to another folder.", "folder"),
    make("cp", "Copy a file to a new location.", "source", "destination"),
    make("mv", "Move or rename a file.", "source", "destination"),
    make("rm", "Remove a file.", "path"),
    make("cat", "Display the contents of a file.", "path"),
    make("grep", "Search a file for lines that match a pattern.", "path", "pattern"),
    make("mkdir", "Create a new directory.", "name"),
    make("touch", "Create an empty file.", "name"),
    make("wc", "Count the lines, words or characters of a file.", "path"),
    make("sort", "Sort the lines of a file.", "path"),
    make("diff", "Compare two files line by line.", "first", "second"),
    make("send_message", "Send a message to a user by id.", "user_id", "text"),
    make("book_flight", "Book a flight between two airports on a date.", "origin", "destination", "date"),
]

GERMAN = [
    make("liste_dateien", "Listet die Dateien im aktuellen Ordner auf."),
    make("kopiere_datei", "Kopiert eine Datei an einen neuen Ort.", "quelle", "ziel"),
    make("verschiebe_datei", "Verschiebt oder benennt eine Datei um.", "quelle", "ziel"),
    make("loesche_datei", "Löscht eine Datei.", "pfad"),
    make("zeige_datei", "Zeigt den Inhalt einer Datei.", "pfad"),
    make("suche_text", "Sucht in einer Datei nach Zeilen, die einem Muster entsprechen.", "pfad", "muster"),
    make("erstelle_ordner", "Erstellt einen neuen Ordner.", "name"),
    make("sende_nachricht", "Sendet eine Nachricht an einen Benutzer.", "benutzer", "text"),
    make("buche_flug", "Bucht einen Flug zwischen zwei Flughäfen an einem Datum.", "von", "nach", "datum"),
    make("wetter", "Gibt die Wettervorhersage für eine Stadt.", "stadt"),
]

CHINESE = [
    make("read_file", "读取一个文件的内容。", "path"),
    make("write_file", "把文本写入一个文件。", "path", "text"),
    make("book_flight", "预订两个机场之间的航班。", "origin", "destination"),
    make("get_weather", "查询一个城市的天气预报。", "city"),
    make("send_message", "给用户发送一条消息。", "user", "text"),
    make("list_files", "列出当前文件夹里的文件。"),
    make("delete_file", "删除一个文件。", "path"),
    make("create_folder", "新建一个文件夹。", "name"),
    make("exchange_rate", "查询两种货币之间的汇率。", "source", "target"),
    make("order_food", "从餐厅点外卖。", "restaurant", "dish"),
]


def view(
    tools: Sequence[Tool],
    task: str,
    *,
    calls: Sequence[CallOutcome] = (),
    said: Sequence[str] = (),
    step: int = 1,
) -> RunView:
    messages = [Message(role="system", content="prompt"), Message(role="user", content=task)]
    messages += [Message(role="assistant", content=text) for text in said]
    return RunView(task=task, tools=tuple(tools), messages=tuple(messages), calls=tuple(calls), step=step, max_steps=12)


def offered(policy: ToolRanking, at: RunView) -> frozenset[str]:
    shape = policy.shape_step(at)
    assert shape is not None and shape.tools is not None
    return shape.tools


def outcome(tool: str, text: str, status: ToolStatus = ToolStatus.OK, **args: Any) -> CallOutcome:
    return CallOutcome(call=ToolCall(tool=tool, args=args), status=status, text=text)


def test_grams_are_word_beginnings_and_cjk_characters_and_pairs() -> None:
    assert grams("cp") == {" cp ": 1.0}
    assert set(grams("Kopiere")) == {" kop", " kopi", " kopie", " kopier", " kopiere "}
    assert sum(grams("Kopiere").values()) == pytest.approx(1.0) == sum(grams("cp").values())  # long or short
    assert {" read ", " file ", " get ", " tic"} <= set(grams("read_file getTicket"))  # "_" and camelCase split
    assert set(grams("天气预报")) == {"天", "气", "预", "报", "天气", "气预", "预报"}


@pytest.mark.parametrize(
    ("tools", "task", "right"),
    [
        (ENGLISH, "Copy report.txt to the archive folder.", "cp"),
        (ENGLISH, "Book me a flight from Boston to Denver next Friday.", "book_flight"),
        (ENGLISH, "Count the words in notes.txt.", "wc"),
        (GERMAN, "Kopiere bericht.txt in den Ordner archiv.", "kopiere_datei"),
        (GERMAN, "Schick Anna eine Nachricht: das Meeting beginnt um 10 Uhr.", "sende_nachricht"),
        (GERMAN, "Wie wird das Wetter morgen in München?", "wetter"),
        (ENGLISH, "Führe grep für TODO in notes.txt aus.", "grep"),  # German, through the tool's own name
        (CHINESE, "帮我查一下北京明天的天气", "get_weather"),
        (CHINESE, "给张三发一条消息，说我晚点到", "send_message"),
        (CHINESE, "今天美元兑人民币的汇率是多少？", "exchange_rate"),
    ],
)
def test_the_right_tool_is_kept_in_any_language(tools: list[Tool], task: str, right: str) -> None:
    policy = ToolRanking(max_tools=3).for_run(task, tools)
    kept = offered(policy, view(tools, task))
    assert right in kept and len(kept) == 3


def test_the_last_result_moves_the_tool_it_calls_for_up() -> None:
    policy = ToolRanking(max_tools=2).for_run("Weiter.", ENGLISH)
    failed = outcome("cp", "ERROR: the destination directory archive does not exist: create it first", ToolStatus.ERROR)
    assert "mkdir" not in offered(policy, view(ENGLISH, "Weiter."))
    assert offered(policy, view(ENGLISH, "Weiter.", calls=[failed])) == {"cp", "mkdir"}


def test_the_cut_names_its_count_and_lists_the_cut_tools_in_one_line() -> None:
    policy = ToolRanking(max_tools=4).for_run("Copy report.txt to the archive folder.", ENGLISH)
    shape = policy.shape_step(view(ENGLISH, "Copy report.txt to the archive folder."))
    assert isinstance(shape, StepShape) and shape.tools is not None and len(shape.tools) == 4
    assert shape.reason.startswith(f"{len(ENGLISH) - 4} of {len(ENGLISH)} tools cut")
    cut = [t.name for t in ENGLISH if t.name not in shape.tools]
    assert "\n" not in shape.note and ", ".join(cut) in shape.note
    assert shape.answer == "may"


def test_tools_already_called_stay_offered_however_they_rank() -> None:
    task = "Copy report.txt to the archive folder."
    policy = ToolRanking(max_tools=2).for_run(task, ENGLISH)
    assert "book_flight" not in offered(policy, view(ENGLISH, task))
    called = outcome("book_flight", "booked", origin="BOS", destination="DEN", date="2026-05-01")
    kept = offered(policy, view(ENGLISH, task, calls=[called]))
    assert "book_flight" in kept and len(kept) == 2


def test_with_few_tools_nothing_is_cut() -> None:
    policy = ToolRanking(max_tools=8).for_run("anything", ENGLISH[:8])
    assert policy.shape_step(view(ENGLISH[:8], "anything")) is None
    with pytest.raises(ValueError, match="max_tools"):
        ToolRanking(max_tools=0)


def test_a_cut_tool_the_model_names_is_offered_from_the_next_step() -> None:
    task = "Copy report.txt to the archive folder."
    policy = ToolRanking(max_tools=3).for_run(task, ENGLISH)
    assert "diff" not in offered(policy, view(ENGLISH, task))
    said = json.dumps({"reason": "first I need diff, then cp", "action": "tool", "tool": "cp", "args": {}})
    assert "diff" in offered(policy, view(ENGLISH, task, said=[said], step=2))
    assert "diff" in offered(policy, view(ENGLISH, task, said=[said, "{}"], step=3))  # and it stays
    # a name inside another word is not a name: "cpu" names no cp, "sorted" no sort
    fresh = ToolRanking(max_tools=3).for_run(task, ENGLISH)
    fresh.shape_step(view(ENGLISH, task))
    assert "sort" not in offered(fresh, view(ENGLISH, task, said=["the cpu list is sorted"], step=2))


def test_an_answer_that_names_a_cut_tool_is_put_back_once() -> None:
    task = "Copy report.txt to the archive folder."
    policy = ToolRanking(max_tools=3).for_run(task, ENGLISH)
    policy.shape_step(view(ENGLISH, task))
    objection = policy.check_answer(view(ENGLISH, task), "diff")
    assert objection is not None and objection.feedback.startswith("diff is offered now")
    assert policy.check_answer(view(ENGLISH, task), "diff") is None  # once
    assert policy.check_answer(view(ENGLISH, task), "Copied.") is None
    assert "diff" in offered(policy, view(ENGLISH, task, step=2))


def test_one_policy_object_serves_runs_that_do_not_share_state() -> None:
    task = "Copy report.txt to the archive folder."
    shared = ToolRanking(max_tools=3)
    one, two = shared.for_run(task, ENGLISH), shared.for_run(task, ENGLISH)
    one.shape_step(view(ENGLISH, task))
    assert one.check_answer(view(ENGLISH, task), "diff") is not None
    two.shape_step(view(ENGLISH, task))
    assert "diff" not in offered(two, view(ENGLISH, task, step=2))


class Recorder:
    """A brain function that records what each step offered and replies from a script."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.requests: list[Request] = []

    def __call__(self, request: Request) -> str:
        self.requests.append(request)
        return self.replies.pop(0)

    def offered(self, index: int) -> set[str]:
        return {name for name, _ in self.requests[index].offered}


def test_through_run_agent_the_cut_is_an_event_and_the_escape_works() -> None:
    task = "Copy report.txt to the archive folder."
    brain = Recorder([answer_step("diff"), tool_step("diff", first="a", second="b"), answer_step("they differ")])
    run = run_agent(ScriptedBrain(brain), ENGLISH, task, policies=[ToolRanking(max_tools=3)])
    assert run.ok and run.answer == "they differ"
    assert len(brain.offered(0)) == 3 and "diff" not in brain.offered(0)
    assert "diff" in brain.offered(1)  # the model named it; the next step offers it
    assert '"diff"' in json.dumps(brain.requests[1].schema)  # and the constrained schema lets it be called
    assert [str(e.call) for e in run.events if isinstance(e, ToolCalled)] == ['diff({"first": "a", "second": "b"})']
    note = brain.requests[0].messages[-1]["content"]
    assert note.startswith("Not offered at this step: ") and "diff" in note
    assert all(m["content"] != note for m in run.messages)  # read at that step only
    hooks = [(e.hook, e.policy) for e in run.events if isinstance(e, PolicyIntervened)]
    assert ("shape_step", "tool-ranking") in hooks and ("check_answer", "tool-ranking") in hooks
    assert run.interventions["tool-ranking"] == len(hooks)
    # the step's system prompt documents the offered tools only; the run's record keeps the whole one
    first = brain.requests[0].messages[0]["content"]
    assert all(f"{name}(" in first for name in brain.offered(0)) and "diff(" not in first
    assert "diff(" in brain.requests[1].messages[0]["content"] and "diff(" in run.messages[0]["content"]
    assert len(first) < len(run.messages[0]["content"])


def test_a_cut_tool_called_anyway_runs() -> None:
    task = "Copy report.txt to the archive folder."
    brain = ScriptedBrain([tool_step("book_flight", origin="A", destination="B", date="C"), answer_step("booked")])
    brain.refuse_schema = True  # prose: the model may write any tool
    run = run_agent(brain, ENGLISH, task, policies=[ToolRanking(max_tools=3)])
    assert run.ok
    returned = [e for e in run.events if isinstance(e, ToolReturned)]
    assert [(e.call.tool, e.status) for e in returned] == [("book_flight", ToolStatus.OK)]


@pytest.mark.parametrize(
    ("tools", "task", "call"),
    [
        (GERMAN, "Kopiere bericht.txt in den Ordner archiv.", tool_step("kopiere_datei", quelle="b", ziel="a")),
        (CHINESE, "帮我查一下北京明天的天气", tool_step("get_weather", city="北京")),
    ],
)
def test_german_and_chinese_runs_call_the_ranked_tool_and_nothing_is_refused(
    tools: list[Tool], task: str, call: str
) -> None:
    brain = Recorder([call, answer_step("ok")])
    run = run_agent(ScriptedBrain(brain), tools, task, policies=[ToolRanking(max_tools=3)])
    assert run.ok and len(brain.offered(0)) == 3
    assert not [e for e in run.events if e.kind == "call_refused"]


def test_the_state_line_is_each_steps_note_as_the_tools_report_it_now() -> None:
    where = {"cwd": "/workspace"}
    policy = StateLine(lambda: f"current folder: {where['cwd']}").for_run("t", ENGLISH)
    first = policy.shape_step(view(ENGLISH, "t"))
    where["cwd"] = "/workspace/docs"
    second = policy.shape_step(view(ENGLISH, "t", step=2))
    assert first is not None and first.note == "current folder: /workspace" and first.tools is None
    assert second is not None and second.note == "current folder: /workspace/docs"


def test_the_state_line_is_one_short_line_or_nothing() -> None:
    assert StateLine(lambda: "  ").shape_step(view(ENGLISH, "t")) is None
    shape = StateLine(lambda: "a\nb " + "c" * 400, max_chars=50).shape_step(view(ENGLISH, "t"))
    assert shape is not None and shape.note.startswith("a b ccc") and len(shape.note) == 50
    assert shape.note.endswith("…")


@pytest.mark.parametrize("line", ["aktueller Ordner: /arbeit/Berichte", "当前文件夹：/工作/文档"])
def test_through_run_agent_the_state_line_is_read_at_every_step_in_any_language(line: str) -> None:
    brain = Recorder([tool_step("ls"), answer_step("fertig")])
    run = run_agent(ScriptedBrain(brain), ENGLISH[:3], "Liste die Dateien.", policies=[StateLine(lambda: line)])
    assert run.ok and [r.messages[-1]["content"] for r in brain.requests] == [line, line]
    assert all(m["content"] != line for m in run.messages)
    assert run.interventions == {"state-line": 2}
