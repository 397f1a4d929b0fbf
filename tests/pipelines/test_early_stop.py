"""Early-stopping decisions on anytime-valid intervals (the pure rule; run_evals wiring in
test_experiment.py)."""

from __future__ import annotations

import numpy as np
import pytest

from assay.errors import ConfigError
from assay.pipelines.shards.early_stop import EarlyStop, MetricTrace, decide


def bernoulli_rows(p: float, size: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(size) < p).astype(float)


def per_row(scores: np.ndarray, order: np.ndarray, n: int) -> MetricTrace:
    """The first n rows of the run's shuffled order, as a config scored them."""
    rows = order[:n]
    return MetricTrace(values=list(scores[rows]), rows=list(rows))


def test_a_clearly_worse_config_is_stopped_on_paired_rows() -> None:
    order = np.random.default_rng(0).permutation(400)
    good, bad = bernoulli_rows(0.8, 400, 1), bernoulli_rows(0.3, 400, 2)
    traces = {1: per_row(good, order, 80), 2: per_row(bad, order, 80)}
    [decision] = decide(traces, active=[1, 2], rule=EarlyStop("Correct"), population=400)
    assert (decision.config_id, decision.best_id, decision.rule) == (2, 1, "paired")
    assert decision.rows == 80 and decision.interval[0] > 0
    assert decision.confidence_level == pytest.approx(0.95)  # K - 1 = 1 comparison
    assert "config 2 stopped early" in decision.message and "config 1" in decision.message
    # Minimising the same metric stops the other one.
    [flipped] = decide(traces, [1, 2], EarlyStop("Correct", direction="minimize"), 400)
    assert (flipped.config_id, flipped.best_id) == (1, 2)


def test_batch_level_metrics_use_the_marginal_rule_with_a_split_level() -> None:
    order = np.random.default_rng(3).permutation(600)
    traces = {}
    for cid, p in ((1, 0.85), (2, 0.2), (3, 0.8)):
        rows = bernoulli_rows(p, 600, cid)[order[:240]]
        traces[cid] = MetricTrace(values=list(rows.reshape(30, 8).mean(axis=1)), counts=[8] * 30)
    decisions = decide(traces, active=[1, 2, 3], rule=EarlyStop("Accuracy"), population=600)
    assert [d.config_id for d in decisions] == [2]  # 1 and 3 are too close to call
    [stop] = decisions
    assert stop.rule == "marginal" and stop.best_id in (1, 3)
    assert stop.interval[1] < stop.best_interval[0]
    assert stop.confidence_level == pytest.approx(1 - 0.05 / 3)


def test_close_configs_and_lone_configs_are_never_stopped() -> None:
    order = np.random.default_rng(4).permutation(300)
    same = bernoulli_rows(0.6, 300, 5)
    traces = {1: per_row(same, order, 150), 2: per_row(same, order, 150)}
    assert decide(traces, [1, 2], EarlyStop("Correct"), 300) == []
    assert decide({1: traces[1]}, [1], EarlyStop("Correct"), 300) == []


def test_configs_of_equal_quality_are_rarely_stopped_however_often_we_look() -> None:
    """Three configs with the same mean: every stop is a wrong decision; checking after every
    shard, at most about α of the runs may ever stop one."""
    runs, size, shards = 100, 120, 4
    rng = np.random.default_rng(6)
    wrong = 0
    for _ in range(runs):
        order = rng.permutation(size)
        scores = {cid: (rng.random(size) < 0.5).astype(float) for cid in (1, 2, 3)}
        # Population means differ by sampling noise: make them exactly equal.
        for cid in (2, 3):
            ones = int(scores[1].sum())
            scores[cid] = np.zeros(size)
            scores[cid][rng.permutation(size)[:ones]] = 1.0
        for look in range(1, shards + 1):
            n = look * size // shards
            traces = {cid: per_row(s, order, n) for cid, s in scores.items()}
            if decide(traces, [1, 2, 3], EarlyStop("Correct"), size):
                wrong += 1
                break
    assert wrong / runs <= 0.05 + 3 * (0.05 * 0.95 / runs) ** 0.5


def test_rule_is_checked() -> None:
    with pytest.raises(ConfigError, match="direction"):
        EarlyStop("Accuracy", direction="up")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="confidence_level"):
        EarlyStop("Accuracy", confidence_level=95)
    with pytest.raises(ConfigError, match="metric"):
        EarlyStop("")
