"""perplexity, word_perplexity, byte_perplexity and bits_per_byte per-sample values.

Expected (log-likelihood, count) pairs were produced once by calling lm-eval 0.4.13's
ConfigurableTask.process_results (loglikelihood_rolling, target = the same text) and frozen.
"""

from __future__ import annotations

import pytest

from assay.doc import Doc, OutputType
from assay.errors import ConfigError, DataError
from assay.metrics import get_metric
from assay.metrics.base import SampleInput
from assay.requests.types import LoglikelihoodResult, RollingResult

ROLLING = [
    ("simple", "Hello world, this is text.", 5, 26),
    ("edge_whitespace_adds_empty_words", "  leading and trailing  \n", 5, 25),
    ("unicode", "naïve café — ünïcödé\ttabs", 5, 33),
]


@pytest.mark.parametrize(
    ("text", "words", "n_bytes"), [c[1:] for c in ROLLING], ids=[c[0] for c in ROLLING]
)
def test_rolling_metrics_match_lm_eval(text, words, n_bytes):
    sample = SampleInput(Doc(text), OutputType.LOGLIKELIHOOD_ROLLING, RollingResult(-42.5, 9))
    assert get_metric("word_perplexity").sample_fn(sample) == (-42.5, words)
    assert get_metric("byte_perplexity").sample_fn(sample) == (-42.5, n_bytes)
    assert get_metric("bits_per_byte").sample_fn(sample) == (-42.5, n_bytes)


def test_rolling_metric_aggregations():
    assert get_metric("word_perplexity").aggregation == "weighted_perplexity"
    assert get_metric("byte_perplexity").aggregation == "weighted_perplexity"
    assert get_metric("bits_per_byte").aggregation == "bits_per_byte"
    for name in ["word_perplexity", "byte_perplexity", "bits_per_byte", "perplexity"]:
        assert get_metric(name).higher_is_better is False


def test_perplexity_of_a_loglikelihood_task_is_the_loglikelihood():
    sample = SampleInput(
        Doc("ctx", choices=[" c"]), OutputType.LOGLIKELIHOOD, LoglikelihoodResult(-1.5, True)
    )
    assert get_metric("perplexity").sample_fn(sample) == -1.5
    assert get_metric("perplexity").aggregation == "perplexity"
    assert get_metric("perplexity").output_types == {OutputType.LOGLIKELIHOOD}


def test_text_response_is_a_data_error():
    sample = SampleInput(Doc("t"), OutputType.LOGLIKELIHOOD_ROLLING, "oops")
    with pytest.raises(DataError, match="loglikelihood result"):
        get_metric("bits_per_byte").sample_fn(sample)


def test_unknown_options_are_refused():
    with pytest.raises(ConfigError, match="'word_perplexity'"):
        get_metric("word_perplexity", base=2)
