"""Scoring one shard of a task: filters over responses, then per-sample metrics.

Filters run per request (lm-eval's Instance), over lists of repeats; each filter ensemble gives
its own `filtered_resps` and its own metric values (the ",filter" suffix of result keys).
The samples-file records of scored docs are written by `results.samples`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assay.doc import OutputType
from assay.errors import ConfigError, DataError
from assay.filters.base import FilterEnsemble, build_filter_ensemble
from assay.metrics.base import (
    AGGREGATIONS,
    METRICS,
    Aggregation,
    Metric,
    SampleInput,
    ScoredMetric,
    get_metric,
    is_peer_metric_name,
)
from assay.requests.doc_result import DocResult
from assay.requests.types import RollingResult
from assay.sandbox.policy import current_policy, recording, using
from assay.tasks.config import MetricSpec, TaskConfig


def build_filters(config: TaskConfig) -> list[FilterEnsemble]:
    """The task's filter ensembles (unknown names and bad kwargs fail here, before any model)."""
    try:
        return [build_filter_ensemble(name, steps) for name, steps in config.filters]
    except ConfigError as exc:
        raise ConfigError(f"{config.where()}: {exc}") from None


def build_metrics(config: TaskConfig) -> list[ScoredMetric]:
    """The task's metrics with their aggregations resolved."""
    out = []
    for spec in config.metrics:
        assert isinstance(spec, MetricSpec)
        if spec.peer is not None:
            metric, aggregation = spec.peer.build(spec.name, config)
            out.append(ScoredMetric(metric, aggregation, metric.higher_is_better))
            continue
        try:
            if spec.hf_evaluate and config.process_results is None:
                from assay.metrics.hf_evaluate import load_evaluate_metric

                metric = _user_metric(spec, config, load_evaluate_metric(spec.name))
            elif spec.function:
                metric = _user_metric(spec, config)
            elif config.process_results is not None and spec.name not in METRICS:
                metric = _process_results_metric(spec)
            elif evaluate_fallback(spec, config):
                from assay.metrics.hf_evaluate import load_evaluate_metric

                aggregated_by = getattr(spec.aggregation, "__name__", spec.aggregation or "mean")
                print(
                    f"{config.where()}: metric {spec.name!r} is neither assay's nor lm-eval's: "
                    f"served by evaluate.load({spec.name!r}), as lm-eval does (called per doc; "
                    f"aggregation {aggregated_by}).",
                    file=sys.stderr,
                )
                metric = _user_metric(
                    spec, config, load_evaluate_metric(spec.name, known=METRICS.names())
                )
            else:
                metric = get_metric(spec.name, **spec.kwargs)
        except ConfigError as exc:
            raise ConfigError(f"{config.where()}: metric {spec.name!r}: {exc}") from None
        output_type = config.resolved_output_type
        if (
            metric.output_types
            and output_type not in metric.output_types
            and config.process_results is None
        ):
            raise ConfigError(
                f"{config.where()}: metric {spec.name!r} cannot score output_type {output_type.value}; it "
                f"scores {', '.join(sorted(t.value for t in metric.output_types))}."
            )
        aggregation = _aggregation(spec, metric, config)
        higher = (
            spec.higher_is_better if spec.higher_is_better is not None else metric.higher_is_better
        )
        out.append(ScoredMetric(metric, aggregation, higher))
    return out


def evaluate_fallback(spec: MetricSpec, config: TaskConfig) -> bool:
    """lm-eval's rule (api/registry.get_metric): a metric_list name its registry lacks is
    `evaluate.load(name)`. Taken for lm-eval YAMLs of generated answers (the only output type
    whose metrics lm-eval calls by function); assay's own and other harnesses' names, and
    Python task configs, keep their refusal of unknown names."""
    return (
        not spec.hf_evaluate
        and spec.function is None
        and config.process_results is None
        and config.raw_config is not None
        and config.resolved_output_type == OutputType.GENERATE_UNTIL
        and spec.name not in METRICS
        and not is_peer_metric_name(spec.name)
    )


