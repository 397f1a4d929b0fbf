"""What a paired comparison reports (`PairedResult`), the names of its methods and tests, and
the one builder of a result whose interval and MDE are not estimated."""

from __future__ import annotations

import math
from dataclasses import dataclass

METHOD_PAIRED = "paired"
METHOD_CLUSTERED = "paired-clustered"
METHOD_BOOTSTRAP = "paired-bootstrap"
METHOD_CLUSTER_BOOTSTRAP = "paired-cluster-bootstrap"
METHOD_EXACT = "paired-exact"
EXACT_BOUND = "-exact-bound"
"""Suffix of the method of a comparison whose interval is the exact bound of `stats.exact`."""


MDE_NOTE = "MDE: "
"""How the note of a 0/1 comparison whose MDE exceeds 1 begins (`paired_binary.within_range`)
when nothing else is noted: its interval stands, unmarked (`interval_noted`)."""


def interval_noted(note: str | None) -> bool:
    """Whether a comparison's note concerns its interval (a missing or substitute statistic),
    not only an MDE beyond the range of 0/1 differences: the tables mark the interval `†`
    exactly then."""
    return note is not None and not note.startswith(MDE_NOTE)


TEST_NORMAL = "normal"
TEST_CLUSTERED = "t(Bell-McCaffrey) CR2"
TEST_MCNEMAR = "McNemar exact"
TEST_SIGN_FLIP = "sign-flip exact"
TEST_SIGN = "exact sign test"
TEST_BOOTSTRAP = "bootstrap"
TEST_NONE = "none"


@dataclass(frozen=True)
class PairedResult:
    """One paired comparison of run b against run a. NaN where a statistic cannot be
    estimated from the docs, with the reason in `note`."""

    n: int
    """Docs paired."""
    mean_a: float
    mean_b: float
    diff: float
    """mean_b - mean_a (for corpus-level metrics: aggregate(b) - aggregate(a))."""
    stderr: float
    """Standard error of diff."""
    ci_low: float
    ci_high: float
    confidence: float
    p_value: float
    """Two-sided p-value of "no difference"."""
    mcnemar_p: float | None
    """McNemar's exact two-sided p-value, for 0/1 metrics only."""
    mde: float
    """Smallest true difference detected with 80 % power at level 1 - confidence."""
    clusters: int | None
    """Distinct clusters (None: docs treated as independent)."""
    method: str
    """paired, paired-clustered, paired-bootstrap or paired-cluster-bootstrap; with the suffix
    -exact-bound when the interval is the exact bound of a sample without spread."""
    note: str | None = None
    """Why a statistic is NaN, or which conservative substitute stands in for it; None when
    every statistic was estimated."""
    stderr_bound: float | None = None
    """Where `stderr` cannot be estimated but bounded: the upper bound the MDE was computed
    from (a group that combines tasks uses it in place of the missing stderr)."""
    test: str = "normal"
    """The test `p_value` comes from (and so the row's `*`): normal, t(Bell-McCaffrey) CR2,
    McNemar exact, sign-flip exact, exact sign test, bootstrap, or none."""


def unestimated(
    n: int,
    mean_a: float,
    mean_b: float,
    diff: float,
    confidence: float,
    *,
    note: str,
    p_value: float = math.nan,
    test: str = TEST_NONE,
    stderr: float = math.nan,
    mcnemar_p: float | None = None,
    clusters: int | None = None,
    method: str = METHOD_PAIRED,
) -> PairedResult:
    """A comparison whose interval and MDE are not estimated (NaN), with the reason in `note`;
    the p-value and stderr only where the caller has them."""
    return PairedResult(
        n=n,
        mean_a=mean_a,
        mean_b=mean_b,
        diff=diff,
        stderr=stderr,
        ci_low=math.nan,
        ci_high=math.nan,
        confidence=confidence,
        p_value=p_value,
        mcnemar_p=mcnemar_p,
        mde=math.nan,
        clusters=clusters,
        method=method,
        test=test,
        note=note,
    )
