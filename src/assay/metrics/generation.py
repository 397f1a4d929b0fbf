"""Metrics of generated text (generate_until tasks), as lm-eval scores them.

The golds are `doc.get_golds()`. A doc whose `gold_index` is a list has several acceptable
answers and scores 1.0 when any of them matches. The response is normally one string (after
a take_first filter); when a filter keeps several, exact_match scores the fraction of them that
match the gold, as lm-eval's array comparison does.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Sequence
from typing import Any

from assay.doc import Doc, OutputType
from assay.errors import ConfigError, DataError
from assay.metrics._options import check_flag, compile_patterns, reject_unknown
from assay.metrics.base import Metric, SampleInput, register_metric
from assay.metrics.choice import greedy_match

GENERATIVE = frozenset({OutputType.GENERATE_UNTIL})
_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)
_NO_DIGITS = str.maketrans("", "", string.digits)


def _has_several_golds(doc: Doc) -> bool:
    return doc.shared_continuation is None and isinstance(doc.gold_index, list)


class _Normaliser:
    """exact_match's text transforms, in lm-eval's order: ignored regexes (removed), case,
    ASCII punctuation, digits. Whitespace is never stripped."""

    def __init__(
        self,
        ignored: list[re.Pattern[str]],
        ignore_case: bool,
        ignore_punctuation: bool,
        ignore_numbers: bool,
    ) -> None:
        self.ignored = ignored
        self.ignore_case = ignore_case
        self.ignore_punctuation = ignore_punctuation
        self.ignore_numbers = ignore_numbers

    @property
    def active(self) -> bool:
        return (
            bool(self.ignored) or self.ignore_case or self.ignore_punctuation or self.ignore_numbers
        )

    def __call__(self, text: str) -> str:
        for pattern in self.ignored:
            text = pattern.sub("", text)
        if self.ignore_case:
            text = text.lower()
        if self.ignore_punctuation:
            text = text.translate(_NO_PUNCTUATION)
        if self.ignore_numbers:
            text = text.translate(_NO_DIGITS)
        return text


def _generated_match(sample: SampleInput, normalise: _Normaliser) -> float:
    doc, response = sample.doc, sample.response
    golds = doc.get_golds()
    if isinstance(response, str):
        candidates = [response]
    elif isinstance(response, list) and all(isinstance(r, str) for r in response):
        candidates = response
    else:
        return _non_text_match(sample, golds, normalise)
    golds = [normalise(gold) for gold in golds]
    candidates = [normalise(candidate) for candidate in candidates]
    if _has_several_golds(doc):
        # lm-eval compares several responses with several golds by array broadcasting,
        # which pairs them positionally or fails; assay counts any (response, gold) match.
        return 1.0 if any(c == g for c in candidates for g in golds) else 0.0
    if not candidates:
        return math.nan  # the mean of no comparisons, as numpy reports it
    return sum(1.0 for c in candidates if c == golds[0]) / len(candidates)


def _non_text_match(sample: SampleInput, golds: list[str], normalise: _Normaliser) -> float:
    """A filter such as `map` turned the response into another type (e.g. int): lm-eval
    converts the gold to that type and compares values."""
    response, doc = sample.response, sample.doc
    if normalise.active:
        raise DataError(
            f"doc {doc.id!r} of task {doc.task_name!r}: exact_match options (ignore_case, "
            f"regexes_to_ignore, ...) need a text response, got {type(response).__name__}"
        )
    if response is None:
        return 0.0
    try:
        converted = [type(response)(gold) for gold in golds]
    except (TypeError, ValueError):
        raise DataError(
            f"doc {doc.id!r} of task {doc.task_name!r}: cannot compare the "
            f"{type(response).__name__} response {response!r} with gold {golds!r}; make the "
            "filters produce text, or golds of the response's type"
        ) from None
    return 1.0 if any(response == gold for gold in converted) else 0.0


@register_metric("exact_match", output_type=OutputType.GENERATE_UNTIL)
def exact_match(
    *,
    regexes_to_ignore: Sequence[str] | None = None,
    ignore_case: bool = False,
    ignore_punctuation: bool = False,
    ignore_numbers: bool = False,
    **unknown: Any,
) -> Metric:
    """Exact match, mean-aggregated with a closed-form stderr.

    generate_until: 1.0 when the response equals a gold after the transforms (regexes removed,
    then lower-cased, then ASCII punctuation and digits removed), else 0.0.
    multiple_choice: 1 when the gold continuation is the greedy one (lm-eval ignores the
    options there, and so does assay).
    """
    accepted = ("regexes_to_ignore", "ignore_case", "ignore_punctuation", "ignore_numbers")
    reject_unknown("exact_match", unknown, accepted)
    normalise = _Normaliser(
        compile_patterns("exact_match", "regexes_to_ignore", regexes_to_ignore),
        check_flag("exact_match", "ignore_case", ignore_case),
        check_flag("exact_match", "ignore_punctuation", ignore_punctuation),
        check_flag("exact_match", "ignore_numbers", ignore_numbers),
    )

    def sample_fn(sample: SampleInput) -> float | int:
        if sample.output_type is OutputType.MULTIPLE_CHOICE:
            return greedy_match(sample)
        if sample.output_type is OutputType.GENERATE_UNTIL:
            return _generated_match(sample, normalise)
        raise ConfigError(
            f"metric 'exact_match' scores generate_until or multiple_choice tasks, not "
            f"{sample.output_type.value}"
        )

    options = {
        "regexes_to_ignore": regexes_to_ignore,
        "ignore_case": ignore_case,
        "ignore_punctuation": ignore_punctuation,
        "ignore_numbers": ignore_numbers,
    }
    return Metric(
        name="exact_match",
        sample_fn=sample_fn,
        aggregation="mean",
        higher_is_better=True,
        output_types=frozenset({OutputType.GENERATE_UNTIL, OutputType.MULTIPLE_CHOICE}),
        kwargs={key: value for key, value in options.items() if value not in (None, False)},
    )


def _reference_and_prediction(sample: SampleInput) -> list[Any]:
    """[gold, response] for a corpus metric; [golds, response] for a doc with several golds.

    (lm-eval collapses the latter to 1.0, which its corpus aggregations cannot use; passing
    all golds gives sacrebleu one reference stream per gold.)
    """
    golds = sample.doc.get_golds()
    reference: Any = golds if _has_several_golds(sample.doc) else golds[0]
    return [reference, sample.response]


def _corpus_metric(name: str, higher_is_better: bool, options: dict[str, Any]) -> Metric:
    reject_unknown(name, options)
    return Metric(
        name=name,
        sample_fn=_reference_and_prediction,
        aggregation=name,
        higher_is_better=higher_is_better,
        output_types=GENERATIVE,
    )


@register_metric("bleu", output_type=OutputType.GENERATE_UNTIL)
def bleu(**options: Any) -> Metric:
    """sacrebleu corpus BLEU; per sample the [reference, prediction] pair."""
    return _corpus_metric("bleu", True, options)


@register_metric("chrf", output_type=OutputType.GENERATE_UNTIL)
def chrf(**options: Any) -> Metric:
    """sacrebleu corpus chrF; per sample the [reference, prediction] pair."""
    return _corpus_metric("chrf", True, options)


@register_metric("ter", output_type=OutputType.GENERATE_UNTIL)
def ter(**options: Any) -> Metric:
    """sacrebleu corpus TER (lower is better); per sample the [reference, prediction] pair."""
    return _corpus_metric("ter", False, options)


ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")


@register_metric("rouge", output_type=OutputType.GENERATE_UNTIL)
def rouge(*, rouge_type: str = "rougeL", use_stemmer: bool = False, **unknown: Any) -> Metric:
    """ROUGE F-measure (0..1) of the response against the best-matching gold, mean-aggregated.

    lm-eval registers no generic rouge metric (tasks compute it in their own code); this is
    the per-sample F-measure of rouge-score's RougeScorer, by default rougeL. For rougeLsum,
    sentences are split on " . " first, as lm-eval's TruthfulQA does (T5 style).
    """
    reject_unknown("rouge", unknown, ("rouge_type", "use_stemmer"))
    if rouge_type not in ROUGE_TYPES:
        raise ConfigError(
            f"metric 'rouge': rouge_type must be one of {', '.join(ROUGE_TYPES)}, "
            f"got {rouge_type!r}"
        )
    use_stemmer = check_flag("rouge", "use_stemmer", use_stemmer)
    score = _rouge_scorer(rouge_type, use_stemmer)

    def sample_fn(sample: SampleInput) -> float:
        if not isinstance(sample.response, str):
            raise DataError(
                f"doc {sample.doc.id!r} of task {sample.doc.task_name!r}: rouge needs one "
                f"text response, got {type(sample.response).__name__}; add a take_first filter"
            )
        return max(score(gold, sample.response) for gold in sample.doc.get_golds())

    return Metric(
        name="rouge",
        sample_fn=sample_fn,
        aggregation="mean",
        higher_is_better=True,
        output_types=GENERATIVE,
        kwargs={"rouge_type": rouge_type, "use_stemmer": use_stemmer},
    )


def _rouge_scorer(rouge_type: str, use_stemmer: bool) -> Callable[[str, str], float]:
    """F-measure of one (reference, prediction) pair; the scorer is built on first use."""
    scorer: list[Any] = []

    def score(reference: str, prediction: str) -> float:
        if not scorer:
            from rouge_score import rouge_scorer

            scorer.append(rouge_scorer.RougeScorer([rouge_type], use_stemmer=use_stemmer))
        if rouge_type == "rougeLsum":
            reference = reference.replace(" . ", ".\n")
            prediction = prediction.replace(" . ", ".\n")
        return scorer[0].score(reference, prediction)[rouge_type].fmeasure

    return score


@register_metric("bypass")
def bypass(**options: Any) -> Metric:
    """No metric (predict-only runs): None per sample, 999 for the task."""
    reject_unknown("bypass", options)
    return Metric(
        name="bypass",
        sample_fn=lambda sample: None,
        aggregation="bypass",
        higher_is_better=True,
    )
