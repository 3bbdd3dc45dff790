"""A conversation's cost and history against its age: 1 000 requests with a scripted brain (no model).

    python -m benchmarks.conversation_age                # 3 repeats of 1 000 requests
    python -m benchmarks.conversation_age --requests 200 --repeats 1

Each request calls a tool once (its result about 300 characters) and answers. With a 4 096-token
window (the history's budget worked out as ``shapeloop chat`` does) it times every ``ask`` and
records the history each request's run read, in estimated tokens; then it runs the same requests on
a 2 000-character budget. Figures: the median seconds of an ask around request 10 and around
request 1 000 (the ten asks up to it, over the repeats), their ratio (within 2: the cost follows
the history kept, not the requests ever asked), and the largest history against its budget at every
request (markers included). Writes measurements/conversation.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.common import write
from shapeloop import Conversation, Message, ScriptedBrain, estimate_tokens, tool
from shapeloop.conversation import MESSAGE_TOKENS

WINDOW = 4096
CHARS = 2000
MARKS = (10, 40, 80, 160, 320, 640, 1000)  # the requests whose asks are reported


@tool
def note(text: str) -> str:
    """Write a note and say what it holds."""
    return f"noted: {text} " + "details " * 35


class Chat:
    """A scripted brain for a long chat: each request calls ``note``, then answers; it keeps the
    history each request's first step read (the messages between the system prompt and the request)."""

    def __init__(self) -> None:
        self.read: list[list[Message]] = []
        self.brain = ScriptedBrain(self.step)

    def step(self, messages: Sequence[Message], schema: object) -> str:
        last = messages[-1]["content"]
        if last.startswith(("Result of ", "Results of ")):  # one call's, a batch's
            return json.dumps({"answer": "Noted it; the note holds the details asked for."})
        self.read.append(list(messages[1:-1]))
        call = {"name": "note", "arguments": {"text": last[-24:]}}
        return json.dumps({"calls": [call]})


def one_chat(requests: int, **budget: int) -> dict[str, Any]:
    """Seconds of each ask, and each request's history against the budget."""
    chat = Chat()
    talk = Conversation(chat.brain, [note], policies=(), **budget)
    seconds: list[float] = []
    for number in range(1, requests + 1):
        start = time.perf_counter()
        turn = talk.ask(f"Request {number}: note what the user said at step {number}.")
        seconds.append(time.perf_counter() - start)
        if not turn.ok:
            raise RuntimeError(f"request {number} was not answered: {turn.run.reason}")
    if talk.max_history_tokens is not None:
        unit, limit = "estimated tokens", talk.max_history_tokens
        sizes = [sum(estimate_tokens(m["content"]) + MESSAGE_TOKENS for m in read) for read in chat.read]
    else:
        unit, limit = "characters", talk.max_history_chars or 0
        sizes = [sum(len(m["content"]) for m in read) for read in chat.read]
    return {"seconds": seconds, "unit": unit, "budget": limit, "sizes": sizes,
            "kept_at_end": len(talk.history), "cut_markers": sum(len(t.cuts) for t in talk.turns)}  # fmt: skip


def around(runs: list[dict[str, Any]], request: int) -> float:
    """The median seconds of the ten asks up to ``request`` (the tenth and before), over the runs."""
    first = max(0, request - 10)
    return statistics.median(s for run in runs for s in run["seconds"][first:request])


def history(run: dict[str, Any]) -> dict[str, Any]:
    sizes = run["sizes"]
    return {
        "unit": run["unit"],
        "budget": run["budget"],
        "largest": max(sizes),
        "at_marks": {str(mark): sizes[mark - 1] for mark in MARKS if mark <= len(sizes)},
        "within_budget_at_every_request": all(size <= run["budget"] for size in sizes),
        "messages_kept_at_end": run["kept_at_end"],
        "cut_markers_made": run["cut_markers"],
    }


def measure(requests: int, repeats: int) -> dict[str, Any]:
    runs = []
    for _ in range(repeats):
        gc.collect()
        runs.append(one_chat(requests, context_window=WINDOW))
    chars = one_chat(requests, max_history_chars=CHARS)
    marks = [mark for mark in MARKS if mark <= requests]
    asks = {str(mark): round(around(runs, mark), 6) for mark in marks}
    ratio = around(runs, marks[-1]) / around(runs, marks[0])
    return {
        "model": "none: a scripted brain (each request one call of a ~300-character tool, then an answer)",
        "backend": "ScriptedBrain",
        "settings": {
            "requests": requests,
            "repeats": repeats,
            "context_window": WINDOW,
            "max_history_chars": CHARS,
            "policies": [],
        },
        "ask_seconds_median": asks,
        "last_over_first": round(ratio, 3),
        "cost_follows_history_kept": ratio <= 2,
        "history_window": history(runs[0]),
        "history_chars": history(chars),
        "total_seconds": round(sum(sum(run["seconds"]) for run in [*runs, chars]), 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.conversation_age", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="conversation", help="the measurements file's name, without .json")
    args = parser.parse_args(argv)
    result = measure(args.requests, args.repeats)
    path = write(args.out, result)
    print(f"asks (median seconds): {result['ask_seconds_median']}; last/first {result['last_over_first']}")
    for name in ("history_window", "history_chars"):
        kept = result[name]
        print(f"{name}: largest {kept['largest']} of {kept['budget']} {kept['unit']}, "
              f"within budget at every request: {kept['within_budget_at_every_request']}")  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
