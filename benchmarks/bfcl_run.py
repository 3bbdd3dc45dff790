"""Run one BFCL item through a column: the raw one-call baseline, or the loop with a policy set.

Single-turn functions have no implementation in BFCL: a call made to one is recorded and answered
with :data:`NO_RESULT`. BFCL asks a model once, so a single-turn item is scored on the first step of
the run that reached a tool (a refused call is no call): the run stops there (:class:`FirstCalls`),
and a run that answers before any call ran is scored as an answer. Multi-turn items call BFCL's API
classes for real, through BFCL's own executor, so the state carries from call to call and turn to
turn; each turn is a run that continues the previous one (``history=``).

Every column runs with ``batch=True``: the model may make one call or several in a step, in every
category, so the category never tells the loop the answer's shape.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.bfcl_data import Item, json_schema, load
from benchmarks.bfcl_score import Call, call_string, forget, score_multi, score_single, turn_checks
from shapeloop import (
    AgentRun,
    BackendError,
    BackendUnavailable,
    BaseBrain,
    Brain,
    Capabilities,
    Conversation,
    Message,
    Reply,
    Request,
    RunSettings,
    Tool,
    ToolFailure,
    WindowTooSmall,
    run_agent,
)
from shapeloop.events import CallRefused, Event, StepBegan, ToolCalled
from shapeloop.policies import StateLine, resolve
from shapeloop.tooldoc import render_tools

NO_RESULT = "done: the call was made (this function returns no data)"
ADAPTER = 2
"""The multi-turn adapter's version, in each multi-turn record: 1 passed the whole history and BFCL's
error data as ordinary results; 2 plays the turns through a Conversation kept within the window and
raises BFCL's errors as failures. Records of different versions are not compared."""
_EXECUTION_ERROR = "Error during execution:"
LOCK = "bfcl"  # one lock key for every tool: calls run one at a time, in the model's order
RAW_PROMPT = """You can call these functions:
{functions}

Reply with one JSON object: {{"calls": [{{"name": "<function name>", "arguments": {{...}}}}, ...]}} to call \
one function or several, or {{"answer": "..."}} to answer directly when the question needs no function or \
none of them fits."""


@dataclass(kw_only=True)
class Made:
    """The calls a run's tools received, with the step each came in."""

    calls: list[tuple[int, Call]] = field(default_factory=list)
    step: int = 0
    gaps: list[float | None] = field(default_factory=list)  # each reply's lean to calling, where measured
    mores: list[float | None] = field(default_factory=list)  # each reply's lean to a second call, where measured

    def on_event(self, event: Event) -> None:
        """Note the step in progress (a sink for ``run_agent``)."""
        if isinstance(event, StepBegan):
            self.step = event.step


class Scored(BackendError):
    """Raised in place of a request once a single-turn run's first calls have run: the run ends."""


class FirstCalls(BaseBrain):
    """``brain``, asked until a step's calls have run; the next request ends the run (:class:`Scored`).

    Single-turn BFCL items are scored on the first step that reached a tool, so what the model would
    do with :data:`NO_RESULT` afterwards costs time and changes nothing.
    """

    def __init__(self, brain: Brain, made: Made) -> None:
        self.brain, self.made = brain, made

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        return self.brain.capabilities

    @property
    def members(self) -> Sequence[Brain]:
        return (self.brain,)

    def __getattr__(self, name: str) -> Any:
        """The inner brain's other methods (its scorer, ``continuation_logprobs``, for the fit floor)."""
        if name == "brain":  # not set yet (a copy, a pickle): no recursion
            raise AttributeError(name)
        return getattr(self.brain, name)

    def ask(self, request: Request) -> Reply:
        if self.made.calls:
            raise Scored("the first step that reached a tool has been made: the item is scored on it")
        reply = self.brain.ask(request)
        # the embedded backend measures how far the model leans to calling where it chooses (its
        # logits: calling minus answering); the record keeps the first step's
        stats = getattr(self.brain, "last_stats", None)
        self.made.gaps.append(stats.get("decision_gap") if isinstance(stats, dict) else None)
        self.made.mores.append(stats.get("more_gap") if isinstance(stats, dict) else None)
        return reply


