"""`assay power`: docs (and repeats per doc) a paired comparison needs to detect a difference,
and the smallest difference the current docs detect. The formulas are in stats/power.py."""

from __future__ import annotations

import argparse
import math
from typing import Any

from assay.cli.compare import confidence_level
from assay.errors import ConfigError


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add the `power` command to the subcommands `sub`."""
    power = sub.add_parser(
        "power",
        parents=parents,
        help="docs (and repeats) needed to detect a difference, and the current MDE",
        description="Docs needed for a paired comparison to detect --difference with the given "
        "power. The variance of the per-doc differences comes from two runs (paired), from "
        "one run's scores and --correlation, or from --accuracy and --correlation.",
    )
    power.add_argument("runs", nargs="*", metavar="RUN", help="zero, one or two runs")
    power.add_argument("--task", default=None, help="task of the runs to read")
    power.add_argument("--metric", default=None, help="metric (default: the task's first)")
    power.add_argument("--filter", default=None, help="filter (default: the task's first)")
    power.add_argument("--accuracy", type=confidence_level, default=None, help="without runs: p")
    power.add_argument(
        "--correlation",
        type=float,
        default=None,
        help="correlation of the two models' per-doc scores (needed without two runs)",
    )
    power.add_argument(
        "--difference", type=float, required=True, help="true difference to detect, e.g. 0.02"
    )
    power.add_argument("--power", type=confidence_level, default=0.8, help="default 0.8")
    power.add_argument("--confidence", type=confidence_level, default=0.95, help="default 0.95")
    power.add_argument(
        "--within-variance",
        type=float,
        default=0.0,
        help="per-sample score variance within a doc, for sampled generation (a 0/1 metric: "
        "the mean of p(1-p) over docs); with it the table lists repeats per doc",
    )
    power.add_argument(
        "--repeats", default="1,2,4,8,16", help="repeats per doc to tabulate (default 1,2,4,8,16)"
    )
    power.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Print the docs needed per repeats, and the current MDE."""
    from assay.stats.power import docs_needed, mde, paired_diff_variance, with_repeats

    repeats = _repeats(args.repeats)
    variance, source, current = _diff_variance(args, paired_diff_variance)
    if not 0 <= 2 * args.within_variance <= variance:
        raise ConfigError(
            f"--within-variance {args.within_variance}: must lie between 0 and half the "
            f"variance of the per-doc differences ({variance:.4g})."
        )
    if args.difference == 0:
        raise ConfigError("--difference: give the nonzero difference to detect, e.g. 0.02.")
    level = f"{args.power:.0%} power at {args.confidence:.0%} confidence (two-sided)"
    print(f"variance of the per-doc differences: {variance:.6g} ({source})")
    print(f"docs needed to detect a difference of {args.difference:g} with {level}:")
    shown = repeats if args.within_variance > 0 else [1]
    print("  repeats per doc  docs needed")
    for k in shown:
        needed = docs_needed(
            with_repeats(variance, args.within_variance, k),
            args.difference,
            args.confidence,
            args.power,
        )
        print(f"  {k:<15}  {needed}")
    if current:
        stderr = math.sqrt(variance / current)
        smallest = mde(stderr, args.confidence, args.power)
        print(f"MDE with the current {current} docs (1 sample each): {smallest:.4g}")
    return 0


def _repeats(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise ConfigError(f"--repeats {text!r}: give whole numbers >= 1, e.g. 1,2,4,8.")
    return values


def _diff_variance(args: argparse.Namespace, paired_diff_variance: Any) -> tuple[float, str, int]:
    """Var(d) of one sample per doc, where it came from, and the docs it came from (0: none)."""
    import numpy as np

    if len(args.runs) > 2:
        raise ConfigError("assay power reads at most two runs (a baseline and a candidate).")
    if not args.runs:
        if args.accuracy is None or args.correlation is None:
            raise ConfigError(
                "assay power without runs needs --accuracy (the baseline's) and --correlation "
                "(between the two models' per-doc scores, e.g. 0.5)."
            )
        var = args.accuracy * (1 - args.accuracy)
        return (
            paired_diff_variance(var, var, _correlation(args.correlation)),
            f"accuracy {args.accuracy:g} for both models, correlation {args.correlation:g}",
            0,
        )
    if args.accuracy is not None:
        raise ConfigError("--accuracy is for power without runs; the runs give the scores.")
    values = [_scores(path, args) for path in args.runs]
    if len(values) == 1:
        if args.correlation is None:
            raise ConfigError(
                "assay power with one run needs --correlation (between the two models' per-doc "
                "scores, e.g. 0.5); or give two runs to measure it."
            )
        scores = np.asarray(list(values[0].values()), dtype=float)
        var = float(scores.var(ddof=1))
        variance = paired_diff_variance(var, var, _correlation(args.correlation))
        return variance, f"{args.runs[0]}, correlation {args.correlation:g}", len(scores)
    shared = sorted(set(values[0]) & set(values[1]))
    if len(shared) < 2:
        raise ConfigError(f"the two runs share {len(shared)} doc(s) of the task: too few.")
    d = np.asarray([values[1][i] - values[0][i] for i in shared], dtype=float)
    return float(d.var(ddof=1)), f"{len(shared)} docs paired between the two runs", len(shared)


def _correlation(value: float) -> float:
    if not -1 <= value <= 1:
        raise ConfigError(f"--correlation {value}: must lie between -1 and 1.")
    return value


def _scores(path: str, args: argparse.Namespace) -> dict[int, float]:
    """Per-doc values of the chosen task, metric and filter of one run."""
    from assay.results.readers import read_run

    run = read_run(path)
    tasks = run.tasks()
    task = args.task or (tasks[0] if len(tasks) == 1 else None)
    if task is None or task not in tasks:
        raise ConfigError(
            f"--task {args.task!r}: choose one of the tasks of {path}: {', '.join(tasks)}."
        )
    samples = run.samples(task)
    flt = args.filter or next(iter(samples.by_filter), None)
    if flt not in samples.by_filter:
        raise ConfigError(
            f"--filter {flt!r}: task {task} has filters {', '.join(samples.by_filter)}."
        )
    docs = samples.by_filter[flt]
    first: dict[str, Any] = dict(next(iter(docs.values()), {}))
    metric = args.metric or next(iter(first.get("metrics", [])), None)
    values: dict[int, float] = {}
    for doc_id, record in docs.items():
        value = record.get(metric) if metric else None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(
                f"--metric {metric!r}: doc {doc_id} of {task} in {path} holds {value!r}, not a "
                f"per-doc number (metrics: {', '.join(first.get('metrics', []))}). Power "
                "analysis needs a metric aggregated by mean."
            )
        values[doc_id] = float(value)
    return values
