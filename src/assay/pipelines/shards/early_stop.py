"""Early stopping of configs that are already beaten, decided on anytime-valid intervals.

After every shard, each active config is compared with the best one on a chosen metric, using
the confidence sequences of `assay.stats.anytime` (valid at every look, so checking after
every shard does not inflate the error):

- *paired*, when both configs have per-row scores: the sequence for mean(best) - mean(config)
  over the rows both scored; the config stops once it excludes 0 on the losing side;
- *marginal* otherwise: the config stops once its interval lies entirely below the best
  config's (above it, when lower is better).

The levels are Bonferroni-split so that the chance of ever stopping a config that is in fact
the best is at most 1 - confidence_level: with K configs, each marginal sequence is at level
1 - α/K (a wrong stop needs one of the K to miss), each paired one at 1 - α/(K - 1) (a wrong
stop of the best needs one of its K - 1 differences to miss). Stopped configs keep their rows
and metrics, as if stopped by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from assay.errors import ConfigError
from assay.stats.anytime import (
    METHODS,
    AnytimeMethod,
    ConfidenceSequence,
    confidence_sequence,
)
from assay.stats.anytime import paired_confidence_sequence as paired_sequence

Direction = Literal["maximize", "minimize"]


@dataclass(frozen=True, slots=True)
class EarlyStop:
    """Opt-in early stopping: ``run_evals(..., early_stop=EarlyStop("Accuracy"))``."""

    metric: str
    """An accumulated metric (``is_algebraic``) or a per-row metric of compute_metrics_fn."""
    direction: Direction = "maximize"
    confidence_level: float = 0.95
    """Chance of never stopping the truly best config."""
    paired: bool = True
    """Compare on the rows both configs scored when per-row scores exist (far sharper)."""
    method: AnytimeMethod = "betting"

    def __post_init__(self) -> None:
        if not isinstance(self.metric, str) or not self.metric:
            raise ConfigError(f"EarlyStop metric must be a metric name, got {self.metric!r}")
        if self.direction not in ("maximize", "minimize"):
            raise ConfigError(
                f"EarlyStop direction {self.direction!r}: choose 'maximize' or 'minimize'"
            )
        if not 0.0 < self.confidence_level < 1.0:
            raise ConfigError(
                f"EarlyStop confidence_level must be in (0, 1), got {self.confidence_level!r}"
            )
        if self.method not in METHODS:
            raise ConfigError(f"EarlyStop method {self.method!r} is not one of {list(METHODS)}")


@dataclass(frozen=True, slots=True)
class MetricTrace:
    """A config's observations of one metric, in the order its rows were scored.

    Per-row traces have one value per row and its dataset index in `rows` (for pairing);
    batch traces have one mean per batch, `counts` rows each, and no `rows`.
    """

    values: Sequence[float]
    counts: Sequence[int] | None = None
    rows: Sequence[int] | None = None
    value_range: tuple[float, float] = (0.0, 1.0)

    @property
    def n(self) -> int:
        """Rows observed."""
        return len(self.values) if self.counts is None else int(sum(self.counts))


@dataclass(frozen=True, slots=True)
class StopDecision:
    """Why a config was stopped: the comparison that excluded it, with its numbers."""

    config_id: int
    best_id: int
    rule: Literal["paired", "marginal"]
    rows: int
    """Rows the comparison used (of the stopped config, or pairs of rows)."""
    interval: tuple[float, float]
    """The stopped config's interval (marginal) or that of best minus it (paired)."""
    best_interval: tuple[float, float] | None
    """The best config's interval (marginal rule only)."""
    confidence_level: float
    """Level of each sequence after the Bonferroni split."""
    metric: str
    message: str = field(default="", compare=False)

    def as_dict(self) -> dict[str, Any]:
        """Plain values, as the experiment store keeps them."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StopDecision:
        """The decision `as_dict` wrote (intervals come back as tuples)."""
        values = dict(data)
        for key in ("interval", "best_interval"):
            if values.get(key) is not None:
                values[key] = tuple(values[key])
        return cls(**values)


def decide(
    traces: Mapping[int, MetricTrace],
    active: Sequence[int],
    rule: EarlyStop,
    population: int,
) -> list[StopDecision]:
    """Configs among `active` to stop now, given every comparable config's trace.

    `traces` holds the configs that count in the comparison (active, completed or stopped by
    hand; not failed or deleted), each with at least one observation.
    """
    ids = sorted(cid for cid, trace in traces.items() if trace.n > 0)
    if len(ids) < 2:
        return []
    alpha = 1.0 - rule.confidence_level
    sign = 1.0 if rule.direction == "maximize" else -1.0
    if rule.paired and all(traces[cid].rows is not None for cid in ids):
        # The best by its running mean: any choice keeps the guarantee, since the best's
        # K - 1 paired sequences all hold with probability 1 - α.
        best = max(ids, key=lambda cid: sign * float(np.mean(traces[cid].values)))
        found = [
            _paired(cid, best, traces, rule, population, alpha / (len(ids) - 1), sign)
            for cid in active
            if cid != best and cid in traces
        ]
        return [d for d in found if d is not None]
    level = 1.0 - alpha / len(ids)
    bounds = {
        cid: _final(
            confidence_sequence(
                traces[cid].values,
                population=population,
                value_range=traces[cid].value_range,
                confidence_level=level,
                counts=traces[cid].counts,
                method=rule.method,
            )
        )
        for cid in ids
    }
    # The best: the highest guaranteed value (lowest, when minimising).
    best = max(ids, key=lambda cid: sign * bounds[cid][0 if sign > 0 else 1])
    found = [
        _marginal(cid, best, bounds, rule, level, traces[cid].n, sign)
        for cid in active
        if cid != best and cid in bounds
    ]
    return [d for d in found if d is not None]


def _final(sequence: ConfidenceSequence) -> tuple[float, float]:
    return float(sequence.lower[-1]), float(sequence.upper[-1])


def _marginal(
    cid: int,
    best: int,
    bounds: Mapping[int, tuple[float, float]],
    rule: EarlyStop,
    level: float,
    rows: int,
    sign: float,
) -> StopDecision | None:
    low, high = bounds[cid]
    best_low, best_high = bounds[best]
    beaten = high < best_low if sign > 0 else low > best_high
    if not beaten:
        return None
    side = "below" if sign > 0 else "above"
    message = (
        f"config {cid} stopped early: its {rule.metric} interval [{low:.4g}, {high:.4g}] lies "
        f"entirely {side} config {best}'s [{best_low:.4g}, {best_high:.4g}] (anytime-valid, "
        f"{level:.4g} each) after {rows} rows"
    )
    return StopDecision(
        cid, best, "marginal", rows, (low, high), (best_low, best_high), level, rule.metric, message
    )


def _paired(
    cid: int,
    best: int,
    traces: Mapping[int, MetricTrace],
    rule: EarlyStop,
    population: int,
    alpha: float,
    sign: float,
) -> StopDecision | None:
    mine, theirs = traces[cid], traces[best]
    assert mine.rows is not None and theirs.rows is not None
    best_scores = dict(zip(theirs.rows, theirs.values, strict=True))
    # Rows both scored, in the order this config scored them: both follow the run's one
    # shuffled order, so this is a prefix of a random draw without replacement.
    pairs = [
        (best_scores[row], value)
        for row, value in zip(mine.rows, mine.values, strict=True)
        if row in best_scores
    ]
    if not pairs:
        return None
    level = 1.0 - alpha
    value_range = (
        min(mine.value_range[0], theirs.value_range[0]),
        max(mine.value_range[1], theirs.value_range[1]),
    )
    best_side, my_side = [b for b, _ in pairs], [c for _, c in pairs]
    # The difference in the winning direction: best - config, or config - best when minimising.
    sequence = paired_sequence(
        best_side if sign > 0 else my_side,
        my_side if sign > 0 else best_side,
        population=population,
        value_range=value_range,
        confidence_level=level,
        method=rule.method,
    )
    low, high = _final(sequence)
    if low <= 0.0:
        return None
    word = "higher" if sign > 0 else "lower"
    message = (
        f"config {cid} stopped early: config {best} scores {rule.metric} {word} on the "
        f"{len(pairs)} rows both scored, by [{low:.4g}, {high:.4g}] (paired, anytime-valid, "
        f"{level:.4g})"
    )
    return StopDecision(
        cid, best, "paired", len(pairs), (low, high), None, level, rule.metric, message
    )
