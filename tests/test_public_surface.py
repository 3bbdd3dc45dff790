"""What a newcomer meets at the public surface: one line that says what to do next, and docstrings."""

import ast
import inspect
import itertools
import re
import socket
from pathlib import Path
from typing import Any

import pytest

import shapeloop
from shapeloop import FunctionBrain, Reply, Request, ScriptedBrain, run_agent, run_many, tool

ANSWER = '{"reason": "done", "action": "answer", "tool": "", "args": {}, "answer": "hi"}'


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text, text
    return text


def test_a_one_argument_brain_function_is_refused_before_the_first_request_naming_the_contract() -> None:
    asked: list[object] = []

    def fn(messages: list[dict[str, str]]) -> str:
        asked.append(messages)
        return ANSWER

    with pytest.raises(TypeError) as exc:
        run_agent(fn, [], "hello")  # type: ignore[arg-type]
    assert "fn(messages, schema) -> str" in one_line(exc) and "fn(messages)" in str(exc.value)
    assert asked == []  # refused before the first request
    (run,) = run_many([{"brain": fn, "tools": [], "task": "hello"}])  # a job that raises is a run stopped
    assert run.stop == "error" and "fn(messages, schema) -> str" in run.reason and "\n" not in run.reason
    assert asked == []


def test_the_same_one_argument_function_is_refused_by_the_scripted_brain_in_the_same_words() -> None:
    def fn(messages: list[dict[str, str]]) -> str:
        return ANSWER

    with pytest.raises(TypeError) as exc:
        ScriptedBrain(fn)
    assert "fn(messages, schema) -> str" in one_line(exc)
    with pytest.raises(TypeError, match=re.escape("fn(messages, schema) -> str")):
        FunctionBrain(fn)


def test_one_contract_everywhere_a_function_is_a_brain() -> None:
    def fn(messages: list[dict[str, str]], schema: dict[str, Any] | None) -> str:
        assert messages[-1] == {"role": "user", "content": "hello"} and schema is not None
        return ANSWER

    assert run_agent(fn, [], "hello").answer == "hi"
    assert run_agent(ScriptedBrain(fn), [], "hello").answer == "hi"
    assert run_agent(FunctionBrain(fn), [], "hello").answer == "hi"
    assert run_agent(lambda messages, schema: ANSWER, [], "hello").answer == "hi"


def test_a_function_of_the_request_is_told_apart_by_its_parameter() -> None:
    def fn(request: Request) -> Reply:
        return Reply(text=ANSWER if request.results == 0 else "")

    assert run_agent(ScriptedBrain(fn), [], "hello").answer == "hi"
    assert run_agent(fn, [], "hello").answer == "hi"
    assert run_agent(ScriptedBrain(lambda request: ANSWER), [], "hello").answer == "hi"  # named so
    with pytest.raises(TypeError, match=re.escape("fn(messages, schema) -> str")):
        ScriptedBrain(lambda req: ANSWER)  # neither named nor annotated: fn(messages), one argument short


def test_a_reply_that_is_not_a_string_is_refused_at_the_first_reply_naming_the_contract() -> None:
    def fn(messages: list[dict[str, str]], schema: dict[str, Any] | None) -> Any:
        return {"reason": "done", "action": "answer", "tool": "", "args": {}, "answer": "hi"}

    for brain in (fn, ScriptedBrain(fn)):
        with pytest.raises(TypeError) as exc:
            run_agent(brain, [], "hello")
        assert "returned a dict" in one_line(exc) and "fn(messages, schema) -> str" in str(exc.value)


def test_a_script_item_that_is_not_a_reply_is_refused_at_once() -> None:
    with pytest.raises(TypeError) as exc:
        ScriptedBrain([ANSWER, {"answer": "hi"}])  # type: ignore[list-item]
    assert "item 1 of the script is a dict" in one_line(exc)


def test_an_object_that_is_no_brain_is_refused_naming_the_contract() -> None:
    with pytest.raises(TypeError) as exc:
        run_agent("qwen2.5-coder-0.5b", [], "hello")  # type: ignore[arg-type]
    assert "fn(messages, schema) -> str" in one_line(exc) and "got a str" in str(exc.value)


def test_a_tool_parameter_with_no_json_schema_is_refused_naming_the_parameter_and_what_to_use() -> None:
    def send(sock: socket.socket, text: str) -> str:
        return text

    with pytest.raises(TypeError) as exc:
        tool(send)
    message = one_line(exc)
    assert "tool 'send': parameter 'sock' is a socket" in message and "annotate each with str, int" in message


def test_a_tool_annotation_python_cannot_find_is_refused_in_one_line() -> None:
    def lookup(key: "NoSuchType") -> str:  # type: ignore[name-defined]  # noqa: F821
        return "x"

    with pytest.raises(TypeError) as exc:
        tool(lookup)
    assert "tool 'lookup': an annotation names what Python cannot find" in one_line(exc)


def test_a_positional_only_tool_parameter_is_refused_naming_it() -> None:
    def lookup(key: str, /) -> str:
        return key

    with pytest.raises(TypeError) as exc:
        tool(lookup)
    assert "parameter 'key' must be a plain or keyword argument" in one_line(exc)


def attribute_docstrings() -> dict[str, str]:
    """``{name: docstring}`` of the package's module-level names documented by a string after them (an
    alias such as ``Approver`` carries no ``__doc__`` of its own; mkdocstrings reads these)."""
    found: dict[str, str] = {}
    for path in Path(shapeloop.__file__).parent.rglob("*.py"):
        for node, after in itertools.pairwise(ast.parse(path.read_text()).body):
            if not (isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(after, ast.Expr)):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            doc = after.value.value if isinstance(after.value, ast.Constant) else None
            found.update({t.id: doc for t in targets if isinstance(t, ast.Name) and isinstance(doc, str)})
    return found


@pytest.mark.parametrize("name", shapeloop.__all__)
def test_every_public_name_has_a_docstring_of_its_own(name: str) -> None:
    obj = getattr(shapeloop, name)
    # a class or function has its own __doc__; an alias or a constant, the string written after it
    own = inspect.isclass(obj) or inspect.isfunction(obj)
    doc = obj.__doc__ if own else attribute_docstrings().get(name)
    assert doc and doc.strip(), f"shapeloop.{name} has no docstring"
