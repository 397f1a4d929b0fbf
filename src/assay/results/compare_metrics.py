"""One `assay compare` row per (task or group, metric, filter): the paired statistics of
`stats.paired` on the per-doc values, by the metric's aggregation (a paired mean, or a paired
bootstrap for corpus-level metrics); groups pool their leaf tasks' docs."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from assay.results.compare_docs import TaskPairing
from assay.results.compare_report import CompareOptions, Comparison, PairSummary
from assay.results.readers import Run
from assay.results.schema import metric_columns, metric_key
from assay.stats.paired import PairedResult, combine_unweighted, paired_bootstrap, paired_mean


def aggregation_name(run: Run, task: str, metric: str) -> str | None:
    """The aggregation a task uses for a metric: as its config says, else the registered
    metric's own; None when unknown."""
    for spec in run.config(task).get("metric_list") or []:
        if isinstance(spec, dict) and spec.get("metric") == metric:
            given = spec.get("aggregation")
            if given is not None:
                return _registered_aggregation(given)
    from assay.metrics.base import get_metric

    try:
        return get_metric(metric).aggregation
    except Exception:  # unknown or needing arguments: no aggregation known
        return None


def _registered_aggregation(given: Any) -> str | None:
    """The registered aggregation a config's `aggregation` names: a registered name, or the
    dotted path of a registered aggregation's function (how results record a Python task's
    callable); None for anything else (a task's own function cannot be recomputed here)."""
    from importlib import import_module

    from assay.metrics.base import AGGREGATIONS

    if not isinstance(given, str) or given.startswith("!function"):
        return None
    if given in AGGREGATIONS:
        return given
    module, _, name = given.rpartition(".")
    if not module.startswith("assay."):
        return None  # a results file never makes compare import code outside assay
    try:
        function = getattr(import_module(module), name) if module else None
    except (ImportError, AttributeError, ValueError):
        return None
    return next((a for a in AGGREGATIONS if AGGREGATIONS.get(a).fn is function), None)


def compare_metric(
    a: Run,
    b: Run,
    task: str,
    metric: str,
    flt: str,
    va: list[Any],
    vb: list[Any],
    pairing: TaskPairing,
    options: CompareOptions,
    summary: PairSummary,
) -> Comparison | None:
    from assay.metrics.base import AGGREGATIONS

    name = aggregation_name(a, task, metric)
    if name is not None and name != aggregation_name(b, task, metric):
        summary.skipped.append(
            f"{task} {metric},{flt}: the runs aggregate it differently "
            f"({name} vs {aggregation_name(b, task, metric)})"
        )
        return None
    if name is None or name not in AGGREGATIONS or name == "bypass":
        what = f"aggregation {name}" if name else "its aggregation (the task's own, or unknown)"
        summary.skipped.append(f"{task} {metric},{flt}: {what} cannot be recomputed here")
        return None
    aggregation = AGGREGATIONS.get(name)
    if name in ("nanmean", "judge_mean", "clipped_nanmean"):
        va, vb, pairing = _both_valued(va, vb, pairing, f"{task} {metric},{flt}", summary)
        if not va:
            return None
    if aggregation.stderr in ("mean", "nan_mean"):
        # NaN is a number here (a metric that does not skip NaN): paired_mean says n/a for it.
        bad = [
            (label, doc_id, v)
            for label, values in ((a.label, va), (b.label, vb))
            for doc_id, v in zip(pairing.doc_ids, values, strict=True)
            if not isinstance(v, int | float)
        ]
        if bad:
            label, doc_id, value = bad[0]
            summary.skipped.append(
                f"{task} {metric},{flt}: {len(bad)} per-doc value(s) are not numbers; the "
                f"first: doc {doc_id} of run {label} holds {value!r} in its samples file "
                f"(field {metric!r}). Fix or re-score that doc"
            )
            return None
        result = paired_mean(
            [float(v) for v in va],
            [float(v) for v in vb],
            clusters=pairing.clusters,
            confidence=options.confidence,
        )
    else:
        result = paired_bootstrap(
            va,
            vb,
            aggregation.fn,
            clusters=pairing.clusters,
            confidence=options.confidence,
            iters=options.bootstrap_iters,
            seed=options.seed,
        )
    return comparison_row(task, metric, flt, a, b, result)


