"""Standard errors of task and group scores, reproducing lm-eval 0.4.13 number for number.

Bootstrap: the `iters` replicates are split into chunks of min(1000, iters) (a remainder smaller
than a chunk is dropped, as lm-eval does); chunk i draws from `random.Random(i)`, and each
replicate resamples the n values with replacement exactly as `Random.choices(values, k=n)` does
(index = floor(random() * n)). The Mersenne Twister state of `random.Random(i)` is loaded into a
numpy RandomState, whose `random_sample` yields the same doubles as `random()`, so the indices
are drawn in bulk. For the built-in aggregations a vectorised twin computes every replicate of a
block at once with the same arithmetic (left-to-right sums, the same scikit-learn formulas), so
results are bit-identical to lm-eval's loop under CPython 3.11; any other aggregation is called
once per replicate on the resampled values.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from numbers import Integral, Real
from typing import Any, Literal

import numpy as np

from assay.metrics import aggregations as agg
from assay.metrics.base import Aggregation

NA: Literal["N/A"] = "N/A"
"""lm-eval's placeholder for a standard error that is not computed."""

Stderr = float | Literal["N/A"]

_CHUNK = 1000
_BLOCK_ELEMENTS = 1 << 21
"""Resampled values held in memory at once (a block of replicates), about 16 MB of float64."""


def sample_stddev(values: Sequence[Any]) -> float:
    """Standard deviation with Bessel's correction (n - 1), summed left to right; exactly 0
    when every value is the same (the mean of equal floats can be an ulp off, which left
    lm-eval's formula a spread of ~1e-16 where there is none)."""
    if min(values) == max(values):
        return 0.0
    mu = sum(values) / len(values)
    return math.sqrt(sum([(x - mu) ** 2 for x in values]) / (len(values) - 1))


def mean_stderr(values: Sequence[Any]) -> float:
    """Closed-form standard error of a mean: sample stddev / sqrt(n)."""
    return sample_stddev(values) / math.sqrt(len(values))


def stderr_of(aggregation: Aggregation, values: Sequence[Any], bootstrap_iters: int) -> Stderr:
    """The standard error lm-eval reports next to `aggregation(values)`.

    "N/A" when `bootstrap_iters` is 0 (lm-eval then skips every stderr, closed forms
    included), when there is at most one value, or when the aggregation has no stderr rule.
    """
    if isinstance(bootstrap_iters, bool) or not isinstance(bootstrap_iters, int):
        return NA
    if bootstrap_iters <= 0 or aggregation.stderr == "none" or len(values) <= 1:
        return NA
    if aggregation.peer_stderr is not None:
        return aggregation.peer_stderr(values, bootstrap_iters)[0]
    if aggregation.stderr == "mean":
        return mean_stderr(values)
    if aggregation.stderr == "nan_mean":
        kept = [v for v in values if not math.isnan(v)]
        return mean_stderr(kept) if len(kept) > 1 else NA
    if aggregation.stderr == "flat_mean":
        flat = [item for per_sample in values for item in per_sample]
        return mean_stderr(flat) if len(flat) > 1 else NA
    iters = bootstrap_iters
    if aggregation.bootstrap_cap is not None:
        iters = min(iters, aggregation.bootstrap_cap)
    return sample_stddev(bootstrap_replicates(aggregation.fn, values, iters))


def bootstrap_replicates(
    fn: Callable[[Sequence[Any]], Any], values: Sequence[Any], iters: int
) -> list[Any]:
    """fn over each of lm-eval's bootstrap resamples of `values`, in lm-eval's order."""
    chunk = min(_CHUNK, iters)
    n = len(values)
    vectorised = _vectorised_twin(fn, values)
    replicates: list[Any] = []
    for seed in range(iters // chunk):
        for block in _resample_indices(seed, n, chunk):
            if vectorised is not None:
                replicates.extend(vectorised(block))
            else:
                replicates.extend(fn([values[j] for j in row]) for row in block.tolist())
    return replicates


def _resample_indices(seed: int, n: int, replicates: int) -> Iterator[np.ndarray]:
    """Blocks of rows of indices, row r being what `random.Random(seed).choices` draws the
    r-th time it is called with k = n."""
    _version, internal, _gauss = random.Random(seed).getstate()
    generator = np.random.RandomState()
    # (has_gauss, cached_gaussian) = (0, 0.0): the defaults set_state uses for a 3-tuple.
    generator.set_state(("MT19937", np.array(internal[:-1], dtype=np.uint32), internal[-1], 0, 0.0))
    rows_per_block = max(1, _BLOCK_ELEMENTS // max(n, 1))
    done = 0
    while done < replicates:
        rows = min(rows_per_block, replicates - done)
        uniform = generator.random_sample(rows * n)
        # Truncation is floor here: the products are non-negative.
        yield (uniform * float(n)).astype(np.intp).reshape(rows, n)
        done += rows


# Vectorised twins: given the values, return a function from a block of index rows to the
# replicates of that block, or None when the values are outside what the twin reproduces
# exactly (the caller then calls the aggregation itself per replicate).

Twin = Callable[[np.ndarray], list[Any]]


def _all(values: Sequence[Any], kind: type) -> bool:
    return all(isinstance(v, kind) and not isinstance(v, bool) for v in values)


def _left_to_right_sums(data: np.ndarray, block: np.ndarray) -> np.ndarray:
    # cumsum accumulates strictly left to right, like Python's sum() over floats.
    return np.cumsum(data[block], axis=1)[:, -1]


def _perplexity_twin(values: Sequence[Any]) -> Twin | None:
    if not _all(values, float):
        return None
    data = np.asarray(values, dtype=np.float64)
    n = len(values)
    return lambda block: [math.exp(-(total / n)) for total in _left_to_right_sums(data, block)]


def _median_twin(values: Sequence[Any]) -> Twin | None:
    if _all(values, float) and not any(math.isnan(v) for v in values):
        data = np.asarray(values, dtype=np.float64)
    elif all(isinstance(v, Integral) for v in values) and all(abs(v) < 2**62 for v in values):
        data = np.asarray([int(v) for v in values], dtype=np.int64)
    else:
        return None
    middle = len(values) // 2
    return lambda block: np.partition(data[block], middle, axis=1)[:, middle].tolist()


def _nanmean_twin(values: Sequence[Any]) -> Twin | None:
    if not all(isinstance(v, Real) for v in values):
        return None
    data = np.asarray(values, dtype=np.float64)

    def replicates(block: np.ndarray) -> list[Any]:
        rows = data[block]
        missing = np.isnan(rows)
        all_missing = missing.all(axis=1)
        # np.nanmean's own steps: NaNs become 0, then sum (pairwise, per row) / count.
        totals = np.where(missing, 0.0, rows).sum(axis=1)
        counts = (~missing).sum(axis=1)
        out = list(totals / np.maximum(counts, 1))
        return [math.nan if empty else value for empty, value in zip(all_missing, out)]

    return replicates


def _clipped(twin: Twin | None) -> Twin | None:
    if twin is None:
        return None
    return lambda block: [v if math.isnan(v) else min(1.0, max(0.0, v)) for v in twin(block)]


def _binary_labels(pairs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    try:
        golds, preds = zip(*pairs)
    except (TypeError, ValueError):
        return None
    if not all(isinstance(v, Integral) and v in (0, 1) for v in (*golds, *preds)):
        return None
    return np.asarray(golds, dtype=np.int64), np.asarray(preds, dtype=np.int64)


def _f1_twin(pairs: Sequence[Any]) -> Twin | None:
    labels = _binary_labels(pairs)
    if labels is None:
        return None
    golds, preds = labels

    def replicates(block: np.ndarray) -> list[Any]:
        gold, pred = golds[block], preds[block]
        true_positives = (gold & pred).sum(axis=1).astype(np.float64)
        denominator = gold.sum(axis=1).astype(np.float64) + pred.sum(axis=1)
        # scikit-learn: F1 = 2 tp / (true + predicted), 0 when both are empty.
        scores = 2.0 * true_positives / np.where(denominator == 0, 1.0, denominator)
        return list(np.where(denominator == 0, 0.0, scores))

    return replicates


def _mcc_twin(pairs: Sequence[Any]) -> Twin | None:
    try:
        golds, preds = zip(*pairs)
    except (TypeError, ValueError):
        return None
    if not all(isinstance(v, Integral) for v in (*golds, *preds)):
        return None
    classes, codes = np.unique(np.asarray([*golds, *preds], dtype=np.int64), return_inverse=True)
    if len(classes) > 64:
        return None
    n = len(pairs)
    gold_codes, pred_codes = codes[:n], codes[n:]

    def replicates(block: np.ndarray) -> list[Any]:
        gold, pred = gold_codes[block], pred_codes[block]
        true_counts = np.stack([(gold == c).sum(axis=1) for c in range(len(classes))], axis=1)
        pred_counts = np.stack([(pred == c).sum(axis=1) for c in range(len(classes))], axis=1)
        true_counts = true_counts.astype(np.float64)
        pred_counts = pred_counts.astype(np.float64)
        correct = (gold == pred).sum(axis=1).astype(np.float64)
        total = float(n)
        # scikit-learn's multiclass formula over the confusion matrix margins (all exact
        # integers in float64, so the order of the dot products does not matter).
        cov_true_pred = correct * total - (true_counts * pred_counts).sum(axis=1)
        cov_pred = total**2 - (pred_counts * pred_counts).sum(axis=1)
        cov_true = total**2 - (true_counts * true_counts).sum(axis=1)
        product = cov_pred * cov_true
        safe = np.where(product == 0, 1.0, product)
        return np.where(product == 0, 0.0, cov_true_pred / np.sqrt(safe)).tolist()

    return replicates


_TWINS: dict[Callable[..., Any], Callable[[Sequence[Any]], Twin | None]] = {
    agg.perplexity: _perplexity_twin,
    agg.median: _median_twin,
    agg.nanmean: _nanmean_twin,
    agg.clipped_nanmean: lambda values: _clipped(_nanmean_twin(values)),
    agg.f1: _f1_twin,
    agg.matthews_corrcoef: _mcc_twin,
}


def _vectorised_twin(fn: Callable[..., Any], values: Sequence[Any]) -> Twin | None:
    make = _TWINS.get(fn)
    return make(values) if make is not None else None


def group_aggregate(
    values: Sequence[float],
    sizes: Sequence[int],
    stderrs: Sequence[float | str | None],
    weight_by_size: bool = True,
) -> tuple[float, Stderr]:
    """A group's score and stderr from its subtasks' (lm-eval 0.4.13 `Group.aggregate`).

    Score: mean of the subtask scores weighted by `sizes` (sample counts), or unweighted.
    Stderr: with weighting, the pooled-variance formula
    sqrt(sum((n_i - 1) * se_i^2 * n_i) / (sum(n) - k) / sum(n)); without, sqrt(sum(se_i^2)) / k.
    "N/A" as soon as one subtask's stderr is missing (None) or "N/A".
    """
    if not values or len(values) != len(sizes):
        raise ValueError("group_aggregate needs one size per value and at least one value")
    weights = list(sizes) if weight_by_size else [1] * len(values)
    value = sum(v * w for v, w in zip(values, weights)) / sum(weights)
    if len(stderrs) != len(values) or any(se is None or se == NA for se in stderrs):
        return value, NA
    errors = [float(se) for se in stderrs]  # type: ignore[arg-type]
    if not weight_by_size:
        return value, math.sqrt(sum(se**2 for se in errors)) / len(errors)
    total = sum(sizes)
    if total - len(sizes) <= 0:
        # Only possible with one sample per subtask, whose stderrs are "N/A" anyway.
        return value, NA
    pooled_variance = sum((n - 1) * se**2 * n for n, se in zip(sizes, errors)) / (
        total - len(sizes)
    )
    return value, math.sqrt(pooled_variance / total)