def native_name(name: str) -> str:
    """A function's name as native tool APIs take it, and as BFCL maps it for them: no dots."""
    return name.replace(".", "_")


READ_ONLY = frozenset({
    # GorillaFileSystem: these report on files and folders and change none (cd changes the folder)
    "cat", "diff", "du", "find", "grep", "ls", "pwd", "sort", "tail", "wc",
    # MathAPI: every function computes a value from its arguments
    "absolute_value", "add", "divide", "imperial_si_conversion", "logarithm", "max_value", "mean", "min_value",
    "multiply", "percentage", "power", "round_number", "si_unit_conversion", "square_root", "standard_deviation",
    "subtract", "sum_values",
    # MessageAPI
    "get_message_stats", "get_user_id", "list_users", "message_get_login_status", "search_messages",
    "view_messages_sent",
    # TwitterAPI
    "get_tweet", "get_tweet_comments", "get_user_stats", "get_user_tweets", "list_all_following",
    "posting_get_login_status", "search_tweets",
    # TicketAPI
    "get_ticket", "get_user_tickets", "ticket_get_login_status",
    # TradingBot
    "filter_stocks_by_price", "get_account_info", "notify_price_change", "get_available_stocks", "get_current_time",
    "get_order_details", "get_order_history", "get_stock_info", "get_symbol_by_name", "get_transaction_history",
    "get_watchlist", "trading_get_login_status",
    # TravelAPI
    "compute_exchange_rate", "get_all_credit_cards", "get_booking_history", "get_budget_fiscal_year",
    "get_credit_card_balance", "get_flight_cost", "get_nearest_airport_by_city", "list_all_airports",
    "retrieve_invoice", "travel_get_login_status",
    # VehicleControlAPI
    "check_tire_pressure", "displayCarStatus", "display_log", "estimate_distance",
    "estimate_drive_feasibility_by_mileage", "find_nearest_tire_shop", "gallon_to_liter", "get_current_speed",
    "get_outside_temperature_from_google", "get_outside_temperature_from_weather_com", "get_zipcode_based_on_city",
    "liter_to_gallon",
})  # fmt: skip
"""The functions of BFCL's multi-turn API classes that only read, as their documentation describes
them (issue 46: marked by the benchmark from the docs, for every entry alike, never per entry): each
reports or computes and changes no state. Those that change state (a folder, a login, an order, a
booking, the car) and those whose doc says they write are not here. Their tools get
``read_only=True``, which the look-before-acting policies read."""


def _tool(doc: Mapping[str, Any], fn: Callable[..., str], name: str | None = None, *, reads: bool = False) -> Tool:
    return Tool(name=name or doc["name"], description=doc.get("description", ""),
                parameters=json_schema(doc["parameters"]), fn=fn, lock_key=LOCK, read_only=reads)  # fmt: skip


def single_tools(item: Item, made: Made, *, native: bool = False) -> list[Tool]:
    """The item's functions as tools that record each call and return :data:`NO_RESULT` (named with
    :func:`native_name` for the native column)."""

    def recorder(name: str) -> Callable[..., str]:
        def record(**args: Any) -> str:
            made.calls.append((made.step, (name, args)))
            return NO_RESULT

        return record

    names = [native_name(doc["name"]) if native else doc["name"] for doc in item.functions]
    return [_tool(doc, recorder(name), name) for doc, name in zip(item.functions, names, strict=True)]


def multi_tools(item: Item, made: Made, session: str) -> list[Tool]:
    """The item's API functions as tools that run on BFCL's API-class instances for ``session``."""

    def runner(name: str) -> Callable[..., str]:
        def run(**args: Any) -> str:
            try:
                text = call_string(name, args)
            except ValueError as exc:
                raise ToolFailure(f"{exc}: every argument name must be a parameter of {name}") from exc
            made.calls.append((made.step, (name, args)))
            result = execute(item, session, [text])[0]
            why = failure(result)
            if why is not None:
                raise ToolFailure(why)
            return result

        return run

    return [_tool(doc, runner(doc["name"]), reads=doc["name"] in READ_ONLY) for doc in item.functions]


