"""Scoring by BFCL's own rules: its AST checker, its multi-turn checker, and its relevance rule.

The checker's input is the calls the run made, verbatim and in order (``[{name: args}, ...]``): no
coercion, no dropped arguments, no choice among several tries. It is kept in each record.

The relevance rule is BFCL's (``bfcl_eval/eval_checker/eval_runner.py``, lines 263-316 of 2026.3.23,
``_evaluate_single_relevance_entry``, with ``is_empty_output`` in ``bfcl_eval/utils.py``, lines
605-615), written out here because ``eval_runner`` does not import without BFCL's dependencies: an
irrelevance item is right when the output holds no function call, a relevance item when it holds one.
A shapeloop run's output holds a call when a call was made (it ran). The stricter irrelevance rule
asks for a real answer too: the run ended with a non-empty answer and proposed no call at all.

Also here: the oracles the tests feed back through a scripted brain (BFCL's allowed values as calls),
and :func:`unanswerable`, which says why an item's possible answer admits no call at all.
"""

from __future__ import annotations

import ast
import copy
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.bfcl_data import NATIVE_MODEL, NO_ANSWER, Item, load

CHECKER_MODEL = "shapeloop"  # the model name BFCL's checkers are given (its entry: underscore_to_dot=False)
Call = tuple[str, dict[str, Any]]


def checker_input(calls: Sequence[Call]) -> list[dict[str, Any]]:
    """The calls in the shape BFCL's AST checker takes: ``[{name: {param: value}}, ...]``."""
    return [{name: dict(args)} for name, args in calls]


def score_single(
    item: Item, calls: Sequence[Call], *, answer: str | None, proposed: int, native: bool = False
) -> dict[str, Any]:
    """Score a single-turn item on the calls made.

    Args:
        item: the BFCL item.
        calls: the calls that were made, in order.
        answer: the run's final answer, if it gave one.
        proposed: how many calls the model proposed, made or not (for the strict irrelevance rule).
        native: the calls name functions as native tool APIs took them (a dot as ``_``).
    """
    given = checker_input(calls)
    if item.category in NO_ANSWER:
        made = len(given) > 0
        right = not made if "irrelevance" in item.category else made
        scored: dict[str, Any] = {"checker_input": given, "valid": right, "rule": "relevance"}
        if "irrelevance" in item.category:
            scored["strict_valid"] = right and bool(answer and answer.strip()) and proposed == 0
            scored["error_type"] = None if right else "irrelevance_error:decoder_success"
        else:
            scored["error_type"] = None if right else "relevance_error:decoder_failed"
        return scored
    bfcl = load()
    result = bfcl.ast_checker(copy.deepcopy(item.functions), copy.deepcopy(given), copy.deepcopy(item.answer),
                              bfcl.python, item.category, NATIVE_MODEL if native else CHECKER_MODEL)  # fmt: skip
    return {"checker_input": given, "valid": bool(result["valid"]), "rule": "ast",
            "error_type": result.get("error_type"), "error": result.get("error") or None}  # fmt: skip


def score_multi(item: Item, turns: Sequence[Sequence[Sequence[str]]]) -> dict[str, Any]:
    """Score a multi-turn item with BFCL's multi-turn checker (state and responses after each turn).

    Args:
        item: the BFCL item.
        turns: for each turn, for each step, the calls made, as BFCL's call strings.
    """
    given = [[list(step) for step in turn] for turn in turns]
    assert item.answer is not None, "a multi-turn item has a ground truth"
    if len(given) != len(item.answer):  # BFCL's force-terminated case (eval_runner.py, lines 199-215)
        why = f"{len(given)} turns of {len(item.answer)}"
        return {"checker_input": given, "valid": False, "rule": "multi_turn",
                "error_type": "multi_turn:force_terminated", "error": why}  # fmt: skip
    bfcl = load()
    entry = {"id": item.id, "initial_config": item.initial_config, "involved_classes": item.involved_classes}
    name = f"{CHECKER_MODEL}_{uuid.uuid4().hex}"
    try:
        result = bfcl.multi_turn_checker(given, item.answer, entry, item.category, name)
    finally:
        forget(name)
    return {"checker_input": given, "valid": bool(result["valid"]), "rule": "multi_turn",
            "error_type": result.get("error_type"), "error": result.get("error_message")}  # fmt: skip


