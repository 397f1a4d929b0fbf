"""Task and group numbers from per-sample values: aggregation, stderr, size-weighted groups."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from assay.errors import AssayError, TaskConfigError
from assay.metrics.base import Aggregation
from assay.results.schema import NA, clustered_stderr_key


@dataclass
class MetricValues:
    """Per-sample values of one metric under one filter, and how they aggregate."""

    metric: str
    filter: str
    aggregation: Aggregation
    higher_is_better: bool
    values: list[Any] = field(default_factory=list)
    clusters: list[Any] = field(default_factory=list)
    """Per sample, its doc's cluster value (None when the task has no cluster key)."""


def task_entry(
    name: str,
    alias: str | None,
    sample_len: int,
    columns: Sequence[MetricValues],
    bootstrap_iters: int,
    clustered: bool = False,
) -> dict[str, Any]:
    """A task's entry of results.json, in lm-eval 0.4.13's layout.

    With `clustered` (the task has a cluster key), each metric also gets
    "<metric>_stderr_clustered,<filter>": Miller's clustered standard error over the columns'
    cluster values for metrics aggregated by mean, "N/A" for other aggregations (and whenever
    the plain stderr is "N/A")."""
    from assay.metrics.stderr import stderr_of

    entry: dict[str, Any] = {"name": name, "alias": alias or name, "sample_len": sample_len}
    for col in columns:
        key = f"{col.metric},{col.filter}"
        with _aggregating(name, col):
            value = col.aggregation.fn(col.values) if col.values else float("nan")
            stderr = stderr_of(col.aggregation, col.values, bootstrap_iters)
        entry[key] = _plain(value)
        entry[f"{col.metric}_stderr,{col.filter}"] = _plain(stderr)
        if clustered:
            entry[clustered_stderr_key(col.metric, col.filter)] = _clustered(col, stderr)
    return entry


def _clustered(col: MetricValues, stderr: Any) -> Any:
    """The clustered stderr of a mean-aggregated column; "N/A" where the plain one is."""
    from assay.stats.clustered import clustered_stderr

    if col.aggregation.stderr != "mean" or stderr == NA:
        return NA
    return clustered_stderr([float(v) for v in col.values], col.clusters)


@contextmanager
def _aggregating(task: str, col: MetricValues) -> Iterator[None]:
    """Report an aggregation that fails (a user `!function`, or e.g. binary f1 over three
    choices) as a task error naming the metric, not as a traceback from inside it."""
    try:
        yield
    except AssayError:
        raise
    except Exception as exc:
        raise TaskConfigError(
            f"task {task!r}: aggregating metric {col.metric!r} (filter {col.filter!r}) with "
            f"{col.aggregation.name!r} failed: {type(exc).__name__}: {exc}. Fix the aggregation "
            "or choose a metric that suits the task's outputs in its metric_list."
        ) from None


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    return value


@dataclass
class GroupSpec:
    """One aggregate metric of a group (lm-eval's aggregate_metric_list entry)."""

    metric: str
    filters: list[str] | None
    weight_by_size: bool = True
    function: Callable[[list[Any], list[int], bool], Any] | None = None
    """A group's own aggregation (`!function`): fn(values, sizes, weight_by_size); no stderr."""


def group_entry(
    name: str,
    alias: str | None,
    children: Sequence[dict[str, Any]],
    specs: Sequence[GroupSpec],
) -> dict[str, Any]:
    """A group's entry: size-weighted (or plain) means with pooled stderr."""
    from assay.metrics.stderr import group_aggregate

    entry: dict[str, Any] = {
        "name": name,
        "alias": alias or name,
        "sample_len": sum(c.get("sample_len", 0) for c in children),
    }
    counts: dict[str, int] = {}
    for spec in specs:
        filters = spec.filters or sorted(
            {k.split(",", 1)[1] for c in children for k in c if k.startswith(f"{spec.metric},")}
        )
        for flt in filters:
            key = f"{spec.metric},{flt}"
            present = [c for c in children if key in c]
            if not present:
                continue
            values = [c[key] for c in present]
            sizes = [c.get("sample_len", 0) for c in present]
            stderrs = [c.get(f"{spec.metric}_stderr,{flt}", "N/A") for c in present]
            if spec.function is not None:
                value, stderr = spec.function(values, sizes, spec.weight_by_size), "N/A"
            else:
                value, stderr = group_aggregate(values, sizes, stderrs, spec.weight_by_size)
            entry[key] = value
            entry[f"{spec.metric}_stderr,{flt}"] = stderr
            counts[key] = sum(sizes)
    entry["sample_count"] = counts
    return entry


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)
