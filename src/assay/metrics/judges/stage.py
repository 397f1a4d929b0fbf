"""The judge stage of a shard: judge prompts out, verdicts filed under their docs.

Runs between filters and metrics for tasks with judge metrics: for every doc, filter pipeline
and judge metric it builds the judge prompts from the doc and its filtered answer, has `ask`
(the judge model's executor and cache) answer them all at once, and stores a Judgement per
metric in `DocResult.judged[filter][metric]`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from assay.errors import DataError
from assay.metrics.judges.grading import Judgement, JudgeMetric
from assay.requests.types import GenerateRequest, GenParams, Request
from assay.scoring import DocResult

JUDGE_PARAMS = GenParams(max_gen_toks=1024)
"""Greedy decoding, room for a short explanation before the verdict."""
REPEAT_TEMPERATURE = 1.0
"""Repeated judgements (judge_repeats > 1) sample at this temperature, seeded."""

Ask = Callable[[list[Request]], Sequence[object]]
"""Answers judge requests in order (the judge model behind the run's executor and cache)."""


def run_judges(
    results: Sequence[DocResult],
    metrics: Sequence[JudgeMetric],
    filters: Sequence[str],
    ask: Ask,
    seed: int = 0,
) -> None:
    """Judge every doc's filtered answer for every judge metric and filter pipeline (K times,
    sampled with `seed` and the repeat as sample index, for judge_repeats K > 1)."""
    pending: list[tuple[DocResult, str, JudgeMetric, list[str]]] = []
    for result in results:
        question, reference = result.doc.query, _reference(result)
        for name in filters:
            answer = _answer_text(result.filtered[name][0])
            for metric in metrics:
                assert metric.grader is not None
                try:
                    prompts = metric.grader.prompts(question, answer, reference)
                except DataError as exc:
                    raise DataError(f"doc {result.doc_id}: {exc}") from None
                pending.append((result, name, metric, prompts))
    sampled = GenParams(
        max_gen_toks=1024, do_sample=True, temperature=REPEAT_TEMPERATURE, seed=seed
    )
    requests: list[Request] = []
    for _, _, metric, prompts in pending:
        assert metric.grader is not None
        k = metric.grader.repeats
        params = JUDGE_PARAMS if k == 1 else sampled
        requests += [GenerateRequest(p, params, i) for i in range(k) for p in prompts]
    verdicts = [str(v) for v in ask(requests)] if requests else []
    at = 0
    for result, name, metric, prompts in pending:
        assert metric.grader is not None
        k, n = metric.grader.repeats, len(prompts)
        said = verdicts[at : at + k * n]
        at += k * n
        parsed = [metric.grader.score(said[i * n : (i + 1) * n]) for i in range(k)]
        result.judged.setdefault(name, {})[metric.name] = _combined(prompts, said, parsed)


def _combined(
    prompts: list[str], said: list[str], parsed: list[tuple[float, str | None]]
) -> Judgement:
    """One answer's Judgement from its repeats: the mean of the parsed scores (NaN, with the
    first reason, when none parsed)."""
    if len(parsed) == 1:
        return Judgement(prompts, said, *parsed[0])
    scores = [value for value, _ in parsed]
    kept = [v for v in scores if not math.isnan(v)]
    errors = [e for _, e in parsed if e is not None]
    if not kept:
        return Judgement(prompts, said, math.nan, errors[0], scores)
    error = f"{len(errors)} of {len(parsed)} repeats unparseable: {errors[0]}" if errors else None
    return Judgement(prompts, said, sum(kept) / len(kept), error, scores)


def _reference(result: DocResult) -> str | None:
    doc = result.doc
    if doc.specific and "target" in doc.specific:
        return str(doc.specific["target"])
    if doc.choices or doc.shared_continuation is not None:
        return doc.get_golds()[0]
    return None


def _answer_text(response: object) -> str:
    """The filtered answer (the first one when a filter keeps several)."""
    if isinstance(response, list | tuple):
        return str(response[0]) if response else ""
    return str(response)