def _aggregation(spec: MetricSpec, metric: Metric, config: TaskConfig) -> Aggregation:
    chosen = spec.aggregation if spec.aggregation is not None else metric.aggregation
    if callable(chosen):
        return Aggregation(getattr(chosen, "__name__", "custom"), chosen, "none")
    try:
        return AGGREGATIONS.get(chosen)
    except ConfigError as exc:
        raise ConfigError(f"{config.where()}: metric {spec.name!r}: {exc}") from None


def _process_results_metric(spec: MetricSpec) -> Metric:
    """A metric_list entry naming a value that the task's process_results returns.

    As in lm-eval, such a name needs no registered metric: process_results computes the
    per-sample value and the entry only says how it aggregates (default mean).
    """

    def computed_by_process_results(sample: SampleInput) -> Any:
        raise DataError(f"metric {spec.name!r} is computed by the task's process_results.")

    return Metric(spec.name, computed_by_process_results, "mean", True, frozenset(), spec.kwargs)


def _user_metric(
    spec: MetricSpec, config: TaskConfig, function: Callable[..., Any] | None = None
) -> Metric:
    """A `!function` (or `evaluate`) metric, called as lm-eval calls it:
    fn(references=[gold], predictions=[pred])."""
    fn = function or spec.function
    assert fn is not None
    kwargs = dict(spec.kwargs)

    def sample_fn(sample: SampleInput) -> Any:
        golds = sample.doc.get_golds()
        value = fn(
            references=[golds[0] if len(golds) == 1 else golds],
            predictions=[sample.response],
            **kwargs,
        )
        if isinstance(value, dict) and spec.name not in value:
            return Expanded(value)
        return value[spec.name] if isinstance(value, dict) else value

    return Metric(
        spec.name, sample_fn, "mean", True, frozenset({OutputType.GENERATE_UNTIL}), kwargs
    )


class Expanded(dict[str, Any]):
    """A user metric's dict that lacks the metric's own name (lm-eval's humaneval returns
    {"pass@1": ...} from `pass_at_k`): lm-eval reports each key as a metric of its own, and so
    does assay, aggregated by mean."""


