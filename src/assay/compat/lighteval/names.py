"""lighteval's metrics in assay: which compute exactly what an assay metric computes.

In an assay TaskConfig or YAML, a lighteval metric name whose metric computes what an assay
metric computes is served by that metric (with one log line saying so); a name with no exact
counterpart is refused with the closest assay metric and what differs, so a ported task never
reports a number under a metric that is not the one its author chose. In a task converted from
lighteval (`metrics.py` here), the metric objects of `SAME_COMPUTATION` are assay's and
every other runs lighteval's own functions.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from assay.errors import ConfigError

log = logging.getLogger(__name__)


class Same(NamedTuple):
    """lighteval's metric is assay's `name` built with `kwargs`."""

    name: str
    kwargs: dict[str, Any]


SAME: dict[str, Same] = {
    "loglikelihood_acc": Same("acc", {}),
    # LogProbCharNorm: the log-probability over the choice's characters, as lm-eval's acc_norm.
    "loglikelihood_acc_norm": Same("acc_norm", {}),
}

CLOSEST: dict[str, str] = {
    "loglikelihood_acc_norm_nospace": "acc_norm (lighteval leaves the choice's first space out "
    "of the length; assay counts it, as lm-eval does)",
    "loglikelihood_acc_norm_single_token": "acc_norm (normalises by characters, not tokens)",
    "loglikelihood_f1": "f1 (lighteval reports the largest per-class F1, assay the binary F1)",
    "quasi_exact_match": "exact_match with ignore_case: true, ignore_punctuation: true and "
    "regexes_to_ignore: ['\\\\b(a|an|the)\\\\b'] (lighteval also collapses whitespace)",
    "quasi_exact_match_math": "math_verify",
    "quasi_exact_match_gsm8k": "exact_match after the gsm8k task's regex filters",
    "prefix_exact_match": "exact_match after a regex filter that keeps the answer's start",
    "prefix_quasi_exact_match": "exact_match with ignore_case and ignore_punctuation after a "
    "prefix filter",
    "expr_gold_metric": "math_verify",
    "gpqa_instruct_metric": "exact_match after a regex filter for the answer letter",
    "f1_score": "no bag-of-words F1 metric yet; exact_match is the nearest",
    "f1_score_macro": "f1 (binary; lighteval averages over classes)",
    "f1_score_micro": "f1 (binary; lighteval pools over classes)",
    "rouge1": "rouge with rouge_type: rouge1 (reported as rouge)",
    "rouge2": "rouge with rouge_type: rouge2 (reported as rouge)",
    "rougeL": "rouge with rouge_type: rougeL (reported as rouge)",
    "rougeLsum": "rouge with rouge_type: rougeLsum (assay splits sentences on ' . ', as "
    "lm-eval's TruthfulQA; lighteval on new lines)",
    "target_perplexity": "perplexity",
    "prediction_perplexity": "perplexity",
    "truthfulqa_mc_metrics": "the built-in truthfulqa_mc1 and truthfulqa_mc2 tasks",
    "drop": "the built-in drop task (its em and f1)",
    "maj_at_n": "a group of sampled repeats with the majority-vote filter (see gsm8k_cot_self_consistency)",
    "pass_at_k": "pass@1 of the built-in code tasks (humaneval, mbpp)",
}


SAME_COMPUTATION = {
    "LoglikelihoodAcc()": "acc",
    "LoglikelihoodAcc(LogProbCharNorm(ignore_first_space=False))": "acc_norm",
}
"""lighteval metric objects, by their sample function (as `compat.lighteval.metrics._signature` writes
it), that assay's metric computes
identically: the argmax of the choices' log-probabilities (divided by each choice's length in
characters for acc_norm; the first maximum wins; any gold counts), 1 or 0 per doc, averaged."""


def knows(name: str) -> bool:
    """Whether `name` is one of lighteval's metric names (served by assay, or refused)."""
    return name in SAME or name in CLOSEST


def translate(name: str, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """assay's metric for lighteval's metric `name`, None when `name` is not lighteval's;
    a ConfigError naming the closest assay metric when no assay metric is the same."""
    same = SAME.get(name)
    if same is not None:
        log.info("metric %r is lighteval's name of assay's %s %s", name, same.name, same.kwargs)
        return same.name, {**same.kwargs, **kwargs}
    if name in CLOSEST:
        raise ConfigError(
            f"metric {name!r} is lighteval's; assay has no metric computing exactly the same. "
            f"Closest: {CLOSEST[name]}."
        )
    return None
