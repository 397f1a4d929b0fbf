"""Do live intervals stay valid when looked at after every shard? And what does early stopping save?

    .venv/bin/python benchmarks/online_coverage.py [--runs 500] [--rows 1000] [--shards 20]

Part 1 simulates many evaluations of synthetic bounded scores whose population mean is known
(the mean of the N rows), scored in a random order and looked at after every shard, as
run_evals shows them. For each interval strategy it prints the share of runs whose interval
missed the truth at *some* look (what a user who watches every shard risks), beside the share
that missed at one look fixed in advance (what the nominal level promises). The anytime
sequences should stay at or below the nominal 5 % on both; the classical ones are calibrated at
one look only.

Part 2 runs several configs of known quality over the same rows, shard by shard in
round-robin, with `EarlyStop` deciding after every shard, and prints the rows scored against
running every config to the end, and how often the truly best config was stopped (the decision
error, at most 5 % by construction) next to the same rule driven by the classical normal
interval.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from assay.pipelines.shards.early_stop import EarlyStop, MetricTrace, decide
from assay.stats.anytime import confidence_sequence
from assay.stats.online import OnlineSettings, mean_interval, paired_difference

LEVEL = 0.95

Population = Callable[[np.random.Generator, int], np.ndarray]
POPULATIONS: dict[str, Population] = {
    "Bernoulli(0.5)": lambda rng, n: (rng.random(n) < 0.5).astype(float),
    "Bernoulli(0.9)": lambda rng, n: (rng.random(n) < 0.9).astype(float),
    "Beta(2, 5) scores": lambda rng, n: rng.beta(2.0, 5.0, size=n),
}


def classical(strategy: str, observed_variance: bool) -> Callable[[np.ndarray, int], Any]:
    settings = OnlineSettings(strategy, LEVEL, True)  # type: ignore[arg-type]

    def interval(prefix: np.ndarray, population: int) -> tuple[float, float]:
        variance = float(prefix.var(ddof=1)) if observed_variance and len(prefix) > 1 else None
        est = mean_interval(
            float(prefix.mean()),
            len(prefix),
            variance=variance,
            population=population,
            settings=settings,
        )
        return est.lower, est.upper

    return interval


STRATEGIES: dict[str, Callable[[np.ndarray, int], Any]] = {
    "normal (bound variance)": classical("normal", False),
    "normal (observed variance)": classical("normal", True),
    "wilson": classical("wilson", False),
    "hoeffding": classical("hoeffding", False),
}
ANYTIME = ("betting", "eb")


def coverage(runs: int, rows: int, shards: int, seed: int) -> None:
    looks = [rows * (s + 1) // shards for s in range(shards - 1)]  # the last look is a census
    fixed = looks[len(looks) // 2]
    print(
        f"\n## Coverage: {runs} runs per population, N={rows} rows, a look after each of "
        f"{shards} shards, nominal {1 - LEVEL:.0%}"
    )
    print(f"(missed ever = at some look; missed once = at the fixed look n={fixed})\n")
    names = list(STRATEGIES) + [f"anytime ({m})" for m in ANYTIME]
    header = "| population | " + " | ".join(names) + " |"
    print(header)
    print("|" + "---|" * (len(names) + 1))
    rng = np.random.default_rng(seed)
    for label, make in POPULATIONS.items():
        ever = dict.fromkeys(names, 0)
        once = dict.fromkeys(names, 0)
        widths = dict.fromkeys(names, 0.0)
        for _ in range(runs):
            population = make(rng, rows)
            truth = float(population.mean())
            order = rng.permutation(population)
            for name, interval in STRATEGIES.items():
                missed_ever = False
                for n in looks:
                    low, high = interval(order[:n], rows)
                    missed = not (low - 1e-12 <= truth <= high + 1e-12)
                    missed_ever |= missed
                    if n == fixed:
                        once[name] += missed
                        widths[name] += high - low
                ever[name] += missed_ever
            for method in ANYTIME:
                name = f"anytime ({method})"
                cs = confidence_sequence(
                    order, population=rows, looks=looks, method=method, confidence_level=LEVEL
                )
                covered = cs.covers(truth)
                ever[name] += not covered.all()
                at = looks.index(fixed)
                once[name] += not covered[at]
                widths[name] += float(cs.upper[at] - cs.lower[at])
        cells = [
            f"{ever[n] / runs:.1%} ever, {once[n] / runs:.1%} once, w {widths[n] / runs:.3f}"
            for n in names
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("\n(w = mean interval width at the fixed look)")


def config_scores(
    rng: np.random.Generator, means: list[float], rows: int, shared: float
) -> np.ndarray:
    """Per-row 0/1 scores of configs whose row-level successes are correlated (rows have a
    shared difficulty), with population means exactly `means` (a fixed number of successes)."""
    difficulty = rng.random(rows)
    scores = np.zeros((len(means), rows))
    for k, mean in enumerate(means):
        noise = np.where(rng.random(rows) < shared, difficulty, rng.random(rows))
        scores[k, np.argsort(noise)[: round(mean * rows)]] = 1.0
    return scores


def normal_rule(traces: dict[int, MetricTrace], active: list[int], population: int) -> list[int]:
    """The same stopping rule on the classical normal interval (what users do by eye)."""
    bounds = {}
    for cid, trace in traces.items():
        prefix = np.asarray(trace.values)
        est = mean_interval(
            float(prefix.mean()), len(prefix), population=population, settings=OnlineSettings()
        )
        bounds[cid] = (est.lower, est.upper)
    best = max(bounds, key=lambda c: bounds[c][0])
    return [c for c in active if c != best and bounds[c][1] < bounds[best][0]]


def normal_paired_rule(
    traces: dict[int, MetricTrace], active: list[int], population: int
) -> list[int]:
    """Stop a config once the classical paired-difference interval to the best excludes 0."""
    means = {cid: float(np.mean(trace.values)) for cid, trace in traces.items()}
    best = max(means, key=means.__getitem__)
    stopped = []
    for cid in active:
        if cid == best:
            continue
        n = min(traces[best].n, traces[cid].n)  # both follow one order: a common prefix
        est = paired_difference(
            traces[best].values[:n], traces[cid].values[:n], population=population
        )
        if est.lower > 0:
            stopped.append(cid)
    return stopped


def early_stopping(runs: int, rows: int, shards: int, seed: int) -> None:
    scenarios = {
        "spread 0.50-0.80": [0.5, 0.6, 0.7, 0.8],
        "close 0.60-0.66": [0.60, 0.62, 0.64, 0.66],
        "all equal 0.60": [0.6, 0.6, 0.6, 0.6],
    }
    rules: dict[str, Callable[[dict[int, MetricTrace], list[int], int], list[int]]] = {
        "anytime paired": lambda t, a, n: [
            d.config_id for d in decide(t, a, EarlyStop("score", paired=True), n)
        ],
        "anytime marginal": lambda t, a, n: [
            d.config_id for d in decide(t, a, EarlyStop("score", paired=False), n)
        ],
        "normal marginal": normal_rule,
        "normal paired": normal_paired_rule,
    }
    print(f"\n## Early stopping: 4 configs, N={rows} rows, {shards} shards, {runs} runs each")
    print(
        "(the same rule on anytime sequences, paired or marginal, and on the classical normal "
        "intervals)"
    )
    print(
        "(rows = rows scored as a share of running all 4 to the end; error = runs in which a "
        "truly best config was stopped)\n"
    )
    print("| configs' means | " + " | ".join(rules) + " |")
    print("|" + "---|" * (len(rules) + 1))
    rng = np.random.default_rng(seed)
    for label, means in scenarios.items():
        used = dict.fromkeys(rules, 0)
        errors = dict.fromkeys(rules, 0)
        top = max(means)
        best_ids = {k + 1 for k, m in enumerate(means) if m == top}
        for _ in range(runs):
            scores = config_scores(rng, means, rows, shared=0.7)
            order = rng.permutation(rows)
            for name, rule in rules.items():
                active = [k + 1 for k in range(len(means))]
                done = dict.fromkeys(active, 0)
                wrong = False
                for shard in range(shards):
                    end = rows * (shard + 1) // shards
                    for cid in active:
                        done[cid] = end
                    if shard == shards - 1:
                        break
                    traces = {
                        cid: MetricTrace(
                            values=list(scores[cid - 1, order[: done[cid]]]),
                            rows=list(order[: done[cid]]),
                        )
                        for cid in done
                    }
                    stopped = rule(traces, active, rows)
                    active = [c for c in active if c not in stopped]
                    wrong |= bool(best_ids & set(stopped))
                errors[name] += wrong
                used[name] += sum(done.values())
        cells = [
            f"rows {used[n] / (runs * rows * len(means)):.0%}, error {errors[n] / runs:.1%}"
            for n in rules
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500, help="simulated runs per scenario")
    parser.add_argument("--rows", type=int, default=1000, help="rows in each population (N)")
    parser.add_argument("--shards", type=int, default=20, help="looks per run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--part", choices=("all", "coverage", "early-stop"), default="all")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.part in ("all", "coverage"):
        coverage(args.runs, args.rows, args.shards, args.seed)
    if args.part in ("all", "early-stop"):
        early_stopping(max(1, args.runs // 2), args.rows, args.shards, args.seed + 1)
    noise = [3 * math.sqrt(0.05 * 0.95 / runs) for runs in (args.runs, max(1, args.runs // 2))]
    print(
        f"\n(simulation noise on a 5% rate: about ±{noise[0]:.1%} for coverage, "
        f"±{noise[1]:.1%} for early stopping; {time.perf_counter() - started:.0f} s)"
    )


if __name__ == "__main__":
    main()
