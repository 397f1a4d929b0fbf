"""A config's metrics as rows arrive: user accumulation plus confidence intervals.

With an ``accumulate_metrics_fn``, per-batch metric dicts are kept per metric name and the user
function turns them into dataset-level metrics after every shard; metrics flagged
``is_algebraic`` get an interval on the mean, ``is_distributive`` ones are extrapolated to all N
rows with an interval on the total. Without an accumulate function, compute_metrics_fn runs once
on everything processed and there is no live interval.

Observed variance: when compute_metrics_fn returns a per-row list for a metric, the interval of
an accumulated metric uses the variance of those scores. The accumulated metric names its
per-row source with the key ``"per_row_metric"`` (``{"Accuracy": {"value": ..., "is_algebraic":
True, "per_row_metric": "Correct"}}``); without that key, a per-row metric of the same name is
used. Otherwise the normal strategy assumes the bound variance of the value range (``ci_method``
says which), and logs a warning once per config and metric when per-row scores were there to use.
Batch-level results (as RapidFire's examples return) always use the bound variance.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from assay.errors import ConfigError
from assay.pipelines.shards.batch import PipelineError, split_metrics
from assay.pipelines.shards.early_stop import MetricTrace
from assay.pipelines.shards.store import to_json
from assay.stats.anytime import ConfidenceSequence, confidence_sequence
from assay.stats.online import (
    Estimate,
    OnlineSettings,
    RunningEstimate,
    mean_interval,
    total_interval,
)

log = logging.getLogger(__name__)

SAMPLES = "Samples Processed"
PER_ROW_METRIC = "per_row_metric"
"""Key of an accumulated metric naming the per-row compute metric its interval is based on."""


def batch_entries(
    metrics: Mapping[str, Mapping[str, Any]] | None, n_scored: int
) -> dict[str, dict[str, Any]] | None:
    """One batch's metric dicts as accumulate_metrics_fn sees them and the store keeps them.

    `Samples Processed` is added (weighted accumulations read it), and the dicts take their
    stored JSON form, so a resumed experiment hands accumulate_metrics_fn exactly what an
    uninterrupted one would have.
    """
    if metrics is None:
        return None
    entries = dict(metrics)
    entries.setdefault(SAMPLES, {"value": n_scored})
    return json.loads(to_json(entries))


class ConfigMetrics:
    """Everything needed to (re)compute one config's metrics."""

    def __init__(
        self,
        population: int,
        settings: OnlineSettings,
        compute_fn: Callable[..., Any] | None,
        accumulate_fn: Callable[..., Any] | None,
        where: str,
    ) -> None:
        self.population = population
        self.settings = settings
        self.compute_fn = compute_fn
        self.accumulate_fn = accumulate_fn
        self.where = where
        self.batch_metrics: dict[str, list[dict[str, Any]]] = {}
        self.row_scores: dict[str, RunningEstimate] = {}
        self.samples = 0
        """Rows scored so far."""
        self.errors = 0
        """Rows whose generation failed."""
        self._warned: set[str] = set()
        # What anytime sequences and early stopping read: per-row scores in scoring order with
        # their dataset rows, each batch's entries, and the observation counts at shard ends.
        self.row_values: dict[str, list[float]] = {}
        self.row_order: dict[str, list[int]] = {}
        self.batches: list[dict[str, dict[str, Any]]] = []
        self._shard_ends: list[tuple[int, dict[str, int]]] = []
        self._batch_values: dict[str, list[float]] = {}
        self._bounds: dict[tuple[str, int], tuple[float, float]] = {}

    def add_batch(
        self,
        n_scored: int,
        n_errors: int,
        entries: Mapping[str, dict[str, Any]] | None,
        row_scores: Mapping[str, Sequence[float]],
        rows: Sequence[int] = (),
    ) -> None:
        """Fold in one batch's counts, `batch_entries` and per-row scores (of dataset `rows`,
        the scored rows in order)."""
        self.samples += n_scored
        self.errors += n_errors
        for name, entry in (entries or {}).items():
            self.batch_metrics.setdefault(name, []).append(entry)
        if entries:
            self.batches.append(dict(entries))
        for name, scores in row_scores.items():
            self.row_scores.setdefault(name, RunningEstimate()).extend(scores)
            self.row_values.setdefault(name, []).extend(float(x) for x in scores)
            self.row_order.setdefault(name, []).extend(rows)

    def end_shard(self) -> None:
        """Mark a shard boundary: the anytime sequences are read at every one."""
        counts = {name: len(values) for name, values in self.row_values.items()}
        self._shard_ends.append((len(self.batches), counts))

    def error_budget_exceeded(self, max_error_rate: float) -> str | None:
        """Why the config fails on its failed rows so far, or None: all rows failed, or more
        than `max_error_rate` of them."""
        processed = self.samples + self.errors
        if not self.errors:
            return None
        if self.samples == 0:
            return f"every row failed ({self.errors} of {processed} so far)"
        if self.errors / processed > max_error_rate:
            return (
                f"{self.errors} of {processed} rows failed so far, more than "
                f"max_error_rate={max_error_rate:g}"
            )
        return None

    def trace(self, name: str, entry: Mapping[str, Any] | None = None) -> MetricTrace | None:
        """The observations behind metric `name`, in scoring order: its per-row scores (those
        of its ``per_row_metric``) when compute_metrics_fn returns them, else one value per
        batch (accumulate_metrics_fn applied to that batch alone). None when neither exists."""
        entry = entry if entry is not None else self._entry(name)
        value_range = _range(entry.get("value_range") if entry else None)
        source = entry.get(PER_ROW_METRIC, name) if entry else name
        if source in self.row_values:
            return MetricTrace(
                values=self.row_values[source],
                rows=self.row_order[source],
                value_range=value_range,
            )
        if entry is None or self.accumulate_fn is None:
            return None
        values = self._batch_values.setdefault(name, [])
        counts = [int(batch[SAMPLES]["value"]) for batch in self.batches]
        for batch, count in zip(self.batches[len(values) :], counts[len(values) :], strict=True):
            alone = self._accumulate({k: [v] for k, v in batch.items()})
            value = float(alone[name]["value"])
            # A distributive metric's batch value is a total: its rows' mean contribution.
            values.append(value / count if entry.get("is_distributive") else value)
        return MetricTrace(values=values, counts=counts, value_range=value_range)

    def _entry(self, name: str) -> dict[str, Any] | None:
        if self.accumulate_fn is not None and self.samples:
            accumulated = self._accumulate({k: list(v) for k, v in self.batch_metrics.items()})
            if name in accumulated and isinstance(accumulated[name], Mapping):
                return dict(accumulated[name])
        return {} if name in self.row_values else None

    def _looks(self, trace: MetricTrace, source: str) -> list[int]:
        """Observation counts at every shard end so far and now."""
        if trace.rows is not None:
            ends = [counts.get(source, 0) for _, counts in self._shard_ends]
        else:
            ends = [batches for batches, _ in self._shard_ends]
        ends.append(len(trace.values))
        return sorted({e for e in ends if 0 < e <= len(trace.values)})

    def anytime_bounds(
        self, name: str, trace: MetricTrace, source: str, level: float
    ) -> tuple[float, float, str]:
        """The anytime sequence of a metric read at every shard end so far, intersected:
        (lower, upper, method). Each look's bounds are computed once."""
        lower, upper, method = -math.inf, math.inf, ""
        for look in self._looks(trace, source):
            key = (f"{name}\0{level}", look)
            if key not in self._bounds:
                counts = trace.counts[:look] if trace.counts is not None else None
                sequence = confidence_sequence(
                    trace.values[:look],
                    population=self.population,
                    value_range=trace.value_range,
                    confidence_level=level,
                    counts=counts,
                )
                self._bounds[key] = (float(sequence.lower[-1]), float(sequence.upper[-1]))
            low, high = self._bounds[key]
            lower, upper = max(lower, low), min(upper, high)
        method = f"anytime (betting, without replacement, {len(self._looks(trace, source))} looks)"
        return lower, upper, method

    @property
    def live(self) -> bool:
        """Whether metrics (with intervals) exist before the config has finished."""
        return self.accumulate_fn is not None

    def current(self) -> dict[str, dict[str, Any]]:
        """Metrics with intervals from the batches so far (accumulate path only)."""
        if self.accumulate_fn is None or self.samples == 0:
            return {}
        accumulated = self._accumulate({k: list(v) for k, v in self.batch_metrics.items()})
        return {name: self.annotate(name, entry) for name, entry in accumulated.items()}

    def _accumulate(self, lists: dict[str, list[dict[str, Any]]]) -> Mapping[str, Any]:
        assert self.accumulate_fn is not None
        try:
            accumulated = self.accumulate_fn(lists)
        except ConfigError:
            raise
        except Exception as exc:
            raise PipelineError(
                f"{self.where}: accumulate_metrics_fn raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(accumulated, Mapping):
            raise PipelineError(
                f"{self.where}: accumulate_metrics_fn must return a dict, "
                f"got {type(accumulated).__name__}"
            )
        return accumulated

    def annotate(self, name: str, entry: Any) -> dict[str, Any]:
        """One accumulated metric with its interval fields added."""
        if not isinstance(entry, Mapping) or "value" not in entry:
            raise PipelineError(
                f"{self.where}: accumulate_metrics_fn must return {{name: {{'value': ...}}}}; "
                f"metric {name!r} is {entry!r}"
            )
        out = dict(entry)
        algebraic, distributive = out.get("is_algebraic"), out.get("is_distributive")
        if not (algebraic or distributive) or self.samples == 0:
            return out
        if algebraic and distributive:
            raise PipelineError(
                f"{self.where}: metric {name!r} cannot be both is_algebraic and is_distributive"
            )
        try:
            if self.settings.strategy == "anytime":
                return {**out, **self._anytime(name, out, bool(algebraic)).as_dict()}
            value_range = tuple(out.get("value_range") or (0.0, 1.0))
            variance = self._observed_variance(name, out)
            interval = mean_interval if algebraic else total_interval
            est = interval(
                float(out["value"]),
                self.samples,
                population=self.population,
                value_range=value_range,
                variance=variance,
                settings=self.settings,
                rows=self.row_values.get(out.get(PER_ROW_METRIC, name)),
            )
        except ConfigError as exc:
            raise PipelineError(f"{self.where}: metric {name!r}: {exc}") from None
        return {**out, **est.as_dict()}

    def _anytime(self, name: str, entry: Mapping[str, Any], algebraic: bool) -> Estimate:
        """The anytime-valid interval of an accumulated metric (see assay.stats.anytime)."""
        trace = self.trace(name, entry)
        assert trace is not None  # an accumulated metric always has batch observations
        source = entry.get(PER_ROW_METRIC, name) if trace.rows is not None else name
        level = self.settings.confidence_level
        low, high, method = self.anytime_bounds(name, trace, source, level)
        scale = 1 if algebraic else self.population
        value = float(entry["value"])
        return Estimate(
            value=value if algebraic else value / self.samples * self.population,
            lower=low * scale,
            upper=high * scale,
            margin=(high - low) * scale / 2,
            n=self.samples,
            population=self.population,
            confidence_level=level,
            method=method,
            observed=None if algebraic else value,
        )

    def _observed_variance(self, name: str, entry: Mapping[str, Any]) -> float | None:
        """Variance of the per-row scores behind accumulated metric `name` (None: assume one)."""
        source = entry.get(PER_ROW_METRIC, name)
        running = self.row_scores.get(source)
        if running is not None:
            return running.variance
        if PER_ROW_METRIC in entry:
            raise PipelineError(
                f"{self.where}: metric {name!r} names per_row_metric={source!r}, but "
                f"compute_metrics_fn returned no per-row list under that name; per-row metrics: "
                f"{sorted(self.row_scores)}"
            )
        # Only the normal strategy uses a variance; warn when one was there to be used.
        if self.row_scores and self.settings.strategy == "normal" and name not in self._warned:
            self._warned.add(name)
            log.warning(
                "%s: metric %r matches no per-row metric (%s), so its interval assumes the bound "
                'variance; add "%s": <per-row metric name> to it in accumulate_metrics_fn to use '
                "the observed variance",
                self.where,
                name,
                ", ".join(sorted(self.row_scores)),
                PER_ROW_METRIC,
            )
        return None

    def final(self, processed: Mapping[str, list[Any]]) -> dict[str, dict[str, Any]]:
        """Metrics once the config stops or finishes; `processed` is every scored row's columns."""
        if self.accumulate_fn is not None:
            return self.current()
        if self.compute_fn is None or self.samples == 0:
            return {}
        try:
            metrics = self.compute_fn(dict(processed))
        except ConfigError:
            raise
        except Exception as exc:
            raise PipelineError(
                f"{self.where}: compute_metrics_fn raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(metrics, Mapping):
            raise PipelineError(f"{self.where}: compute_metrics_fn must return a dict")
        batch, rows = split_metrics(metrics, self.samples, self.where)
        out: dict[str, dict[str, Any]] = {}
        for name, entry in batch.items():
            scores = rows.get(name)
            if scores is None:
                out[name] = entry
                continue
            running = RunningEstimate()
            running.extend(scores)
            low, high = entry.get("value_range") or (min(0.0, *scores), max(1.0, *scores))
            if self.settings.strategy == "anytime":
                sequence = confidence_sequence(
                    scores,
                    population=self.population,
                    value_range=(low, high if high > low else low + 1.0),
                    confidence_level=self.settings.confidence_level,
                )
                kept = {k: v for k, v in entry.items() if k != "per_row"}
                out[name] = {
                    **kept,
                    "is_algebraic": True,
                    **_sequence_estimate(sequence, self.population).as_dict(),
                }
                continue
            est = mean_interval(
                running.mean,
                running.n,
                value_range=(low, high if high > low else low + 1.0),
                variance=running.variance,
                population=self.population,
                settings=self.settings,
                rows=scores,
            )
            kept = {k: v for k, v in entry.items() if k != "per_row"}
            out[name] = {**kept, "is_algebraic": True, **est.as_dict()}
        return out


def _sequence_estimate(sequence: ConfidenceSequence, population: int) -> Estimate:
    """The last look of a confidence sequence as an Estimate."""
    low, high = float(sequence.lower[-1]), float(sequence.upper[-1])
    return Estimate(
        value=float(sequence.estimate[-1]),
        lower=low,
        upper=high,
        margin=(high - low) / 2,
        n=int(sequence.rows[-1]),
        population=population,
        confidence_level=sequence.confidence_level,
        method=sequence.method,
    )


def _range(value_range: Any) -> tuple[float, float]:
    low, high = value_range or (0.0, 1.0)
    return float(low), float(high)


def metric_cell(entry: Mapping[str, Any]) -> str:
    """``0.731 [0.702, 0.760]`` (or just the value) for tables."""
    value = entry.get("value")
    if not isinstance(value, int | float) or isinstance(value, bool):
        return str(value)
    text = _fmt(value)
    if "lower_bound" in entry and "upper_bound" in entry:
        text += f" [{_fmt(entry['lower_bound'])}, {_fmt(entry['upper_bound'])}]"
    return text


def _fmt(x: float) -> str:
    if isinstance(x, int) or (math.isfinite(x) and float(x).is_integer() and abs(x) >= 100):
        return f"{x:.0f}"
    return f"{x:.4g}" if abs(x) < 1000 else f"{x:.0f}"
