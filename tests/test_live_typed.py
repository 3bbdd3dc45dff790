"""Live: qwen2.5-coder-0.5b returns a valid typed record from a workspace file, through the embedded
backend and through ``python -m llama_cpp.server`` with the OpenAI-compatible backend."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from helpers import need_model
from shapeloop import AgentRun, Mode, run_agent, workspace_tools
from shapeloop.backends.openai import OpenAIBrain
from shapeloop.events import ToolCalled
from test_servers import SERVED, server  # noqa: F401 - the fixture: a fresh server for this module

pytestmark = pytest.mark.live
WORKSPACE = Path(__file__).resolve().parent.parent / "benchmarks" / "typed_workspace"


class Contact(BaseModel):
    name: str
    email: str
    role: Literal["engineer", "designer", "manager"]
    started: datetime.date


TASK = "Read people/ana.txt and extract the contact."


def check(run: AgentRun[Contact]) -> None:
    assert run.ok and run.mode is Mode.CONSTRAINED, run.reason
    assert isinstance(run.output, Contact)
    assert any(e.call.args.get("path") == "people/ana.txt" for e in run.events if isinstance(e, ToolCalled))
    assert run.output.email == "ana.lima@example.org" and run.output.role == "engineer"
    assert run.output.started == datetime.date(2024, 9, 2)


def test_qwen_extracts_a_typed_contact_through_the_embedded_backend() -> None:
    need_model("qwen2.5-coder-0.5b")
    from shapeloop.backends.llamacpp import LlamaCppBrain

    brain = LlamaCppBrain("qwen2.5-coder-0.5b", n_ctx=4096)
    check(run_agent(brain, workspace_tools(WORKSPACE), TASK, output_type=Contact, max_steps=5))


def test_qwen_extracts_a_typed_contact_through_llama_cpp_server(server: str) -> None:  # noqa: F811
    with OpenAIBrain(SERVED, base_url=server) as brain:
        check(run_agent(brain, workspace_tools(WORKSPACE), TASK, output_type=Contact, max_steps=5))
    assert brain.dialects == ["json_object"]  # the server constrained the reply with the typed schema
