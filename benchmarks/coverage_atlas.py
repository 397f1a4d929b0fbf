"""The coverage atlas: how often every interval and test assay shows does what it claims.

    PYTHONPATH=src python benchmarks/coverage_atlas.py [--reps 1000] [--seed 0] [--jobs 2] [--fast]

Each cell draws `reps` seeded samples from a population whose truth is known, runs assay's own
code on each (`paired_mean`, `paired_bootstrap`, `mcnemar_exact`, the live interval of
`stats.online`, the anytime sequence of `stats.anytime`, `assay power`'s planning formula) and
counts: the share of intervals that cover the truth (coverage), the share of tests that reject a
true null (false-positive rate), or the share that detect a true difference at the n that
`assay power` planned (achieved power). It prints one markdown table, nominal beside measured;
`Shipped` says which method assay uses in that cell (the normal interval where assay switches
away from it is measured too, marked "replaced", to show why). The time taken is printed at the
end (stderr); the cost grows linearly with --reps. `--fast` is the small grid the test suite
checks.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from multiprocessing import Pool
from unittest import mock

import numpy as np

from assay.stats import binary_power, online
from assay.stats.anytime import paired_confidence_sequence
from assay.stats.binary_power import binary_docs_needed, discordance
from assay.stats.clustered import cluster_degrees_of_freedom
from assay.stats.exact import constant_sample_bound
from assay.stats.paired import PairedResult, paired_bootstrap, paired_mean
from assay.stats.power import binary_variance_floor, other_docs_needed

LEVEL = 0.95
FEW_DRAWS = 50
"""Draws below which a cell's measure is too noisy to judge against the bar (no ✗): the
unmarked minority of a cell whose draws are mostly marked, say."""
_SKEWED_MEAN = float(np.mean(np.minimum(np.random.default_rng(9).lognormal(-4, 1.5, 10**6), 1.0)))
"""Mean of the capped lognormal amount by which a doc differs in the skewed populations."""


@dataclass(frozen=True)
class Cell:
    """One measured cell of the atlas."""

    family: str
    """What is measured: an interval (coverage), a test (false positives) or power."""
    setting: str
    measure: str
    """coverage, false positives or power."""
    nominal: float
    """What assay claims: the confidence level, α, or the planned power."""
    measured: float
    shipped: str
    """The method assay ships for this cell (most draws), or "replaced" for a contrast."""
    reps: int

    def holds(self) -> bool:
        """Coverage ≥ 0.90, false positives ≤ 0.10 or power ≥ 0.70: the atlas' bar."""
        if self.measure == "coverage":
            return self.measured >= 0.90
        if self.measure == "false positives":
            return self.measured <= 0.10
        return self.measured >= 0.70


def _binary_pair(
    rng: np.random.Generator, n: int, only_b: float, only_a: float, base: float = 0.3
) -> tuple[np.ndarray, np.ndarray]:
    """Two 0/1 runs over n docs: b alone right w.p. only_b, a alone w.p. only_a, both right
    w.p. `base` (capped), otherwise both wrong; the true difference is only_b - only_a."""
    u = rng.uniform(size=n)
    both = min(base, 1 - only_a - only_b)
    b = (u < only_b) | ((u >= only_b + only_a) & (u < only_b + only_a + both))
    a = ((u >= only_b) & (u < only_b + only_a)) | (
        (u >= only_b + only_a) & (u < only_b + only_a + both)
    )
    return a.astype(float), b.astype(float)


def _binary_counts(
    rng: np.random.Generator, n: int, only_b: float, only_a: float, reps: int, base: float = 0.3
) -> np.ndarray:
    """`reps` draws of `_binary_pair`'s population as counts (b only, a only, both right,
    both wrong): every statistic of paired 0/1 scores depends on the counts alone."""
    both = min(base, 1 - only_a - only_b)
    shares = [only_b, only_a, both, max(0.0, 1 - only_b - only_a - both)]
    return rng.multinomial(n, np.asarray(shares) / sum(shares), size=reps)


