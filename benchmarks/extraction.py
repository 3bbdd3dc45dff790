"""Extraction: shapeloop's extractor vs first-{-to-last-} vs the json_repair package, on replies
recorded from real models in prose mode plus constructed hard cases; and throughput in MB/s."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from shapeloop import Step, extract_step


def _step(reason: str, action: str, tool: str = "", answer: str = "", **args: Any) -> dict[str, Any]:
    return {"reason": reason, "action": action, "tool": tool, "args": args, "answer": answer}


def constructed() -> list[tuple[str, str, dict[str, Any]]]:
    """``(name, reply, expected step)`` for the hard cases the design was measured on."""
    final = _step("write it", "tool", "append_note", path="notes.txt", text="def f():\n    return {'a': '}'}\n")
    answer = _step("done", "answer", answer="The colour is teal.")
    code = '```python\ndef g(x):\n    return {"k": x}  # } {\n```\n'
    digression = "Let me reconsider. " + ('Consider {a: 1} and the code if (x) { y(); } // "quote\n' * 600)
    cases = [
        ("whole", json.dumps(final), final),
        ("prose-around", "Sure! Here is my step:\n" + json.dumps(answer) + "\nHope that helps.", answer),
        ("fenced", "```json\n" + json.dumps(final, indent=2) + "\n```", final),
        ("think-block", "<think>maybe " + json.dumps(answer) + "</think>\n" + json.dumps(final), final),
        ("draft-then-final", "Draft: " + json.dumps(answer) + "\nActually:\n" + json.dumps(final), final),
        ("second-thoughts", json.dumps(answer) + "\nWait, no. Better: " + json.dumps(final), final),
        ("two-objects-one-line", json.dumps(answer) + json.dumps(final), final),
        ("code-before", code + json.dumps(answer), answer),
        ("braces-in-strings", "Step: " + json.dumps(_step("a } or {", "answer", answer="{not: json}")),
         _step("a } or {", "answer", answer="{not: json}")),
        ("digression-30k", json.dumps(answer) + "\n" + digression + "\nFinal:\n" + json.dumps(final), final),
        ("broken-after", json.dumps(final) + '\n{"reason": "oops", "action": "tool", "tool":', final),
        ("unbalanced-prose", "I'll use { braces and \"quotes in prose: " + json.dumps(answer), answer),
    ]  # fmt: skip
    return cases


def hard_case(size: int = 18_000) -> str:
    """About ``size`` characters: a draft object, code with braces inside strings, then the final step."""
    draft = json.dumps(_step("done", "answer", answer="The colour is teal."))
    final = json.dumps(_step("write it", "tool", "append_note", path="n.txt", text="def f():\n    return {'a': '}'}\n"))
    line = "def g(x):\n    return {\"k\": x, 'b': '}{'}  # } {\n    s = \"{\" + '}'\n"
    code = "```python\n" + line * max(1, (size - len(draft) - len(final)) // len(line)) + "```\n"
    return "Draft: " + draft + "\nHere is the code:\n" + code + "\nFinal:\n" + final


# Inputs built to be slow: what a quadratic scan or a deep recursion would choke on.
ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "hard case": hard_case,
    "think pairs": lambda n: "<think></think>" * (n // 15),
    "think pairs then {}": lambda n: "<think></think>{}" * (n // 17),
    "unclosed think tags": lambda n: "<think>" * (n // 7),
    "open brackets": lambda n: "[" * n,
    "open braces": lambda n: "{" * n,
    "nested objects": lambda n: '{"a":' * (n // 10) + "1" + "}" * (n // 10),
    "unclosed keys": lambda n: '{"reason"' * (n // 9),
    "small step-like objects": lambda n: '{"reason":1}' * (n // 12),
    "brace quote": lambda n: '{"' * (n // 2),
    "fences": lambda n: "```\n" * (n // 4),
    "draft steps": lambda n: (json.dumps(_step("r", "answer", answer="a")) + "\n") * (n // 80),
}


def ours(text: str) -> dict[str, Any] | None:
    step = extract_step(text).step
    return step.model_dump() if step else None


def naive(text: str) -> dict[str, Any] | None:
    """First ``{`` to last ``}``: what instructor, smolagents and pydantic-ai do."""
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end < start:
        return None
    return _valid(text[start : end + 1])


def repaired(text: str) -> dict[str, Any] | None:
    """json_repair's reading of the reply (the last object, when it returns several)."""
    import json_repair

    value = json_repair.repair_json(text, return_objects=True)
    if isinstance(value, list):
        value = next((v for v in reversed(value) if isinstance(v, dict)), None)
    return _checked(value)


def _valid(candidate: str) -> dict[str, Any] | None:
    try:
        return _checked(json.loads(candidate, strict=False))
    except ValueError:
        return None


def _checked(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    try:
        return Step.model_validate(value).model_dump()
    except ValidationError:
        return None


METHODS: dict[str, Callable[[str], dict[str, Any] | None]] = {"shapeloop": ours, "first_to_last": naive}


def measure(recorded: Sequence[str]) -> dict[str, Any]:
    """Recovery on both corpora, and throughput, for each method available here."""
    methods = dict(METHODS)
    try:
        import json_repair  # noqa: F401

        methods["json_repair"] = repaired
    except ImportError:
        pass
    cases = constructed()
    results: dict[str, Any] = {}
    for name, method in methods.items():
        per_case = {case: method(reply) == expected for case, reply, expected in cases}
        recovered = sum(method(reply) is not None for reply in recorded)
        results[name] = {
            "constructed_correct": sum(per_case.values()),
            "constructed_cases": len(cases),
            "per_case": per_case,
            "recorded_valid_step": recovered,
            "recorded_replies": len(recorded),
            "throughput_mb_per_s": _throughput(method, [r for _, r, _ in cases] + list(recorded)),
        }
    results["shapeloop"].update(adversarial_throughput())
    return {"methods": results, "recorded_sample": list(recorded)[:20]}


def adversarial_throughput(size: int = 200_000) -> dict[str, Any]:
    """shapeloop's MB/s on the 18 KB hard case, and on the slowest of the adversarial inputs at ``size``."""
    rates = {name: _throughput(ours, [make(size)], min_seconds=0.2) for name, make in ADVERSARIAL.items()}
    rates["hard case"] = _throughput(ours, [hard_case()], min_seconds=0.2)  # the 18 KB case itself
    worst = min(rates, key=rates.__getitem__)
    return {"hard_case_mb_per_s": rates["hard case"], "worst_case": worst, "worst_case_mb_per_s": rates[worst]}


def _throughput(method: Callable[[str], Any], corpus: Sequence[str], min_seconds: float = 0.5) -> float:
    size = sum(len(t.encode()) for t in corpus)
    rounds, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < min_seconds or rounds == 0:
        for text in corpus:
            method(text)
        rounds += 1
    return round(size * rounds / elapsed / 1e6, 2)


def main() -> None:
    """Measure extraction alone, again, on the prose replies the last suite run recorded (no model)."""
    from benchmarks import report
    from benchmarks.common import MEASUREMENTS, write

    suite = json.loads((MEASUREMENTS / "suite.json").read_text())
    recorded = [text for r in suite["records"] if r.get("mode") == "prose" for text in r.get("prose_replies", [])]
    common = {"models": suite["models"], "settings": suite["settings"]}
    write("extraction", {"benchmark": "extraction", **common, **measure(recorded)})
    report.write(MEASUREMENTS)


if __name__ == "__main__":
    main()
