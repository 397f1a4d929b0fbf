"""Online estimates with confidence intervals, refreshed as rows are scored (run_evals).

Over 500 lines and still one job: the three strategies below and their fallbacks (exact bounds,
Clopper-Pearson below a few events, the skew note) decide together which interval a live row
shows, on the mean and on the total alike; one module keeps that decision in one place.

Pure statistics: a metric's final corpus aggregation is in `metrics.aggregations`, and task and
group results entries are built in `results.summary`.

After every shard an evaluation has scored n of the N rows it will score. A metric is either
*algebraic* (a mean over rows: accuracy, F1, NDCG) or *distributive* (a total over rows: number
correct, tokens spent). For an algebraic metric we report the running mean with an interval on the
population mean; for a distributive one we extrapolate the running total to all N rows and report
an interval on the population total. Rows are drawn without replacement from a finite population,
so intervals shrink with the finite-population correction and have zero width once n = N.

Three strategies:

- ``normal``: mean ± z·SE. SE uses the *observed* variance of per-row scores when they are known,
  otherwise the largest variance a variable in [a, b] with that mean can have, (m - a)(b - m),
  which is the Bernoulli variance on [0, 1] and never understates the spread on other ranges.
  Where that variance is 0 (every row seen scored alike, before the last row) the interval is
  instead the exact bound of `assay.stats.exact`, method "exact bound (no spread in the rows
  seen)": a zero-width interval would claim the unseen rows score alike too. With the observed
  variance of a bounded metric and fewer than `FEW_EVENTS` rows at the rarer end (a 0/1 metric
  with a handful of right, or wrong, answers) the normal interval under-covers: 0/1 rows get
  the exact Clopper-Pearson interval instead, other values keep the normal one with a `note`
  saying it is unreliable.
- ``wilson``: the Wilson score interval on the mean rescaled to [0, 1], with the effective sample
  size n / FPC²; the point value stays the observed mean. Meant for proportions. Below
  `FEW_EVENTS` at the rarer end it gives way as the normal strategy does: to the exact
  Clopper-Pearson interval for proportions (no variance given) and 0/1 rows, to a marked interval
  for other values (Wilson covered 0.84 just below its lower bound after one event).
- ``hoeffding``: a distribution-free bound, (b - a)·sqrt(ln(2/α)·ρ / 2n), where ρ = 1 - (n-1)/N is
  Serfling's correction for sampling without replacement.

Every interval is clipped to the metric's feasible range (scaled by N for totals).

These three hold at one look chosen in advance; looked at after every shard, they miss more
often than they say. The fourth strategy, ``anytime``, is a confidence sequence valid at every
look at once (`assay.stats.anytime`); it needs the scores in the order they were drawn, so
`mean_interval` refuses it and the callers that hold those scores compute it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from assay.errors import ConfigError
from assay.stats.normal import two_sided_z
from assay.stats.value_range import check_range

Strategy = Literal["normal", "wilson", "hoeffding", "anytime"]
STRATEGIES: tuple[str, ...] = ("normal", "wilson", "hoeffding", "anytime")


@dataclass(frozen=True, slots=True)
class OnlineSettings:
    """How intervals are computed: strategy, confidence level, finite-population correction."""

    strategy: Strategy = "normal"
    confidence_level: float = 0.95
    """Two-sided coverage, in (0, 1)."""
    use_fpc: bool = True
    """Shrink intervals because rows are drawn without replacement from N rows."""

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ConfigError(
                f"online_strategy_kwargs: strategy {self.strategy!r} is not one of {list(STRATEGIES)}"
            )
        if not 0.0 < self.confidence_level < 1.0:
            raise ConfigError(
                "online_strategy_kwargs: confidence_level must be in (0, 1), "
                f"got {self.confidence_level!r}"
            )

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any] | None) -> OnlineSettings:
        """Settings from a config's ``online_strategy_kwargs`` (``strategy_name`` or ``strategy``)."""
        if not kwargs:
            return cls()
        known = {"strategy_name", "strategy", "confidence_level", "use_fpc"}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ConfigError(
                f"online_strategy_kwargs: unknown key(s) {unknown}; known keys: {sorted(known)}"
            )
        strategy = kwargs.get("strategy_name", kwargs.get("strategy", "normal"))
        return cls(
            strategy=strategy,
            confidence_level=float(kwargs.get("confidence_level", 0.95)),
            use_fpc=bool(kwargs.get("use_fpc", True)),
        )