def failure(result: str) -> str | None:
    """The message of a BFCL result that reports a failure, or None: an object with an ``error`` and
    nothing else but false or null values (how BFCL's API classes say a call failed), or the
    executor's ``Error during execution:`` (a call that raised: an unknown argument, a wrong type)."""
    if result.startswith(_EXECUTION_ERROR):
        return result[len(_EXECUTION_ERROR) :].strip() or result
    if not result.startswith("{"):
        return None
    try:
        data = json.loads(result)
    except ValueError:
        return None
    if not isinstance(data, dict) or not data.get("error"):
        return None
    # TravelAPI adds a status beside the error: {"booking_status": false, "error": "Invalid access token"}
    if all(value in (False, None) for key, value in data.items() if key != "error"):
        return str(data["error"])
    return None


STATE_LINE = "state-line"
"""A column word for multi-turn items: the loop also shows, at every step, the line this adapter
writes from BFCL's file system (:func:`state_line`), through :class:`~shapeloop.policies.StateLine`.
Help of the benchmark's own, so the headline figure is the one without it."""

FIVE_FIELD = "five-field"
"""A column word: the loop asks for the five-field step (``batch=False``: ``reason``, ``action``,
``tool``, ``args``, ``answer``, one call a step) instead of the calls step every other column asks
for; ``five-field`` alone is the plain loop in that shape."""


def execute(item: Item, session: str, calls: list[str]) -> list[str]:
    """The results of BFCL call strings run on the item's API-class instances for ``session``."""
    results, _ = load().execute(func_call_list=calls, initial_config=item.initial_config,
                                involved_classes=item.involved_classes, model_name=session,
                                test_entry_id=item.id, long_context=False, is_evaL_run=False)  # fmt: skip
    return results


def loop_settings(column: str, state: Callable[[], str] | None = None, **fields: Any) -> RunSettings:
    """A run's settings for a column, with ``fields`` beside: ``native`` (the plain loop, native tool
    calls where the backend has them), ``plain``, ``default`` or ``name1,name2``. Among the names,
    :data:`FIVE_FIELD` asks for the five-field step, and :data:`STATE_LINE` adds a
    :class:`~shapeloop.policies.StateLine` showing ``state()`` (none where ``state`` is None)."""
    if column == "native":
        return RunSettings(policies=resolve("plain"), mode="native", **fields)
    words = [w.strip() for w in column.split(",")]
    rest = ",".join(w for w in words if w not in (STATE_LINE, FIVE_FIELD)) or "plain"
    extra = (StateLine(state),) if STATE_LINE in words and state is not None else ()
    if FIVE_FIELD in words:
        fields = {**fields, "batch": False}
    return RunSettings(policies=(*resolve(rest), *extra), **fields)


def state_line(item: Item, session: str) -> Callable[[], str] | None:
    """For an item on BFCL's file system, a function that writes its state as a person would see it:
    ``current folder: /workspace/docs; here: a.txt, notes/`` (run through BFCL's executor on the
    session's instance, by the read-only ``pwd`` and ``ls``); None for an item without one."""
    if "GorillaFileSystem" not in item.involved_classes:
        return None

    def line() -> str:
        results = execute(item, session, ["pwd()", "ls()"])
        where, here = (json.loads(text) if text.startswith("{") else {} for text in results)
        names = here.get("current_directory_content") or []
        return f"current folder: {where.get('current_working_directory', '?')}; here: {', '.join(names) or 'nothing'}"

    return line


def _split(turn: Sequence[Mapping[str, str]]) -> tuple[str | None, list[Message], str]:
    """A BFCL turn as (system text, earlier messages, the last user message)."""
    system = "\n\n".join(m["content"] for m in turn if m["role"] == "system") or None
    rest = [Message(role=m["role"], content=m["content"]) for m in turn if m["role"] != "system"]  # type: ignore[typeddict-item]
    return system, rest[:-1], rest[-1]["content"]


