"""Metrics of generated text: exact_match, bleu/chrf/ter pass-through, rouge, bypass.

The exact_match and bleu/chrf/ter expectations were produced once by calling lm-eval 0.4.13's
ConfigurableTask.process_results (generate_until, stand-in task object with the same target,
filtered response and metric kwargs) and frozen here.
"""

from __future__ import annotations

import math

import pytest

from assay.doc import Doc, OutputType
from assay.errors import ConfigError, DataError
from assay.metrics import get_metric
from assay.metrics.base import SampleInput
from assay.requests.types import LoglikelihoodResult


def gen_sample(golds: str | list[str], response) -> SampleInput:
    if isinstance(golds, list):
        doc = Doc("Q:", choices=golds, gold_index=list(range(len(golds))), id="3", task_name="t")
    else:
        doc = Doc("Q:", choices=[golds], gold_index=0, id="3", task_name="t")
    return SampleInput(doc, OutputType.GENERATE_UNTIL, response)


EXACT_MATCH = [
    ("exact", "42", "42", {}, 1.0),
    ("whitespace_is_never_stripped", "42", " 42", {}, 0.0),
    ("case_matters_by_default", "Paris", "paris", {}, 0.0),
    ("ignore_case", "Paris", "paris", {"ignore_case": True}, 1.0),
    ("ignore_punctuation", "Hello, world!", "Hello world", {"ignore_punctuation": True}, 1.0),
    ("ignore_numbers", "abc123", "abc", {"ignore_numbers": True}, 1.0),
    ("regexes_to_ignore", "The answer is 42", "42", {"regexes_to_ignore": ["The answer is "]}, 1.0),
    ("regexes_before_case", "ANSWER: Yes", "yes", {"regexes_to_ignore": ["ANSWER: "], "ignore_case": True}, 1.0),
    ("only_ascii_punctuation", "«yes»", "yes", {"ignore_punctuation": True}, 0.0),
    ("several_golds_any", ["cat", "dog"], "dog", {}, 1.0),
    ("several_golds_none", ["cat", "dog"], "bird", {}, 0.0),
    ("several_golds_ignore_case", ["Cat", "Dog"], "dog", {"ignore_case": True}, 1.0),
    ("several_responses_fraction", "a", ["a", "b", "a", "c"], {}, 0.5),
]  # fmt: skip


@pytest.mark.parametrize(("golds", "response", "kwargs", "expected"), [c[1:] for c in EXACT_MATCH],
                         ids=[c[0] for c in EXACT_MATCH])  # fmt: skip
def test_exact_match_matches_lm_eval(golds, response, kwargs, expected):
    value = get_metric("exact_match", **kwargs).sample_fn(gen_sample(golds, response))
    assert value == expected and isinstance(value, float)


def test_exact_match_on_multiple_choice_is_greedy_gold():
    doc = Doc("Q:", choices=["a", "b"], gold_index=1)
    response = [LoglikelihoodResult(-1.0, False), LoglikelihoodResult(-2.0, True)]
    sample = SampleInput(doc, OutputType.MULTIPLE_CHOICE, response)
    # The generation options do not apply to multiple choice (lm-eval ignores them too).
    assert get_metric("exact_match", ignore_case=True).sample_fn(sample) == 1


def test_exact_match_compares_values_after_a_map_filter():
    # lm-eval converts the gold to the response's type: "1" == 1 after map {"yes": 1}.
    metric = get_metric("exact_match")
    assert metric.sample_fn(gen_sample("1", 1)) == 1.0
    assert metric.sample_fn(gen_sample("0", 1)) == 0.0
    assert metric.sample_fn(gen_sample("1", None)) == 0.0
    with pytest.raises(DataError, match="cannot compare"):
        metric.sample_fn(gen_sample("one", 1))


def test_exact_match_with_several_golds_and_responses_counts_any_pair():
    metric = get_metric("exact_match")
    assert metric.sample_fn(gen_sample(["x", "y"], ["z", "y"])) == 1.0
    assert metric.sample_fn(gen_sample(["x", "y"], ["z", "w"])) == 0.0


def test_exact_match_of_no_responses_is_nan():
    assert math.isnan(get_metric("exact_match").sample_fn(gen_sample("a", [])))


def test_exact_match_records_its_options():
    metric = get_metric("exact_match", ignore_case=True, regexes_to_ignore=[","])
    assert metric.kwargs == {"ignore_case": True, "regexes_to_ignore": [","]}
    assert metric.aggregation == "mean" and metric.higher_is_better


BAD_OPTIONS = [
    ({"ignore_case": "false"}, "ignore_case must be true or false"),
    ({"regexes_to_ignore": "(unclosed"}, "must be a list"),
    ({"regexes_to_ignore": ["(unclosed"]}, "not a valid regular expression"),
    ({"ignore_whitespace": True}, "does not accept option"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_OPTIONS)
def test_exact_match_bad_options(kwargs, message):
    with pytest.raises(ConfigError, match=message) as info:
        get_metric("exact_match", **kwargs)
    assert "'exact_match'" in str(info.value)


@pytest.mark.parametrize("name", ["bleu", "chrf", "ter"])
def test_corpus_metrics_pass_reference_and_prediction(name):
    metric = get_metric(name)
    assert metric.sample_fn(gen_sample("the cat", "a cat")) == ["the cat", "a cat"]
    # Several golds become one reference list (sacrebleu gets one stream per gold).
    assert metric.sample_fn(gen_sample(["x", "y"], "z")) == [["x", "y"], "z"]
    assert metric.aggregation == name
    assert metric.higher_is_better is (name != "ter")


ROUGE = [
    ("identical", "rougeL", "the cat sat", "the cat sat", 1.0),
    ("disjoint", "rougeL", "the cat sat", "dogs run", 0.0),
    # 2 shared unigrams of 3 and 4: P = 2/4, R = 2/3, F = 4/7.
    ("unigrams", "rouge1", "the cat sat", "a cat sat down", 4 / 7),
    # one shared bigram ("cat sat") of 2 and 3.
    ("bigrams", "rouge2", "the cat sat", "a cat sat down", 2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2)),
]


@pytest.mark.parametrize(("rouge_type", "gold", "response", "expected"), [c[1:] for c in ROUGE],
                         ids=[c[0] for c in ROUGE])  # fmt: skip
def test_rouge_f_measure(rouge_type, gold, response, expected):
    metric = get_metric("rouge", rouge_type=rouge_type)
    assert metric.sample_fn(gen_sample(gold, response)) == pytest.approx(expected)


def test_rouge_takes_the_best_gold_and_defaults_to_rouge_l():
    metric = get_metric("rouge")
    assert metric.kwargs == {"rouge_type": "rougeL", "use_stemmer": False}
    assert metric.sample_fn(gen_sample(["dogs run", "the cat sat"], "the cat sat")) == 1.0


def test_rouge_lsum_splits_sentences_on_spaced_periods():
    metric = get_metric("rouge", rouge_type="rougeLsum")
    assert metric.sample_fn(gen_sample("a b . c d", "c d . a b")) == 1.0
    assert get_metric("rouge").sample_fn(gen_sample("a b . c d", "c d . a b")) < 1.0


def test_rouge_bad_type():
    with pytest.raises(ConfigError, match="rouge_type must be one of"):
        get_metric("rouge", rouge_type="rouge3")


def test_bypass():
    metric = get_metric("bypass")
    assert metric.sample_fn(gen_sample("a", "b")) is None
    assert metric.aggregation == "bypass" and not metric.output_types
