"""Multiple-choice and loglikelihood metrics: acc, acc_norm, acc_bytes, acc_mutual_info,
exact_match (multiple choice), f1, mcc, brier_score.

Expected per-sample values were produced once by calling lm-eval 0.4.13's
ConfigurableTask.process_results (on a stand-in task object with the same choices, gold and
(loglikelihood, is_greedy) results) and frozen here.
"""

from __future__ import annotations

import numpy as np
import pytest

from assay.doc import Doc, OutputType
from assay.errors import ConfigError, DataError
from assay.metrics import get_metric
from assay.metrics.base import SampleInput
from assay.requests.types import LoglikelihoodResult


def mc_sample(choices, gold, results, unconditioned=None) -> SampleInput:
    doc = Doc(query="Q:", choices=choices, gold_index=gold, id="7", task_name="t")
    response = [LoglikelihoodResult(ll, greedy) for ll, greedy in results]
    return SampleInput(doc, OutputType.MULTIPLE_CHOICE, response, unconditioned)


# name: (choices, gold, results, unconditioned), then lm-eval's values.
CASES = {
    "plain": ((["Paris", "London", "Rome"], 0, [(-1.2, True), (-2.5, False), (-0.9, False)], [-3.0, -2.0, -1.0]),
              dict(acc=0.0, acc_norm=0.0, acc_bytes=0.0, exact_match=1, acc_mutual_info=1.0, f1=(0, 2),
                   brier=[0.3813314461115678, 0.1039249427490385, 0.5147436111393937])),
    "norm_flips": ((["a", "much longer answer"], 1, [(-2.0, False), (-6.0, True)], [-1.0, -9.0]),
                   dict(acc=0.0, acc_norm=1.0, acc_bytes=1.0, exact_match=1, acc_mutual_info=1.0, f1=(1, 0),
                        brier=[0.9820137900379085, 0.017986209962091555])),
    "bytes_differ_from_chars": ((["é", "ab"], 0, [(-2.0, True), (-3.0, False)], [-1.0, -1.0]),
                                dict(acc=1.0, acc_norm=0.0, acc_bytes=1.0, exact_match=1, acc_mutual_info=1.0,
                                     f1=(0, 0), brier=[0.7310585786300049, 0.2689414213699951])),
    "tie_goes_to_first": ((["x", "y", "z"], 2, [(-1.0, False), (-1.0, False), (-2.0, True)], [-1.0, -1.0, -1.0]),
                          dict(acc=0.0, acc_norm=0.0, acc_bytes=0.0, exact_match=1, acc_mutual_info=0.0,
                               f1=(2, 0), brier=[0.4223187982515182, 0.4223187982515182, 0.15536240349696362])),
    "several_golds": ((["one", "two", "three"], [1, 2], [(-3.0, False), (-1.0, False), (-2.0, True)], None),
                      dict(acc=1.0, acc_norm=1.0, acc_bytes=1.0, exact_match=1, f1=([1, 2], 1),
                           brier=[0.09003057317038046, 0.6652409557748218, 0.24472847105479764])),
    "gold_out_of_range": ((["one", "two"], 5, [(-1.0, True), (-2.0, False)], [-1.0, -1.0]),
                          dict(acc=0.0, acc_norm=0.0, acc_bytes=0.0, exact_match=0, acc_mutual_info=0.0,
                               f1=(-100, 0), brier=[0.7310585786300049, 0.2689414213699951])),
    "one_gold_out_of_range": ((["one", "two"], [0, 7], [(-3.0, True), (-1.0, False)], None),
                              dict(acc=0.0, acc_norm=0.0, acc_bytes=0.0, exact_match=1, f1=([0, -100], 1),
                                   brier=[0.11920292202211755, 0.8807970779778823])),
}  # fmt: skip


# lm-eval cannot score acc_mutual_info with several golds, so those cases have no value for it.
SCALAR_CASES = [
    (case, metric)
    for case, (_, expected) in CASES.items()
    for metric in ["acc", "acc_norm", "acc_bytes", "exact_match", "acc_mutual_info"]
    if metric in expected
]


