"""regex, multi_choice_regex and regex_pos filters.

Expected outputs were produced once by running lm-eval 0.4.13's RegexFilter,
MultiChoiceRegexFilter and POSFilter on the same inputs, and frozen here.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.errors import ConfigError, DataError
from assay.filters import FILTERS, build_filter_ensemble


def run(name: str, kwargs: dict, responses: list, doc: dict | None = None) -> list:
    """Filter one doc's responses."""
    return FILTERS.get(name)(**kwargs).apply([responses], [doc or {}])[0]


REGEX_CASES = [
    ("gsm_default", {}, ["The answer is #### 1,234.5", "no marker", "#### -7 then #### 8"],
     ["1,234.5", "[invalid]", "-7"]),
    ("last_match", {"regex_pattern": r"(\d+)", "group_select": -1}, ["1 2 3", "x", "42"],
     ["3", "[invalid]", "42"]),
    ("second_match", {"regex_pattern": r"(\d+)", "group_select": 1}, ["1 2 3", "7 8"], ["2", "8"]),
    ("tuple_groups", {"regex_pattern": r"(?:answer is (\w+))|(?:final: (\w+))"},
     ["final: B", "answer is C", "answer is  "], ["B", "C", "[invalid]"]),
    ("all_empty_tuple_gives_stripped_fallback", {"regex_pattern": r"(a*)(b*)x", "fallback": "  [none]  "},
     ["x", "abx"], ["[none]", "a"]),
    ("strip", {"regex_pattern": r"ANSWER:(.*)"}, ["ANSWER:   spaced out   "], ["spaced out"]),
    ("no_group_whole_match", {"regex_pattern": r"[A-D]\)"}, ["pick C) now", "none"], ["C)", "[invalid]"]),
    ("non_str_searched_as_empty", {"regex_pattern": r"(.*)", "fallback": "FB"}, [None, 3], ["", ""]),
    ("custom_fallback", {"regex_pattern": r"(\d+)", "fallback": "none"}, ["abc"], ["none"]),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "responses", "expected"), [c[1:] for c in REGEX_CASES],
                         ids=[c[0] for c in REGEX_CASES])  # fmt: skip
def test_regex_matches_lm_eval(kwargs, responses, expected):
    assert run("regex", kwargs, responses) == expected


def test_regex_group_select_past_the_matches_gives_fallback():
    # lm-eval raises IndexError here; assay reads it as "no usable match".
    assert run("regex", {"regex_pattern": r"(\d)", "group_select": 3}, ["1 2"]) == ["[invalid]"]
    assert run("regex", {"regex_pattern": r"(\d)", "group_select": -3}, ["1 2"]) == ["[invalid]"]


def test_regex_keeps_one_list_per_doc():
    regex = FILTERS.get("regex")(regex_pattern=r"(\d+)")
    assert regex.apply([["a1", "b2"], ["c3"]], [{}, {}]) == [["1", "2"], ["3"]]


MC_CASES = [
    ("gpqa_style",
     {"regex_pattern": r"(\([A-Z]\))", "group_select": -1, "ignore_case": True, "ignore_punctuation": True},
     ["Guilty", "Guilty of Romance", "Innocent"],
     ["The answer is (B) not (C)", "I think it is guilty of romance.", "Answer: C", "nothing here", "(A)", ""],
     ["(C)", "(B)", "(C)", "[invalid]", "(A)", "[invalid]"]),
    ("literal_choice_is_case_sensitive_by_default", {"regex_pattern": r"(\([A-Z]\))"}, ["Red", "Blue"],
     ["blue", "Blue!", "so: B", "final answer:   A"], ["[invalid]", "(B)", "(B)", "(A)"]),
    ("regexes_to_ignore", {"regex_pattern": r"XXX", "regexes_to_ignore": [r"\s+"], "ignore_case": True},
     ["New York", "Los Angeles"], ["I'd say newyork", "LOSANGELES", "other"], ["(A)", "(B)", "[invalid]"]),
    ("unicode_punctuation_removed", {"regex_pattern": r"XXX", "ignore_punctuation": True},
     ["it's «fine»", "bad"], ["its fine", "it's «fine»", "bad"], ["(A)", "(A)", "(B)"]),
    ("group_select_applies_to_every_stage", {"regex_pattern": r"XXX", "group_select": -1}, ["cat", "dog"],
     ["cat then dog", "dog then cat", "x: A and: B"], ["(B)", "(A)", "(B)"]),
    ("match_whose_stripped_text_is_no_choice_key", {"regex_pattern": r"XXX", "ignore_punctuation": True},
     ["A .", "B"], ["A is it", "B"], ["A", "(B)"]),
    ("default_pattern", {}, ["1", "2"], ["#### 2", "2"], ["2", "(B)"]),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "choices", "responses", "expected"), [c[1:] for c in MC_CASES],
                         ids=[c[0] for c in MC_CASES])  # fmt: skip
def test_multi_choice_regex_matches_lm_eval(kwargs, choices, responses, expected):
    assert run("multi_choice_regex", kwargs, responses, {"choices": choices}) == expected


def test_multi_choice_regex_reads_each_docs_own_choices():
    mcr = FILTERS.get("multi_choice_regex")(regex_pattern="XXX")
    docs = [{"choices": ["red", "blue"]}, {"choices": ["blue", "red"]}]
    assert mcr.apply([["blue"], ["blue"]], docs) == [["(B)"], ["(A)"]]


def test_multi_choice_regex_without_choices_is_a_data_error():
    mcr = FILTERS.get("multi_choice_regex")()
    with pytest.raises(DataError, match="choices"):
        mcr.apply([["x"]], [{"question": "q"}])


POS_CASES = [
    ("string_of_pairs", {}, ["[('The', 'DET'), ('cat', 'NOUN')]", "no tags"], [["DET", "NOUN"], ["invalid"]]),
    ("pairs_given", {"fallback": ["X"]}, [[("a", "B"), ("c", "D")], []], [["B", "D"], ["X"]]),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "responses", "expected"), [c[1:] for c in POS_CASES],
                         ids=[c[0] for c in POS_CASES])  # fmt: skip
def test_regex_pos_matches_lm_eval(kwargs, responses, expected):
    assert run("regex_pos", kwargs, responses) == expected


BAD_CONFIGS = [
    ("regex", {"regex_pattern": "(unclosed"}, "not a valid regular expression"),
    ("regex", {"regex_pattern": 5}, "must be a regular expression string"),
    ("regex", {"group_select": "1"}, "group_select must be an integer"),
    ("multi_choice_regex", {"regex_pattern": "[a-"}, "not a valid regular expression"),
    ("multi_choice_regex", {"regexes_to_ignore": ["ok", "(bad"]}, "regexes_to_ignore"),
    ("multi_choice_regex", {"regexes_to_ignore": ","}, "must be a list"),
    ("regex_pos", {"regex_pattern": "*"}, "not a valid regular expression"),
    ("regex", {"pattern": "x"}, "does not accept"),
]


@pytest.mark.parametrize(("name", "kwargs", "message"), BAD_CONFIGS)
def test_bad_configuration_fails_at_build_time_naming_the_filter(name, kwargs, message):
    with pytest.raises(ConfigError, match=message) as info:
        build_filter_ensemble("strict-match", [(name, kwargs)])
    assert repr(name) in str(info.value)


@given(
    text=st.text(max_size=80),
    pattern=st.sampled_from([r"#### (\-?[0-9\.\,]+)", r"(\d+)", r"(a)|(b)", r"\w+", r"(x*)"]),
    group_select=st.integers(-3, 3),
)
def test_regex_returns_fallback_or_a_substring(text, pattern, group_select):
    out = run(
        "regex", {"regex_pattern": pattern, "group_select": group_select, "fallback": "FB"}, [text]
    )
    assert len(out) == 1
    assert out[0] == "FB" or out[0] in text


@given(
    responses=st.lists(st.one_of(st.text(max_size=40), st.none(), st.integers()), max_size=5),
    choices=st.lists(st.text(max_size=12), min_size=1, max_size=5),
    ignore_case=st.booleans(),
    ignore_punctuation=st.booleans(),
)
def test_multi_choice_regex_never_raises(responses, choices, ignore_case, ignore_punctuation):
    out = run(
        "multi_choice_regex",
        {"regex_pattern": r"(\([A-Z]\))", "ignore_case": ignore_case,
         "ignore_punctuation": ignore_punctuation, "group_select": -1},
        responses,
        {"choices": choices},
    )  # fmt: skip
    assert len(out) == len(responses)
    # Every stage only accepts a non-empty answer; otherwise the fallback comes out.
    assert all(isinstance(answer, str) and answer for answer in out)
    for answer, response in zip(out, responses):
        if not isinstance(response, str):
            # Nothing to search: only the fallback can come out.
            assert answer == "[invalid]"
