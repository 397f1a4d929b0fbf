"""Perplexity metrics of loglikelihood and loglikelihood_rolling tasks, as lm-eval scores them.

Per-sample values are what lm-eval writes to its samples files: the log-likelihood for
`perplexity`, and (log-likelihood, word or byte count) pairs for the rolling metrics, which
are aggregated as ratios of sums over the corpus.
"""

from __future__ import annotations

import re
from typing import Any

from assay.doc import OutputType
from assay.errors import DataError
from assay.metrics._options import reject_unknown
from assay.metrics.base import Metric, SampleInput, register_metric
from assay.requests.types import LoglikelihoodResult, RollingResult

ROLLING = frozenset({OutputType.LOGLIKELIHOOD_ROLLING})
_WHITESPACE_RUN = re.compile(r"\s+")


def count_words(text: str) -> int:
    """Words as lm-eval counts them: the pieces of `re.split(r"\\s+", text)`, so leading or
    trailing whitespace adds an empty piece."""
    return len(_WHITESPACE_RUN.split(text))


def count_bytes(text: str) -> int:
    """UTF-8 length of `text`."""
    return len(text.encode("utf-8"))


def _logprob(sample: SampleInput) -> float:
    response = sample.response
    if isinstance(response, LoglikelihoodResult | RollingResult):
        return response.logprob
    raise DataError(
        f"doc {sample.doc.id!r} of task {sample.doc.task_name!r}: a perplexity metric needs a "
        f"loglikelihood result, got {type(response).__name__}"
    )


def _scored_text(sample: SampleInput) -> str:
    """The text a rolling task scored.

    lm-eval counts words and bytes of doc_to_target(doc), the text it scores; an assay rolling
    task scores `doc.query`, so that is what is counted.
    """
    return sample.doc.query


@register_metric("perplexity")
def perplexity(**options: Any) -> Metric:
    """exp(-mean log-likelihood) of a loglikelihood task's continuations; per sample the
    log-likelihood. Bootstrap stderr."""
    reject_unknown("perplexity", options)
    return Metric(
        name="perplexity",
        sample_fn=_logprob,
        aggregation="perplexity",
        higher_is_better=False,
        output_types=frozenset({OutputType.LOGLIKELIHOOD}),
    )


def _rolling_metric(name: str, aggregation: str, count: Any, options: dict[str, Any]) -> Metric:
    reject_unknown(name, options)
    return Metric(
        name=name,
        sample_fn=lambda sample: (_logprob(sample), count(_scored_text(sample))),
        aggregation=aggregation,
        higher_is_better=False,
        output_types=ROLLING,
    )


@register_metric("word_perplexity", output_type=OutputType.LOGLIKELIHOOD_ROLLING)
def word_perplexity(**options: Any) -> Metric:
    """exp(-sum ll / sum words) over the corpus; per sample (ll, words of doc.query)."""
    return _rolling_metric("word_perplexity", "weighted_perplexity", count_words, options)


@register_metric("byte_perplexity", output_type=OutputType.LOGLIKELIHOOD_ROLLING)
def byte_perplexity(**options: Any) -> Metric:
    """exp(-sum ll / sum bytes) over the corpus; per sample (ll, UTF-8 bytes of doc.query)."""
    return _rolling_metric("byte_perplexity", "weighted_perplexity", count_bytes, options)


@register_metric("bits_per_byte", output_type=OutputType.LOGLIKELIHOOD_ROLLING)
def bits_per_byte(**options: Any) -> Metric:
    """-sum ll / sum bytes / ln 2 over the corpus; per sample (ll, UTF-8 bytes of doc.query)."""
    return _rolling_metric("bits_per_byte", "bits_per_byte", count_bytes, options)