def _run_facts(run: AgentRun[Any], seconds: float) -> dict[str, Any]:
    proposals = [e for e in run.events if isinstance(e, (ToolCalled, CallRefused))]
    return {
        "stop": run.stop.value, "reason": run.reason, "answer": run.answer, "steps": run.steps,
        "mode": run.mode.value, "usage": run.usage.to_dict() if run.usage else None,
        "policies": list(run.policies), "interventions": dict(run.interventions),
        "proposed": len(proposals), "seconds": round(seconds, 3),
        # what the model asked for, run or refused (the checker's input is what ran), and why refused
        "proposed_calls": [str(e.call) for e in proposals][:12],
        "refusals": [e.objection for e in proposals if isinstance(e, CallRefused)][:12],
    }  # fmt: skip


def run_loop(
    brain: Brain, item: Item, column: str, *, max_steps: int, transcript: Path | None = None
) -> dict[str, Any]:
    """A single-turn item through the loop; its record (the score and how the run went). With
    ``transcript``, the run's messages and events are written there too (a file made anew)."""
    made = Made()
    native = column == "native"
    system, history, task = _split(item.turns[0])
    started = time.perf_counter()
    tools = single_tools(item, made, native=native)
    settings = loop_settings(column, batch=True, max_steps=max_steps, system=system, on_event=made.on_event)
    run = run_agent(FirstCalls(brain, made), tools, task, settings=settings, history=history or None,
                    transcript_path=_fresh(transcript))  # fmt: skip
    facts = _run_facts(run, time.perf_counter() - started)
    facts["decision_gap"] = made.gaps[0] if made.gaps else None
    facts["more_gap"] = made.mores[0] if made.mores else None
    if made.calls:  # the run ended on Scored (or on its last step): it called, as raw's "called"
        facts.update(stop="called", steps=made.calls[-1][0])
    calls = [call for _, call in made.calls]
    return {**score_single(item, calls, answer=run.answer, proposed=facts["proposed"], native=native), **facts}


def run_loop_multi(
    brain: Brain, item: Item, column: str, *, max_steps: int, context: int, transcript: Path | None = None
) -> dict[str, Any]:
    """A multi-turn item through the loop: each turn one request of a :class:`~shapeloop.Conversation`
    whose history is kept within the model's window of ``context`` tokens; its record. With
    ``transcript``, the conversation's log is written there too (a file made anew)."""
    session = f"shapeloop_live_{uuid.uuid4().hex}"
    made = Made()
    tools = multi_tools(item, made, session)
    system, earlier, _ = _split(item.turns[0])
    if earlier or any(len(turn) != 1 for turn in item.turns[1:]):
        raise ValueError(f"{item.id}: a multi-turn entry whose turns are not one user message each")
    settings = loop_settings(column, state_line(item, session), batch=True, max_steps=max_steps, system=system,
                             on_event=made.on_event)  # fmt: skip
    options = {"settings": settings, "transcript_path": _fresh(transcript)}
    with warnings.catch_warnings(record=True) as warned:  # a tight window is a fact of the record, not a crash
        warnings.simplefilter("always", UserWarning)
        try:
            conversation = Conversation(brain, tools, context_window=context, **options)
            said = [str(w.message) for w in warned if issubclass(w.category, UserWarning)]
        except WindowTooSmall as exc:  # the entry's requests will overflow: the record says so, the run goes on
            conversation = Conversation(brain, tools, **options)
            said = [str(exc)]
    for warning in warned:
        if not issubclass(warning.category, UserWarning):
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    budget = {
        "max_history_tokens": conversation.max_history_tokens,
        "max_history_chars": conversation.max_history_chars,
        "warning": "; ".join(said) or None,
    }
    turns: list[list[list[str]]] = []
    per_turn = []
    started = time.perf_counter()
    try:
        for turn in item.turns:
            made.calls.clear()
            begun = time.perf_counter()
            asked = conversation.ask(_split(turn)[2])
            turns.append(_by_step(made.calls))
            per_turn.append({**_run_facts(asked.run, time.perf_counter() - begun), "cuts": len(asked.cuts)})
    finally:
        conversation.close()
        forget(session)
    record = multi_record(item, turns, per_turn, time.perf_counter() - started)
    return {**record, "adapter": ADAPTER, "history_budget": budget}


