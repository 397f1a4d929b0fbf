"""`assay power` on runs whose docs come in clusters (a task's cluster key, or --cluster-by):
planned with the test `assay compare` runs on them, CR2's standard error against t with
Bell-McCaffrey's degrees of freedom (or, below `SPARSE_DISCORDANT` differing clusters, the exact
sign-flip test over cluster sums), so the plan counts clusters, not docs. A plan on the docs'
variance alone would be for a test compare does not run: with 20 passages of 20 docs it planned
364 docs where compare's clustered test then had power 0.25."""

from __future__ import annotations

import argparse
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assay.errors import ConfigError

SMALL_PLAN_CLUSTERS = 30
"""Clusters below which the variance between them is too uncertain to plan on (caveat), as
`assay power` says of fewer than 30 docs."""


@dataclass(frozen=True)
class ClusteredRuns:
    """The paired docs of the runs, with their cluster labels."""

    field: str
    """The doc field the docs are clustered by."""
    labels: list[Hashable]
    scores: list[list[float]]
    """Per run, the values of the paired docs (in the order of `labels`)."""


def clustered_runs(
    args: argparse.Namespace,
    runs: Sequence[Any],
    task: str,
    docs: Mapping[int, Any],
    values: Sequence[Mapping[int, float]],
) -> ClusteredRuns | None:
    """The runs' clusters: --cluster-by's field, else the cluster key the runs recorded; None
    when neither names one, or every doc is a cluster of its own (compare then reads the docs
    as independent, and so does the plan)."""
    from assay.cli.compare import cluster_by_option
    from assay.results.compare_docs import cluster_labels
    from assay.results.compare_report import CompareOptions
    from assay.stats.clustered import cluster_count

    chosen = cluster_by_option(args.cluster_by)
    field = chosen.get(task, chosen.get("*")) or runs[0].cluster_key(task)
    if field is None and len(runs) > 1:
        field = runs[1].cluster_key(task)
    if field is None:
        return None
    shared = sorted(set.intersection(*(set(v) for v in values)))
    options = CompareOptions(cluster_by=chosen)
    labels = cluster_labels(runs[0], runs[-1], task, dict(docs), shared, options)
    if labels is None or cluster_count(labels) == len(labels):
        return None
    return ClusteredRuns(field, labels, [[v[i] for i in shared] for v in values])


def print_clustered_plan(
    args: argparse.Namespace, clustered: ClusteredRuns, binary: bool, level: str
) -> None:
    """Clusters (and docs) needed, and the current MDE of compare's clustered test."""
    from assay.stats.clustered import cluster_count
    from assay.stats.power import binary_variance_floor, clusters_needed, mde

    if args.within_variance > 0:
        raise ConfigError(
            f"--within-variance {args.within_variance:g}: repeats per doc are not planned for "
            f"clustered docs (clustered by {clustered.field!r}); leave it out, or plan the "
            "docs as independent with --cluster-by given a field every doc holds uniquely."
        )
    labels = clustered.labels
    count, n = cluster_count(labels), len(labels)
    size = n / count
    stderr, df, note = _clustered_stderr(args, clustered)
    print(
        f"clustered by {clustered.field!r}: {count} clusters, {size:.3g} docs each on average; "
        "assay compare reads them with CR2's standard error against t (Bell-McCaffrey degrees "
        "of freedom), so the plan counts clusters"
    )
    if count < SMALL_PLAN_CLUSTERS:
        print(
            f"caveat: the variance comes from {count} clusters; below {SMALL_PLAN_CLUSTERS} it "
            "is too uncertain to plan on and the plan may fall short of its power. Score more "
            "clusters."
        )
    measured = stderr**2 * count if math.isfinite(stderr) and stderr > 0 else math.nan
    floor = binary_variance_floor(args.difference) / size if binary else 0.0
    if math.isnan(measured) and not binary:
        raise ConfigError(
            f"the clusters of {', '.join(args.runs)} show no spread between their mean "
            "differences: the variance compare's clustered test needs cannot be estimated. "
            "Score more clusters."
        )
    unit = measured if measured > floor else floor  # (NaN: no spread, the floor stands in)
    least = binary and not measured > floor
    if math.isnan(measured):
        print("  variance of a cluster's mean difference: not estimable (no spread)")
    else:
        print(f"  variance of a cluster's mean difference: {measured:.6g} (CR2 × clusters)")
    if least:
        print(
            f"  planned on {unit:.6g}: d(1-d)/(docs per cluster), the least a true difference "
            f"of {args.difference:g} allows with independent docs; more where docs of a "
            "cluster agree"
        )
    needed = clusters_needed(unit, args.difference, args.confidence, args.power)
    docs = math.ceil(needed * size - 1e-9)
    print(f"clusters needed to detect a difference of {args.difference:g} with {level}:")
    print(
        f"  {'at least ' if least else ''}{needed} clusters ({docs} docs at {size:.3g} a cluster)"
    )
    print(
        "  (t with clusters - 1 degrees of freedom, the test compare runs on equal clusters; "
        "clusters of unequal sizes lower the degrees of freedom and need more)"
    )
    if df is None or not math.isfinite(stderr):
        print(f"MDE with the current {count} clusters: none: {note or 'no clustered stderr'}")
        return
    smallest = mde(stderr, args.confidence, args.power, df)
    if binary and smallest > 1:
        print(f"MDE with the current {count} clusters: none: {smallest:.3g} exceeds 1")
        return
    mark = "" if note is None else f"† ({note})"
    print(f"MDE with the current {count} clusters ({n} docs): {smallest:.4g}{mark}")


def _clustered_stderr(
    args: argparse.Namespace, clustered: ClusteredRuns
) -> tuple[float, float | None, str | None]:
    """CR2's stderr of the mean difference, its degrees of freedom and compare's note: of the
    two runs' differences (compare's own `paired_mean`), or for one run, of its scores'
    mean scaled by the paired variance 2(1 - correlation) assumes."""
    from assay.stats.clustered import (
        cluster_count,
        cluster_degrees_of_freedom,
        cr2_variance_of_mean,
    )
    from assay.stats.paired import paired_mean
    from assay.stats.thresholds import SPARSE_DISCORDANT

    if len(clustered.scores) == 2:
        a, b = clustered.scores
        result = paired_mean(a, b, clusters=clustered.labels, confidence=args.confidence)
        df = cluster_degrees_of_freedom(clustered.labels)
        return result.stderr, (df if math.isfinite(df) else None), result.note
    variance = cr2_variance_of_mean(clustered.scores[0], clustered.labels)
    df = cluster_degrees_of_freedom(clustered.labels)
    stderr = math.sqrt(2 * (1 - args.correlation) * variance) if variance == variance else math.nan
    count = cluster_count(clustered.labels)
    note = (
        f"{count} clusters: below {SPARSE_DISCORDANT} compare decides by the exact sign-flip "
        "test over cluster sums, and this CR2 MDE may be optimistic"
        if count < SPARSE_DISCORDANT
        else None
    )
    return stderr, (df if math.isfinite(df) else None), note
