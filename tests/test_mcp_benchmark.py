"""benchmarks/mcp_tools.py: its offers and its checker, with a scripted brain (no model)."""

from __future__ import annotations

import json

from benchmarks import mcp_tools

from shapeloop import ScriptedBrain
from shapeloop.tools import ToolCall


def test_every_offer_holds_the_right_tool_among_the_count_drawn_the_same_each_time() -> None:
    for index, (_, right, _) in enumerate(mcp_tools.REQUESTS):
        for count in (1, 2, 10, len(mcp_tools.SPECS)):
            offered = mcp_tools.offer(index, count, seed=47)
            assert right in offered and len(offered) == len(set(offered)) == count
            assert offered == mcp_tools.offer(index, count, seed=47)
    assert {spec[1] for spec in mcp_tools.SPECS} >= {right for _, right, _ in mcp_tools.REQUESTS}


def test_the_checker_refuses_a_wrong_tool_a_wrong_value_and_no_call() -> None:
    wanted = {"timezone": "Asia/Tokyo"}
    assert mcp_tools.judge(ToolCall(tool="get_current_time", args={"timezone": "asia/tokyo"}), "get_current_time",
                           wanted) == (True, True)  # fmt: skip
    assert mcp_tools.judge(ToolCall(tool="get_current_time", args={"timezone": "Europe/Paris"}), "get_current_time",
                           wanted) == (True, False)  # fmt: skip
    assert mcp_tools.judge(ToolCall(tool="convert_time", args={}), "get_current_time", wanted) == (False, False)
    assert mcp_tools.judge(None, "get_current_time", wanted) == (False, False)
    assert mcp_tools.judge(ToolCall(tool="search_repositories", args={}), "search_repositories",
                           {"query": None}) == (True, False)  # fmt: skip


def test_one_record_through_the_loop_with_and_without_the_cut() -> None:
    step = json.dumps({"reason": "r", "action": "tool", "tool": "get_current_time", "args": {"timezone": "Asia/Tokyo"},
                       "answer": ""})  # fmt: skip
    brain = ScriptedBrain([step, step])
    plain = mcp_tools.run_one(brain, 0, 40, "plain", ctx=4096, seed=47)
    cut = mcp_tools.run_one(brain, 0, 40, "tool-cut", ctx=4096, seed=47)
    assert plain["tool_right"] and plain["args_right"] and cut["args_right"]
    assert plain["doc_tokens"] == cut["doc_tokens"] > 0.4 * 4096  # the cut applies at 40 tools in 4k
    rows = mcp_tools.summary([plain, cut])
    assert [(r["column"], r["count"], r["args_right"]) for r in rows] == [("plain", 40, 1), ("tool-cut", 40, 1)]
