"""results.json's task and group entries, from per-sample values.

The one home of aggregation into results: a task's columns of per-sample values go through
their metric's corpus aggregation (`metrics.aggregations`) and standard error (`stats.stderr`)
into its entry (`task_entry`); a group's entry is the size-weighted (or plain) mean of its leaf
tasks' entries, with pooled standard errors (`group_entry`, `add_groups`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from assay.errors import AssayError, TaskConfigError
from assay.metrics.base import AGGREGATIONS, Aggregation, ScoredMetric
from assay.requests.doc_result import DocResult
from assay.results.schema import NA, clustered_stderr_key, corrected_stderr_key
from assay.results.stderr_notes import measured_stderr_notes
from assay.tasks.registry import GroupNode


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
    notes: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A task's entry of results.json, in lm-eval 0.4.13's layout.

    With `clustered` (the task has a cluster key), each metric also gets
    "<metric>_stderr_clustered,<filter>": Miller's clustered standard error over the columns'
    cluster values for metrics aggregated by mean, "N/A" for other aggregations (and whenever
    the plain stderr is "N/A").

    `notes`, when given, receives the stderr keys whose measured value is unreliable, with why
    (`stderr_notes.measured_stderr_note`): results.json's `stderr_notes` adds them."""
    from assay.metrics.stderr import stderr_of

    entry: dict[str, Any] = {"name": name, "alias": alias or name, "sample_len": sample_len}
    for col in columns:
        key = f"{col.metric},{col.filter}"
        corrected = None
        with _aggregating(name, col):
            value = col.aggregation.fn(col.values) if col.values else float("nan")
            if col.aggregation.peer_stderr is not None:
                stderr, corrected = col.aggregation.peer_stderr(col.values, bootstrap_iters)
            else:
                stderr = stderr_of(col.aggregation, col.values, bootstrap_iters)
        entry[key] = _plain(value)
        entry[f"{col.metric}_stderr,{col.filter}"] = _plain(stderr)
        if corrected is not None:
            entry[corrected_stderr_key(col.metric, col.filter)] = corrected
        if clustered:
            entry[clustered_stderr_key(col.metric, col.filter)] = _clustered(col, stderr)
        if notes is not None:
            for name, why in measured_stderr_notes(col, entry).items():
                notes[name] = why
    return entry


def _clustered(col: MetricValues, stderr: Any) -> Any:
    """The clustered stderr of a mean-aggregated column; "N/A" where the plain one is, and
    where the clustered one cannot be estimated (one cluster, a negative estimate)."""
    import math

    from assay.stats.clustered import clustered_stderr

    if col.aggregation.stderr != "mean" or stderr == NA:
        return NA
    value = clustered_stderr([float(v) for v in col.values], col.clusters)
    return NA if math.isnan(value) else value


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
    """A group's own aggregation (`!function`): fn(values, sizes, weight_by_size)."""
    stderr_function: Callable[[list[Any], list[int], list[Any]], float | str] | None = None
    """The standard error of a group's own aggregation: fn(values, sizes, stderrs) (a Python
    group's `"stderr"` entry); without one, such a group's stderr is "N/A"."""


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
            stderr: float | str
            if spec.function is not None:
                value = spec.function(values, sizes, spec.weight_by_size)
                stderr = "N/A"
                if spec.stderr_function is not None:
                    stderr = spec.stderr_function(values, sizes, stderrs)
            else:
                value, stderr = group_aggregate(values, sizes, stderrs, spec.weight_by_size)
            entry[key] = value
            entry[f"{spec.metric}_stderr,{flt}"] = stderr
            counts[key] = sum(sizes)
    entry["sample_count"] = counts
    return entry


class MetricColumns:
    """A task's per-sample metric values, one column per (metric, filter) in the order first
    seen, each with the aggregation its metric uses in the task."""

    def __init__(self, metrics: Sequence[ScoredMetric]) -> None:
        # The first metric of a name wins, as in the task's metric list.
        self.metrics = {m.metric.name: m for m in reversed(metrics)}
        self.columns: dict[tuple[str, str], MetricValues] = {}

    def add(
        self, results: Sequence[DocResult], filters: Sequence[str], clusters: Mapping[int, Any]
    ) -> None:
        """Append the values of a scored shard, with each doc's cluster value."""
        for flt in filters:
            for result in results:
                for name, value in result.values[flt].items():
                    col = self.columns.get((name, flt))
                    if col is None:
                        col = self.columns[(name, flt)] = self._column(name, flt)
                    col.values.append(value)
                    col.clusters.append(clusters[result.doc_id])

    def _column(self, name: str, flt: str) -> MetricValues:
        m = self.metrics.get(name)
        if m is None:
            # A value that process_results returns without a metric_list entry: a mean.
            return MetricValues(name, flt, AGGREGATIONS.get("mean"), True)
        return MetricValues(name, flt, m.aggregation, m.higher_is_better)

    def values(self) -> list[MetricValues]:
        """The columns, in the order first seen."""
        return list(self.columns.values())


def add_groups(results: dict[str, Any], groups: Sequence[GroupNode]) -> None:
    """Aggregate, into results.json's sections, every group whose children are all done.

    A group with an aggregate_metric_list gets an entry in "groups" (lm-eval aggregates a group
    over its leaf tasks, not over its subgroups' results), its version, its n-shot when its
    children agree, and each metric's higher_is_better (None where children disagree); one
    without gets a name-only line in "results", as lm-eval prints it.
    """
    done = results["results"]
    for node in groups:
        cfg = node.config
        results["group_subtasks"][cfg.name] = list(node.children)
        children = [done.get(c) or results["groups"].get(c) for c in node.children]
        if any(c is None for c in children):
            continue
        if not cfg.aggregate_metric_list:
            done.setdefault(cfg.name, {"name": cfg.name, "alias": cfg.alias or cfg.name})
            continue
        specs = [
            GroupSpec(
                a["metric"],
                _as_list(a.get("filter_list")),
                bool(a.get("weight_by_size", True)),
                a["aggregation"] if callable(a.get("aggregation")) else None,
                a["stderr"] if callable(a.get("stderr")) else None,
            )
            for a in cfg.aggregate_metric_list
        ]
        leaves = [done[t] for t in _leaf_tasks(cfg.name, groups) if t in done]
        results["groups"][cfg.name] = group_entry(cfg.name, cfg.alias, leaves, specs)
        results["versions"][cfg.name] = str(cfg.version) if cfg.version is not None else "N/A"
        shots = {results["n-shot"].get(c) for c in node.children}
        if len(shots) == 1:
            results["n-shot"][cfg.name] = shots.pop()
        merged: dict[str, Any] = {}
        for c in node.children:
            for metric, higher in results["higher_is_better"].get(c, {}).items():
                merged[metric] = higher if merged.get(metric, higher) == higher else None
        results["higher_is_better"][cfg.name] = merged


def _leaf_tasks(name: str, groups: Sequence[GroupNode]) -> list[str]:
    """The tasks under a group, through its subgroups (a task name gives itself)."""
    node = next((n for n in groups if n.config.name == name), None)
    if node is None:
        return [name]
    return [leaf for child in node.children for leaf in _leaf_tasks(child, groups)]


def _as_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)
