import json
import string
import time

import pytest
from benchmarks.extraction import ADVERSARIAL, hard_case
from hypothesis import given
from hypothesis import strategies as st

from helpers import answer_step, tool_step
from shapeloop import Step, extract_step


def test_whole_reply_is_used_as_it_is() -> None:
    found = extract_step(tool_step("read_file", path="a.txt"))
    assert found.step is not None and found.whole
    assert found.step.args == {"path": "a.txt"}
    assert found.stripped == ()


def test_last_valid_object_wins_over_a_draft() -> None:
    reply = "Draft: " + tool_step("list_files", path=".") + "\nOn second thought:\n" + tool_step("read_file", path="b")
    found = extract_step(reply)
    assert found.step is not None and found.step.tool == "read_file"
    assert found.objects == 2  # two steps; their args objects do not start like a step
    assert found.chosen == 1
    assert "object 2 of 2" in found.summary


def test_a_broken_object_after_a_valid_one_does_not_hide_it() -> None:
    reply = answer_step("red") + ' and then {"reason": "more", "action": "tool"}'
    found = extract_step(reply)
    assert found.step is not None and found.step.answer == "red"


def test_braces_and_quotes_inside_strings_do_not_close_the_object() -> None:
    code = 'def f():\n    return {"a": "}"}  # } { "\n'
    reply = "Here it is: " + tool_step("write", path="f.py", text=code) + " done } {"
    found = extract_step(reply)
    assert found.step is not None and found.step.args["text"] == code


def test_code_fences_and_think_blocks_are_stripped() -> None:
    reply = (
        "<think>maybe " + tool_step("list_files") + " or not</think>\n"
        "```json\n" + tool_step("read_file", path="x") + "\n```"
    )
    found = extract_step(reply)
    assert found.step is not None and found.step.tool == "read_file"
    assert found.stripped == ("think", "fence")


def test_a_think_tag_inside_a_string_value_is_not_mistaken_for_thinking() -> None:
    reply = answer_step("models write <think> and then </think> around their reasoning")
    found = extract_step("Answer: " + reply)
    assert found.step is not None and "<think>" in found.step.answer


def test_nothing_found_says_why() -> None:
    assert extract_step("I think the answer is red.").error == "the reply holds no JSON object"
    found = extract_step('{"reason": "r", "action": "tool"}')
    assert found.step is None and found.error is not None
    assert "tool" in found.error and "Field required" in found.error
    assert extract_step("{'reason': 'python dict'}").step is None
    assert extract_step("").step is None


def test_unbalanced_prose_before_the_step_does_not_hide_it() -> None:
    for prefix in [
        '{ he said "hi',
        "{'",
        '{"draft": "unterminated\n\n',
        '{"a": 1, ',
        '{"x{',
        "{ \"it's {",
        "\\{",
    ]:
        found = extract_step(prefix + tool_step("read_file", path="p") + " trailing")
        assert found.step is not None, prefix
        assert found.step.args == {"path": "p"}, prefix


def test_thirty_thousand_character_reply_with_draft_digression_and_final_object() -> None:
    draft = tool_step("append_note", path="notes.txt", text="first try")
    code_line = 'if (x) { y = "}"; z = {a: 1}; } // "quote\n'
    digression = "Wait, let me reconsider {the approach}. " + "```js\n" + code_line * 720 + "```\n"
    final = tool_step("append_note", path="notes.txt", text="function f() { return '}'; }")
    reply = draft + "\n" + digression + "\nSo the final answer:\n" + final
    assert len(reply) > 30_000
    found = extract_step(reply)
    assert found.step is not None
    assert found.step.args["text"] == "function f() { return '}'; }"
    assert found.objects >= 2
    # first { to last } spans all of it and parses as nothing: the naive reading fails here
    naive = reply[reply.index("{") : reply.rindex("}") + 1]
    try:
        json.loads(naive)
        naive_ok = True
    except ValueError:
        naive_ok = False
    assert not naive_ok