_RESULTS: dict[tuple[int, ...], PairedResult] = {}


def _binary_result(counts: np.ndarray) -> PairedResult:
    """paired_mean on the 0/1 runs these counts describe, computed once per distinct counts
    (the atlas draws the same counts many times; the result depends on nothing else). The
    row's MDE is left out (NaN): no 0/1 cell measures it, and its exact power search
    (`binary_power.exact_mde`, about 0.15 s a row) would cost most of the atlas' time over
    its 15,000 distinct counts; the interval, p-value and method are paired_mean's own."""
    key = tuple(int(c) for c in counts)
    if key not in _RESULTS:
        a = np.repeat([0.0, 1.0, 1.0, 0.0], key)
        b = np.repeat([1.0, 0.0, 1.0, 0.0], key)
        with mock.patch.object(binary_power, "exact_mde", return_value=math.nan):
            _RESULTS[key] = paired_mean(a, b)
    return _RESULTS[key]


def _share(outcomes: Iterator[tuple[bool, str]]) -> tuple[float, str, int]:
    hits, methods, count = 0, {}, 0
    for hit, method in outcomes:
        hits += hit
        methods[method] = methods.get(method, 0) + 1
        count += 1
    return hits / count, max(methods, key=lambda m: methods[m]), count


def _wald_covers(counts: np.ndarray, truth: float) -> bool:
    """The plain normal interval diff ∓ z·sd(d)/√n (what paired_mean used everywhere before
    the exact method) on 0/1 runs with these counts, a spread-free sample counted as a miss
    unless diff is the truth."""
    only_b, only_a = int(counts[0]), int(counts[1])
    n = int(counts.sum())
    diff = (only_b - only_a) / n
    variance = ((only_b + only_a) / n - diff**2) * n / (n - 1) if n > 1 else 0.0
    se = math.sqrt(max(variance, 0.0) / n)
    return abs(diff - truth) <= 1.959964 * se + 1e-12


def paired_binary_cells(reps: int, seed: int, sizes: list[int]) -> list[Cell]:
    """paired_mean on 0/1 scores over n and the share of docs that differ."""
    cells = []
    for n in sizes:
        for only_b, only_a in [(0.10, 0.05), (0.02, 0.0), (0.30, 0.30)]:
            rng = np.random.default_rng(seed)
            truth = only_b - only_a
            results = [_binary_result(c) for c in _binary_counts(rng, n, only_b, only_a, reps)]
            coverage, method, count = _share(
                (r.ci_low - 1e-12 <= truth <= r.ci_high + 1e-12, r.method) for r in results
            )
            setting = f"0/1, n={n}, b-only {only_b:g}, a-only {only_a:g}"
            cells.append(Cell("paired 0/1", setting, "coverage", LEVEL, coverage, method, count))
    return cells


def sparse_cells(reps: int, seed: int, n: int = 1000) -> list[Cell]:
    """Few differing docs among n: coverage (one-sided differences) and false positives
    (differences in both directions, no true difference), shipped method and plain normal."""
    cells = []
    for expected in [1, 2, 4, 10, 20, 40]:
        rng = np.random.default_rng(seed + expected)
        share = expected / n
        draws = _binary_counts(rng, n, share, 0.0, reps)
        results = [_binary_result(c) for c in draws]
        covered = [r.ci_low - 1e-12 <= share <= r.ci_high + 1e-12 for r in results]
        method = max({r.method for r in results}, key=[r.method for r in results].count)
        setting = f"n={n}, ~{expected} docs differ, all favour b"
        cells.append(
            Cell("sparse 0/1", setting, "coverage", LEVEL, float(np.mean(covered)), method, reps)
        )
        wald = float(np.mean([_wald_covers(c, share) for c in draws]))
        cells.append(
            Cell("sparse 0/1", setting, "coverage", LEVEL, wald, "normal (replaced)", reps)
        )
        null = _binary_counts(rng, n, share / 2, share / 2, reps)
        rejected = [_binary_result(c).p_value < 1 - LEVEL for c in null]
        setting = f"n={n}, ~{expected} docs differ, no true difference"
        cells.append(
            Cell(
                "sparse 0/1",
                setting,
                "false positives",
                1 - LEVEL,
                float(np.mean(rejected)),
                method,
                reps,
            )
        )
    return cells


