"""Metrics of multiple-choice (and single loglikelihood) tasks, as lm-eval scores them.

For a multiple_choice doc the response is one LoglikelihoodResult per entry of `doc.choices`;
the prediction is the choice with the highest log-likelihood (first one on ties). The gold is
`doc.gold_index`; a list of golds means any of them is correct. A gold index past the last
choice counts as wrong for every metric (lm-eval logs a warning and scores it -100).

Per-sample values are the ones lm-eval writes to its samples files: acc / acc_norm /
acc_bytes / acc_mutual_info are 1.0 or 0.0; exact_match is 1 or 0; f1 and mcc are
(gold, prediction) pairs and brier_score a (gold, choice probabilities) pair for their corpus
aggregations. For a loglikelihood task (one continuation per doc), acc is 1 or 0: whether
the continuation is the greedy one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from assay.doc import OutputType
from assay.errors import ConfigError, DataError
from assay.metrics._options import reject_unknown
from assay.metrics.base import Metric, SampleInput, register_metric
from assay.requests.types import LoglikelihoodResult

logger = logging.getLogger(__name__)

OUT_OF_RANGE = -100
"""lm-eval's marker for a gold index with no matching choice."""

MC = frozenset({OutputType.MULTIPLE_CHOICE})


@dataclass(frozen=True, slots=True)
class ChoiceOutcome:
    """What a multiple-choice doc's log-likelihoods say, computed once per sample."""

    lls: np.ndarray
    """log P(choice | context), one per choice."""
    is_greedy: tuple[bool, ...]
    gold: int | list[int]
    """Gold index, or indices; OUT_OF_RANGE for an index past the last choice."""

    def hit(self, prediction: Any) -> float:
        """1.0 if `prediction` is (one of) the gold index(es), else 0.0."""
        correct = (
            prediction in self.gold if isinstance(self.gold, list) else prediction == self.gold
        )
        return 1.0 if correct else 0.0

    def argmax_per(self, lengths: np.ndarray) -> int:
        """The best choice by log-likelihood per unit of `lengths`."""
        # An empty choice divides by zero; numpy's inf/nan then decide, as in lm-eval.
        with np.errstate(divide="ignore", invalid="ignore"):
            return int(np.argmax(self.lls / lengths))


def choice_outcome(sample: SampleInput) -> ChoiceOutcome:
    """Log-likelihoods, greedy flags and the range-checked gold of a multiple-choice sample
    (computed once per sample, however many of its metrics ask)."""
    outcome: ChoiceOutcome | None = sample.derived.get("choice_outcome")
    if outcome is None:
        outcome = sample.derived["choice_outcome"] = _choice_outcome(sample)
    return outcome


def _choice_outcome(sample: SampleInput) -> ChoiceOutcome:
    doc, results = sample.doc, sample.response
    if not isinstance(results, Sequence) or len(results) != len(doc.choices):
        count = len(results) if isinstance(results, Sequence) else type(results).__name__
        raise DataError(
            f"doc {doc.id!r} of task {doc.task_name!r}: a multiple_choice doc needs one "
            f"loglikelihood result per choice ({len(doc.choices)}), got {count}"
        )
    lls = np.array([_result(r).logprob for r in results], dtype=np.float64)
    greedy = tuple(bool(_result(r).is_greedy) for r in results)
    n = len(doc.choices)
    gold_index = doc.gold_index
    if isinstance(gold_index, list):
        golds = [i if i < n else OUT_OF_RANGE for i in gold_index]
        gold: int | list[int] = golds
        out_of_range = OUT_OF_RANGE in golds
    else:
        gold = gold_index if gold_index < n else OUT_OF_RANGE
        out_of_range = gold == OUT_OF_RANGE
    if out_of_range:
        logger.warning(
            "doc %r of task %r: gold index %r has no choice among %d; it never counts as correct",
            doc.id,
            doc.task_name,
            gold_index,
            n,
        )
    return ChoiceOutcome(lls=lls, is_greedy=greedy, gold=gold)


def _result(value: Any) -> LoglikelihoodResult:
    if not isinstance(value, LoglikelihoodResult):
        raise DataError(f"expected a LoglikelihoodResult response, got {type(value).__name__}")
    return value


def _lengths(choices: Sequence[str], *, utf8: bool) -> np.ndarray:
    sizes = [len(c.encode("utf-8")) if utf8 else len(c) for c in choices]
    return np.array(sizes, dtype=np.float64)


def softmax(values: np.ndarray) -> np.ndarray:
    """exp(x - max) normalised to sum 1."""
    exps = np.exp(values - np.max(values))
    return exps / exps.sum()


def greedy_match(sample: SampleInput) -> int:
    """Multiple-choice exact_match: 1 if the gold continuation is the greedy one."""
    outcome = choice_outcome(sample)
    if isinstance(outcome.gold, list):
        return int(any(outcome.is_greedy[i] for i in outcome.gold if i != OUT_OF_RANGE))
    return int(outcome.is_greedy[outcome.gold]) if outcome.gold != OUT_OF_RANGE else 0


