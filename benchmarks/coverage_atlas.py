"""The coverage atlas: how often every interval and test assay shows does what it claims.

    PYTHONPATH=src python benchmarks/coverage_atlas.py [--reps 1000] [--seed 0] [--fast]

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

import numpy as np

from assay.stats import online
from assay.stats.anytime import paired_confidence_sequence
from assay.stats.binary_power import binary_docs_needed, discordance
from assay.stats.exact import constant_sample_bound
from assay.stats.paired import mcnemar_exact, paired_bootstrap, paired_mean
from assay.stats.power import binary_variance_floor

LEVEL = 0.95


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


def _share(outcomes: Iterator[tuple[bool, str]]) -> tuple[float, str, int]:
    hits, methods, count = 0, {}, 0
    for hit, method in outcomes:
        hits += hit
        methods[method] = methods.get(method, 0) + 1
        count += 1
    return hits / count, max(methods, key=lambda m: methods[m]), count


def _wald_covers(a: np.ndarray, b: np.ndarray, truth: float) -> bool:
    """The plain normal interval diff ∓ z·sd(d)/√n (what paired_mean used everywhere before
    the exact method), with a spread-free sample counted as a miss unless diff is the truth."""
    d = b - a
    se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0
    return abs(float(d.mean()) - truth) <= 1.959964 * se + 1e-12


def paired_binary_cells(reps: int, seed: int, sizes: list[int]) -> list[Cell]:
    """paired_mean on 0/1 scores over n and the share of docs that differ."""
    cells = []
    for n in sizes:
        for only_b, only_a in [(0.10, 0.05), (0.02, 0.0), (0.30, 0.30)]:
            rng = np.random.default_rng(seed)
            truth = only_b - only_a
            draws = [_binary_pair(rng, n, only_b, only_a) for _ in range(reps)]

            def shipped(
                pair: tuple[np.ndarray, np.ndarray], truth: float = truth
            ) -> tuple[bool, str]:
                r = paired_mean(pair[0].tolist(), pair[1].tolist())
                return r.ci_low - 1e-12 <= truth <= r.ci_high + 1e-12, r.method

            coverage, method, count = _share(shipped(p) for p in draws)
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
        draws = [_binary_pair(rng, n, share, 0.0) for _ in range(reps)]
        results = [paired_mean(a.tolist(), b.tolist()) for a, b in draws]
        covered = [r.ci_low - 1e-12 <= share <= r.ci_high + 1e-12 for r in results]
        method = max({r.method for r in results}, key=[r.method for r in results].count)
        setting = f"n={n}, ~{expected} docs differ, all favour b"
        cells.append(
            Cell("sparse 0/1", setting, "coverage", LEVEL, float(np.mean(covered)), method, reps)
        )
        wald = float(np.mean([_wald_covers(a, b, share) for a, b in draws]))
        cells.append(
            Cell("sparse 0/1", setting, "coverage", LEVEL, wald, "normal (replaced)", reps)
        )
        null = [_binary_pair(rng, n, share / 2, share / 2) for _ in range(reps)]
        rejected = [paired_mean(a.tolist(), b.tolist()).p_value < 1 - LEVEL for a, b in null]
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
    """McNemar's exact test under no true difference."""
    cells = []
    for n, share in [(50, 0.2), (1000, 0.01), (1000, 0.1)]:
        rng = np.random.default_rng(seed)
        rejected = []
        for _ in range(reps):
            a, b = _binary_pair(rng, n, share / 2, share / 2)
            rejected.append((mcnemar_exact(a.tolist(), b.tolist()) or 1.0) < 1 - LEVEL)
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
        "floor: 95 % zeros, rest uniform": lambda g, n: (
            np.where(g.uniform(size=n) < 0.95, 0.0, g.uniform(size=n)),
            np.where(g.uniform(size=n) < 0.95, 0.0, g.uniform(size=n)),
            0.0,
        ),
    }
    cells = []
    for name, draw in populations.items():
        for n in sizes:
            rng = np.random.default_rng(seed)
            covered, methods, shown = [], [], 0
            for _ in range(reps):
                a, b, truth = draw(rng, n)
                r = paired_mean(a.tolist(), b.tolist())
                methods.append(r.method + (" (marked †)" if r.note else ""))
                if math.isnan(r.ci_low):
                    continue  # no interval shown (n/a†): nothing to cover
                shown += 1
                covered.append(r.ci_low - 1e-12 <= truth <= r.ci_high + 1e-12)
            if shown:
                method = max(set(methods), key=methods.count)
                cells.append(
                    Cell(
                        "paired mean",
                        f"{name}, n={n}",
                        "coverage",
                        LEVEL,
                        float(np.mean(covered)),
                        method,
                        shown,
                    )
                )
    return cells


