"""lighteval's metrics in assay's metric stage.

A task converted from lighteval (`files`) lists lighteval `Metric` objects. Each
reported name becomes one column, under lighteval's name:

- where assay computes exactly what lighteval computes (`SAME_COMPUTATION`), assay's metric
  scores it;
- otherwise lighteval's own functions do: its sample-level function (`Metric.compute_sample`)
  gets the lighteval Doc and a lighteval `ModelResponse` built from assay's response, and its
  corpus-level function aggregates the per-sample values (recorded in samples files as usual);
- a sample function that runs the model's programs (LiveCodeBench's) is computed by assay
  instead, each program in the run's sandbox (`compat.lighteval.code`): lighteval's own
  would run them in a fork of this process.

Standard errors are lighteval's: its `mean_stderr` when the corpus function's name contains
"mean", else its bootstrap over 1000 resamples, which divides the standard deviation of the
replicates by sqrt(1000) (about 31.6 times too small). For those, assay also reports the
standard deviation of the same replicates, the bootstrap standard error, as
`<metric>_stderr_corrected` (see `stderr.lighteval_stderr`).

Metrics lighteval computes through a judge model (`batched_compute`) and those normalising by
token counts (assay's loglikelihood results carry none) are refused before any model loads.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from assay.compat.lighteval.code import sandboxed_sample_function
from assay.compat.lighteval.docs import doc_to_lighteval
from assay.compat.lighteval.names import SAME_COMPUTATION
from assay.compat.lighteval.stderr import lighteval_stderr
from assay.doc import OutputType
from assay.errors import ConfigError
from assay.metrics.base import (
    AGGREGATIONS,
    Aggregation,
    Metric,
    SampleInput,
    StderrRule,
    get_metric,
)
from assay.requests.types import LoglikelihoodResult, RollingResult
from assay.tasks.config import TaskConfig

if TYPE_CHECKING:
    from assay.compat.lighteval.files import LightevalMetricRef

log = logging.getLogger(__name__)

REASONING_TAGS = [("<think>", "</think>")]
"""lighteval's default `reasoning_tags`: removed from generations before metrics read them."""


def _signature(metric: Any) -> str:
    fn = metric.sample_level_fn
    norm = getattr(fn, "logprob_normalization", None)
    if norm is None:
        return f"{type(fn).__name__}()"
    option = getattr(norm, "ignore_first_space", None)
    return f"{type(fn).__name__}({type(norm).__name__}(ignore_first_space={option}))"


def build(
    spec_name: str, ref: LightevalMetricRef, config: TaskConfig
) -> tuple[Metric, Aggregation]:
    """The assay Metric and Aggregation of one reported name of a lighteval metric."""
    metric = ref.group.metric
    where = config.where()
    same = SAME_COMPUTATION.get(_signature(metric))  # names.py: the identical ones
    if same is not None and ref.name == metric.metric_name:
        log.info("%s: lighteval's %r is computed by assay's %s.", where, ref.name, same)
        built = replace(get_metric(same), name=spec_name)
        return built, AGGREGATIONS.get(built.aggregation)
    _refuse_unsupported(metric, ref.name, where)
    corpus = metric.get_corpus_aggregations()[ref.name]
    higher = metric.higher_is_better
    if isinstance(higher, dict):
        higher = higher[ref.name]
    sample_fn = _SampleFunction(ref, config.name)
    built = Metric(
        name=spec_name,
        sample_fn=sample_fn,
        aggregation=f"lighteval:{getattr(corpus, '__name__', 'corpus')}",
        higher_is_better=bool(higher),
        needs_unconditioned=_needs_unconditioned(metric),
    )
    # lighteval's own rule, by the corpus function's name (see the module doc).
    mean = "mean" in getattr(corpus, "__name__", "")
    rule: StderrRule = "peer_mean" if mean else "peer"
    return built, Aggregation(
        built.aggregation, corpus, rule, peer_stderr=lighteval_stderr(corpus, mean)
    )


def _refuse_unsupported(metric: Any, name: str, where: str) -> None:
    from lighteval.metrics.metrics_sample import JudgeLLM
    from lighteval.metrics.normalizations import LogProbTokenNorm

    if metric.batched_compute or isinstance(metric.sample_level_fn, JudgeLLM):
        raise ConfigError(
            f"{where}: lighteval metric {name!r} is graded by a judge model through lighteval's "
            "own model backends, which assay does not run. Use assay's judge metrics "
            "(judge_score, judge_correct with --judge-model) instead."
        )
    if isinstance(getattr(metric.sample_level_fn, "logprob_normalization", None), LogProbTokenNorm):
        raise ConfigError(
            f"{where}: lighteval metric {name!r} normalises log-probabilities by token counts, "
            "which assay's loglikelihood results do not carry. Use a character-normalised "
            "metric (LogProbCharNorm) or loglikelihood_acc."
        )


def _needs_unconditioned(metric: Any) -> bool:
    from lighteval.metrics.normalizations import LogProbPMINorm

    norm = getattr(metric.sample_level_fn, "logprob_normalization", None)
    return isinstance(norm, LogProbPMINorm)


@dataclass
class _SampleFunction:
    """lighteval's sample-level function of one reported name, over assay's SampleInput.

    A grouping metric reports several names from one computation; the names share `ref.group`,
    which keeps the last sample's result so the computation runs once per sample."""

    ref: LightevalMetricRef
    task: str

    def __call__(self, sample: SampleInput) -> Any:
        group = self.ref.group
        if group.last_sample is not sample:
            shots = len(sample.doc.fewshot_samples)
            doc = doc_to_lighteval(sample.doc, f"{self.task}|{shots}")
            # A sample function that runs programs is scored by assay, in its sandbox.
            compute = sandboxed_sample_function(group.metric) or group.metric.compute_sample
            group.last_result = compute(doc=doc, model_response=model_response(sample))
            group.last_sample = sample
        return group.last_result[self.ref.name]


def model_response(sample: SampleInput) -> Any:
    """lighteval's ModelResponse for assay's response to one doc.

    multiple_choice: one log-probability and greedy flag per choice (then one unconditioned
    log-probability per choice for PMI, where lighteval's metrics look for them); generation:
    the texts (one per sample) and the texts with reasoning tags removed, as lighteval's
    pipeline post-processes them; perplexity: the text's summed log-probability.
    """
    from lighteval.models.model_output import ModelResponse
    from lighteval.utils.utils import remove_reasoning_tags

    response = sample.response
    if sample.output_type == OutputType.MULTIPLE_CHOICE:
        results: Sequence[LoglikelihoodResult] = response
        logprobs = [float(r.logprob) for r in results]
        return ModelResponse(
            logprobs=logprobs + list(sample.unconditioned or []),
            argmax_logits_eq_gold=[bool(r.is_greedy) for r in results],
        )
    if sample.output_type == OutputType.GENERATE_UNTIL:
        texts = [response] if isinstance(response, str) else [str(t) for t in response]
        return ModelResponse(
            text=texts,
            text_post_processed=[remove_reasoning_tags(t, REASONING_TAGS) for t in texts],
        )
    if isinstance(response, RollingResult):
        return ModelResponse(logprobs=[response.logprob])
    raise ConfigError(
        f"lighteval metrics cannot score output type {sample.output_type.value} "
        f"(doc {sample.doc.id!r} of task {sample.doc.task_name!r})."
    )
