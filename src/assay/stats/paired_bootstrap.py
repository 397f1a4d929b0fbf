"""Paired bootstrap comparisons of corpus-level metrics (an aggregation over all docs, not a
mean of per-doc values): the same resampled docs, or whole clusters, for both runs."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from assay.stats.normal import check_confidence
from assay.stats.paired_result import (
    METHOD_BOOTSTRAP,
    METHOD_CLUSTER_BOOTSTRAP,
    TEST_BOOTSTRAP,
    TEST_NONE,
    PairedResult,
)
from assay.stats.power import mde


def paired_bootstrap(
    a: Sequence[Any],
    b: Sequence[Any],
    aggregate: Callable[[Sequence[Any]], float],
    *,
    clusters: Sequence[Hashable] | None = None,
    confidence: float = 0.95,
    iters: int = 1000,
    seed: int = 1234,
) -> PairedResult:
    """Compare aggregate(b) with aggregate(a) for a corpus-level aggregation.

    Each of `iters` replicates draws n docs with replacement (with clusters: as many clusters
    as there are, with replacement, keeping each drawn cluster's docs), the same draw for both
    runs, from `numpy.random.default_rng(seed)`; draw r is `rng.integers(0, units, units)` in
    order. diff* = aggregate(b*) - aggregate(a*) per replicate; stderr = sd(diff*) (n - 1);
    the interval is the percentile interval of diff* (widened to reach diff where every
    percentile lies on one side of it); the p-value is the two-sided
    min(1, 2·(min(#{diff* ≤ 0}, #{diff* ≥ 0}) + 1)/(iters + 1)), never 0. With fewer than two
    docs or clusters, or resamples that all give the same difference, the spread cannot be
    estimated: stderr, interval and MDE are NaN (p-value 1.0 for identical runs, else NaN)
    and `note` says why.
    """
    check_confidence(confidence)
    if iters < 2:
        raise ValueError(f"iters must be at least 2, got {iters!r}")
    if len(a) != len(b):
        raise ValueError(f"{len(a)} values for run a but {len(b)} for run b")
    n = len(a)
    if clusters is not None:
        if len(clusters) != n:
            raise ValueError(f"{n} values but {len(clusters)} cluster labels")
        members = _cluster_members(clusters)
        method, count = METHOD_CLUSTER_BOOTSTRAP, len(members)
    else:
        members = [np.asarray([i]) for i in range(n)]
        method, count = METHOD_BOOTSTRAP, None
    rng = np.random.default_rng(seed)
    replicates = np.empty(iters)
    units = len(members)
    with warnings.catch_warnings(record=True) as raised:
        # An aggregation's library (sklearn's f1 on a resample without positives) may warn on
        # many resamples: the warnings are summarised once in the note, not printed each time.
        warnings.simplefilter("always")
        for r in range(iters):
            drawn = rng.integers(0, units, units)
            rows = np.concatenate([members[u] for u in drawn]) if units else np.asarray([], int)
            replicates[r] = float(aggregate(_take(b, rows))) - float(aggregate(_take(a, rows)))
        mean_a = float(aggregate(a)) if n else math.nan
        mean_b = float(aggregate(b)) if n else math.nan
        diff = mean_b - mean_a
    notes = []
    if n < 2 or units < 2:
        stderr = low = high = p_value = math.nan
        where = f"{n} doc(s)" if clusters is None else f"{n} doc(s) in {units} cluster(s)"
        notes.append(
            f"{where}: a bootstrap needs two or more to estimate a spread, so there is no "
            "stderr, interval, p-value or MDE"
        )
    elif not np.isfinite(replicates).all():
        stderr = low = high = p_value = math.nan
        bad = int((~np.isfinite(replicates)).sum())
        notes.append(
            f"{bad} of the {iters} bootstrap resamples give a difference that is not a finite "
            "number: no stderr, interval, p-value or MDE"
        )
    elif not np.ptp(replicates):
        stderr = low = high = math.nan
        p_value = 1.0 if diff == 0 and replicates[0] == 0 else math.nan
        notes.append(
            f"all {iters} bootstrap resamples give the same difference ({replicates[0]:g}): the "
            "spread cannot be estimated from these docs, so there is no stderr, interval or MDE"
            + ("" if p_value == 1.0 else ", nor a p-value")
        )
    else:
        stderr = float(replicates.std(ddof=1))
        tail = (1 - confidence) / 2
        low, high = (float(q) for q in np.quantile(replicates, [tail, 1 - tail]))
        # A skewed aggregation can put every percentile on one side of the estimate itself:
        # the interval is widened to reach it rather than exclude the one value observed.
        low, high = min(low, diff), max(high, diff)
        below, above = int((replicates <= 0).sum()), int((replicates >= 0).sum())
        p_value = min(1.0, 2 * (min(below, above) + 1) / (iters + 1))
        if units < SMALL_BOOTSTRAP:
            what = "docs" if clusters is None else "clusters"
            notes.append(
                f"bootstrap over {units} {what}: below {SMALL_BOOTSTRAP} the percentile "
                "interval is narrower than its level claims (benchmarks/coverage_atlas.py), so "
                "the interval, p-value and MDE are optimistic"
            )
    if raised:
        notes.append(_warnings_summary(raised))
    note = "; ".join(notes) if notes else None
    return PairedResult(
        n=n,
        mean_a=mean_a,
        mean_b=mean_b,
        diff=diff,
        stderr=stderr,
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        p_value=p_value,
        mcnemar_p=None,
        mde=mde(stderr, confidence),
        clusters=count,
        method=method,
        note=note,
        test=TEST_NONE if math.isnan(p_value) else TEST_BOOTSTRAP,
    )


SMALL_BOOTSTRAP = 30
"""Docs (or clusters) below which a paired bootstrap's interval is marked as optimistic."""


def _warnings_summary(raised: list[warnings.WarningMessage]) -> str:
    """The warnings an aggregation raised during the bootstrap, counted, each kind once."""
    kinds: dict[str, int] = {}
    for w in raised:
        key = f"{w.category.__name__}: {str(w.message).splitlines()[0][:160]}"
        kinds[key] = kinds.get(key, 0) + 1
    shown = "; ".join(f"{text} (×{count})" for text, count in kinds.items())
    return f"the aggregation warned {len(raised)} time(s) over the resamples: {shown}"


def _take(values: Sequence[Any], rows: np.ndarray) -> Any:
    """The values at `rows`: an array indexed at once, any other sequence as a list."""
    if isinstance(values, np.ndarray):
        return values[rows]
    return [values[i] for i in rows]


def _cluster_members(clusters: Sequence[Hashable]) -> list[np.ndarray]:
    """Doc indices per cluster, clusters in order of first appearance."""
    index: dict[str, list[int]] = {}
    for i, c in enumerate(clusters):
        index.setdefault(str(c), []).append(i)
    return [np.asarray(rows) for rows in index.values()]