def mcnemar_cells(reps: int, seed: int) -> list[Cell]:
    """McNemar's exact test (the p-value of every 0/1 row) under no true difference."""
    cells = []
    for n, share in [(50, 0.2), (1000, 0.01), (1000, 0.1)]:
        rng = np.random.default_rng(seed)
        draws = _binary_counts(rng, n, share / 2, share / 2, reps)
        rejected = [(_binary_result(c).mcnemar_p or 1.0) < 1 - LEVEL for c in draws]
        setting = f"n={n}, {share:g} of docs differ, no true difference"
        cells.append(
            Cell(
                "McNemar exact",
                setting,
                "false positives",
                1 - LEVEL,
                float(np.mean(rejected)),
                "mcnemar",
                reps,
            )
        )
    return cells


def continuous_cells(reps: int, seed: int, sizes: list[int]) -> list[Cell]:
    """paired_mean on bounded (beta scores in [0, 1]) and unbounded (t₃ noise) metrics, and
    at the floor (mostly 0 with rare small scores)."""
    populations: dict[
        str, Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray, float]]
    ] = {
        "bounded beta(2,5) vs beta(2,4)": lambda g, n: (
            g.beta(2, 5, n),
            g.beta(2, 4, n),
            2 / 6 - 2 / 7,
        ),
        "unbounded, t(3) noise, shift 0.1": lambda g, n: (
            (base := g.normal(size=n)),
            base + 0.1 + g.standard_t(3, n),
            0.1,
        ),
        "skewed: 5 % of docs differ, one way, lognormal": lambda g, n: (
            np.zeros(n),
            (g.uniform(size=n) < 0.05) * np.minimum(g.lognormal(-4, 1.5, n), 1.0),
            _SKEWED_MEAN * 0.05,
        ),
        "skewed: 20 % of docs differ, one way, lognormal": lambda g, n: (
            np.zeros(n),
            (g.uniform(size=n) < 0.2) * np.minimum(g.lognormal(-4, 1.5, n), 1.0),
            _SKEWED_MEAN * 0.2,
        ),
        "skewed: exponential differences": lambda g, n: (
            (base := g.uniform(size=n)),
            base + g.exponential(1.0, n),
            1.0,
        ),
        "floor: 95 % zeros, rest uniform": lambda g, n: (
            np.where(g.uniform(size=n) < 0.95, 0.0, g.uniform(size=n)),
            np.where(g.uniform(size=n) < 0.95, 0.0, g.uniform(size=n)),
            0.0,
        ),
    }
    return [
        cell
        for name, draw in populations.items()
        for n in sizes
        for cell in _paired_mean_cells(f"{name}, n={n}", draw, n, reps, seed)
    ]


Draw = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray, float]]


def lognormal_cells(reps: int, seed: int, sizes: list[int]) -> list[Cell]:
    """Unbounded, heavily skewed differences (lognormal, sigma 1, 1.5, 2) on many docs, where
    the normal interval held only with Cochran's rule (n > 25·g1²) as its guard."""

    def draw(sigma: float) -> Draw:
        return lambda g, n: (
            (base := g.uniform(0, 10, n)),
            base + g.lognormal(0, sigma, n),
            math.exp(sigma**2 / 2),
        )

    return [
        cell
        for sigma in (1.0, 1.5, 2.0)
        for n in sizes
        for cell in _paired_mean_cells(
            f"lognormal differences, sigma {sigma:g}, n={n}", draw(sigma), n, reps, seed
        )
    ]


