"""The custom filter: the user's function decides the whole output."""

from __future__ import annotations

import pytest

from assay.errors import ConfigError
from assay.filters import build_filter_ensemble


def keep_longest(resps, docs):
    return [max(responses, key=len) + doc["suffix"] for responses, doc in zip(resps, docs)]


def test_custom_filter_sees_all_docs_and_responses():
    ensemble = build_filter_ensemble("longest", [("custom", {"filter_fn": keep_longest})])
    out = ensemble.apply([["a", "abc"], ["xy", "z"]], [{"suffix": "!"}, {"suffix": "?"}])
    assert out == ["abc!", "xy?"]


def test_custom_filter_output_can_be_filtered_further():
    ensemble = build_filter_ensemble(
        "x", [("custom", {"filter_fn": lambda resps, docs: [[r.upper() for r in rs] for rs in resps]}),
              ("take_first", None)]
    )  # fmt: skip
    assert ensemble.apply([["a", "b"]], [{}]) == ["A"]


@pytest.mark.parametrize("kwargs", [{}, {"filter_fn": "module.fn"}])
def test_custom_filter_needs_a_function(kwargs):
    with pytest.raises(ConfigError, match="custom"):
        build_filter_ensemble("x", [("custom", kwargs)])