def cluster_cells(reps: int, seed: int, counts: list[int], size: int = 20) -> list[Cell]:
    """Clustered comparisons: a cluster-level shift (sd 0.3) plus doc noise (sd 1), true
    difference 0; the shipped CR2 / t(G-1) interval and the uncorrected z one it replaced."""
    cells = []
    for clusters in counts:
        rng = np.random.default_rng(seed + clusters)
        labels = np.repeat(np.arange(clusters), size)
        cr2, old = [], []
        for _ in range(reps):
            d = rng.normal(0, 0.3, clusters)[labels] + rng.normal(0, 1, clusters * size)
            r = paired_mean(np.zeros_like(d).tolist(), d.tolist(), clusters=labels.tolist())
            cr2.append(r.ci_low <= 0 <= r.ci_high)
            sums = np.bincount(labels, weights=d - d.mean())
            miller = math.sqrt(
                float(d.var(ddof=1)) / len(d)
                + (float(sums @ sums) - float((d - d.mean()) @ (d - d.mean()))) / len(d) ** 2
            )
            old.append(abs(float(d.mean())) <= 1.959964 * miller)
        setting = f"{clusters} clusters of {size} docs"
        cells.append(
            Cell(
                "clustered",
                setting,
                "coverage",
                LEVEL,
                float(np.mean(cr2)),
                "paired-clustered (CR2, t(G-1))",
                reps,
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
            r = paired_bootstrap(
                a.tolist(), b.tolist(), np.mean, iters=iters, seed=int(rng.integers(1 << 30))
            )
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
    for strategy, n, p, partial in grid:
        rng = np.random.default_rng(seed + n)
        settings = online.OnlineSettings(strategy=strategy, use_fpc=False)  # type: ignore[arg-type]
        truth = p / 2 if partial else p
        covered, methods = [], []
        for _ in range(reps):
            x = (rng.uniform(size=n) < p).astype(float) * (0.5 if partial else 1.0)
            variance = float(x.var(ddof=1)) if n > 1 else None
            e = online.mean_interval(float(x.mean()), n, variance=variance, settings=settings)
            methods.append(e.method + (" (marked †)" if e.note else ""))
            covered.append(e.lower - 1e-12 <= truth <= e.upper + 1e-12)
        method = max(set(methods), key=methods.count)
        values = "0/0.5" if partial else "0/1"
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
        for _ in range(reps):
            a, b = _binary_pair(rng, n, only_b, only_a)
            r = paired_mean(a.tolist(), b.tolist())
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


def atlas(reps: int, seed: int, fast: bool = False) -> list[Cell]:
    """Every cell; `fast` is the small grid the test suite runs."""
    sizes = [5, 30, 300] if fast else [2, 5, 10, 30, 100, 1000, 5000]
    small = max(50, reps // 4)
    return [
        *paired_binary_cells(reps, seed, sizes),
        *sparse_cells(reps, seed),
        *mcnemar_cells(reps, seed),
        *continuous_cells(reps, seed, sizes),
        *cluster_cells(reps, seed, [2, 5, 30] if fast else [2, 3, 5, 10, 30, 100]),
        *bootstrap_cells(small, seed, [5, 30] if fast else [3, 5, 10, 30, 100]),
        *live_cells(reps, seed),
        *anytime_cells(small, seed),
        *power_cells(reps, seed),
    ]


def markdown(cells: list[Cell]) -> str:
    """The table docs/comparing-runs.md publishes."""
    lines = [
        "| What | Cell | Measure | Nominal | Measured | Shipped as | Draws |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in cells:
        flag = "" if c.holds() or "replaced" in c.shipped or "marked" in c.shipped else " ✗"
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
    args = parser.parse_args(argv)
    start = time.perf_counter()
    cells = atlas(args.reps, args.seed, args.fast)
    print(markdown(cells))
    print(
        f"\n{len(cells)} cells, {args.reps} draws each, seed {args.seed}, {time.perf_counter() - start:.0f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
