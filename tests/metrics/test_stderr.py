"""Standard errors: closed form, lm-eval's seeded bootstrap, group pooling.

Expected numbers were produced once by lm-eval 0.4.13 (stderr_for_metric with
DISABLE_MULTIPROC=1, pooled_sample_stderr, unweighted_mean_stderr, aggregate_subtask_metrics)
on the inputs of _lm_eval_reference.py, and frozen. Equality is exact: the bootstrap draws
the same resamples and computes every replicate with the same arithmetic.
"""

from __future__ import annotations

import math
import random

import pytest

# A sibling module: pytest puts this folder on sys.path.
from _lm_eval_reference import reference_inputs

from assay.metrics import AGGREGATIONS, group_aggregate, stderr_of
from assay.metrics import aggregations as agg
from assay.metrics.base import Aggregation
from assay.metrics.stderr import bootstrap_replicates

DATA = reference_inputs()

LM_EVAL_STDERRS = [
    ("mean", "acc", 100000, 0.08191780219091252),
    ("perplexity", "lls", 2000, 3.3112056381468853),  # two chunks of 1000
    ("perplexity", "lls", 1500, 3.3047674672748886),  # one chunk: the remainder is dropped
    ("perplexity", "lls", 300, 3.3665130340964873),  # one chunk of 300
    ("median", "median_floats", 1000, 0.24678541479299185),
    ("median", "median_ints", 1000, 1.0689240378055875),
    ("nanmean", "with_nans", 1000, 0.04503190524129122),
    ("f1", "binary", 1000, 0.040143857640974924),
    ("matthews_corrcoef", "binary", 1000, 0.08782640531605039),
    ("matthews_corrcoef", "three_class", 1000, 0.09643810175371782),
    ("bleu", "translations", 100000, 6.660999702447806),  # capped at 100 iterations
    ("chrf", "translations", 100000, 4.237764797090839),
    ("ter", "translations", 100000, 5.070866410698928),
]


@pytest.mark.parametrize(("name", "inputs", "iters", "expected"), LM_EVAL_STDERRS,
                         ids=[f"{n}-{i}-{k}" for n, i, k, _ in LM_EVAL_STDERRS])  # fmt: skip
def test_stderr_equals_lm_eval(name, inputs, iters, expected):
    assert stderr_of(AGGREGATIONS.get(name), DATA[inputs], iters) == expected


@pytest.mark.parametrize(
    ("name", "values", "iters"),
    [("mean", [1.0, 0.0], 0), ("perplexity", [-1.0, -2.0], 0), ("mean", [1.0], 100),
     ("perplexity", [-1.0], 100), ("brier_score", [(0, [1.0])] * 3, 100), ("bypass", [None] * 3, 100),
     ("weighted_perplexity", [(-1.0, 2), (-2.0, 3)], 100)],
)  # fmt: skip
def test_not_available(name, values, iters):
    assert stderr_of(AGGREGATIONS.get(name), values, iters) == "N/A"


def test_flat_mean_uses_every_item():
    per_doc = Aggregation("per_instruction", lambda xs: 0.0, stderr="flat_mean")
    nested = [[True, False, True], [True], [False, False]]
    flat = [1, 0, 1, 1, 0, 0]
    assert stderr_of(per_doc, nested, 10) == stderr_of(AGGREGATIONS.get("mean"), flat, 10)


def naive_replicates(fn, values, iters):
    """lm-eval's loop, written out: chunk i draws from random.Random(i)."""
    chunk = min(1000, iters)
    out = []
    for i in range(iters // chunk):
        rng = random.Random(i)
        out.extend(fn(rng.choices(values, k=len(values))) for _ in range(chunk))
    return out


# (aggregation, values, iterations, replicates lm-eval computes). scikit-learn takes ~2 ms a
# call, so its cases use one short chunk.
CASES = [
    (agg.perplexity, [random.Random(1).uniform(-9, 0) for _ in range(37)], 2500, 2000),
    (agg.median, [random.Random(2).uniform(-1, 1) for _ in range(20)], 1200, 1000),
    (agg.median, [random.Random(3).randint(0, 5) for _ in range(21)], 1200, 1000),
    (agg.nanmean, [math.nan, 0.25, 0.5, math.nan, 1.0], 1200, 1000),
    (agg.f1, [(0, 0), (1, 1), (1, 0), (0, 1), (1, 1)], 120, 120),
    (agg.f1, [(0, 0), (0, 0), (1, 0)], 60, 60),  # replicates without positives: sklearn's 0.0
    (agg.matthews_corrcoef, [(2, 2), (0, 1), (1, 1), (0, 0), (2, 0)], 120, 120),
    (agg.matthews_corrcoef, [(1, 1), (1, 1), (0, 1)], 60, 60),  # degenerate replicates: 0.0
    (agg.mean, [0.5, 0.25, 1.0], 1200, 1000),  # no vectorised twin: called per replicate
]


@pytest.mark.parametrize(("fn", "values", "iters", "count"), CASES,
                         ids=lambda v: getattr(v, "__name__", None))  # fmt: skip
def test_vectorised_replicates_equal_lm_evals_loop(fn, values, iters, count):
    fast = bootstrap_replicates(fn, values, iters)
    slow = naive_replicates(fn, values, iters)
    assert len(fast) == len(slow) == count
    assert all((a == b) or (math.isnan(a) and math.isnan(b)) for a, b in zip(fast, slow))


def test_group_weighted_by_size_equals_lm_eval():
    value, stderr = group_aggregate([0.5, 0.7, 0.9], [10, 30, 60], [0.1, 0.05, 0.03], True)
    assert (value, stderr) == (0.8, 0.02540598192406216)


def test_group_unweighted_equals_lm_eval():
    value, stderr = group_aggregate([0.5, 0.7, 0.9], [10, 30, 60], [0.1, 0.05, 0.03], False)
    assert (value, stderr) == (0.7000000000000001, 0.038586123009300755)


@pytest.mark.parametrize("stderrs", [[0.1, "N/A"], [0.1, None], [0.1]])
def test_group_stderr_is_not_available_if_any_child_lacks_one(stderrs):
    value, stderr = group_aggregate([0.5, 0.7], [10, 30], stderrs, True)
    assert value == 0.65 and stderr == "N/A"


def test_equal_values_have_no_spread_even_where_their_mean_is_an_ulp_off():
    """The mean of 1,000 copies of log(0.3) is not log(0.3) in floats: the formula alone
    gives a standard error of ~1e-17, a spread no doc has."""
    values = [math.log(0.3)] * 1000
    assert sum(values) / len(values) != values[0]
    assert stderr_of(AGGREGATIONS.get("mean"), values, 100) == 0.0
