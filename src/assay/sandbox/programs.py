"""Scoring model-written programs: run each against its tests in assay's sandbox; pass@k.

Each candidate program is run as the candidate, a newline and the test code (the contract of
the hub's `code_eval` metric, which lm-eval uses) in the run's sandbox (`--sandbox`, see
`assay.sandbox`) with time and memory limits; it passes when it exits cleanly in time.
Identical candidates of one problem are run once; every candidate's outcome (passed, failed,
timed_out, killed_by_limit, blocked) goes to the samples file.

The rules are code_eval's (`benchmarks/code_eval_parity.py` compares the two doc by doc): a
program passes when its code returned within `timeout` seconds of its own run time (3 by
default; an exception, an exit of any status, a signal or a later return is no pass); it runs
in a namespace without a `__name__` of its own, as in code_eval, so an `if __name__ ==
"__main__":` block does not run; and pass@k is the unbiased estimator of Chen et al. (2021).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from assay.sandbox import SandboxResult

CODE_EVAL_TIMEOUT_S = 3.0
"""Seconds of execution `code_eval` allows a program (its `timeout` default)."""

STARTUP_S = 2.0
"""What a fresh interpreter's start-up adds to a program's time: a sandboxed run is killed
at its run time plus this (a program whose code returned after its run time is timed out
all the same)."""

MEMORY_MB = 1024
"""Address-space limit per program."""


def run_programs(
    programs: Sequence[str], run_s: float = CODE_EVAL_TIMEOUT_S
) -> list[SandboxResult]:
    """Run each program in the run's sandbox (`assay.sandbox.run_many`), its code given
    `run_s` seconds, identical programs once; the results, one per program in order, are
    recorded for the samples file."""
    from assay.sandbox import Limits, run_many
    from assay.sandbox.policy import record

    unique = list(dict.fromkeys(programs))
    limits = Limits(timeout_s=run_s + STARTUP_S, run_s=run_s, memory_mb=MEMORY_MB, as_main=False)
    ran = dict(zip(unique, run_many(unique, limits), strict=True))
    results = [ran[program] for program in programs]
    record(results)
    return results


def count_passing(candidates: Sequence[str], tests: str) -> int:
    """How many candidates pass `tests`, each run as the candidate, a newline and the tests."""
    return sum(result.passed for result in run_programs([c + "\n" + tests for c in candidates]))


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
