"""Metrics: per-sample scores, corpus aggregations and their standard errors (lm-eval's).

Built-in metrics register themselves when their module is imported; `get_metric(name)` imports
the right module on first use.
"""

from assay.metrics.base import (
    AGGREGATIONS,
    METRICS,
    Aggregation,
    Metric,
    MetricRole,
    SampleInput,
    get_metric,
    judge_metric_names,
    metric_role,
    register_aggregation,
    register_metric,
)
from assay.metrics.stderr import group_aggregate, stderr_of

__all__ = [
    "AGGREGATIONS",
    "METRICS",
    "Aggregation",
    "Metric",
    "MetricRole",
    "SampleInput",
    "get_metric",
    "group_aggregate",
    "judge_metric_names",
    "metric_role",
    "register_aggregation",
    "register_metric",
    "stderr_of",
]