def thin_cluster_cells(reps: int, seed: int) -> list[Cell]:
    """Clusters where the data are thin: a few 0/1 docs differ (one way) among 100 clusters
    of 10, and skewed (lognormal) differences with one doc per cluster."""

    def sparse(k: int) -> Draw:
        return lambda g, n: (np.zeros(n), (g.uniform(size=n) < k / n) * 1.0, k / n)

    def singleton(g: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, float]:
        base = g.uniform(0, 10, n)
        return base, base + g.lognormal(0, 1.5, n), math.exp(1.5**2 / 2)

    cells = []
    for k in (3, 5, 10, 20):
        labels = np.arange(1000) // 10
        name = f"{k} of 1,000 0/1 docs differ (expected), one way, 100 clusters of 10"
        cells += _paired_mean_cells(name, sparse(k), 1000, reps, seed, labels)
    for n in (3, 5, 50):
        name = f"lognormal differences, one doc per cluster, n={n}"
        cells += _paired_mean_cells(name, singleton, n, reps, seed, np.arange(n))
    return cells


def _paired_mean_cells(
    setting: str,
    draw: Draw,
    n: int,
    reps: int,
    seed: int,
    clusters: np.ndarray | None = None,
) -> list[Cell]:
    """Coverage of paired_mean's intervals on draws of one population, the unmarked and the
    marked draws apart (draws with no interval shown have nothing to cover)."""
    cells = []
    rng = np.random.default_rng(seed)
    outcomes: dict[str, list[bool]] = {}
    for _ in range(reps):
        a, b, truth = draw(rng, n)
        r = paired_mean(a, b, clusters=None if clusters is None else clusters.tolist())
        if math.isnan(r.ci_low):
            continue  # no interval shown (n/a†): nothing to cover
        # Unmarked and marked draws apart: the bar is on the intervals shown unmarked.
        label = r.method + (" (marked †)" if r.note else "")
        outcomes.setdefault(label, []).append(r.ci_low - 1e-12 <= truth <= r.ci_high + 1e-12)
    for label, covered in sorted(outcomes.items()):
        cells.append(
            Cell(
                "paired mean" if clusters is None else "clustered",
                setting,
                "coverage",
                LEVEL,
                float(np.mean(covered)),
                label,
                len(covered),
            )
        )
    return cells


def cluster_cells(reps: int, seed: int, layouts: list[list[int]]) -> list[Cell]:
    """Clustered comparisons: a cluster-level shift (sd 0.3) plus doc noise (sd 1), true
    difference 0, over cluster sizes equal and unequal; the shipped CR2 interval read against
    Bell-McCaffrey's t, and the uncorrected z one it replaced."""
    cells = []
    for sizes in layouts:
        rng = np.random.default_rng(seed + len(sizes) + sizes[0])
        labels = np.repeat(np.arange(len(sizes)), sizes)
        shipped: dict[str, list[bool]] = {}
        old = []
        for _ in range(reps):
            d = rng.normal(0, 0.3, len(sizes))[labels] + rng.normal(0, 1, labels.size)
            r = paired_mean(np.zeros_like(d), d, clusters=labels)
            label = "paired-clustered (CR2, t(Bell-McCaffrey))" + (" (marked †)" if r.note else "")
            shipped.setdefault(label, []).append(r.ci_low <= 0 <= r.ci_high)
            sums = np.bincount(labels, weights=d - d.mean())
            miller = math.sqrt(
                float(d.var(ddof=1)) / len(d)
                + (float(sums @ sums) - float((d - d.mean()) @ (d - d.mean()))) / len(d) ** 2
            )
            old.append(abs(float(d.mean())) <= 1.959964 * miller)
        if len(set(sizes)) == 1:
            setting = f"{len(sizes)} clusters of {sizes[0]} docs"
        else:
            shown = ", ".join(str(k) for k in sizes[:5]) + (", ..." if len(sizes) > 5 else "")
            setting = f"{len(sizes)} clusters of {shown} docs"
        dof = cluster_degrees_of_freedom(labels.tolist())
        for label, covered in shipped.items():
            cells.append(
                Cell(
                    "clustered",
                    f"{setting} (dof {dof:.2g})",
                    "coverage",
                    LEVEL,
                    float(np.mean(covered)),
                    label,
                    len(covered),
                )
            )
        cells.append(
            Cell(
                "clustered",
                setting,
                "coverage",
                LEVEL,
                float(np.mean(old)),
                "Miller z (replaced)",
                reps,
            )
        )
    return cells


