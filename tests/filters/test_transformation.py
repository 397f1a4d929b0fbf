"""remove_whitespace, lowercase, uppercase, map and format_span.

The remove_whitespace, map and format_span expectations were produced once by lm-eval 0.4.13's
WhitespaceFilter, MapFilter and SPANFilter on the same inputs, and frozen here; lowercase and
uppercase are Python's str.lower / str.upper there too.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.errors import ConfigError, DataError
from assay.filters import FILTERS, build_filter_ensemble


def apply(name: str, responses: list, **kwargs) -> list:
    return FILTERS.get(name)(**kwargs).apply([responses], [{}])[0]


CASES = [
    ("remove_whitespace", {}, ["  a b \n", "\tx"], ["a b", "x"]),
    ("lowercase", {}, ["ÄbC", "x"], ["äbc", "x"]),
    ("uppercase", {}, ["straße", "x"], ["STRASSE", "X"]),
    ("map", {"mapping_dict": {"yes": 1, "no": 0}, "default_value": -1}, ["yes", "no", "maybe"], [1, 0, -1]),
    ("map", {"mapping_dict": {"A": "(A)"}}, ["A", "B"], ["(A)", None]),
    ("map", {}, ["anything"], [None]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "kwargs", "responses", "expected"), CASES)
def test_transformation(name, kwargs, responses, expected):
    assert apply(name, responses, **kwargs) == expected


SPAN = [
    (
        "Person: John Smith, Jane Doe\nLocation: Paris",
        "per: john smith $ per: jane doe $ loc: paris",
    ),
    ("PER: none\nORG: Acme $$ DATE: Monday", "org: acme $ date: monday"),
    ("country: Kenya, Uganda$$", "loc: kenya $ loc: uganda"),
    ("nothing", ""),
    ("The location: of person: here", "loc: of PER: here"),
]


@pytest.mark.parametrize(("response", "expected"), SPAN)
def test_format_span_matches_lm_eval(response, expected):
    assert apply("format_span", [response]) == [expected]


@pytest.mark.parametrize("name", ["remove_whitespace", "lowercase", "uppercase", "format_span"])
def test_text_filters_reject_non_text_with_a_hint(name):
    with pytest.raises(DataError, match="before filters"):
        apply(name, ["ok", 3])


def test_map_needs_a_mapping():
    with pytest.raises(ConfigError, match="mapping_dict"):
        build_filter_ensemble("x", [("map", {"mapping_dict": ["a", "b"]})])


@given(st.lists(st.text(max_size=40), max_size=4))
def test_format_span_never_raises_and_lowercases(responses):
    out = apply("format_span", responses)
    assert len(out) == len(responses)
    for formatted in out:
        items = formatted.split(" $ ") if formatted else []
        assert all(item.startswith(("per: ", "loc: ", "org: ", "date: ")) for item in items)


@given(st.lists(st.text(max_size=20), max_size=4))
def test_remove_whitespace_is_idempotent(responses):
    once = apply("remove_whitespace", responses)
    assert apply("remove_whitespace", once) == once