def multi_record(
    item: Item, turns: list[list[list[str]]], per_turn: list[dict[str, Any]], seconds: float
) -> dict[str, Any]:
    """A multi-turn item's record: BFCL's verdict, the totals, and each turn's facts with its own
    checks (state against the truth, first function right), beside the state doing nothing leaves."""
    checks = turn_checks(item, turns)
    for facts, check in zip(per_turn, checks, strict=False):
        facts.update(check)
    nothing = turn_checks(item, [[] for _ in item.turns])
    steps = sum(t["steps"] for t in per_turn)
    totals = _totals(per_turn, seconds)
    prompt = (totals["usage"] or {}).get("prompt_tokens")
    return {**score_multi(item, turns), **totals, "turns": per_turn,
            "turns_total": len(checks), "turns_state": sum(c["state"] for c in checks),
            "turns_state_nothing": sum(c["state"] for c in nothing),
            "turns_first_tool": sum(c["first_tool"] for c in checks),
            "prompt_tokens_per_step": round(prompt / steps) if prompt and steps else None}  # fmt: skip


def _by_step(calls: Sequence[tuple[int, Call]]) -> list[list[str]]:
    steps: dict[int, list[str]] = {}
    for step, (name, args) in calls:
        steps.setdefault(step, []).append(call_string(name, args))
    return list(steps.values())


def _totals(per_turn: Sequence[Mapping[str, Any]], seconds: float) -> dict[str, Any]:
    usages = [t["usage"] for t in per_turn if t["usage"]]
    usage = {key: sum(u[key] for u in usages) for key in usages[0]} if usages else None
    return {"stop": per_turn[-1]["stop"] if per_turn else None, "steps": sum(t["steps"] for t in per_turn),
            "proposed": sum(t["proposed"] for t in per_turn), "usage": usage, "seconds": round(seconds, 3),
            "policies": per_turn[0]["policies"] if per_turn else None,
            "interventions": _sum_counts([t["interventions"] or {} for t in per_turn])}  # fmt: skip