def _accuracy(sample: SampleInput) -> float | int:
    if sample.output_type is OutputType.LOGLIKELIHOOD:
        return int(_result(sample.response).is_greedy)
    outcome = choice_outcome(sample)
    return outcome.hit(int(np.argmax(outcome.lls)))


def _accuracy_norm(sample: SampleInput) -> float:
    outcome = choice_outcome(sample)
    return outcome.hit(outcome.argmax_per(_lengths(sample.doc.choices, utf8=False)))


def _accuracy_bytes(sample: SampleInput) -> float:
    outcome = choice_outcome(sample)
    return outcome.hit(outcome.argmax_per(_lengths(sample.doc.choices, utf8=True)))


def _accuracy_mutual_info(sample: SampleInput) -> float:
    outcome = choice_outcome(sample)
    unconditioned = sample.unconditioned
    if unconditioned is None or len(unconditioned) != len(outcome.lls):
        raise DataError(
            f"doc {sample.doc.id!r} of task {sample.doc.task_name!r}: acc_mutual_info needs "
            f"one unconditioned loglikelihood per choice, got {unconditioned!r}"
        )
    pmi = [conditioned - free for conditioned, free in zip(outcome.lls.tolist(), unconditioned)]
    return outcome.hit(int(np.argmax(pmi)))


def _gold_and_prediction(sample: SampleInput) -> tuple[int | list[int], int]:
    outcome = choice_outcome(sample)
    return outcome.gold, int(np.argmax(outcome.lls))


def _gold_and_probabilities(sample: SampleInput) -> tuple[int | list[int], np.ndarray]:
    outcome = choice_outcome(sample)
    return outcome.gold, softmax(outcome.lls)


def _mc_metric(
    name: str,
    sample_fn: Callable[[SampleInput], Any],
    aggregation: str,
    options: dict[str, Any],
    *,
    higher_is_better: bool = True,
    needs_unconditioned: bool = False,
) -> Metric:
    reject_unknown(name, options)
    return Metric(
        name=name,
        sample_fn=sample_fn,
        aggregation=aggregation,
        higher_is_better=higher_is_better,
        output_types=MC,
        needs_unconditioned=needs_unconditioned,
    )


@register_metric("acc", output_type=OutputType.MULTIPLE_CHOICE)
def acc(**options: Any) -> Metric:
    """Accuracy: the most likely choice is gold (multiple_choice, 1.0/0.0), or the
    continuation is the greedy one (loglikelihood, 1/0). Mean, closed-form stderr."""
    reject_unknown("acc", options)

    def sample_fn(sample: SampleInput) -> float | int:
        if sample.output_type not in (OutputType.MULTIPLE_CHOICE, OutputType.LOGLIKELIHOOD):
            raise ConfigError(
                f"metric 'acc' scores multiple_choice or loglikelihood tasks, not "
                f"{sample.output_type.value}; use exact_match for generated answers"
            )
        return _accuracy(sample)

    return Metric(
        name="acc",
        sample_fn=sample_fn,
        aggregation="mean",
        higher_is_better=True,
        output_types=frozenset({OutputType.MULTIPLE_CHOICE, OutputType.LOGLIKELIHOOD}),
    )


@register_metric("acc_norm", output_type=OutputType.MULTIPLE_CHOICE)
def acc_norm(**options: Any) -> Metric:
    """Accuracy of the best choice by log-likelihood per character of the choice text."""
    return _mc_metric("acc_norm", _accuracy_norm, "mean", options)


@register_metric("acc_bytes", output_type=OutputType.MULTIPLE_CHOICE)
def acc_bytes(**options: Any) -> Metric:
    """Accuracy of the best choice by log-likelihood per UTF-8 byte of the choice text."""
    return _mc_metric("acc_bytes", _accuracy_bytes, "mean", options)


@register_metric("acc_mutual_info", output_type=OutputType.MULTIPLE_CHOICE)
def acc_mutual_info(**options: Any) -> Metric:
    """Accuracy of the best choice by log P(choice | context) - log P(choice | "")."""
    return _mc_metric(
        "acc_mutual_info", _accuracy_mutual_info, "mean", options, needs_unconditioned=True
    )


@register_metric("brier_score", output_type=OutputType.MULTIPLE_CHOICE)
def brier_score(**options: Any) -> Metric:
    """Brier score of the softmax over choice log-likelihoods (lower is better)."""
    return _mc_metric(
        "brier_score", _gold_and_probabilities, "brier_score", options, higher_is_better=False
    )


@register_metric("f1", output_type=OutputType.MULTIPLE_CHOICE)
def f1(**options: Any) -> Metric:
    """Binary F1 of (gold, predicted choice) over the corpus; bootstrap stderr."""
    return _mc_metric("f1", _gold_and_prediction, "f1", options)


@register_metric("mcc", output_type=OutputType.MULTIPLE_CHOICE)
def mcc(**options: Any) -> Metric:
    """Matthews correlation of (gold, predicted choice) over the corpus; bootstrap stderr."""
    return _mc_metric("mcc", _gold_and_prediction, "matthews_corrcoef", options)