@pytest.mark.parametrize(("case", "metric"), SCALAR_CASES)
def test_per_sample_value_matches_lm_eval(case, metric):
    inputs, expected = CASES[case]
    value = get_metric(metric).sample_fn(mc_sample(*inputs))
    assert value == expected[metric]
    assert type(value) is type(expected[metric])  # 1.0/0.0 floats, exact_match 1/0 ints


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
@pytest.mark.parametrize("metric", ["f1", "mcc"])
def test_pair_metrics_pass_gold_and_prediction(case, metric):
    inputs, expected = CASES[case]
    assert get_metric(metric).sample_fn(mc_sample(*inputs)) == expected["f1"]


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_brier_score_passes_gold_and_softmax(case):
    inputs, expected = CASES[case]
    gold, probabilities = get_metric("brier_score").sample_fn(mc_sample(*inputs))
    assert gold == expected["f1"][0]
    assert isinstance(probabilities, np.ndarray)
    np.testing.assert_allclose(probabilities, expected["brier"], rtol=0, atol=1e-15)


@pytest.mark.parametrize(("greedy", "expected"), [(True, 1), (False, 0)])
def test_acc_of_a_loglikelihood_task_is_is_greedy(greedy, expected):
    # lm-eval writes an int here, unlike the 1.0/0.0 of multiple choice.
    sample = SampleInput(Doc("ctx", choices=[" cont"]), OutputType.LOGLIKELIHOOD,
                         LoglikelihoodResult(-1.5, greedy))  # fmt: skip
    value = get_metric("acc").sample_fn(sample)
    assert value == expected and type(value) is int


def test_metric_descriptions():
    assert get_metric("acc").output_types == {OutputType.MULTIPLE_CHOICE, OutputType.LOGLIKELIHOOD}
    assert get_metric("acc_norm").output_types == {OutputType.MULTIPLE_CHOICE}
    assert get_metric("acc_mutual_info").needs_unconditioned
    assert not get_metric("acc").needs_unconditioned
    assert get_metric("brier_score").higher_is_better is False
    assert get_metric("brier_score").aggregation == "brier_score"
    assert get_metric("mcc").aggregation == "matthews_corrcoef"
    assert get_metric("f1").aggregation == "f1"
    assert get_metric("exact_match").output_types >= {OutputType.MULTIPLE_CHOICE}


@pytest.mark.parametrize(
    "metric", ["acc", "acc_norm", "acc_bytes", "acc_mutual_info", "brier_score", "f1", "mcc"]
)
def test_unknown_options_are_refused(metric):
    with pytest.raises(ConfigError, match=f"metric '{metric}'.*'foo'"):
        get_metric(metric, foo=1)


def test_response_count_must_match_choices():
    sample = mc_sample(["a", "b", "c"], 0, [(-1.0, True), (-2.0, False)])
    with pytest.raises(DataError, match="one loglikelihood result per choice"):
        get_metric("acc").sample_fn(sample)


def test_mutual_info_needs_unconditioned_loglikelihoods():
    sample = mc_sample(["a", "b"], 0, [(-1.0, True), (-2.0, False)], unconditioned=None)
    with pytest.raises(DataError, match="unconditioned"):
        get_metric("acc_mutual_info").sample_fn(sample)


def test_acc_refuses_generated_text():
    sample = SampleInput(Doc("q", choices=["a"]), OutputType.GENERATE_UNTIL, "a")
    with pytest.raises(ConfigError, match="exact_match"):
        get_metric("acc").sample_fn(sample)


def test_mutual_info_with_several_golds_counts_any():
    # lm-eval fails on this case; assay scores it like acc does.
    sample = mc_sample(
        ["a", "b", "c"], [0, 2], [(-1.0, True), (-2.0, False), (-3.0, False)], [-1.0, -2.0, -5.0]
    )
    assert get_metric("acc_mutual_info").sample_fn(sample) == 1.0  # PMI picks "c" (+2)
    sample = mc_sample(
        ["a", "b", "c"], [1], [(-1.0, True), (-2.0, False), (-3.0, False)], [-1.0, -2.0, -5.0]
    )
    assert get_metric("acc_mutual_info").sample_fn(sample) == 0.0