def bootstrap_cells(reps: int, seed: int, sizes: list[int], iters: int = 200) -> list[Cell]:
    """paired_bootstrap of a mean of 0/1 scores (the corpus-level path, on an aggregation whose
    truth is known), marked below 30 docs."""
    cells = []
    for n in sizes:
        rng = np.random.default_rng(seed + n)
        covered, shown, marked = [], 0, 0
        for _ in range(reps):
            a, b = _binary_pair(rng, n, 0.25, 0.10)
            r = paired_bootstrap(a, b, np.mean, iters=iters, seed=int(rng.integers(1 << 30)))
            if math.isnan(r.ci_low):
                continue
            shown += 1
            marked += r.note is not None
            covered.append(r.ci_low - 1e-12 <= 0.15 <= r.ci_high + 1e-12)
        if shown:
            label = "paired-bootstrap" + (" (marked †)" if marked > shown / 2 else "")
            cells.append(
                Cell(
                    "paired bootstrap",
                    f"0/1 mean, n={n}, {iters} resamples",
                    "coverage",
                    LEVEL,
                    float(np.mean(covered)),
                    label,
                    shown,
                )
            )
    return cells


def live_cells(reps: int, seed: int) -> list[Cell]:
    """The live interval of `assay run` / run_evals (stats.online.mean_interval with the
    observed variance; the exact interval below FEW_EVENTS rows at one end) at one look,
    floors and ceilings included, and run_evals' wilson and hoeffding strategies; "partial"
    rows score 0.5 where a 0/1 row would score 1 (values that are not 0/1)."""
    grid = [
        ("normal", 5, 0.5, False),
        ("normal", 30, 0.5, False),
        ("normal", 30, 0.02, False),
        ("normal", 200, 0.02, False),
        ("normal", 500, 0.02, False),
        ("normal", 1000, 0.01, False),
        ("normal", 200, 0.98, False),
        ("normal", 1000, 0.5, False),
        ("normal", 200, 0.04, True),
        ("normal", 2000, 0.04, True),
        ("wilson", 30, 0.02, False),
        ("wilson", 200, 0.02, False),
        ("hoeffding", 200, 0.02, False),
    ]
    cells = []
    for strategy, n, p, halved in grid:
        rng = np.random.default_rng(seed + n)
        settings = online.OnlineSettings(strategy=strategy, use_fpc=False)  # type: ignore[arg-type]
        truth = p / 2 if halved else p
        covered, methods = [], []
        for _ in range(reps):
            x = (rng.uniform(size=n) < p).astype(float) * (0.5 if halved else 1.0)
            variance = float(x.var(ddof=1)) if n > 1 else None
            e = online.mean_interval(float(x.mean()), n, variance=variance, settings=settings)
            methods.append(e.method + (" (marked †)" if e.note else ""))
            covered.append(e.lower - 1e-12 <= truth <= e.upper + 1e-12)
        method = max(set(methods), key=methods.count)
        values = "0/0.5" if halved else "0/1"
        cells.append(
            Cell(
                "live interval",
                f"{strategy}, {values}, n={n}, p={p:g}, one look",
                "coverage",
                LEVEL,
                float(np.mean(covered)),
                method,
                reps,
            )
        )
    return cells


