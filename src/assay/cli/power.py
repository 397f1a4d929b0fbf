"""`assay power`: docs (and repeats per doc) a paired comparison needs to detect a difference,
and the smallest difference the current docs detect. The formulas are in stats/power.py.

Over 500 lines and still one job: the command's flags, their refusals and the printout of one
plan, for two runs and for one run, share the plan record and the wording of every note, so the
refusal a flag gets and the line a plan prints stay side by side (clustered plans, which add
their own reading of the runs, live in cli/power_clustered.py)."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

from assay.cli.compare import confidence_level
from assay.errors import ConfigError
from assay.stats.thresholds import SMALL_NORMAL, SPARSE_DISCORDANT


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
        "--discordance",
        type=confidence_level,
        default=None,
        help="0/1 metrics: share of docs the two models score differently (default: the runs' "
        "own share where they show one, else the least the difference allows, |difference|)",
    )
    power.add_argument(
        "--cluster-by",
        action="append",
        default=[],
        metavar="FIELD|TASK=FIELD",
        help="plan for docs clustered by a field of the sample's doc, in clusters, with the "
        "test assay compare runs on them (default: the cluster key the task declared)",
    )
    power.add_argument(
        "--repeats", default="1,2,4,8,16", help="repeats per doc to tabulate (default 1,2,4,8,16)"
    )
    power.set_defaults(handler=main)


@dataclass(frozen=True)
class _Variance:
    """Var(d) of one sample per doc, and where it came from."""

    value: float
    source: str
    """What gave the value (runs and docs, assumptions, a bound)."""
    docs: int
    """Docs of the runs it came from (0: none), for the current MDE."""
    unestimated: str | None = None
    """Why the runs do not estimate the variance, when `value` is a substitute for it."""
    binary: bool = False
    """Whether the scores are 0/1 (then the difference to detect floors the variance)."""
    discordance: float | None = None
    """0/1 runs with spread: the share of their docs that differ."""
    span: float | None = None
    """Runs of values that are not 0/1: the range their scores span (max - min)."""
    differing: int | None = None
    """Runs of values that are not 0/1: the docs whose values differ (beyond rounding) between
    two runs, or could differ (all of them) for one."""
    baseline: float | None = None
    """One 0/1 run: its accuracy, from which a model B lies within [0, 1]."""


SMALL_PLAN = 30
"""Docs below which a variance measured on runs is too uncertain to plan on (caveat)."""


def _differing_share(variance: _Variance) -> float:
    """The share of docs that differ between the runs (1 where they do not say)."""
    if not variance.differing or not variance.docs:
        return 1.0
    return variance.differing / variance.docs


def main(args: argparse.Namespace) -> int:
    """Print the docs needed per repeats, and the current MDE."""
    from assay.cli.compare import cluster_by_option
    from assay.cli.power_clustered import clustered_runs, print_clustered_plan
    from assay.stats.binary_power import binary_docs_needed, exact_mde
    from assay.stats.power import least_normal_docs, mde, other_docs_needed, with_repeats

    repeats = _repeats(args.repeats)
    cluster_by_option(args.cluster_by)  # a malformed value is refused before a run is read
    scored = [_scores(path, args) for path in args.runs[:2]]
    variance = _diff_variance(args, scored)
    clustered = None
    if scored:
        runs, values = [s.run for s in scored], [s.values for s in scored]
        clustered = clustered_runs(args, runs, scored[0].task, scored[0].docs, values)
    elif args.cluster_by:
        raise ConfigError(
            "--cluster-by: reads the clusters of the runs' docs; give the runs, or leave it "
            "out to plan with --accuracy and --correlation for independent docs."
        )
    if args.difference == 0:
        raise ConfigError("--difference: give the nonzero difference to detect, e.g. 0.02.")
    if variance.binary and not abs(args.difference) < 1:
        raise ConfigError(
            f"--difference {args.difference:g}: 0/1 scores differ by less than 1; give a "
            "difference between -1 and 1 (exclusive), e.g. 0.05."
        )
    if variance.span is not None and abs(args.difference) > variance.span:
        raise ConfigError(
            f"--difference {args.difference:g}: the runs' scores span {variance.span:g} (from "
            "their least to their largest), so no mean difference beyond it is seen in them "
            f"and their variance says nothing about one; give a difference within "
            f"±{variance.span:g}."
        )
    if args.discordance is not None and not variance.binary:
        raise ConfigError(
            f"--discordance {args.discordance:g}: only for 0/1 metrics (the scores here are "
            "not 0/1); leave it out."
        )
    share, assumption = _planned_discordance(args, variance) if variance.binary else (0.0, "")
    planned = share - args.difference**2 if variance.binary else variance.value
    if not 0 <= 2 * args.within_variance <= planned:
        raise ConfigError(
            f"--within-variance {args.within_variance}: must lie between 0 and half the "
            f"variance of the per-doc differences ({planned:.4g})."
        )
    level = f"{args.power:.0%} power at {args.confidence:.0%} confidence (two-sided)"
    if variance.unestimated is None:
        print(f"variance of the per-doc differences: {variance.value:.6g} ({variance.source})")
    else:
        print(f"variance of the per-doc differences: not estimable: {variance.unestimated}")
        print(f"  in its place: {variance.value:.6g}, {variance.source}")
    if clustered is not None:
        print_clustered_plan(args, clustered, variance.binary, level)
        return 0
    if variance.binary:
        print(f"  planned on {assumption}: Var(d) = share - d^2 = {planned:.6g}")
    if variance.docs and variance.docs < SMALL_PLAN and variance.unestimated is None:
        print(
            f"caveat: the variance comes from {variance.docs} docs; below {SMALL_PLAN} it is "
            "too uncertain to plan on and the plan may fall short of its power. Score more "
            "docs, or plan on stated assumptions (--discordance, or --accuracy and "
            "--correlation without runs)."
        )
    least = variance.binary and share <= abs(args.difference) + 1e-12
    print(f"docs needed to detect a difference of {args.difference:g} with {level}:")
    shown = repeats if args.within_variance > 0 else [1]
    print("  repeats per doc  docs needed")
    raised = False
    for k in shown:
        variance_k = with_repeats(planned, args.within_variance, k)
        if variance.binary and k == 1:
            # One 0/1 sample per doc: planned with the test `assay compare` runs on them
            # (McNemar's exact test), whose power is computed exactly.
            needed = binary_docs_needed(variance_k, args.difference, args.confidence, args.power)
            print(f"  {k:<15}  {'at least ' if least else ''}{needed}")
        else:
            needed, lifted = other_docs_needed(
                variance_k, args.difference, args.confidence, args.power, _differing_share(variance)
            )
            print(f"  {k:<15}  {needed}{' (raised)' if lifted else ''}")
            raised = raised or lifted
    if raised:
        print(
            f"  (raised: assay compare reads values that are not 0/1 against the normal only "
            f"from {SMALL_NORMAL} docs with {SPARSE_DISCORDANT} or more differing; below that "
            "it decides by the exact sign-flip test, whose power the formula does not give, "
            f"so the plan is at least {least_normal_docs(_differing_share(variance))} docs"
            + (
                f"; {variance.differing} of the runs' {variance.docs} docs differ, a share "
                f"that reaches {SPARSE_DISCORDANT} differing docs at that many)"
                if variance.differing and variance.differing < variance.docs
                else ")"
            )
        )
    if variance.binary:
        print(
            "  (1 sample per doc: the power of assay compare's own test on 0/1 scores, "
            "McNemar's exact test, computed exactly)"
        )
    if least:
        print(
            "  (at least: planned on the least discordance the difference allows, every "
            "differing doc favouring one side; with differences both ways more docs are "
            "needed: give --discordance)"
        )
    if variance.docs:
        basis = "" if variance.unestimated is None else " (from the variance in its place)"
        current = f"MDE with the current {variance.docs} docs (1 sample each)"
        if variance.binary:
            smallest = exact_mde(variance.docs, variance.value, args.confidence, args.power)
            if smallest != smallest:  # NaN: even a difference of 1 is not reached
                print(
                    f"{current}: none{basis}: no difference of 0/1 scores, up to 1, is "
                    "detected with this power from these docs"
                )
                return 0
            if variance.baseline is not None and not (
                variance.baseline - smallest >= 0 and variance.baseline + smallest <= 1
            ):
                print(
                    f"{current}: {smallest:.4g}†{basis}: {_past_the_end(variance.baseline, smallest)}"
                )
                return 0
        elif variance.differing is not None and variance.differing < SPARSE_DISCORDANT:
            print(
                f"{current}: none: only {variance.differing} of the {variance.docs} docs "
                f"{'could differ' if len(args.runs) == 1 else 'differ'} "
                f"(fewer than {SPARSE_DISCORDANT}): assay compare decides them by the exact "
                "sign-flip test and shows no interval or MDE, which would lean on those few docs"
            )
            return 0
        else:
            smallest = mde(math.sqrt(variance.value / variance.docs), args.confidence, args.power)
        print(f"{current}: {smallest:.4g}{basis}")
    return 0


def _past_the_end(accuracy: float, smallest: float) -> str:
    """Why an MDE of one 0/1 run reaching past 0 or 1 holds one way only."""
    if accuracy + smallest > 1 and accuracy - smallest < 0:
        return f"from the run's accuracy {accuracy:.4g} it passes both 0 and 1: none is detectable"
    way, end = ("an improvement", 1) if accuracy + smallest > 1 else ("a drop", 0)
    other = "a drop" if end == 1 else "an improvement"
    return (
        f"{way} that large from the run's accuracy {accuracy:.4g} passes {end}, so it cannot "
        f"happen; the MDE holds for {other} only"
    )


def _planned_discordance(args: argparse.Namespace, variance: _Variance) -> tuple[float, str]:
    """The share of docs the plan assumes differ between the two models (0/1 scores), and how
    it was chosen: --discordance, the runs' own share, or what the variance implies; never below
    |difference| (the least share that differs by it)."""
    from assay.stats.binary_power import discordance

    size = abs(args.difference)
    if args.discordance is not None:
        if not size <= args.discordance <= 1:
            raise ConfigError(
                f"--discordance {args.discordance:g}: docs that differ by "
                f"{args.difference:g} on average differ on at least {size:g} of them; give a "
                f"share between {size:g} and 1."
            )
        return args.discordance, f"discordance {args.discordance:g} (given)"
    if variance.discordance is not None:
        share = max(size, variance.discordance)
        seen = f"{variance.discordance:.4g} of the {variance.docs} docs differ between the runs"
        if share > variance.discordance:
            return share, f"discordance {share:g}, the least |difference| allows ({seen})"
        return share, f"discordance {share:.4g} ({seen})"
    share, _ = discordance(variance.value, args.difference)
    if share <= size + 1e-12:
        return share, (
            f"discordance {share:g}, the least the difference allows (the variance "
            f"{variance.value:.4g} implies less)"
        )
    return share, f"discordance {share:.4g} (the variance plus the difference squared)"


def _repeats(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise ConfigError(f"--repeats {text!r}: give whole numbers >= 1, e.g. 1,2,4,8.")
    return values


def _diff_variance(args: argparse.Namespace, scored: list[_Scored]) -> _Variance:
    """Var(d) of one sample per doc: measured on the runs, assumed from --accuracy and
    --correlation, or, where the runs show no spread, a conservative bound in its place."""
    if len(args.runs) > 2:
        raise ConfigError("assay power reads at most two runs (a baseline and a candidate).")
    if not args.runs:
        if args.accuracy is None or args.correlation is None:
            raise ConfigError(
                "assay power without runs needs --accuracy (the baseline's) and --correlation "
                "(between the two models' per-doc scores, e.g. 0.5)."
            )
        return _Variance(*_assumed(args), 0, binary=True)
    values = [s.values for s in scored]
    if len(values) == 1:
        return _one_run(args, values[0])
    return _two_runs(args, values[0], values[1])


def _assumed(args: argparse.Namespace) -> tuple[float, str]:
    """Var(d) of two models with accuracy --accuracy each and correlation --correlation."""
    from assay.stats.power import paired_diff_variance

    var = args.accuracy * (1 - args.accuracy)
    _check_ceiling(args.accuracy, args.difference, f"--accuracy {args.accuracy:g}")
    correlation = _correlation(args.correlation)
    _check_bernoulli_correlation(correlation, args.accuracy, f"--accuracy {args.accuracy:g}")
    variance = paired_diff_variance(var, var, correlation)
    return variance, f"accuracy {args.accuracy:g} for both models, correlation {args.correlation:g}"


def _check_ceiling(accuracy: float, difference: float, source: str) -> None:
    """A model B at accuracy + difference must lie in [0, 1]: a plan for one beyond is refused."""
    other = accuracy + difference
    if not 0 <= other <= 1:
        raise ConfigError(
            f"--difference {difference:g}: from an accuracy of {accuracy:g} ({source}) it plans "
            f"for a model at {other:.4g}, beyond the possible 0-1; give a difference between "
            f"{-accuracy:.4g} and {1 - accuracy:.4g}."
        )


def _one_run(args: argparse.Namespace, values: dict[int, float]) -> _Variance:
    import numpy as np

    from assay.stats.exact import bernoulli_variance_bound
    from assay.stats.paired import no_spread
    from assay.stats.power import paired_diff_variance

    path = args.runs[0]
    if args.accuracy is not None:
        raise ConfigError("--accuracy is for power without runs; the run gives the scores.")
    if args.correlation is None:
        raise ConfigError(
            "assay power with one run needs --correlation (between the two models' per-doc "
            "scores, e.g. 0.5); or give two runs to measure it."
        )
    correlation = _correlation(args.correlation)
    scores = np.asarray(list(values.values()), dtype=float)
    n = len(scores)
    if n > 1 and not no_spread(scores - scores[0], scores, scores):
        with np.errstate(over="ignore", invalid="ignore"):
            spread = float(scores.var(ddof=1))
        binary = _binary(scores)
        if binary:
            _check_bernoulli_correlation(correlation, float(scores.mean()), f"{path}'s accuracy")
            _check_ceiling(float(scores.mean()), args.difference, f"{path}'s accuracy")
        variance = paired_diff_variance(spread, spread, correlation)
        return _Variance(
            _finite_variance(variance, args.runs),
            f"{path}, correlation {args.correlation:g}",
            n,
            binary=binary,
            span=None if binary else float(np.ptp(scores)),
            # Another model's run can differ on at most these n docs: below the sparse
            # threshold compare shows no MDE whatever the correlation.
            differing=None if binary else n,
            baseline=float(scores.mean()) if binary else None,
        )
    seen = f"all {n} scores of {path} are {scores[0]:g}" if n > 1 else f"{path} has one doc"
    if not _binary(scores):
        raise ConfigError(
            f"{seen}: with no spread their variance cannot be estimated, and the scores are "
            "not 0/1, so no bound stands in. Score more docs, or plan without runs: "
            "--accuracy P --correlation R."
        )
    _check_ceiling(float(scores[0]), args.difference, f"{path}'s accuracy")
    bound = bernoulli_variance_bound(int(scores.sum()), n, args.confidence)
    return _Variance(
        paired_diff_variance(bound, bound, correlation),
        f"an upper bound from p(1-p) <= {bound:.4g} over the Clopper-Pearson "
        f"{args.confidence:.0%} bound on the run's accuracy (rule of three ≈ 3/n), "
        f"correlation {args.correlation:g}",
        n,
        f"{seen} (no spread)",
        binary=True,
    )


def _two_runs(
    args: argparse.Namespace, first: dict[int, float], second: dict[int, float]
) -> _Variance:
    import numpy as np

    from assay.stats.exact import constant_sample_bound
    from assay.stats.paired import describe_constant, no_spread, rounding_tolerance

    shared = sorted(set(first) & set(second))
    if len(shared) < 2:
        raise ConfigError(f"the two runs share {len(shared)} doc(s) of the task: too few.")
    scores = np.asarray([[first[i], second[i]] for i in shared], dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        d = scores[:, 1] - scores[:, 0]
        measured = float(d.var(ddof=1))
    n = len(shared)
    binary = _binary(scores)
    if not no_spread(d, scores[:, 0], scores[:, 1]):
        if args.accuracy is not None or args.correlation is not None:
            flag = "--accuracy" if args.accuracy is not None else "--correlation"
            raise ConfigError(
                f"{flag} is for power without runs (or with runs whose differences show no "
                "spread); the two runs measure the variance of their differences: leave "
                f"{flag} out."
            )
        tolerance = rounding_tolerance(scores[:, 0], scores[:, 1])
        return _Variance(
            _finite_variance(measured, args.runs),
            f"{n} docs paired between the two runs",
            n,
            binary=binary,
            discordance=float(np.mean(d != 0)) if binary else None,
            span=None if binary else float(np.ptp(scores)),
            differing=None if binary else int((np.abs(d) > tolerance).sum()),
        )
    seen, _ = describe_constant(d, rounding_tolerance(scores[:, 0], scores[:, 1]))
    unestimated = f"{seen} (no spread)"
    if args.accuracy is not None or args.correlation is not None:
        if args.accuracy is None or args.correlation is None:
            raise ConfigError(
                "give both --accuracy and --correlation to plan on assumptions in place of "
                "the runs' variance, or neither to use the exact bound."
            )
        value, source = _assumed(args)
        return _Variance(value, source + " (given)", n, unestimated, binary=True)
    if not binary:
        raise ConfigError(
            f"{unestimated}: their variance cannot be estimated, and the scores are not 0/1, "
            "so no bound stands in. Score more docs, or give --accuracy P and --correlation R "
            "to plan on assumptions."
        )
    bound = constant_sample_bound(float(d[0]), n, args.confidence)
    return _Variance(
        bound.variance,
        f"an upper bound from the Clopper-Pearson {args.confidence:.0%} bound on the share of "
        f"docs whose difference is not {d[0]:g} ({bound.other_share:.4g}, rule of three "
        "≈ 3/n); or give --accuracy and --correlation to plan on assumptions",
        n,
        unestimated,
        binary=True,
    )


def _binary(scores: Any) -> bool:
    return bool(((scores == 0) | (scores == 1)).all())


def _correlation(value: float) -> float:
    if not -1 <= value < 1:
        raise ConfigError(
            f"--correlation {value}: must lie in [-1, 1); at 1 two models of equal accuracy "
            "score every doc alike, and there is no difference to detect."
        )
    return value


def _check_bernoulli_correlation(correlation: float, accuracy: float, source: str) -> None:
    """Two 0/1 scores of the same accuracy p cannot correlate below -min(p, 1-p)/max(p, 1-p)
    (the Fréchet bound: at least max(0, 2p - 1) of the docs are right in both)."""
    low, high = min(accuracy, 1 - accuracy), max(accuracy, 1 - accuracy)
    least = -low / high if high > 0 else 0.0
    if correlation < least - 1e-12:
        raise ConfigError(
            f"--correlation {correlation:g}: two models of the same accuracy {accuracy:g} "
            f"({source}) cannot correlate below {least:.4g} on 0/1 scores (at least "
            f"{max(0.0, 2 * accuracy - 1):.4g} of the docs are right in both); give a "
            f"correlation between {least:.4g} and 1."
        )


def _finite_variance(value: float, runs: list[str]) -> float:
    """The variance measured on the runs, refused when it overflows floating point."""
    if not math.isfinite(value):
        raise ConfigError(
            f"the per-doc values of {', '.join(runs)} are too large for floating point: the "
            "variance of their differences overflows. Rescale the metric (e.g. to [0, 1]) "
            "before planning on it."
        )
    return value


@dataclass(frozen=True)
class _Scored:
    """One run's per-doc values of the chosen task, metric and filter, with what they came
    from (for the docs' cluster labels)."""

    values: dict[int, float]
    run: Any
    task: str
    docs: dict[int, Any]


def _scores(path: str, args: argparse.Namespace) -> _Scored:
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
        if not math.isfinite(value):
            raise ConfigError(
                f"--metric {metric!r}: doc {doc_id} of {task} in {path} holds {value!r}, not a "
                "finite number: a variance cannot be estimated with it. Choose another metric "
                "or fix the run."
            )
        values[doc_id] = float(value)
    return _Scored(values, run, task, dict(docs))