def test_an_object_nested_in_a_step_that_looks_like_a_step_does_not_hide_it() -> None:
    inner = {"reason": "x", "tool": "y"}
    found = extract_step("Step: " + tool_step("t", reason="r", nested=inner) + " ok")
    assert found.step is not None and found.step.args == {"nested": inner}
    assert found.objects == 2 and found.chosen == 0


def test_a_long_step_after_short_junk_objects_is_read_whole() -> None:
    # The scanner reads a window first; a step longer than it must still come back whole.
    text = "x" * 50_000
    found = extract_step('{"tool": 1} ' + tool_step("write", path="p", text=text) + ' {"answer": 2}')
    assert found.step is not None and found.step.args["text"] == text


def test_scan_is_linear_on_adversarial_input() -> None:
    # many unclosed objects each holding a string that is never closed: rescans are bounded
    for noise in ['{"a' * 20_000, '{"x"o' * 20_000, "{" * 50_000, '"' * 50_000]:
        found = extract_step(noise + tool_step("t", x=1))
        assert found.step is not None and found.step.args == {"x": 1}


_texts = st.text(alphabet=st.sampled_from([*list(string.printable), "é", "{", "}", '"', "\\", "\u2028"]), max_size=200)
_steps = st.builds(
    lambda reason, action, tool, args, answer: Step(reason=reason, action=action, tool=tool, args=args, answer=answer),
    st.text(max_size=40),
    st.sampled_from(["tool", "answer"]),
    st.text(max_size=15),
    st.dictionaries(
        st.text(max_size=8),
        st.one_of(
            st.text(max_size=20),
            st.integers(),
            st.booleans(),
            st.none(),
            st.lists(st.text(max_size=5), max_size=3),
        ),
        max_size=3,
    ),
    st.text(max_size=40),
)
_drafts = st.lists(
    st.one_of(
        st.dictionaries(st.text(max_size=6), st.text(max_size=10), max_size=3).map(json.dumps),
        _steps.map(lambda s: json.dumps(s.model_dump())),
        st.just('{"reason": "half a draft", "action": "tool"'),
    ),
    max_size=3,
)


@given(prefix=_texts, drafts=_drafts, middle=_texts, step=_steps, suffix=_texts, ascii_only=st.booleans())
def test_any_dumped_step_in_prose_comes_back(
    prefix: str, drafts: list[str], middle: str, step: Step, suffix: str, ascii_only: bool
) -> None:
    # prose after the final object never closes an object that validates as a step
    reply = prefix + " ".join(drafts) + middle + json.dumps(step.model_dump(), ensure_ascii=ascii_only) + suffix
    found = extract_step(reply)
    assert found.step == step


@given(st.text(max_size=500))
def test_arbitrary_text_never_raises(text: str) -> None:
    found = extract_step(text)
    assert (found.step is None) == (found.error is not None) or found.step is not None


@given(st.text(alphabet='{}[]":,\\ \nabtrue0-', max_size=400))
def test_json_like_noise_never_raises(text: str) -> None:
    extract_step(text)


def _best_seconds(text: str, tries: int = 3) -> float:
    best = float("inf")
    for _ in range(tries):
        started = time.perf_counter()
        extract_step(text)
        best = min(best, time.perf_counter() - started)
    return best


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_reading_time_grows_linearly_with_the_reply(name: str) -> None:
    # Not a speed test: the ratio of two timings on one machine. Eight times the input takes about
    # eight times as long when the reading is linear, and about 64 times when it is quadratic. A
    # busy machine can spoil one ratio, so the best of three attempts is compared.
    small, large = ADVERSARIAL[name](40_000), ADVERSARIAL[name](320_000)
    ratios = []
    for _ in range(3):
        ratios.append(_best_seconds(large) / max(_best_seconds(small, tries=5), 1e-6))
        if ratios[-1] < 24:
            return
    pytest.fail(f"{name}: 8x the input took {min(ratios):.1f}x as long (quadratic reading is about 64x)")


def test_the_hard_case_is_found() -> None:
    found = extract_step(hard_case())
    assert found.step is not None and found.step.tool == "append_note"
