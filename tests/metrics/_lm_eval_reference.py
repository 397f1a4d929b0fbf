"""Inputs of the aggregation and stderr reference values.

The expected numbers in test_aggregations.py and test_stderr.py were produced once by feeding
exactly these inputs (same generator, same seed, same order of draws) to lm-eval 0.4.13's
functions in lm_eval.api.metrics (mean, median, nanmean, perplexity, weighted_perplexity,
bits_per_byte, f1_score, matthews_corrcoef, bleu, chrf, ter, brier_score, stderr_for_metric
with DISABLE_MULTIPROC=1, pooled_sample_stderr, unweighted_mean_stderr,
aggregate_subtask_metrics), then frozen.
"""

from __future__ import annotations

import math
import random

REFS = ["the cat sat on the mat", "a quick brown fox jumps", "hello world", "it is raining today",
        "we like green tea", "the sun rises in the east", "numbers are fun", "good morning to you"]  # fmt: skip
PREDS = ["the cat is on the mat", "a fast brown fox jumped", "hello there world", "it rains today",
         "we love green tea", "sun rises east", "numbers fun", "morning to you"]  # fmt: skip


def reference_inputs() -> dict[str, list]:
    """Per-sample values of several shapes, from one seeded generator."""
    rng = random.Random(12345)
    acc = [float(rng.random() < 0.6) for _ in range(20)]
    lls = [round(-rng.random() * 5, 6) for _ in range(50)]
    median_floats = [round(rng.gauss(0, 1), 6) for _ in range(31)]
    median_ints = [rng.randint(0, 9) for _ in range(31)]
    with_nans = [math.nan if rng.random() < 0.2 else round(rng.random(), 6) for _ in range(40)]
    binary = [(int(rng.random() < 0.5), int(rng.random() < 0.5)) for _ in range(60)]
    binary = [(g, g if rng.random() < 0.7 else p) for g, p in binary]
    three_class = [(rng.randint(0, 2), rng.randint(0, 2)) for _ in range(60)]
    three_class = [(g, g if rng.random() < 0.5 else p) for g, p in three_class]
    weighted = [(round(-rng.random() * 100, 4), rng.randint(5, 40)) for _ in range(12)]
    return {
        "acc": acc,
        "lls": lls,
        "median_floats": median_floats,
        "median_ints": median_ints,
        "with_nans": with_nans,
        "binary": binary,
        "three_class": three_class,
        "weighted": weighted,
        "translations": [[r, p] for r, p in zip(REFS, PREDS)],
        "translations_two_refs": [
            [[r, p if i % 2 == 0 else r.upper()], p] for i, (r, p) in enumerate(zip(REFS, PREDS))
        ],
    }