def _both_valued(
    va: list[Any], vb: list[Any], pairing: TaskPairing, what: str, summary: PairSummary
) -> tuple[list[Any], list[Any], TaskPairing]:
    """The docs valued in both runs of a NaN-skipping metric (NaN is no value, e.g. a judge's
    unparseable verdict): each run's number leaves its NaN docs out, so the paired difference
    is over the docs both runs valued; how many were left out goes to the summary."""
    kept = [
        i for i, (x, y) in enumerate(zip(va, vb, strict=True)) if _is_number(x) and _is_number(y)
    ]
    if len(kept) < len(va):
        summary.skipped.append(
            f"{what}: {len(va) - len(kept)} of {len(va)} doc(s) have no value in one run "
            f"({'none left to compare' if not kept else 'compared on the other ' + str(len(kept))})"
        )
    clusters = None if pairing.clusters is None else [pairing.clusters[i] for i in kept]
    return (
        [va[i] for i in kept],
        [vb[i] for i in kept],
        replace(pairing, doc_ids=[pairing.doc_ids[i] for i in kept], clusters=clusters),
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value))


def comparison_row(
    task: str, metric: str, flt: str, a: Run, b: Run, result: PairedResult
) -> Comparison:
    return Comparison(
        task=task,
        metric=metric,
        filter=flt,
        a=a.label,
        b=b.label,
        n=result.n,
        mean_a=result.mean_a,
        mean_b=result.mean_b,
        diff=result.diff,
        stderr=result.stderr,
        ci_low=result.ci_low,
        ci_high=result.ci_high,
        confidence=result.confidence,
        p_value=result.p_value,
        p_value_holm=None,
        mcnemar_p=result.mcnemar_p,
        mde=result.mde,
        clusters=result.clusters,
        method=result.method,
        note=result.note,
        test=result.test,
    )


def compare_groups(
    a: Run,
    b: Run,
    per_doc: dict[str, dict[tuple[str, str], tuple[list[Any], list[Any]]]],
    pairings: dict[str, TaskPairing],
    options: CompareOptions,
    summary: PairSummary,
) -> list[Comparison]:
    """Groups both runs aggregated: per (metric, filter) of the group, the leaf tasks' paired
    per-doc values pooled. A group weighted by size (as its recorded score shows) gets the
    comparison of the pooled docs; an unweighted one the mean of its tasks' differences with
    sqrt(Σ stderr²)/k."""
    rows = []
    for group in [g for g in a.groups() if g in set(b.groups())]:
        entry = a.entry(group) or {}
        leaves = [t for t in a.leaf_tasks(group) if t in per_doc]
        for metric, flt in metric_columns(entry):
            present = [t for t in leaves if (metric, flt) in per_doc[t]]
            if not present or len(present) != len(a.leaf_tasks(group)):
                if present:
                    summary.skipped.append(
                        f"{group} {metric},{flt}: only {len(present)} of its "
                        f"{len(a.leaf_tasks(group))} tasks are compared"
                    )
                continue
            if any(aggregation_name(a, t, metric) != "mean" for t in present):
                summary.skipped.append(f"{group} {metric},{flt}: a task's metric is not a mean")
                continue
            if _weighted_by_size(a, group, metric, flt, present):
                va, vb, clusters = [], [], []
                clustered = any(pairings[t].clusters is not None for t in present)
                for t in present:
                    xs, ys = per_doc[t][(metric, flt)]
                    va += [float(x) for x in xs]
                    vb += [float(y) for y in ys]
                    labels = pairings[t].clusters or pairings[t].doc_ids
                    clusters += [(t, c) for c in labels]
                result = paired_mean(
                    va,
                    vb,
                    clusters=[str(c) for c in clusters] if clustered else None,
                    confidence=options.confidence,
                )
            else:
                parts = [
                    paired_mean(
                        [float(x) for x in per_doc[t][(metric, flt)][0]],
                        [float(y) for y in per_doc[t][(metric, flt)][1]],
                        clusters=pairings[t].clusters,
                        confidence=options.confidence,
                    )
                    for t in present
                ]
                result = combine_unweighted(parts, options.confidence)
            rows.append(comparison_row(group, metric, flt, a, b, result))
    return rows


def _weighted_by_size(run: Run, group: str, metric: str, flt: str, tasks: list[str]) -> bool:
    """Whether the group's recorded score is the size-weighted mean of its tasks' scores (the
    default, and lm-eval's for mmlu) rather than their plain mean. lm-eval's results do not
    record the group's weight_by_size; the recorded numbers tell which was used."""
    key = metric_key(metric, flt)
    recorded = (run.entry(group) or {}).get(key)
    entries = [run.entry(t) or {} for t in tasks]
    values = [e.get(key) for e in entries]
    sizes = [e.get("sample_len", 0) for e in entries]
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    if not isinstance(recorded, int | float) or len(numbers) != len(values):
        return True
    weighted = sum(v * n for v, n in zip(numbers, sizes)) / max(sum(sizes), 1)
    plain = sum(numbers) / len(numbers)
    return abs(recorded - weighted) <= abs(recorded - plain)