def anytime_cells(reps: int, seed: int, population: int = 200) -> list[Cell]:
    """The anytime-valid sequence of the paired difference over a finite population, looked
    at after every row: the share of runs that cover at every look."""
    cells = []
    for only_b, only_a in [(0.1, 0.05), (0.02, 0.0)]:
        rng = np.random.default_rng(seed)
        a_pop, b_pop = _binary_pair(rng, population, only_b, only_a)
        truth = float(a_pop.mean() - b_pop.mean())
        covered = []
        for _ in range(reps):
            order = rng.permutation(population)
            seq = paired_confidence_sequence(a_pop[order], b_pop[order], population=population)
            covered.append(bool(np.all((seq.lower <= truth + 1e-9) & (truth - 1e-9 <= seq.upper))))
        setting = f"N={population}, b-only {only_b:g}, a-only {only_a:g}, every look"
        cells.append(
            Cell(
                "anytime-valid",
                setting,
                "coverage",
                LEVEL,
                float(np.mean(covered)),
                "anytime (betting)",
                reps,
            )
        )
    return cells


def power_cells(reps: int, seed: int) -> list[Cell]:
    """`assay power`'s plan for 0/1 scores (`binary_docs_needed`, one sample per doc), then
    assay's own test at the planned n on draws whose shares of differing docs match the planned
    variance: achieved power."""
    scenarios = [
        ("two all-wrong runs of 1000 docs", constant_sample_bound(0.0, 1000, LEVEL).variance, 0.05),
        ("two all-wrong runs of 300 docs", constant_sample_bound(0.0, 300, LEVEL).variance, 0.05),
        ("measured variance 0.15", 0.15, 0.05),
        ("measured variance 0.05", 0.05, 0.02),
        ("--accuracy 0.9 --correlation 0.5", 0.09, 0.1),
        ("measured variance 0.01", 0.01, -0.01),
    ]
    cells = []
    for name, variance, delta in scenarios:
        n = binary_docs_needed(variance, delta)
        share, favour = discordance(max(variance, binary_variance_floor(delta)), delta)
        toward, away = share * favour, share * (1 - favour)
        only_b, only_a = (toward, away) if delta > 0 else (away, toward)
        rng = np.random.default_rng(seed)
        detected = []
        for counts in _binary_counts(rng, n, only_b, only_a, reps):
            r = _binary_result(counts)
            detected.append(r.p_value < 1 - LEVEL and r.diff * delta > 0)
        cells.append(
            Cell(
                "assay power",
                f"{name}, detect {delta:g}: planned n={n}",
                "power",
                0.8,
                float(np.mean(detected)),
                "paired_mean's test",
                reps,
            )
        )
    return cells


def _cluster_layouts(fast: bool) -> list[list[int]]:
    """Cluster sizes: equal (20 docs each), and one large cluster among small ones."""
    equal = [[20] * g for g in ([2, 5, 30] if fast else [2, 3, 5, 10, 30, 100])]
    unequal = [[200, 5, 5, 5, 5], [100, 100, 2, 2], [1000, 1, 1, 1]]
    if not fast:
        unequal += [[300, *[5] * 9], [50, 10, 10, 10, 10], [90, 10], [200, 5, 5], [500, 2, 2]]
    return equal + unequal


