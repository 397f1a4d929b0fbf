"""Built-in per-row metrics for eval pipelines, and an accumulator for per-row metrics.

Not assay's benchmark metrics (assay.metrics): these build a pipeline's ``compute_metrics_fn``.

Each factory returns a ``compute_metrics_fn(batch)`` whose values are lists with one score per
row, so intervals use the observed variance and configs can be compared row by row. Pair them
with ``accumulate_metrics_fn=mean_of_rows`` for live intervals after every shard.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from assay.errors import ConfigError

ComputeFn = Callable[[dict[str, list[Any]]], dict[str, dict[str, Any]]]


def _column(batch: Mapping[str, Any], key: str, fn: str) -> list[Any]:
    if key not in batch:
        raise ConfigError(
            f"{fn}: the batch has no {key!r} column (columns: {sorted(batch)}); add it in "
            "preprocess_fn or postprocess_fn, or pass the right key name"
        )
    return list(batch[key])


def exact_match_per_row(
    prediction_key: str = "model_answer",
    reference_key: str = "ground_truth",
    name: str = "Accuracy",
    normalize: Callable[[Any], Any] | None = None,
) -> ComputeFn:
    """1.0 per row whose prediction equals its reference (after `normalize`), else 0.0."""
    norm = normalize or (lambda x: str(x).strip())

    def compute(batch: dict[str, list[Any]]) -> dict[str, dict[str, Any]]:
        predictions = _column(batch, prediction_key, "exact_match")
        references = _column(batch, reference_key, "exact_match")
        scores = [float(norm(p) == norm(r)) for p, r in zip(predictions, references, strict=True)]
        return {name: {"value": scores, "value_range": (0.0, 1.0)}}

    # The name users call it by (assay.pipelines.exact_match); it is part of the config's identity.
    compute.__qualname__ = f"exact_match({prediction_key!r}, {reference_key!r})"
    return compute


exact_match = exact_match_per_row
"""The name assay.pipelines has always exported."""


def ndcg_at_k(retrieved: Sequence[Any], relevant: Sequence[Any], k: int) -> float:
    """Binary-relevance NDCG of the ranked list `retrieved` cut at k."""
    wanted = set(relevant)
    dcg = sum(1.0 / math.log2(i + 2) for i, doc in enumerate(retrieved[:k]) if doc in wanted)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(wanted))))
    return dcg / ideal if ideal else 0.0


def reciprocal_rank(retrieved: Sequence[Any], relevant: Sequence[Any]) -> float:
    """1 / rank of the first relevant document (0 when none is retrieved)."""
    wanted = set(relevant)
    return next((1.0 / (i + 1) for i, doc in enumerate(retrieved) if doc in wanted), 0.0)


def retrieval_scores(retrieved: Sequence[Any], relevant: Sequence[Any], k: int) -> dict[str, float]:
    """Precision, Recall, F1 Score, NDCG@k and MRR of one ranked retrieval."""
    got, wanted = set(retrieved), set(relevant)
    hits = len(got & wanted)
    precision = hits / len(got) if got else 0.0
    recall = hits / len(wanted) if wanted else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "Precision": precision,
        "Recall": recall,
        "F1 Score": f1,
        f"NDCG@{k}": ndcg_at_k(list(retrieved), list(relevant), k),
        "MRR": reciprocal_rank(list(retrieved), list(relevant)),
    }


def retrieval_metrics(
    retrieved_key: str = "retrieved_documents",
    relevant_key: str = "ground_truth_documents",
    k: int = 5,
) -> ComputeFn:
    """Per-row Precision, Recall, F1 Score, NDCG@k and MRR of ranked retrieved ids."""

    def compute(batch: dict[str, list[Any]]) -> dict[str, dict[str, Any]]:
        retrieved = _column(batch, retrieved_key, "retrieval_metrics")
        relevant = _column(batch, relevant_key, "retrieval_metrics")
        rows = [retrieval_scores(r, g, k) for r, g in zip(retrieved, relevant, strict=True)]
        names = list(rows[0]) if rows else []
        return {n: {"value": [row[n] for row in rows], "value_range": (0.0, 1.0)} for n in names}

    compute.__qualname__ = f"retrieval_metrics({retrieved_key!r}, {relevant_key!r}, k={k})"
    return compute


def mean_of_rows(aggregated: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """accumulate_metrics_fn for per-row metrics: each one's mean over all rows, algebraic.

    Batch-level metrics (no per-row scores) are summed, as distributive totals.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, batches in aggregated.items():
        if batches and all("per_row" in b for b in batches):
            scores = [s for b in batches for s in b["per_row"]]
            value_range = batches[0].get("value_range", (0.0, 1.0))
            out[name] = {
                "value": math.fsum(scores) / len(scores),
                "is_algebraic": True,
                "value_range": tuple(value_range),
            }
        else:
            out[name] = {"value": sum(b.get("value", 0) for b in batches)}
    return out