def _sum_counts(counts: Sequence[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for one in counts:
        for key, value in one.items():
            total[key] = total.get(key, 0) + value
    return total


def raw_schema(tools: Sequence[Tool]) -> dict[str, Any]:
    """A list of calls (each variant one function: its name fixed, its own arguments) or an answer;
    the call variants are built as ``benchmarks.raw`` builds them."""
    variants = [
        {"type": "object", "properties": {"name": {"const": t.name}, "arguments": {"type": "object",
         "additionalProperties": False, **dict(t.parameters)}}, "required": ["name", "arguments"],
         "additionalProperties": False}
        for t in tools
    ]  # fmt: skip
    calls = {"type": "object", "required": ["calls"], "additionalProperties": False,
             "properties": {"calls": {"type": "array", "items": {"anyOf": variants}, "minItems": 1}}}  # fmt: skip
    answer = {"type": "object", "properties": {"answer": {"type": "string", "minLength": 1}}, "required": ["answer"],
              "additionalProperties": False}  # fmt: skip
    return {"anyOf": [calls, answer]}


def _raw_system(tools: Sequence[Tool], extra: str | None) -> str:
    return RAW_PROMPT.format(functions=render_tools(tools, "json")) + (f"\n\n{extra}" if extra else "")


def _ask_raw(brain: Brain, messages: list[Message], schema: dict[str, Any]) -> tuple[list[Call], str | None, Reply]:
    """Ask once; the calls and the answer in the reply. A backend's failure on this item (a prompt
    too long, a schema refused, a timeout) is the item's reply, with no call and no answer; a
    backend that cannot be reached stops the run."""
    try:
        reply = brain.ask(Request(messages=messages, schema=schema))
    except BackendUnavailable:
        raise
    except BackendError as exc:
        return [], None, Reply(text=f"{type(exc).__name__}: {exc}")
    try:
        data = json.loads(reply.text)
    except ValueError:
        data = None
    data = data if isinstance(data, dict) else {}
    answer = data["answer"] if isinstance(data.get("answer"), str) else None
    calls = [(c["name"], c["arguments"]) for c in data.get("calls") or []
             if isinstance(c, dict) and isinstance(c.get("name"), str)
             and isinstance(c.get("arguments"), dict)]  # fmt: skip
    return calls, answer, reply


def _reply_facts(reply: Reply, text_ok: bool, seconds: float) -> dict[str, Any]:
    return {"stop": "answered" if text_ok else "called", "steps": 1, "reply": reply.text,
            "usage": reply.usage.to_dict() if reply.usage else None, "seconds": round(seconds, 3)}  # fmt: skip


def run_raw(brain: Brain, item: Item) -> dict[str, Any]:
    """A single-turn item asked once (no loop, no policies); its record."""
    tools = single_tools(item, Made())
    system, history, task = _split(item.turns[0])
    messages = [
        Message(role="system", content=_raw_system(tools, system)),
        *history,
        Message(role="user", content=task),
    ]
    started = time.perf_counter()
    calls, answer, reply = _ask_raw(brain, messages, raw_schema(tools))
    facts = _reply_facts(reply, answer is not None, time.perf_counter() - started)
    stats = getattr(brain, "last_stats", None)  # the embedded backend's leans, as the loop's records keep them
    if isinstance(stats, dict):
        facts.update(decision_gap=stats.get("decision_gap"), more_gap=stats.get("more_gap"))
    return {**score_single(item, calls, answer=answer, proposed=len(calls)), **facts, "proposed": len(calls)}


def run_raw_multi(brain: Brain, item: Item) -> dict[str, Any]:
    """A multi-turn item asked once per turn: the calls of each reply run on BFCL's API classes, but
    the model never sees a result, only its own earlier replies; its record."""
    session = f"shapeloop_raw_{uuid.uuid4().hex}"
    made = Made()
    tools = multi_tools(item, made, session)
    schema = raw_schema(tools)
    messages: list[Message] = [Message(role="system", content=_raw_system(tools, None))]
    turns: list[list[list[str]]] = []
    per_turn = []
    started = time.perf_counter()
    try:
        for turn in item.turns:
            _, earlier, task = _split(turn)
            messages += [*earlier, Message(role="user", content=task)]
            begun = time.perf_counter()
            calls, answer, reply = _ask_raw(brain, messages, schema)
            messages.append(Message(role="assistant", content=reply.text))
            made.calls.clear()
            by_name = {t.name: t for t in tools}
            for name, args in calls:
                if name not in by_name:
                    continue  # not one of the functions: nothing to run
                with contextlib.suppress(ToolFailure):  # a call BFCL's decoder would not parse is not made
                    by_name[name].fn(**args)
            turns.append(_by_step(made.calls))
            per_turn.append({**_reply_facts(reply, answer is not None, time.perf_counter() - begun),
                             "proposed": len(calls), "policies": None, "interventions": None})  # fmt: skip
    finally:
        forget(session)
    return multi_record(item, turns, per_turn, time.perf_counter() - started)


def run_item(
    brain: Brain, item: Item, column: str, *, max_steps: int, context: int = 8192, transcript: Path | None = None
) -> dict[str, Any]:
    """One item in one column: ``raw``, or a policy set for the loop (``plain``, ``default``, ``a,b``);
    ``context`` is the model's window in tokens (multi-turn keeps its history within it). With
    ``transcript``, a loop column writes its run's transcript (or its conversation's log) there; raw,
    one reply that its record keeps, writes none."""
    if column == "raw":
        return run_raw_multi(brain, item) if item.multi_turn else run_raw(brain, item)
    if item.multi_turn:
        return run_loop_multi(brain, item, column, max_steps=max_steps, context=context, transcript=transcript)
    return run_loop(brain, item, column, max_steps=max_steps, transcript=transcript)


def _fresh(path: Path | None) -> Path | None:
    """``path`` emptied, its folder made: a rerun of an item replaces its transcript."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
    return path