def other_power_cells(reps: int, seed: int) -> list[Cell]:
    """`assay power`'s plan for values that are not 0/1 (`other_docs_needed`: the normal
    formula, raised to what compare's own test needs), then compare's test (`paired_mean`) at
    the planned n on normal differences with the planned variance: achieved power."""
    cells = []
    for name, sd, delta, share in [
        ("0-100 metric, sd 9.7, detect 20", 9.7, 20.0, 1.0),
        ("0-100 metric, sd 9.7, detect 5", 9.7, 5.0, 1.0),
        ("scores in [0, 1], sd 0.2, detect 0.1", 0.2, 0.1, 1.0),
        ("scores in [0, 1], sd 0.3, detect 0.05", 0.3, 0.05, 1.0),
        ("20 % of docs differ, detect 0.05", 0.2, 0.05, 0.2),
    ]:
        variance = share * (sd**2 + (delta / share) ** 2) - delta**2
        n, _ = other_docs_needed(variance, delta, differing_share=share)
        rng = np.random.default_rng(seed)
        detected = []
        for _ in range(reps):
            a = rng.uniform(0, 100 if sd > 1 else 1, n)
            differs = rng.uniform(size=n) < share
            d = np.where(differs, rng.normal(delta / share, sd, n), 0.0)
            r = paired_mean(a, a + d)
            detected.append(r.p_value < 1 - LEVEL and r.diff * delta > 0)
        cells.append(
            Cell(
                "assay power",
                f"{name}: planned n={n}",
                "power",
                0.8,
                float(np.mean(detected)),
                "paired_mean's test",
                reps,
            )
        )
    return cells


def families(reps: int, seed: int, fast: bool = False) -> list[Callable[[], list[Cell]]]:
    """The atlas' families of cells, each a call that returns its cells (independent of the
    others: each seeds its own draws); `fast` is the small grid the test suite runs."""
    sizes = [5, 30, 300] if fast else [2, 5, 10, 30, 100, 1000, 5000]
    return [
        *(partial(paired_binary_cells, reps, seed, [n]) for n in sizes),
        partial(sparse_cells, reps, seed),
        partial(mcnemar_cells, reps, seed),
        partial(continuous_cells, reps, seed, sizes),
        partial(lognormal_cells, reps, seed, [100] if fast else [100, 300, 1000]),
        partial(cluster_cells, reps, seed, _cluster_layouts(fast)),
        partial(thin_cluster_cells, reps, seed),
        partial(bootstrap_cells, reps, seed, [5, 30] if fast else [3, 5, 10, 30, 100]),
        partial(live_cells, reps, seed),
        partial(anytime_cells, reps, seed),
        partial(power_cells, reps, seed),
        partial(other_power_cells, reps, seed),
    ]


def _run(family: Callable[[], list[Cell]]) -> list[Cell]:
    return family()


def atlas(reps: int, seed: int, fast: bool = False, jobs: int = 1) -> list[Cell]:
    """Every cell, in the order of `families`; with `jobs` > 1 the families run in that many
    processes (the cells are the same: every family seeds its own draws)."""
    work = families(reps, seed, fast)
    if jobs <= 1:
        return [cell for family in work for cell in family()]
    with Pool(jobs) as pool:
        return [cell for cells in pool.imap(_run, work) for cell in cells]


def markdown(cells: list[Cell]) -> str:
    """The table docs/comparing-runs.md publishes."""
    lines = [
        "| What | Cell | Measure | Nominal | Measured | Shipped as | Draws |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in cells:
        judged = c.reps >= FEW_DRAWS and "replaced" not in c.shipped and "marked" not in c.shipped
        flag = " ✗" if judged and not c.holds() else ""
        lines.append(
            f"| {c.family} | {c.setting} | {c.measure} | {c.nominal:.2f} | {c.measured:.3f}{flag} "
            f"| {c.shipped} | {c.reps} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=150, help="draws per cell (default 150)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fast", action="store_true", help="the small grid of the test suite")
    parser.add_argument("--jobs", type=int, default=1, help="processes to run in (default 1)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    cells = atlas(args.reps, args.seed, args.fast, args.jobs)
    print(markdown(cells))
    print(
        f"\n{len(cells)} cells, {args.reps} draws each, seed {args.seed}, {args.jobs} process(es), "
        f"{time.perf_counter() - start:.0f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
