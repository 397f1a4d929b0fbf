"""Corrections for testing many comparisons at once."""

from __future__ import annotations

from collections.abc import Sequence


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm–Bonferroni adjusted p-values (step-down), in the order given.

    With m tests sorted by p-value, the k-th smallest (k from 0) becomes
    max over j ≤ k of min(1, (m - j)·p_(j)). Rejecting where the adjusted value is below α
    keeps the family-wise error rate at α under any dependence. None (a comparison without a
    p-value) is passed through and not counted among the m tests.
    """
    present = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(present)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted
