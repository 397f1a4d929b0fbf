"""A run's per-config record: one ConfigRun per config, changed only through its methods."""

from __future__ import annotations

from typing import Any

from assay.errors import ModelError
from assay.pipelines import ModelConfig
from assay.pipelines.configs.eval_config import validate
from assay.pipelines.experiment.state import RunState


def counting_state() -> tuple[RunState, list[int]]:
    """A run of 4 rows with one config whose end-of-run metric counts the rows it is given."""
    calls: list[int] = []

    def compute(batch: dict[str, list[Any]]) -> dict[str, dict[str, Any]]:
        calls.append(len(batch["x"]))
        return {"Rows": {"value": len(batch["x"])}}

    state = RunState("t")
    state.rows = [{"x": i} for i in range(4)]
    leaf = {"pipeline": ModelConfig("dummy"), "batch_size": 2, "compute_metrics_fn": compute}
    state.add(validate(leaf, config_id=1))
    return state, calls


def test_end_of_run_metrics_are_computed_once_per_completed_shard() -> None:
    state, calls = counting_state()
    run = state.runs[1]
    run.metrics.add_batch(2, 0, None, {})
    run.add_batch([{"x": 0}, {"x": 1}], failed=None)
    run.end_shard(0.5)
    assert run.user_metrics()["Rows"]["value"] == 2
    assert run.user_metrics()["Rows"]["value"] == 2
    assert calls == [2]  # cached until the next shard ends
    run.metrics.add_batch(1, 1, None, {})
    run.add_batch([{"x": 2}], failed=(3, "boom"))
    run.end_shard(0.25)
    assert run.user_metrics()["Rows"]["value"] == 3
    assert calls == [2, 3]
    assert run.seconds == 0.75


def test_the_first_failed_row_is_kept_and_a_restore_does_not_forget_it() -> None:
    state, _ = counting_state()
    run = state.runs[1]
    run.add_batch([], failed=(1, "first"))
    run.add_batch([], failed=(2, "second"))
    assert run.first_error == (1, "first")
    run.restore([{"x": 0}], 2.0, None)
    assert (run.records, run.seconds, run.first_error) == ([{"x": 0}], 2.0, (1, "first"))
    run.restore([], 0.0, (0, "stored"))
    assert run.first_error == (0, "stored")


def test_failures_and_configs_come_from_the_runs_and_reset_forgets_them() -> None:
    state, _ = counting_state()
    assert state.failures() == {} and list(state.configs()) == [1]
    error = ModelError("config 1: down")
    state.runs[1].fail(error)
    assert state.failures() == {1: error}
    state.reset()
    assert state.runs == {} and state.failures() == {} and state.rows == []
