"""Corpus aggregations, checked against numbers lm-eval 0.4.13 computed on the same inputs
(see _lm_eval_reference.py for how they were produced)."""

from __future__ import annotations

import math

import numpy as np
import pytest

# A sibling module: pytest puts this folder on sys.path.
from _lm_eval_reference import reference_inputs

from assay.errors import DataError
from assay.metrics import AGGREGATIONS

DATA = reference_inputs()

EXPECTED = [
    ("mean", "acc", 0.85),
    ("perplexity", "lls", 14.286836659334),
    ("median", "median_floats", 0.080925),
    ("median", "median_ints", 5),
    ("nanmean", "with_nans", 0.3928168064516129),
    ("f1", "binary", 0.8985507246376812),
    ("matthews_corrcoef", "binary", 0.7618064470073773),
    ("matthews_corrcoef", "three_class", 0.3368794175504062),
    ("weighted_perplexity", "weighted", 8.62146443827944),
    ("bits_per_byte", "weighted", 3.1079329456947566),
    ("bleu", "translations", 20.99655882221164),
    ("chrf", "translations", 55.237112507700814),
    ("ter", "translations", 35.294117647058826),
    ("bleu", "translations_two_refs", 60.25558587946255),
    ("chrf", "translations_two_refs", 73.24104997348853),
    ("ter", "translations_two_refs", 23.52941176470588),
]


@pytest.mark.parametrize(
    ("name", "inputs", "expected"), EXPECTED, ids=[f"{n}-{i}" for n, i, _ in EXPECTED]
)
def test_aggregation_equals_lm_eval(name, inputs, expected):
    # Bit-for-bit: same arithmetic in the same order.
    assert AGGREGATIONS.get(name).fn(DATA[inputs]) == expected


def test_corpus_metrics_accept_one_element_prediction_lists():
    pairs = [[ref, [pred]] for ref, pred in DATA["translations"]]
    assert AGGREGATIONS.get("bleu").fn(pairs) == 20.99655882221164


def test_corpus_metrics_refuse_several_predictions():
    with pytest.raises(DataError, match="take_first"):
        AGGREGATIONS.get("bleu").fn([["a b", ["a", "b"]]])


def test_brier_score_equals_lm_eval():
    pairs = [
        (1, np.array([0.2, 0.5, 0.3])),
        (0, np.array([0.7, 0.1, 0.2])),
        (2, np.array([0.3, 0.3, 0.4])),
    ]
    assert AGGREGATIONS.get("brier_score").fn(pairs) == 0.35333333333333333


def test_brier_score_needs_equal_choice_counts():
    with pytest.raises(DataError, match="same number of choices"):
        AGGREGATIONS.get("brier_score").fn(
            [(0, np.array([0.5, 0.5])), (1, np.array([0.2, 0.3, 0.5]))]
        )


def test_median_is_the_upper_middle_value():
    assert AGGREGATIONS.get("median").fn([4, 1, 3, 2]) == 3


def test_nanmean_of_only_nans_is_nan():
    assert math.isnan(AGGREGATIONS.get("nanmean").fn([math.nan, math.nan]))


def test_bypass_is_999():
    assert AGGREGATIONS.get("bypass").fn([None, None]) == 999


STDERR_RULES = {
    "mean": ("mean", None),
    "median": ("bootstrap", None),
    "nanmean": ("bootstrap", None),
    "perplexity": ("bootstrap", None),
    "f1": ("bootstrap", None),
    "matthews_corrcoef": ("bootstrap", None),
    "bleu": ("bootstrap", 100),
    "chrf": ("bootstrap", 100),
    "ter": ("bootstrap", 100),
    "weighted_perplexity": ("none", None),
    "bits_per_byte": ("none", None),
    "brier_score": ("none", None),
    "bypass": ("none", None),
}


@pytest.mark.parametrize("name", STDERR_RULES)
def test_stderr_rules_are_lm_evals(name):
    aggregation = AGGREGATIONS.get(name)
    assert (aggregation.stderr, aggregation.bootstrap_cap) == STDERR_RULES[name]
