"""Small builders shared by the tests."""

from __future__ import annotations

import json
from typing import Any


def tool_step(tool: str, reason: str = "next", **args: Any) -> str:
    """A five-field tool step (a run with ``batch=False``) as a model would write it."""
    return json.dumps({"reason": reason, "action": "tool", "tool": tool, "args": args, "answer": ""})


def answer_step(answer: str, reason: str = "done") -> str:
    """A five-field answer step (a run with ``batch=False``) as a model would write it."""
    return json.dumps({"reason": reason, "action": "answer", "tool": "", "args": {}, "answer": answer})


def call_step(tool: str, **args: Any) -> str:
    """A step of the default (batch) shape making one call, as a model would write it."""
    return calls_step((tool, args))


def calls_step(*calls: tuple[str, dict[str, Any]]) -> str:
    """A step of the default (batch) shape making these calls at once: ``{"calls": [...]}``."""
    return json.dumps({"calls": [{"name": name, "arguments": args} for name, args in calls]})


def lean_answer(answer: Any) -> str:
    """An answer step of the default (batch) shape: ``{"answer": ...}`` (text, or a typed answer's value)."""
    return json.dumps({"answer": answer})


def need_model(name: str, *, fast: bool = False) -> None:
    """Skip, loudly, unless llama-cpp-python (and llguidance, for ``fast``) is here; pull the model
    into the cache when it is not there yet, and skip, saying why, when that fails."""
    import importlib.util
    import sys

    import pytest

    from shapeloop import models
    from shapeloop.errors import CatalogueError

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip(
            "LIVE TEST SKIPPED: llama-cpp-python is not installed (pip install '.[local]' with the README's flags)"
        )
    if fast and importlib.util.find_spec("llguidance") is None:
        pytest.skip("LIVE TEST SKIPPED: llguidance is not installed (pip install '.[local]')")
    if not models.is_pulled(name):
        # A fresh machine has no models: the test run pulls what it needs (verified by sha256).
        try:
            models.pull(name, progress=lambda line: print(f"need_model: {line}", file=sys.stderr, flush=True))
        except (CatalogueError, OSError) as exc:
            pytest.skip(f"LIVE TEST SKIPPED: model {name} is not pulled and pulling it failed ({exc})")