def apply_filters(
    results: Sequence[DocResult], filters: Sequence[FilterEnsemble]
) -> list[dict[str, list[Any]]]:
    """Each doc result's `filtered` (per ensemble name, a value per instance), each ensemble
    run over the whole shard."""
    flat = [(k, i) for k, r in enumerate(results) for i in range(len(r.instances))]
    resps = [results[k].resps[i] for k, i in flat]
    rows = [results[k].doc.row or {} for k, _ in flat]
    out: list[dict[str, list[Any]]] = [{} for _ in results]
    for ensemble in filters:
        try:
            filtered = ensemble.apply(resps, rows)
        except Exception as exc:
            raise DataError(
                f"filter pipeline {ensemble.name!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        for values in out:
            values[ensemble.name] = []
        for (k, _), value in zip(flat, filtered, strict=True):
            out[k][ensemble.name].append(value)
    return out


@dataclass(frozen=True, kw_only=True)
class Scored:
    """One doc's scores: per filter name, its metric values, and the programs they ran (code
    tasks; filters whose metrics ran none are left out)."""

    values: dict[str, dict[str, Any]]
    executions: dict[str, list[dict[str, Any]]]


def score(
    results: Sequence[DocResult],
    config: TaskConfig,
    metrics: Sequence[ScoredMetric],
    filters: Sequence[FilterEnsemble],
) -> list[Scored]:
    """Every doc result's metric values for every filter ensemble (and the programs they ran,
    for tasks that run model-written code), in order."""
    jobs = [(result, ensemble.name) for result in results for ensemble in filters]
    if config.unsafe_code:
        scored = _score_code_docs(jobs, config, metrics)
    else:
        scored = [_doc_values(result, name, config, metrics) for result, name in jobs]
    out = [Scored(values={}, executions={}) for _ in results]
    at = {id(result): k for k, result in enumerate(results)}
    for (result, name), (values, executions) in zip(jobs, scored, strict=True):
        doc = out[at[id(result)]]
        doc.values[name] = values
        if executions:
            doc.executions[name] = executions
    return out


def _doc_values(
    result: DocResult, name: str, config: TaskConfig, metrics: Sequence[ScoredMetric]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One doc's metric values under one filter ensemble, and the programs they ran."""
    filtered = result.filtered[name]
    if config.process_results is not None:
        with recording() as runs:
            values = _user_process_results(config, result, filtered)
        return values, [run.record() for run in runs]
    sample = _sample_input(result, config.resolved_output_type, filtered, result.judged.get(name))
    values = {}
    # A metric may run programs too (lm-eval's YAMLs call evaluate's code_eval, sandboxed).
    with recording() as runs:
        for m in metrics:
            try:
                value = m.metric.sample_fn(sample)
            except Exception as exc:
                raise DataError(
                    f"{config.where()}: metric {m.metric.name!r} failed on doc {result.doc_id}: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            if isinstance(value, Expanded):
                values.update(_expanded(value, m, config))
            else:
                values[m.metric.name] = value
    return values, [run.record() for run in runs]


def _expanded(value: Expanded, m: ScoredMetric, config: TaskConfig) -> Expanded:
    """The keys of an expanded metric value, which the task's results aggregate by mean (lm-eval
    gives them the metric's aggregation: refused where that is not the mean)."""
    if m.aggregation.name != "mean" or not m.higher_is_better:
        raise DataError(
            f"{config.where()}: metric {m.metric.name!r} returned {sorted(value)}, not a value "
            f"named {m.metric.name!r}; lm-eval reports each key with the metric's aggregation "
            f"({m.aggregation.name}, higher_is_better {m.higher_is_better}), which assay does "
            "only for mean and higher_is_better true. Return the value under the metric's name."
        )
    return value


def _score_code_docs(
    jobs: Sequence[tuple[DocResult, str]], config: TaskConfig, metrics: Sequence[ScoredMetric]
) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Docs of a task that runs model-written code, scored on the sandbox's workers at once,
    each doc's programs one at a time: a task with one program per doc (greedy HumanEval,
    MBPP) keeps every worker busy too, and never more programs run than there are workers.
    Results keep the order of `jobs`."""
    import os
    from concurrent.futures import ThreadPoolExecutor
    from dataclasses import replace

    policy = current_policy()
    one_each = replace(policy, workers=1)

    def run(job: tuple[DocResult, str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        # A pool thread has a context of its own: the policy is set there.
        with using(one_each):
            return _doc_values(*job, config, metrics)

    workers = max(1, min(policy.workers or os.cpu_count() or 1, len(jobs)))
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(run, jobs))


def _sample_input(
    result: DocResult,
    output_type: OutputType,
    filtered: list[Any],
    judgements: Mapping[str, Any] | None = None,
) -> SampleInput:
    if output_type == OutputType.MULTIPLE_CHOICE:
        conditioned = [
            v for inst, v in zip(result.instances, filtered, strict=True) if not inst.unconditioned
        ]
        unconditioned = [
            v[0] for inst, v in zip(result.instances, filtered, strict=True) if inst.unconditioned
        ]
        return SampleInput(result.doc, output_type, conditioned, unconditioned or None)
    first = result.generations.get((0, 0))
    calls = first.tool_calls if first is not None else ()
    return SampleInput(
        result.doc,
        output_type,
        filtered[0],
        judgements=judgements,
        transcript=result.transcript,
        tool_calls=calls,
    )


def _user_process_results(
    config: TaskConfig, result: DocResult, filtered: list[Any]
) -> dict[str, Any]:
    plain = [v.logprob if isinstance(v, RollingResult) else v for v in filtered]
    try:
        values = config.process_results(result.doc.row or {}, plain)  # type: ignore[misc]
    except Exception as exc:
        raise DataError(
            f"{config.where()}: process_results failed on doc {result.doc_id}: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(values, dict):
        raise DataError(
            f"{config.where()}: process_results must return a dict of metric values, got {type(values).__name__}."
        )
    return values
