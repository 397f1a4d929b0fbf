"""The direct indented writer is json.dumps(indent=2, ensure_ascii=False), byte for byte."""

from __future__ import annotations

import enum
import json
import math
from collections import OrderedDict
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.results._indented_json import MAX_DEPTH, NotPlain, indented
from assay.results.samples import _fallback, doc_hash


def _reference(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


_floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, 1e16, 1e-7, 0.1, math.nan, math.inf, -math.inf, 5e-324, 1.7976931348623157e308]
)
_ints = st.integers() | st.integers(min_value=-(2**200), max_value=2**200)
_text = st.text() | st.sampled_from(
    ['"', "\\", "\n\t\r\b\f", "\x00\x1f\x7f", "é\u2028\u2029😀", ""]
)
_leaves = st.none() | st.booleans() | _ints | _floats | _text
_keys = _text | st.booleans() | st.none() | _ints | _floats
_values = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=5).map(tuple)
        | st.dictionaries(_keys, inner, max_size=5)
    ),
    max_leaves=40,
)


@settings(max_examples=500)
@given(_values)
def test_same_text_as_json(value: Any) -> None:
    assert indented(value) == _reference(value)


@settings(max_examples=200)
@given(st.dictionaries(_text, _values, max_size=8))
def test_doc_hash_rows(row: dict[str, Any]) -> None:
    expected = json.dumps(row, indent=2, ensure_ascii=False, default=_fallback)
    assert indented(row) == expected


@pytest.mark.parametrize(
    "value",
    [{}, [], (), {"a": {}}, [[], {}, ()], {"k": [{"x": []}]}, "top", 1, 1.5, None, True],
)
def test_edges(value: Any) -> None:
    assert indented(value) == _reference(value)


class _Colour(enum.IntEnum):
    RED = 1


class _Text(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {"n": np.int64(3)},
        {"x": np.float64(0.5)},  # a float subclass
        {"e": _Colour.RED},  # an int subclass
        {"s": _Text("a")},
        {_Text("k"): 1},
        OrderedDict(a=1),
        {"set": {1}},
        {"obj": object()},
        {(1, 2): "tuple key"},
    ],
)
def test_other_types_are_left_to_json(value: Any) -> None:
    with pytest.raises(NotPlain):
        indented(value)


@pytest.mark.parametrize(
    "row",
    [
        {"n": np.int64(3), "xs": [np.float32(0.25)], "label": _Colour.RED},
        {"s": _Text("a"), "set": {2}, "nested": {"obj": object.__name__}},
        OrderedDict(b=[1, 2], a={"c": None}),
    ],
)
def test_doc_hash_falls_back_to_json(row: dict[str, Any]) -> None:
    import hashlib

    text = json.dumps(row, indent=2, ensure_ascii=False, default=_fallback)
    assert doc_hash(row) == hashlib.sha256(text.encode("utf-8")).hexdigest()


def _nested(depth: int) -> list[Any]:
    value: list[Any] = [1]
    for _ in range(depth - 1):
        value = [value, 1]
    return value


def test_deep_and_circular_values_are_left_to_json() -> None:
    assert indented(_nested(MAX_DEPTH)) == _reference(_nested(MAX_DEPTH))
    with pytest.raises(NotPlain):
        indented(_nested(MAX_DEPTH + 1))
    circular: dict[str, Any] = {}
    circular["self"] = circular
    with pytest.raises(NotPlain):
        indented(circular)
    with pytest.raises(ValueError, match="Circular reference"):
        doc_hash(circular)
