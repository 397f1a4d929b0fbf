"""The sample sizes at which `assay compare` changes how it reads a paired mean, in one place
for compare (`stats.paired`) and for `assay power`, which must plan with the test compare runs.
No imports: `assay power` reads them without loading numpy."""

from __future__ import annotations

SMALL_NORMAL = 30
"""Docs below which the normal interval of a mean of values that are not 0/1 is marked."""

SPARSE_DISCORDANT = 25
"""Unclustered comparisons of values that are not 0/1 with fewer differing docs than this are
decided by the exact sign-flip test, with no normal interval: it covers 80-93 % there
(benchmarks/coverage_atlas.py). 0/1 values are always decided by McNemar's exact test."""
