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


def need_model(name: str, *, fast: bool = False) -> None:
    """Skip, loudly, unless llama-cpp-python (and llguidance, for ``fast``) and the model are here."""
    import importlib.util

    import pytest

    from shapeloop import models

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip(
            "LIVE TEST SKIPPED: llama-cpp-python is not installed (pip install '.[local]' with the README's flags)"
        )
    if fast and importlib.util.find_spec("llguidance") is None:
        pytest.skip("LIVE TEST SKIPPED: llguidance is not installed (pip install '.[local]')")
    if not models.is_pulled(name):
        pytest.skip(f"LIVE TEST SKIPPED: model {name} is not pulled: run `shapeloop pull {name}`")
