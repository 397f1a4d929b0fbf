"""The exact sign-flip (paired permutation) test, and the comparison of values that are not
0/1 of which few docs differ, decided by it."""

from __future__ import annotations

import math

import numpy as np

from assay.stats.paired_result import TEST_SIGN_FLIP, PairedResult, unestimated
from assay.stats.thresholds import SPARSE_DISCORDANT

SIGN_FLIP_DRAWS = 1 << 16
"""Seeded random sign flips of the sign-flip test above `SIGN_FLIP_ENUMERATED` differing docs."""


SIGN_FLIP_ENUMERATED = 16
"""Differing docs up to which the sign-flip test enumerates all 2^D sign patterns."""


def sparse_differences(
    n: int,
    mean_a: float,
    mean_b: float,
    d: np.ndarray,
    differing: np.ndarray,
    confidence: float,
) -> PairedResult:
    """Values that are not 0/1, of which fewer than `SPARSE_DISCORDANT` docs differ: the
    normal interval and test lean on those few docs and under-cover, so the p-value (and `*`)
    is the exact sign-flip test over the differing docs, and no interval or MDE is claimed."""
    p_value = sign_flip_p(differing)
    count = len(differing)
    how = "all 2^D sign patterns" if count <= SIGN_FLIP_ENUMERATED else f"{SIGN_FLIP_DRAWS} draws"
    return unestimated(
        n,
        mean_a,
        mean_b,
        mean_b - mean_a,
        confidence,
        stderr=float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan,
        p_value=p_value,
        test=TEST_SIGN_FLIP,
        note=f"only {count} of the {n} docs differ (fewer than {SPARSE_DISCORDANT}): the "
        "normal interval and MDE lean on those few docs and cover less than they claim "
        "(benchmarks/coverage_atlas.py), so none is shown; p-value: exact sign-flip test "
        f"over the {count} differing docs ({how})",
    )


def sign_flip_p(differences: np.ndarray, seed: int = 1234) -> float:
    """Two-sided p-value of the sign-flip (paired permutation) test that the differences are
    symmetric about 0: the share of sign patterns whose |sum| reaches the observed one. Exact
    up to `SIGN_FLIP_ENUMERATED` values, else from `SIGN_FLIP_DRAWS` seeded draws with the
    observed pattern counted ((hits + 1)/(draws + 1), never below the exact p on average).
    On ±1 values it is McNemar's exact test. 1.0 without values."""
    values = np.abs(np.asarray(differences, dtype=np.float64))
    count = len(values)
    if count == 0:
        return 1.0
    observed = abs(float(np.asarray(differences, dtype=np.float64).sum()))
    # Sums equal up to rounding count as reaching the observed one (ties favour no rejection).
    slack = 1e-9 * float(values.sum())
    if count <= SIGN_FLIP_ENUMERATED:
        patterns = (np.arange(1 << count)[:, None] >> np.arange(count)) & 1
        sums = np.abs((1 - 2 * patterns) @ values)
        return float(np.mean(sums >= observed - slack))
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(SIGN_FLIP_DRAWS, count))
    hits = int((np.abs(signs @ values) >= observed - slack).sum())
    return (hits + 1) / (SIGN_FLIP_DRAWS + 1)
