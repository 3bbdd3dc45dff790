"""benchmarks/mcp_tools.py: the offers, the judge, the cut's reuse and a resumed run's records."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.mcp_tools import REQUESTS, SPECS, cuts, earlier, judge, offer, run_one

from helpers import call_step
from shapeloop import ScriptedBrain
from shapeloop.tools import ToolCall


def test_an_offer_holds_the_right_tool_among_the_count_the_same_each_time() -> None:
    for index in range(len(REQUESTS)):
        names = offer(index, 10, 47)
        assert len(names) == len(set(names)) == 10 and REQUESTS[index][1] in names
        assert names == offer(index, 10, 47) and set(offer(index, len(SPECS), 47)) == {s[1] for s in SPECS}


def test_the_judge_wants_the_right_tool_and_the_arguments_that_matter() -> None:
    wanted = {"url": ("https://example.org", "https://example.org/")}
    assert judge(ToolCall(tool="fetch", args={"url": "HTTPS://example.org/"}), "fetch", wanted) == (True, True)
    assert judge(ToolCall(tool="fetch", args={"url": "https://example.com"}), "fetch", wanted) == (True, False)
    assert judge(ToolCall(tool="fetch", args={}), "fetch", wanted) == (True, False), "a missing argument is wrong"
    assert judge(ToolCall(tool="git_log", args={}), "fetch", wanted) == (False, False)
    assert judge(None, "fetch", wanted) == (False, False)
    assert judge(ToolCall(tool="search_repositories", args={"query": "x"}), "search_repositories", {"query": None}) == (
        True, True)  # fmt: skip


def test_the_cut_applies_only_where_the_documentation_is_over_its_share() -> None:
    assert not cuts(0, 2, 4096, 47) and cuts(0, 40, 4096, 47) and not cuts(0, 40, 65536, 47)


def test_a_run_s_first_call_is_judged_from_the_model_s_step() -> None:
    brain = ScriptedBrain([call_step("get_current_time", timezone="Asia/Tokyo")])
    record = run_one(brain, 0, 5, "plain", 4096, 47)
    assert (record["tool_right"], record["args_right"], record["cut"]) == (True, True, False)
    assert record["call"] == {"tool": "get_current_time", "args": {"timezone": "Asia/Tokyo"}}


def test_a_resumed_run_keeps_only_records_of_the_same_window_and_seed(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    assert earlier(path, 4096, 47) == []
    path.write_text(json.dumps({"ctx": 4096, "seed": 47, "records": [{"request": 0}]}))
    assert earlier(path, 4096, 47) == [{"request": 0}] and earlier(path, 8192, 47) == []


def test_a_tool_cut_offer_the_cut_leaves_alone_reuses_plain_s_record_and_says_so() -> None:
    from benchmarks.mcp_tools import reuse

    plain = {"request": 0, "count": 5, "column": "plain", "tool_right": True, "cut": False}
    assert reuse([plain], 0, 5, "tool-cut", 4096, 47) == {**plain, "column": "tool-cut", "cut": False}
    assert reuse([plain], 0, 40, "tool-cut", 4096, 47) is None, "at 40 tools the cut applies: it runs"
    assert reuse([], 0, 5, "tool-cut", 4096, 47) is None and reuse([plain], 0, 5, "plain", 4096, 47) is None
    brain = ScriptedBrain([call_step("get_current_time", timezone="Asia/Tokyo")])
    assert run_one(brain, 0, 5, "tool-cut", 4096, 47)["cut"] is False, "run where no plain record exists"


def test_a_resumed_run_keeps_no_record_of_another_backend(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"ctx": 4096, "seed": 47, "backend": "ollama", "records": [{"request": 0}]}))
    assert earlier(path, 4096, 47, "llamacpp") == [] and earlier(path, 4096, 47, "ollama") == [{"request": 0}]


def test_the_summary_of_a_partial_run_leaves_out_what_it_has_not_reached() -> None:
    from benchmarks.mcp_tools import summary

    one = {"request": 0, "count": 5, "column": "plain", "tool_right": True, "args_right": False,
           "doc_tokens": 300, "prompt_tokens": 400}  # fmt: skip
    rows = summary([one, {**one, "count": 40, "column": "tool-cut", "doc_tokens": 2000, "prompt_tokens": 700}])
    assert [(r["column"], r["count"], r["tool_right"]) for r in rows] == [("plain", 5, 1), ("tool-cut", 40, 1)]
