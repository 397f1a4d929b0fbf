"""Scoring model-written programs: run each against its tests in assay's sandbox; pass@k.

Each candidate program is run as the candidate, a newline and the test code (the contract of
the hub's `code_eval` metric, which lm-eval uses) in a separate interpreter with time and
memory limits (`assay.sandbox.run_untrusted`); it passes when it exits cleanly in time.
Identical candidates of one problem are run once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

TIMEOUT_S = 5.0
"""Wall-clock limit per program. code_eval allows 3 s of execution; a fresh interpreter's
start-up counts here too, hence the margin."""

MEMORY_MB = 1024
"""Address-space limit per program."""


def passes(program: str, timeout_s: float = TIMEOUT_S, memory_mb: int = MEMORY_MB) -> bool:
    """Whether `program` runs to a clean exit within the limits."""
    from assay.sandbox import run_untrusted

    return run_untrusted(program, timeout_s=timeout_s, memory_mb=memory_mb).passed


def count_passing(candidates: Sequence[str], tests: str) -> int:
    """How many candidates pass `tests` (programs run in parallel, duplicates once)."""
    unique = sorted(set(candidates), key=candidates.index)
    workers = max(1, min(len(unique), os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        outcome = dict(zip(unique, pool.map(lambda c: passes(c + "\n" + tests), unique)))
    return sum(outcome[candidate] for candidate in candidates)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): chance that k of n samples, c correct, hold a pass."""
    if n - c < k:
        return 1.0
    probability_all_fail = 1.0
    for i in range(n - c + 1, n + 1):
        probability_all_fail *= 1.0 - k / i
    return 1.0 - probability_all_fail


def pass_at_ks(candidates: Sequence[str], tests: str, ks: Sequence[int]) -> dict[str, float]:
    """{"pass@k": value} for each k no larger than the number of candidates."""
    n = len(candidates)
    correct = count_passing(candidates, tests)
    return {f"pass@{k}": pass_at_k(n, correct, k) for k in ks if k <= n}
