"""take_first, take_first_k and majority_vote.

Expected outputs of the table cases were produced once by lm-eval 0.4.13's selection filters
on the same inputs, and frozen here.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.errors import ConfigError, DataError
from assay.filters import FILTERS, build_filter_ensemble


def apply(name: str, resps: list, **kwargs) -> list:
    return FILTERS.get(name)(**kwargs).apply(resps, [{} for _ in resps])


CASES = [
    ("take_first", {}, [["a", "b"], ["c"]], ["a", "c"]),
    ("take_first_k", {"k": 2}, [["a", "b", "c"], ["d", "e", "f"]], [["a", "b"], ["d", "e"]]),
    (
        "majority_vote",
        {},
        [["b", "a", "a", "b", "c"], ["x"], ["1", "2", "2"]],
        [["b"], ["x"], ["2"]],
    ),
    ("majority_vote", {}, [[3, 1, 1]], [[1]]),
]


@pytest.mark.parametrize(("name", "kwargs", "resps", "expected"), CASES)
def test_selection_matches_lm_eval(name, kwargs, resps, expected):
    assert apply(name, resps, **kwargs) == expected


def test_majority_vote_then_take_first_is_the_maj_at_k_pipeline():
    ensemble = build_filter_ensemble("maj@3", [("majority_vote", None), ("take_first", None)])
    assert ensemble.apply([["7", "8", "8"], ["1", "2", "3"]], [{}, {}]) == ["8", "1"]


def test_take_first_k_needs_enough_repeats():
    with pytest.raises(DataError, match="repeats"):
        apply("take_first_k", [["a"]], k=2)


@pytest.mark.parametrize("kwargs", [{}, {"k": "2"}, {"k": -1}, {"k": True}])
def test_take_first_k_needs_a_count(kwargs):
    with pytest.raises(ConfigError, match="take_first_k"):
        build_filter_ensemble("x", [("take_first_k", kwargs)])


@pytest.mark.parametrize("name", ["take_first", "majority_vote"])
def test_a_doc_without_responses_is_a_data_error(name):
    with pytest.raises(DataError, match="no responses"):
        apply(name, [["a"], []])


@given(
    st.lists(st.lists(st.text(max_size=3), min_size=3, max_size=6), max_size=5), st.integers(0, 3)
)
def test_take_first_k_keeps_the_first_k(resps, k):
    out = apply("take_first_k", resps, k=k)
    assert [len(r) for r in out] == [k] * len(resps)
    assert all(r[:k] == o for r, o in zip(resps, out))


@given(st.lists(st.lists(st.sampled_from("abcd"), min_size=1, max_size=8), max_size=5))
def test_majority_vote_picks_the_first_seen_of_the_most_frequent(resps):
    out = apply("majority_vote", resps)
    for responses, (vote,) in zip(resps, out):
        counts = Counter(responses)
        top = max(counts.values())
        assert counts[vote] == top
        assert vote == next(r for r in responses if counts[r] == top)
