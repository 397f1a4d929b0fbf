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

SKEWED_DIFFERING = 100
"""Differing docs below which skewed differences of values that are not 0/1 mark the normal
interval: one-sided, heavy-tailed differences on 25-99 differing docs cover 0.83-0.89
(benchmarks/coverage_atlas.py); from 100 differing docs they cover 0.9 or more."""

SKEWED = 0.5
"""Sample skewness of the per-doc differences above which (in absolute value) they count as
skewed for `SKEWED_DIFFERING`. Low on purpose: a sample of a skewed population that happens
to look symmetric has missed its tail, and its interval covers least of all."""

SKEWED_COCHRAN = 25
"""Cochran's rule: the normal interval of a mean holds once the values number more than this
times their squared skewness (the sample's, or the larger skewness its bulk implies:
`stats.paired_normal.bulk_skewness`); fewer, and the interval is marked (any count of
differing docs: lognormal differences covered 0.75-0.88 at 100-300 docs unmarked)."""

CLUMPED_CLUSTERS = 0.8
"""Sarle's bimodality coefficient of the cluster sums above which the clustered interval is
marked (`stats.paired_clustered.clumped_clusters`): two clumps give 1, normal sums 1/3, and
of 2,000 draws of 26 normal sums none passed 0.8 (5/9, the usual bar, marked 7 %)."""
