"""The schema pattern engine agrees with Python's ``re`` on every pattern it accepts (issue 49).

A property test generates patterns (literals, classes, categories, anchors, groups with local
flags, alternation, greedy and lazy repeats, global flags) and texts over an alphabet chosen for
where engines differ (multi-character case mappings, the Kelvin sign and the long s, Arabic and
full-width digits, newlines) and compares :meth:`Pattern.search` with ``re.search``. What the
engine does not implement is refused with one line, never run with another meaning.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from helpers import answer_step, tool_step
from shapeloop import ScriptedBrain, StopReason, Tool, run_agent
from shapeloop.pattern import Pattern, PatternRefused, compiled

# characters where a hand-written engine and re part ways
ALPHABET = "abkKsSiIzZ_ 1-\nßẞİıſ\u212aﬁéÉ١１٣"

_LITERALS = st.sampled_from(ALPHABET).map(re.escape)
_CLASSES = st.sampled_from(
    [
        ".", r"\d", r"\D", r"\w", r"\W", r"\s", r"\S", "[a-z]", "[^a-z]", "[A-Z0-9]", "[ß-ſ]", r"[\d_]",
        r"[\w-]", r"[^\s]", "[a-zß]", "[k]", "[^k]", "[İi]", r"[^\W\d]", "[s-z]", "[K-Z]", "[\u0130-\u0131]",
    ]
)  # fmt: skip
_ANCHORS = st.sampled_from(["^", "$", r"\A", r"\Z", r"\b", r"\B"])
_QUANTIFIERS = st.sampled_from(["*", "+", "?", "{0,2}", "{2}", "{1,}", "*?", "+?", "??", "{1,2}?"])
_GROUPS = st.sampled_from(["(", "(?:", "(?i:", "(?-i:", "(?a:", "(?s:", "(?m:", "(?ai:", "(?u:"])
_FLAGS = st.sampled_from(["", "(?i)", "(?a)", "(?ai)", "(?m)", "(?s)", "(?is)", "(?ims)", "(?u)", "(?ui)"])


def _patterns() -> st.SearchStrategy[str]:
    single = st.one_of(_LITERALS, _CLASSES, _ANCHORS)
    atom = st.tuples(single, st.one_of(st.just(""), _QUANTIFIERS)).map("".join)

    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.lists(inner, min_size=1, max_size=4).map("".join),
            st.tuples(inner, _QUANTIFIERS).map(lambda pair: f"(?:{pair[0]}){pair[1]}"),  # never a*+: possessive
            st.tuples(_GROUPS, inner).map(lambda pair: f"{pair[0]}{pair[1]})"),
            st.lists(inner, min_size=2, max_size=3).map("|".join),
        )

    return st.tuples(_FLAGS, st.recursive(atom, grow, max_leaves=8)).map("".join)


def _compiles(source: str) -> bool:
    try:
        re.compile(source)
    except re.error:
        return False
    return True


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(source=_patterns(), texts=st.lists(st.text(alphabet=ALPHABET, max_size=8), min_size=1, max_size=6))
@example(source="(?i)^[a-z]+$", texts=["Straße", "İzmir", "ﬁnland", "\u212aelvin", "ſtop"])
@example(source=r"(?a)^\w+$", texts=["naïve", "naive"])
@example(source=r"(?a)^\d+$", texts=["١٢٣", "１２３", "123"])
@example(source=r"\B", texts=["", "a", " ", "ab"])
@example(source=r"(?a:\w)\w", texts=["éé", "aé", "éa"])
@example(source=r"(?i:s)S", texts=["ſs", "sS", "ſS"])
def test_the_engine_agrees_with_re_on_every_pattern_it_accepts(source: str, texts: list[str]) -> None:
    assume(_compiles(source))
    try:
        engine = compiled(source)  # a generated pattern uses nothing else the engine refuses: it must accept it
    except PatternRefused as refused:  # a group that switches ASCII or Unicode matching, which re applies unevenly
        assert "inside a group" in str(refused) and re.search(r"\(\?[a-zL]*[auL][a-zL]*(?:-[a-z]+)?:", source), source
        return
    for text in texts:
        assert engine.search(text) == (re.search(source, text) is not None), (source, text)


@pytest.mark.parametrize(
    ("source", "words"),
    [
        (r"(a)\1", "a backreference"),
        (r"(?=a)a", "a lookaround"),
        (r"(?<!b)a", "a lookaround"),
        (r"(a)?(?(1)a|b)", "a conditional"),
        (r"(?>a*)a", "an atomic group"),
        (r"a*+a", "a possessive repeat"),
        (r"a++", "a possessive repeat"),
    ],
)
def test_what_the_engine_does_not_implement_is_refused_with_one_line(source: str, words: str) -> None:
    with pytest.raises(PatternRefused) as caught:
        Pattern(source)
    message = str(caught.value)
    assert f"uses {words}, which needs a backtracking engine" in message and "\n" not in message


@pytest.mark.parametrize("source", [r"(?a:\W)", r"x(?a:[\W])", r"(?u:\w)+"])
def test_a_group_that_switches_ascii_or_unicode_matching_is_refused(source: str) -> None:
    # re itself reads "É" against (?a:\W) by the whole pattern's mode (no match), against (?a)\W by ASCII
    assert re.search(r"(?a:\W)", "É") is None and re.search(r"(?a)\W", "É") is not None
    with pytest.raises(PatternRefused, match=r"inside a group \(\(\?a:\.\.\.\)") as caught:
        Pattern(source)
    assert "set the mode for the whole pattern with (?a) at its start" in str(caught.value)


def test_an_atomic_group_is_refused_because_it_changes_what_matches() -> None:
    assert re.search(r"(?>a*)a", "aaa") is None  # the reason: a Pike VM would say it matches


@pytest.mark.parametrize("source", ["(", "a{2,1}", "[b-a]", "(?L)a", "*a"])
def test_what_re_refuses_is_refused(source: str) -> None:
    with pytest.raises(PatternRefused, match="is not a regular expression"):
        Pattern(source)


@pytest.mark.parametrize(
    ("source", "text", "matches"),
    [
        ("(?i)^[a-z]+$", "Straße", False),  # raised TypeError: ord() expected a character
        ("(?i)^[a-z]+$", "İzmir", True),  # re folds İ to i (its simple lowercase)
        ("(?i)^[a-z]+$", "ﬁnland", False),
        (r"(?a)^\w+$", "naïve", False),  # accepted: (?a) was ignored
        (r"(?a)^\d+$", "١٢٣", False),
        (r"(?a)^\d+$", "１２３", False),
        (r"\B", "", False),  # matched: re says no
        (r"^\d+$", "١٢٣", True),
    ],
)
def test_the_cases_the_probe_found(source: str, text: str, matches: bool) -> None:
    assert Pattern(source).search(text) is matches
    assert (re.search(source, text) is not None) is matches


WORD = {"type": "object", "properties": {"word": {"type": "string", "pattern": "(?i)^[a-z]+$"}}, "required": ["word"]}


@pytest.mark.parametrize("word", ["Straße", "ﬁnland"])
def test_a_multi_character_case_mapping_in_an_argument_is_refused_as_feedback_not_a_crash(word: str) -> None:
    called: list[str] = []
    shout = Tool(name="shout", description="Shout.", parameters=WORD, fn=lambda word: called.append(word) or "ok")
    run = run_agent(ScriptedBrain([tool_step("shout", word=word), answer_step("done")]), [shout], "t", mode="prose")
    assert run.stop is StopReason.ANSWERED and called == []
    assert (
        f"ERROR: invalid arguments for shout(word: string): word: '{word}' does not match"
        in run.messages[-2]["content"]
    )


def test_a_multi_character_case_mapping_in_a_typed_answer_is_refused_as_feedback_not_a_crash() -> None:
    schema = {"type": "string", "pattern": "(?i)^[a-z]+$"}
    brain = ScriptedBrain([answer_step("Straße"), answer_step("Strasse")])
    run = run_agent(brain, [], "t", output_type=schema, mode="prose")
    assert run.stop is StopReason.ANSWERED and run.output == "Strasse"
    assert "'Straße' does not match '(?i)^[a-z]+$'" in run.messages[-2]["content"]
