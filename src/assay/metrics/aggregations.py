"""The corpus aggregations lm-eval defines, with the stderr rule lm-eval applies to each.

Every function reproduces lm-eval 0.4.13 on the same per-sample values, including its
arithmetic (plain left-to-right sums), so task numbers match to the last digit.

This module's one job is how one metric's per-sample values become one number. Building a
task's or group's results entry from them is `results.summary`'s; running estimates while a
run_evals pipeline scores rows are `stats.online`'s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from assay.errors import DataError
from assay.metrics.base import Aggregation, register_aggregation

BYPASS_VALUE = 999
"""What the `bypass` aggregation reports (predict-only runs)."""


def mean(values: Sequence[Any]) -> float:
    """Arithmetic mean, summed left to right."""
    return sum(values) / len(values)


def median(values: Sequence[Any]) -> Any:
    """The upper median: sorted(values)[n // 2] (no averaging for even n)."""
    return sorted(values)[len(values) // 2]


def nanmean(values: Sequence[float]) -> float:
    """Mean ignoring NaNs; NaN when every value is NaN or there are none."""
    if len(values) == 0 or all(np.isnan(values)):
        return math.nan
    return float(np.nanmean(values))


def clipped_nanmean(values: Sequence[float]) -> float:
    """nanmean clipped to [0, 1]: HealthBench's overall score over per-example rubric scores,
    which may be negative (openai/simple-evals ``healthbench_eval._compute_clipped_stats``)."""
    value = nanmean(values)
    return value if math.isnan(value) else min(1.0, max(0.0, value))


def perplexity(values: Sequence[float]) -> float:
    """exp(-mean log-likelihood) over per-sample log-likelihoods."""
    return math.exp(-mean(values))


def weighted_mean(pairs: Sequence[tuple[float, float]]) -> float:
    """sum(a) / sum(b) over (a, b) pairs."""
    totals, weights = zip(*pairs)
    return sum(totals) / sum(weights)


def weighted_perplexity(pairs: Sequence[tuple[float, float]]) -> float:
    """exp(-sum(ll) / sum(units)) over (log-likelihood, word or byte count) pairs."""
    return math.exp(-weighted_mean(pairs))


def bits_per_byte(pairs: Sequence[tuple[float, float]]) -> float:
    """-sum(ll) / sum(bytes) / ln 2 over (log-likelihood, byte count) pairs."""
    return -weighted_mean(pairs) / math.log(2)


def f1(pairs: Sequence[tuple[Any, Any]]) -> float:
    """Binary F1 of (gold, prediction) pairs, positive label 1 (scikit-learn's f1_score)."""
    from sklearn.metrics import f1_score

    golds, preds = zip(*pairs)
    return float(np.max(f1_score(golds, preds)))


def matthews_corrcoef(pairs: Sequence[tuple[Any, Any]]) -> float:
    """Matthews correlation of (gold, prediction) pairs (scikit-learn)."""
    from sklearn.metrics import matthews_corrcoef as sklearn_mcc

    golds, preds = zip(*pairs)
    return float(sklearn_mcc(golds, preds))


def _is_collection(value: Any) -> bool:
    return isinstance(value, Iterable) and not isinstance(value, str)


def sacrebleu_inputs(pairs: Sequence[tuple[Any, Any]]) -> tuple[list[tuple[str, ...]], list[str]]:
    """(reference streams, hypotheses) for sacrebleu's corpus functions.

    Each pair is (reference or list of references, prediction or one-element list). sacrebleu
    wants one stream per reference position, so per-sample reference lists are transposed;
    like lm-eval, only the first sample decides whether references are lists, and samples with
    fewer references shorten every stream (zip semantics).
    """
    refs = [ref for ref, _ in pairs]
    preds = [pred for _, pred in pairs]
    if not _is_collection(refs[0]):
        refs = [[ref] for ref in refs]
    streams = list(zip(*refs))
    if _is_collection(preds[0]):
        if len(preds[0]) != 1:
            raise DataError(
                f"bleu/chrf/ter need one prediction per doc, got {preds[0]!r}; "
                "add a take_first filter"
            )
        preds = [pred[0] for pred in preds]
    return streams, preds


def bleu(pairs: Sequence[tuple[Any, Any]]) -> float:
    """sacrebleu corpus BLEU of (reference, prediction) pairs."""
    import sacrebleu

    streams, preds = sacrebleu_inputs(pairs)
    return sacrebleu.corpus_bleu(preds, streams).score


def chrf(pairs: Sequence[tuple[Any, Any]]) -> float:
    """sacrebleu corpus chrF (character 6-grams, no word n-grams, beta 2)."""
    import sacrebleu

    streams, preds = sacrebleu_inputs(pairs)
    return sacrebleu.corpus_chrf(preds, streams).score


def ter(pairs: Sequence[tuple[Any, Any]]) -> float:
    """sacrebleu corpus translation error rate (lower is better)."""
    import sacrebleu

    streams, preds = sacrebleu_inputs(pairs)
    return sacrebleu.corpus_ter(preds, streams).score


def brier_score(pairs: Sequence[tuple[int, Any]]) -> float:
    """Mean over docs of sum_c (p_c - onehot(gold)_c)^2 over (gold, choice probabilities)."""
    golds, probabilities = zip(*pairs)
    try:
        probs = np.array(probabilities, dtype=float)
    except ValueError:
        raise DataError(
            "brier_score needs the same number of choices in every doc; "
            "use acc for tasks whose docs have different numbers of choices"
        ) from None
    onehot = np.eye(probs.shape[1])[list(golds)]
    return float(np.mean(np.sum((probs - onehot) ** 2, axis=1)))


def bypass(values: Sequence[Any]) -> int:
    """The placeholder 999 (predict-only runs compute no metric)."""
    return BYPASS_VALUE


for _aggregation in [
    Aggregation("mean", mean, stderr="mean"),
    Aggregation("median", median, stderr="bootstrap"),
    Aggregation("nanmean", nanmean, stderr="bootstrap"),
    # Judge metrics: nanmean with the closed-form stderr over the valued items (the variance
    # of a mean of per-item means; docs/judges.md, "Reading a judged number's uncertainty").
    Aggregation("judge_mean", nanmean, stderr="nan_mean"),
    # HealthBench reports the bootstrap standard deviation of the clipped mean.
    Aggregation("clipped_nanmean", clipped_nanmean, stderr="bootstrap"),
    Aggregation("perplexity", perplexity, stderr="bootstrap"),
    Aggregation("weighted_perplexity", weighted_perplexity, stderr="none"),
    Aggregation("bits_per_byte", bits_per_byte, stderr="none"),
    Aggregation("f1", f1, stderr="bootstrap"),
    Aggregation("matthews_corrcoef", matthews_corrcoef, stderr="bootstrap"),
    Aggregation("bleu", bleu, stderr="bootstrap", bootstrap_cap=100),
    Aggregation("chrf", chrf, stderr="bootstrap", bootstrap_cap=100),
    Aggregation("ter", ter, stderr="bootstrap", bootstrap_cap=100),
    Aggregation("brier_score", brier_score, stderr="none"),
    Aggregation("bypass", bypass, stderr="none"),
]:
    register_aggregation(_aggregation)
