"""Why a standard error in results.json is not a measured spread: the `stderr_notes` map.

lm-eval writes `"acc_stderr,none": 0.0` when every doc scored the same and `"N/A"` when no
standard error was computed (one doc, `--bootstrap_iters 0`, an aggregation without a formula).
results.json keeps both exactly (readers of lm-eval's files rely on them) and adds one top-level
entry, only when some stderr needs it:

    "stderr_notes": {"<task or group>": {"acc_stderr,none": "<why>", ...}, ...}

Its keys are the stderr keys of the task's entry, so a reader finds the note of any stderr by
the key it already reads. The printed table marks those cells `†` and lists the reasons under
it; the report shows them on hover.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assay.results.schema import CLUSTERED_SUFFIX, NA

NOTES_KEY = "stderr_notes"

NO_SPREAD = (
    "stderr 0 is not a measured spread: every doc scored the same (every resample gave the "
    "same value), so the standard error is unknown, not 0, and no interval is shown"
)


FEW_CLUSTERS = 30
"""Clusters below which Miller's clustered stderr (results.json's form, no small-sample
correction) is marked: mean ± 1.96·se covered 0.75-0.80 with 4 clusters, 0.89 with 8 (0/1
scores, cluster logit sd 1), 0.60-0.86 with 2-5 (benchmarks/coverage_atlas.py); `assay
compare` reads clusters with CR2 and t instead."""


def measured_stderr_notes(column: Any, entry: Mapping[str, Any]) -> dict[str, str]:
    """Why a stderr that was measured (a number, not 0) is still not to be trusted at face
    value, by its key in `entry`: a bootstrap over fewer than `SMALL_BOOTSTRAP` docs, a
    clustered stderr over fewer than `FEW_CLUSTERS` clusters. `column` is the
    `summary.MetricValues` the entry's numbers came from."""
    from assay.results.schema import clustered_stderr_key
    from assay.stats.clustered import cluster_count
    from assay.stats.paired_bootstrap import SMALL_BOOTSTRAP

    notes: dict[str, str] = {}
    plain = f"{column.metric}_stderr,{column.filter}"
    docs = len(column.values)
    bootstrapped = column.aggregation.stderr not in _CLOSED_FORMS
    if _measured(entry.get(plain)) and bootstrapped and docs < SMALL_BOOTSTRAP:
        notes[plain] = (
            f"bootstrap over {docs} docs: below {SMALL_BOOTSTRAP} the bootstrap's spread "
            "is narrower than the real one (a 5-doc bootstrap interval covers about 0.75, "
            "benchmarks/coverage_atlas.py): the stderr is optimistic"
        )
    clustered = clustered_stderr_key(column.metric, column.filter)
    if _measured(entry.get(clustered)):
        count = cluster_count(column.clusters)
        if count < FEW_CLUSTERS:
            notes[clustered] = (
                f"clustered stderr over {count} clusters: below {FEW_CLUSTERS} Miller's form "
                "(no small-sample correction) is too small (mean ± 1.96·se covered 0.75-0.80 "
                "with 4 clusters): read it as a lower bound; assay compare uses CR2 with t"
            )
    return notes


_CLOSED_FORMS = ("mean", "nan_mean", "flat_mean")
"""Aggregations whose stderr is a formula (metrics.stderr.stderr_of), not a bootstrap."""


def _measured(value: Any) -> bool:
    return isinstance(value, float | int) and not isinstance(value, bool) and value > 0


def stderr_notes(results: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The notes of a results dict (lm-eval's layout): per task or group, per stderr key whose
    value is 0 or "N/A", why. Empty when every stderr was measured."""
    entries: Mapping[str, Any] = results.get("results", {})
    counts: Mapping[str, Any] = results.get("n-samples", {})
    subtasks: Mapping[str, Any] = results.get("group_subtasks", {})
    iters = results.get("config", {}).get("bootstrap_iters")
    notes: dict[str, dict[str, str]] = {}
    for name, entry in entries.items():
        if not isinstance(entry, Mapping):
            continue
        docs = _docs(counts.get(name), entry)
        for key, value in entry.items():
            metric = key.partition(",")[0]
            if not (metric.endswith("_stderr") or metric.endswith(CLUSTERED_SUFFIX)):
                continue  # a corrected stderr is N/A where the peer's own is right
            why = _why(key, value, entry, docs, iters, name in subtasks)
            if why is not None:
                notes.setdefault(name, {})[key] = why
    return notes


def _why(
    key: str, value: Any, entry: Mapping[str, Any], docs: int | None, iters: Any, group: bool
) -> str | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == 0:
        return NO_SPREAD
    if value != NA:
        return None
    metric, _, flt = key.partition(",")
    if metric.endswith(CLUSTERED_SUFFIX):
        plain = f"{metric.removesuffix(CLUSTERED_SUFFIX)}_stderr,{flt}"
        if entry.get(plain) == NA:
            return _why(plain, NA, entry, docs, iters, group)
        return (
            "N/A: a clustered standard error needs a metric aggregated by mean and two or "
            "more clusters with some spread between them"
        )
    if iters == 0:
        return "N/A: --bootstrap_iters 0 computes no standard errors"
    if group:
        return (
            "N/A: a subtask has no standard error (or the group aggregates with its own "
            "function), so the group's pooled one cannot be formed"
        )
    if docs is not None and docs <= 1:
        return f"N/A: {docs} doc{'' if docs == 1 else 's'}: a standard error needs at least two"
    return (
        "N/A: no standard error for this aggregation (no formula, or fewer than two values "
        "it counts)"
    )


def _docs(count: Any, entry: Mapping[str, Any]) -> int | None:
    if isinstance(count, Mapping) and isinstance(count.get("effective"), int):
        return int(count["effective"])
    size = entry.get("sample_len")
    return size if isinstance(size, int) else None