@dataclass(frozen=True, slots=True)
class Estimate:
    """A point estimate with its confidence interval after n of N rows."""

    value: float
    """Running mean (algebraic) or the total extrapolated to N rows (distributive)."""
    lower: float
    upper: float
    margin: float
    """Half-width before clipping to the feasible range."""
    n: int
    """Rows the estimate is based on."""
    population: int | None
    """Rows the evaluation will score in total (N)."""
    confidence_level: float
    method: str
    """What produced the interval, e.g. "normal (observed variance)"."""
    observed: float | None = None
    """Distributive metrics: the total over the n rows actually scored."""
    note: str | None = None
    """Why the interval is not to be trusted at its level, when it is not (shown with †)."""

    def as_dict(self) -> dict[str, Any]:
        """The metric fields RapidFire users read (value, lower_bound, upper_bound, ...)."""
        out: dict[str, Any] = {
            "value": self.value,
            "lower_bound": self.lower,
            "upper_bound": self.upper,
            "margin_of_error": self.margin,
            "confidence_level": self.confidence_level,
            "ci_method": self.method,
            "n": self.n,
            "population": self.population,
        }
        if self.observed is not None:
            out["observed_value"] = self.observed
        if self.note is not None:
            out["ci_note"] = self.note
        return out


@dataclass(slots=True)
class RunningEstimate:
    """Count, mean and sum of squared deviations of a stream of scores (Welford's algorithm)."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, x: float) -> None:
        """Fold one score in."""
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    def extend(self, xs: Iterable[float]) -> None:
        """Fold many scores in."""
        for x in xs:
            self.add(float(x))

    def merge(self, other: RunningEstimate) -> RunningEstimate:
        """The estimate of both streams together (Chan et al.'s parallel update)."""
        n = self.n + other.n
        if n == 0:
            return RunningEstimate()
        delta = other.mean - self.mean
        mean = self.mean + delta * other.n / n
        m2 = self.m2 + other.m2 + delta * delta * self.n * other.n / n
        return RunningEstimate(n, mean, m2)

    @property
    def variance(self) -> float | None:
        """Sample variance (n - 1 denominator); None below two scores."""
        return self.m2 / (self.n - 1) if self.n > 1 else None

    @property
    def total(self) -> float:
        return self.mean * self.n


def finite_population_factor(n: int, population: int | None) -> float:
    """sqrt((N - n) / (N - 1)): the SE factor for sampling n of N rows without replacement."""
    if population is None:
        return 1.0
    if n >= population:
        return 0.0
    if population <= 1:
        return 1.0
    return math.sqrt((population - n) / (population - 1))


def bound_variance(mean: float, low: float, high: float) -> float:
    """The largest variance a variable in [low, high] with this mean can have."""
    return max(0.0, (mean - low) * (high - mean))


def wilson_interval(proportion: float, n_effective: float, z: float) -> tuple[float, float]:
    """Wilson score interval for a proportion observed over n_effective trials."""
    if n_effective <= 0:
        return 0.0, 1.0
    denom = 1.0 + z * z / n_effective
    centre = (proportion + z * z / (2 * n_effective)) / denom
    half = (z / denom) * math.sqrt(
        proportion * (1 - proportion) / n_effective + z * z / (4 * n_effective * n_effective)
    )
    # The interval always holds the observed proportion; at 0 or 1 rounding could put the end
    # a hair past it (2.8e-17 above 0), so each end is kept on its side of the proportion.
    return max(0.0, min(proportion, centre - half)), min(1.0, max(proportion, centre + half))


def hoeffding_margin(
    width: float, n: int, confidence_level: float, population: int | None = None
) -> float:
    """Hoeffding's two-sided bound on |mean - μ|, with Serfling's correction when N is given."""
    if n <= 0:
        return math.inf
    alpha = 1.0 - confidence_level
    rho = 1.0
    if population is not None:
        if n >= population:
            return 0.0
        rho = 1.0 - (n - 1) / population
    return width * math.sqrt(math.log(2.0 / alpha) * rho / (2.0 * n))


def mean_interval(
    mean: float,
    n: int,
    *,
    value_range: Sequence[float] = (0.0, 1.0),
    variance: float | None = None,
    population: int | None = None,
    settings: OnlineSettings = OnlineSettings(),
    rows: Sequence[float] | None = None,
) -> Estimate:
    """Interval on the population mean of a metric whose rows lie in `value_range`.

    `variance` is the observed per-row sample variance; without it the normal strategy uses the
    bound variance (see module docstring). `rows`, the per-row scores seen, let the normal
    strategy mark skewed scores on a range with an infinite end that are too few for
    Cochran's rule (`_skewed_note`).
    """
    low, high = check_range(value_range)
    level = settings.confidence_level
    if settings.strategy == "anytime":
        raise ValueError("the anytime strategy needs the scores in order: use assay.stats.anytime")
    if n <= 0:  # no rows: the whole range, whose half-width stands as the margin
        return Estimate(mean, low, high, (high - low) / 2, 0, population, level, settings.strategy)
    pop = population if settings.use_fpc else None
    fpc = finite_population_factor(n, pop)
    z = two_sided_z(level)
    note = None
    if settings.strategy == "hoeffding":
        margin = hoeffding_margin(high - low, n, level, pop)
        lower, upper, method = mean - margin, mean + margin, "hoeffding"
    elif settings.strategy == "wilson":
        p = min(1.0, max(0.0, (mean - low) / (high - low)))
        rarer = _rarer_side(mean, n, (low, high))
        if fpc > 0 and rarer < FEW_EVENTS - 1e-9:
            # Wilson's interval dips to 0.84 coverage just below its lower bound after one
            # event (any n), and with the fpc misses a rare row unseen: proportions, or rows
            # known to be 0/1, get the exact interval there, as the normal strategy gives
            # them; other values are marked.
            if variance is None or _zero_one(mean, n, variance, (low, high)):
                return _few_events_interval(mean, n, (low, high), population, level)
            note = _few_events_note(mean, n, (low, high))
        if fpc == 0.0:
            lo_p = hi_p = p
        else:
            lo_p, hi_p = wilson_interval(p, n / (fpc * fpc), z)
        lower, upper = low + lo_p * (high - low), low + hi_p * (high - low)
        margin = (upper - lower) / 2.0
        method = "wilson"
    else:
        if variance is not None:
            var, method = variance, "normal (observed variance)"
        else:
            var, method = bound_variance(mean, low, high), "normal (bound variance)"
        margin = z * math.sqrt(var / n) * fpc
        lower, upper = mean - margin, mean + margin
        rarer = _rarer_side(mean, n, (low, high))
        # (the tolerance keeps 10 events, 200·0.05 up to rounding, on the normal side)
        if variance is not None and margin > 0 and rarer < FEW_EVENTS - 1e-9:
            if _zero_one(mean, n, variance, (low, high)):
                return _few_events_interval(mean, n, (low, high), population, level)
            note = _few_events_note(mean, n, (low, high))
        # Cochran's rule where a tail can run on without end: on a bounded range the rule
        # above guards the ends, and the rule's quantile part marked 4-5 % of 30 uniform rows.
        unbounded = not (math.isfinite(low) and math.isfinite(high))
        if note is None and unbounded and rows is not None and variance is not None:
            note = _skewed_note(rows) if margin > 0 else None
    if margin == 0 and fpc > 0:
        # Rows that all scored alike (a floor or a ceiling) are no evidence that the rows not
        # yet seen match them: a zero-width interval would claim the mean is known.
        return _no_spread_interval(mean, n, (low, high), population, level)
    if settings.use_fpc and population is not None:
        method += " + fpc"
    return Estimate(
        value=mean,
        lower=max(low, lower),
        upper=min(high, upper),
        margin=margin,
        n=n,
        population=population,
        confidence_level=level,
        method=method,
        note=note,
    )


FEW_EVENTS = 10
"""Rows on the rarer side of a 0/1 metric (or, for other values in a bounded range, rows'
worth of score between the mean and the nearer end) below which the normal interval gives way:
the observed variance of a handful of events is too noisy (0.89 coverage at 4 events,
benchmarks/coverage_atlas.py)."""


def _rarer_side(mean: float, n: int, value_range: tuple[float, float]) -> float:
    """n·min(p, 1 - p) for the mean rescaled to p in [0, 1]; inf on an unbounded range."""
    low, high = value_range
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return math.inf
    p = min(1.0, max(0.0, (mean - low) / (high - low)))
    return n * min(p, 1.0 - p)


def _few_events_note(mean: float, n: int, value_range: tuple[float, float]) -> str:
    """Why an interval of values bunched near an end of their range is marked (`FEW_EVENTS`)."""
    low, high = value_range
    end = low if mean - low <= high - mean else high
    return (
        f"the mean {mean:.4g} of {n} rows lies within {FEW_EVENTS}/{n} of the range's width "
        f"from its end {end:g} (range [{low:g}, {high:g}]): values bunched at an end of their "
        "range are skewed, and the interval covers less than it claims there "
        "(benchmarks/coverage_atlas.py)"
    )


def _skewed_note(rows: Sequence[float]) -> str | None:
    """Why the normal interval of skewed per-row scores is marked, or None: the rule `assay
    compare` applies to per-doc differences (`paired_normal.cochran_shortfall`). Unbounded
    lognormal scores covered 0.78 (n 30), 0.85 (100) and 0.88 (300) unmarked."""
    import numpy as np

    from assay.stats.paired_normal import cochran_shortfall, sample_skewness

    values = np.asarray(rows, dtype=float)
    why = cochran_shortfall(values, values, "rows")
    if why is None:
        return None
    return (
        f"the per-row scores are skewed (sample skewness {sample_skewness(values):+.2f}) and "
        f"{why}: the normal interval covers less than it claims there (lognormal "
        "scores covered 0.78-0.88 at 30-300 rows)"
    )


def _zero_one(mean: float, n: int, variance: float, value_range: tuple[float, float]) -> bool:
    """Whether n rows in [low, high] with this mean and sample variance all lie at the ends:
    only then does the variance reach n·p(1 - p)/(n - 1) (scaled), its largest possible."""
    low, high = value_range
    if n < 2 or not (math.isfinite(low) and math.isfinite(high)):
        return False
    p = (mean - low) / (high - low)
    largest = n * p * (1 - p) / (n - 1)
    return abs(variance / (high - low) ** 2 - largest) <= 1e-9 * max(largest, 1e-12)


def _few_events_interval(
    mean: float, n: int, value_range: tuple[float, float], population: int | None, level: float
) -> Estimate:
    """Rows that are all at one end of the range or the other, with fewer than FEW_EVENTS at
    the rarer end: the Clopper-Pearson interval on that count (exact; without the finite
    population correction, which sampling without replacement only makes more conservative)."""
    from assay.stats.exact import clopper_pearson

    low, high = value_range
    events = round(n * (mean - low) / (high - low))
    p_low, p_high = clopper_pearson(events, n, level)
    lower, upper = low + p_low * (high - low), low + p_high * (high - low)
    return Estimate(
        value=mean,
        lower=min(lower, mean),
        upper=max(upper, mean),
        margin=(upper - lower) / 2,
        n=n,
        population=population,
        confidence_level=level,
        method=f"exact (Clopper-Pearson: fewer than {FEW_EVENTS} rows at one end)",
    )


def _no_spread_interval(
    mean: float, n: int, value_range: tuple[float, float], population: int | None, level: float
) -> Estimate:
    """The interval of rows without spread: the exact bound of `assay.stats.exact` on the share
    of the population that could differ from the value every row showed."""
    from assay.stats.exact import constant_sample_bound

    low, high = value_range
    bound = constant_sample_bound(min(high, max(low, mean)), n, level, value_range)
    return Estimate(
        value=mean,
        lower=bound.low,
        upper=bound.high,
        margin=(bound.high - bound.low) / 2,
        n=n,
        population=population,
        confidence_level=level,
        method="exact bound (no spread in the rows seen)",
    )


def total_interval(
    total: float,
    n: int,
    *,
    population: int,
    value_range: Sequence[float] = (0.0, 1.0),
    variance: float | None = None,
    settings: OnlineSettings = OnlineSettings(),
    rows: Sequence[float] | None = None,
) -> Estimate:
    """Extrapolate a total over n rows to all `population` rows, with an interval on that total.

    `value_range` is the range of one row's contribution (e.g. (0, 1) for a correct/incorrect count).
    """
    low, high = check_range(value_range)
    per_row = mean_interval(
        total / n if n else 0.0,
        n,
        value_range=(low, high),
        variance=variance,
        population=population,
        settings=settings,
        rows=rows,
    )
    return Estimate(
        value=per_row.value * population,
        lower=per_row.lower * population,
        upper=per_row.upper * population,
        margin=per_row.margin * population,
        n=n,
        population=population,
        confidence_level=per_row.confidence_level,
        method=per_row.method,
        observed=total,
        note=per_row.note,
    )


def paired_difference(
    scores_a: Sequence[float],
    scores_b: Sequence[float],
    *,
    value_range: Sequence[float] = (0.0, 1.0),
    population: int | None = None,
    settings: OnlineSettings = OnlineSettings(),
) -> Estimate:
    """Interval on mean(a) - mean(b) from scores of two configs on the same rows, pairwise.

    Pairing removes the between-row variance both configs share, so the interval is usually much
    narrower than the two marginal intervals suggest. 0/1 scores with rows that differ get
    `assay compare`'s exact paired interval (`_paired_binary`) under the normal and wilson
    strategies; otherwise Wilson does not apply to a difference and falls back to the normal
    interval on the observed differences.
    """
    if len(scores_a) != len(scores_b):
        raise ValueError(f"paired scores differ in length: {len(scores_a)} vs {len(scores_b)}")
    low, high = check_range(value_range)
    running = RunningEstimate()
    running.extend(a - b for a, b in zip(scores_a, scores_b))
    width = high - low
    if settings.strategy == "anytime":
        return _anytime_difference(scores_a, scores_b, (low, high), population, settings)
    known = settings.use_fpc and population is not None and running.n >= population
    if settings.strategy != "hoeffding" and running.n and not known:
        exact = _paired_binary(scores_a, scores_b, population, settings.confidence_level)
        if exact is not None:
            return exact
    strategy: Strategy = "hoeffding" if settings.strategy == "hoeffding" else "normal"
    diff_settings = OnlineSettings(strategy, settings.confidence_level, settings.use_fpc)
    variance = running.variance if running.variance is not None else width * width
    return mean_interval(
        running.mean,
        running.n,
        value_range=(-width, width),
        variance=variance,
        population=population,
        settings=diff_settings,
    )


def _paired_binary(
    scores_a: Sequence[float], scores_b: Sequence[float], population: int | None, level: float
) -> Estimate | None:
    """0/1 scores with at least one differing row: the exact interval `assay compare` gives
    (`assay.stats.exact.paired_binary_exact`, the inversion of McNemar's exact test), so that
    the interval excludes 0 exactly when McNemar's test rejects. The normal interval on the
    differences covered 0.80 with 3 differing rows expected among 200 or 1,000, all one way.
    Without the finite population correction, which sampling without replacement only makes
    more conservative. None for other scores, or no differing row (the no-spread bound)."""
    from assay.stats.exact import paired_binary_exact
    from assay.stats.paired_binary import is_binary

    if not (is_binary(list(scores_a)) and is_binary(list(scores_b))):
        return None
    only_a = sum(1 for x, y in zip(scores_a, scores_b) if x == 1 and y == 0)
    only_b = sum(1 for x, y in zip(scores_a, scores_b) if x == 0 and y == 1)
    if only_a + only_b == 0:
        return None
    n = len(scores_a)
    # compare's interval is on mean(b) - mean(a); this one is on mean(a) - mean(b).
    exact = paired_binary_exact(only_b, only_a, n, level)
    value = (only_a - only_b) / n
    lower, upper = min(exact.low, value), max(exact.high, value)
    return Estimate(
        value=value,
        lower=lower,
        upper=upper,
        margin=(upper - lower) / 2,
        n=n,
        population=population,
        confidence_level=level,
        method="paired-exact (McNemar's exact test inverted, as assay compare)",
    )


def _anytime_difference(
    scores_a: Sequence[float],
    scores_b: Sequence[float],
    value_range: tuple[float, float],
    population: int | None,
    settings: OnlineSettings,
) -> Estimate:
    """The paired difference's anytime-valid interval (rows in the order they were drawn)."""
    from assay.stats.anytime import paired_confidence_sequence

    if population is None:
        raise ConfigError("the anytime strategy needs the population size N (rows in the run)")
    if not scores_a:
        width = value_range[1] - value_range[0]
        return Estimate(
            0.0, -width, width, width, 0, population, settings.confidence_level, "anytime"
        )
    sequence = paired_confidence_sequence(
        scores_a,
        scores_b,
        population=population,
        value_range=value_range,
        confidence_level=settings.confidence_level,
    )
    low, high = float(sequence.lower[-1]), float(sequence.upper[-1])
    return Estimate(
        value=float(sequence.estimate[-1]),
        lower=low,
        upper=high,
        margin=(high - low) / 2,
        n=len(scores_a),
        population=population,
        confidence_level=settings.confidence_level,
        method=sequence.method,
    )
