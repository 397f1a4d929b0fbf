"""Exact bounds for the samples that show no spread, where a normal interval would claim
certainty.

When every doc of a sample gives the same value (two runs that both score 0 on every doc, a
model right on all of them) the sample variance is 0, and sd/√n, the normal interval and the
MDE built on it all say the quantity is known exactly. It is not: a doc the sample missed could
differ. What the sample does bound is the share of the population that differs from what was
seen, exactly, by the Clopper-Pearson bound for 0 events in n trials,

    share ≤ 1 - (1 - confidence)^(1/n)   with probability at least `confidence`,

about -ln(1 - confidence)/n: the "rule of three" (3/n) at 95 %. On values of known range that
bound turns into an interval on the mean and an upper bound on the variance (below).
"""

from __future__ import annotations

from dataclasses import dataclass

from assay.stats.normal import check_confidence


def no_event_upper_bound(trials: int, confidence: float) -> float:
    """Clopper-Pearson one-sided upper bound on a proportion after 0 events in `trials`
    independent trials: 1 - (1 - confidence)^(1/trials), about 3/trials at 0.95."""
    check_confidence(confidence)
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials!r}")
    return 1.0 - float((1.0 - confidence) ** (1.0 / trials))


@dataclass(frozen=True)
class ConstantSampleBound:
    """What a sample of `units` identical values says about its population."""

    units: int
    """Independent units (docs, or clusters) the sample holds."""
    value: float
    """The value every unit showed."""
    other_share: float
    """Upper bound on the share of the population whose value is not `value`."""
    low: float
    high: float
    """Interval on the population mean, with coverage at least the confidence it was built at."""
    variance: float
    """Upper bound on the population variance (at the same confidence)."""


def constant_sample_bound(
    value: float,
    units: int,
    confidence: float,
    value_range: tuple[float, float] = (-1.0, 1.0),
) -> ConstantSampleBound:
    """Bounds from `units` independent draws that all equal `value`, of a variable that lies in
    `value_range` = [lo, hi] (by default [-1, 1]: a paired difference of two 0/1 scores).

    With a share of at least 1 - s of the population at c = `value` (s = other_share) and the
    rest anywhere in [lo, hi], the mean lies in [c - (c - lo)·s, c + (hi - c)·s] and the
    variance is at most E(X - c)² ≤ max(c - lo, hi - c)²·s, and never above (hi - lo)²/4, the
    largest variance of any variable in [lo, hi] (1 for a 0/1 difference). For a paired 0/1 difference with
    c = 0 (no doc differs) that is [-s, s] and s. Draws without replacement from a finite
    population see the rest less often than independent ones: the bound holds for them too.
    """
    lo, hi = value_range
    if not lo <= value <= hi:
        raise ValueError(f"value must lie in {value_range}, got {value!r}")
    share = no_event_upper_bound(units, confidence)
    return ConstantSampleBound(
        units=units,
        value=value,
        other_share=share,
        low=value - (value - lo) * share,
        high=value + (hi - value) * share,
        variance=min(max(value - lo, hi - value) ** 2 * share, (hi - lo) ** 2 / 4),
    )


def bernoulli_variance_bound(successes: int, trials: int, confidence: float) -> float:
    """Upper bound on p(1 - p) of a proportion seen as 0 or `trials` successes out of
    `trials` (no spread): p lies within the exact bound of the edge, and p(1 - p) grows
    towards 1/2."""
    if successes not in (0, trials):
        raise ValueError("the bound is for samples without spread: 0 or all successes")
    edge = no_event_upper_bound(trials, confidence)
    return 0.25 if edge >= 0.5 else edge * (1.0 - edge)


@dataclass(frozen=True)
class PairedBinaryInterval:
    """The exact interval on the mean difference of paired 0/1 scores (`paired_binary_exact`)."""

    low: float
    high: float
    p_value: float
    """McNemar's exact two-sided p-value: the interval excludes 0 exactly when it is below
    1 - confidence."""


def clopper_pearson(events: int, trials: int, confidence: float) -> tuple[float, float]:
    """The two-sided Clopper-Pearson interval on a proportion after `events` in `trials`."""
    from scipy.stats import beta

    check_confidence(confidence)
    tail = (1 - confidence) / 2
    low = float(beta.ppf(tail, events, trials - events + 1)) if events > 0 else 0.0
    high = float(beta.ppf(1 - tail, events + 1, trials - events)) if events < trials else 1.0
    return low, high


def paired_binary_exact(
    only_a: int, only_b: int, n: int, confidence: float
) -> PairedBinaryInterval:
    """Interval on p_b - p_a from n paired 0/1 scores of which `only_a` docs only run a got
    right and `only_b` only run b (1 <= only_a + only_b <= n).

    The difference is ψ·(2π - 1), with ψ the share of docs that differ and π the share of
    those that favour b. Clopper-Pearson intervals on both (each at `confidence`) bound it:
    [ψ'·(2π_L - 1), ψ''·(2π_U - 1)], taking the end of ψ's interval that makes each bound
    extreme. π's interval is the inversion of McNemar's exact test (the binomial test of π =
    1/2 with the doubled smaller tail), so the interval excludes 0 exactly when that test
    rejects. Used where few docs differ and the normal interval under-covers
    (docs/comparing-runs.md, the coverage atlas)."""
    from scipy.stats import binom

    discordant = only_a + only_b
    if not 1 <= discordant <= n:
        raise ValueError(f"need 1..{n} differing docs, got {discordant}")
    share_low, share_high = clopper_pearson(discordant, n, confidence)
    favour_low, favour_high = clopper_pearson(only_b, discordant, confidence)
    lean_low, lean_high = 2 * favour_low - 1, 2 * favour_high - 1
    low = lean_low * (share_low if lean_low >= 0 else share_high)
    high = lean_high * (share_high if lean_high >= 0 else share_low)
    p_value = min(1.0, 2 * float(binom.cdf(min(only_a, only_b), discordant, 0.5)))
    return PairedBinaryInterval(low, high, p_value)
