"""Pieces the generative catalog families share: metrics a task's process_results computes."""

from __future__ import annotations

from typing import Any

from assay.tasks.config import MetricSpec


def _computed_by_process_results(**_: Any) -> Any:
    """Placeholder metric function: a task with process_results never calls it."""
    raise RuntimeError("this metric is computed by its task's process_results")


def computed_metrics(*names: str, higher_is_better: bool = True) -> list[MetricSpec]:
    """Metric entries whose per-sample values come from the task's process_results
    (lm-eval's metric_list of such tasks: mean-aggregated, named by their result keys)."""
    return [
        MetricSpec(
            name,
            aggregation="mean",
            higher_is_better=higher_is_better,
            function=_computed_by_process_results,
        )
        for name in names
    ]
