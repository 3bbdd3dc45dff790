"""Small builders shared by the tests."""

from __future__ import annotations

import json
from typing import Any


def tool_step(tool: str, reason: str = "next", **args: Any) -> str:
    """A tool step as a model would write it."""
    return json.dumps({"reason": reason, "action": "tool", "tool": tool, "args": args, "answer": ""})


def answer_step(answer: str, reason: str = "done") -> str:
    """An answer step as a model would write it."""
    return json.dumps({"reason": reason, "action": "answer", "tool": "", "args": {}, "answer": answer})