def turn_checks(item: Item, turns: Sequence[Sequence[Sequence[str]]]) -> list[dict[str, Any]]:
    """For each turn of a multi-turn item: whether the API classes' state after it matches the truth's
    (BFCL's ``state_checker``, the model's calls and the truth's each executed from the start, turn
    after turn), and whether the turn's first call names the truth's first function. BFCL's checker
    stops at the first failing turn; this looks at every turn, so a run that goes wrong early and
    right later is seen, and a run can be set beside doing nothing (``turns`` all empty).

    Args:
        item: the BFCL item.
        turns: for each turn, for each step, the calls made, as BFCL's call strings.
    """
    assert item.answer is not None, "a multi-turn item has a ground truth"
    bfcl = load()
    name = f"{CHECKER_MODEL}_{uuid.uuid4().hex}"
    config = {"initial_config": item.initial_config, "involved_classes": item.involved_classes,
              "test_entry_id": item.id, "long_context": False, "is_evaL_run": True}  # fmt: skip
    checks = []
    try:
        for index, truth in enumerate(item.answer):
            steps = [list(step) for step in (turns[index] if index < len(turns) else [])]
            instances: dict[str, Any] = {}
            for step in steps or [[]]:  # no step still fetches the instances, as they stand
                _, instances = bfcl.execute(func_call_list=step, model_name=name, **config)
            _, truths = bfcl.execute(func_call_list=list(truth), model_name=f"{name}_truth", **config)
            made = [call for step in steps for call in step]
            first = _function(made[0]) if made else None
            checks.append({"state": bool(bfcl.state_checker(instances, truths)["valid"]),
                           "first_tool": first == (_function(truth[0]) if truth else None)})  # fmt: skip
    finally:
        forget(name)
    return checks


def _function(call: str) -> str:
    return call.split("(", 1)[0].strip()


def forget(model_name: str) -> None:
    """Drop the API-class instances BFCL's executor keeps (in its module's globals) for a model name."""
    prefix = re.sub(r"[-./:]", "_", f"{model_name}_")
    namespace = load().executor_globals
    for key in [k for k in list(namespace) if k.startswith(prefix)]:  # a copy: other items run in threads
        namespace.pop(key, None)


def call_string(name: str, args: Mapping[str, Any]) -> str:
    """A call as BFCL's executor takes it: ``name(param=value, ...)``, each value as a Python literal.

    Raises:
        ValueError: a parameter name that is not a Python identifier (BFCL's decoder would not parse it).
    """
    bad = [key for key in args if not key.isidentifier() or key in ("True", "False", "None")]
    if bad or not name.isidentifier():
        raise ValueError(f"not a Python call: {name}({', '.join(map(repr, args))})")
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in args.items())})"


def parse_call(text: str, functions: Sequence[Mapping[str, Any]]) -> Call:
    """A ground-truth call string (``sort('final_report.pdf')``) as a name and keyword arguments; a
    positional argument takes the name of the function's parameter in that place."""
    node = ast.parse(text, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain call: {text!r}")
    name = node.func.id
    doc = next(f for f in functions if f["name"] == name)
    order = list(doc["parameters"].get("properties", {}))
    args = {order[i]: ast.literal_eval(arg) for i, arg in enumerate(node.args)}
    args.update({kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None})
    return name, args


def _required(item: Item, name: str) -> set[str]:
    doc = next((f for f in item.functions if f["name"] == name), None)
    return set(doc["parameters"].get("required", [])) if doc else set()


def _first_real(values: Sequence[Any]) -> Any:
    """The first allowed value that is not ``""``, with a dict's (or list of dicts') own alternatives
    narrowed the same way, one level down, as BFCL's ``dict_checker`` reads them."""
    value = next(v for v in values if v != "")

    def narrow(d: Mapping[str, Any]) -> dict[str, Any]:
        return {k: next(x for x in alts if x != "") for k, alts in d.items() if alts and "" not in alts}

    if isinstance(value, dict):
        return narrow(value)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [narrow(v) for v in value]
    return value


def oracle_calls(item: Item) -> list[Call]:
    """BFCL's possible answer as calls: for each parameter, left out where ``""`` allows it and it is
    not required, else its first real allowed value (a dict's alternatives narrowed likewise)."""
    calls = []
    for expected in item.answer or []:
        for name, allowed in expected.items():
            required = _required(item, name)
            args = {
                param: _first_real(values) for param, values in allowed.items()
                if any(v != "" for v in values) and not ("" in values and param not in required)
            }  # fmt: skip
            calls.append((name, args))
    return calls


def first_value_calls(item: Item) -> list[Call]:
    """BFCL's possible answer as calls, naively: each parameter's first allowed value, ``""`` left out."""
    return [
        (name, {param: values[0] for param, values in allowed.items() if values and values[0] != ""})
        for expected in item.answer or [] for name, allowed in expected.items()
    ]  # fmt: skip


def unanswerable(item: Item) -> str | None:
    """Why no call can pass BFCL's checker on this item's possible answer, or None if one can."""
    for expected in item.answer or []:
        for name, allowed in expected.items():
            doc = next((f for f in item.functions if f["name"] == name), None)
            if doc is None:
                return f"the answer calls {name!r}, which is not among the item's functions"
            properties = doc["parameters"].get("properties", {})
            for param in sorted(_required(item, name)):
                values = allowed.get(param)
                if values is None:
                    return f"{name}'s required {param!r} is not in the possible answer (it allows no value)"
                if not any(v != "" for v in values):
                    return f"{name}'s required {param!r} has no allowed value ({values!r})"
            for param, values in allowed.items():
                if param not in properties and "" not in values:
                    return f"the answer needs {name} to have a {param!r}, which its doc does not have"
    return None
