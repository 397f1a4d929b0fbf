"""math_verify: symbolic answer equivalence with Math-Verify."""

from __future__ import annotations

import pytest

from assay.doc import Doc, OutputType
from assay.errors import DataError
from assay.metrics import get_metric
from assay.metrics.base import SampleInput

CASES = [
    ("boxed_fraction", r"so $\boxed{\frac{1}{2}}$", r"The answer is $\frac{1}{2}$.", 1),
    ("decimal_equals_fraction", r"$\boxed{\frac{1}{2}}$", "The answer is $0.5$", 1),
    ("different_number", r"$\boxed{3}$", "The answer is $4$", 0),
    ("equivalent_expression", r"$\boxed{2x+2}$", "Final answer: $2(x+1)$", 1),
    ("no_answer", r"$\boxed{3}$", "I do not know", 0),
]


@pytest.mark.parametrize(
    ("gold", "response", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_math_verify(gold, response, expected):
    doc = Doc("Problem:", choices=[gold], gold_index=0)
    value = get_metric("math_verify").sample_fn(
        SampleInput(doc, OutputType.GENERATE_UNTIL, response)
    )
    assert value == expected and type(value) is int


def test_any_gold_may_match():
    doc = Doc("Problem:", choices=["$7$", "$3$"], gold_index=[0, 1])
    sample = SampleInput(doc, OutputType.GENERATE_UNTIL, "It is $3$")
    assert get_metric("math_verify").sample_fn(sample) == 1


def test_needs_one_text_response():
    doc = Doc("Problem:", choices=["$3$"])
    with pytest.raises(DataError, match="take_first"):
        get_metric("math_verify").sample_fn(SampleInput(doc, OutputType.GENERATE_UNTIL, ["$3$"]))


def test_description():
    metric = get_metric("math_verify")
    assert metric.aggregation == "mean" and metric.higher_is_better
