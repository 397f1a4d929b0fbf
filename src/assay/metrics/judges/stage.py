"""The judge stage of a shard: judge prompts out, verdicts back as Judgements.

Runs between filters and metrics for tasks with judge metrics: for every doc, filter pipeline
and judge metric it builds the judge prompts from the doc and its filtered answer, has `ask`
(one judge model behind the run's executor and cache) answer them all at once, and returns a
Judgement per (doc, filter, metric), in order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from assay.errors import DataError
from assay.metrics.judges.grading import JudgeInput, Judgement, JudgeMetric, Prompt, rubric_items
from assay.requests.doc_result import DocResult
from assay.requests.types import GenerateRequest, GenParams, Request

SAMPLE_TEMPERATURE = 1.0
"""Repeated judgements (judge_samples > 1) sample at this temperature, seeded."""

Ask = Callable[[list[Request]], Sequence[object]]
"""Answers judge requests in order (one judge model behind the run's executor and cache)."""


@dataclass(frozen=True)
class Verdict:
    """One judged answer: where it belongs and what the judge said."""

    result: DocResult
    filter: str
    metric: JudgeMetric
    judgement: Judgement


@dataclass(frozen=True)
class _Pending:
    result: DocResult
    filter: str
    metric: JudgeMetric
    given: JudgeInput
    prompts: list[Prompt]


def judge_shard(
    results: Sequence[DocResult],
    metrics: Sequence[JudgeMetric],
    filters: Sequence[str],
    ask: Ask,
    seed: int | None = 0,
) -> list[Verdict]:
    """Judge every doc's filtered answer for every judge metric and filter pipeline (K times,
    sampled with `seed` and the sample as sample index, for judge_samples K > 1)."""
    pending: list[_Pending] = []
    for result in results:
        doc = result.doc
        # A multi-turn doc is judged on its last turn, with the earlier ones as history.
        question = doc.follow_ups[-1] if doc.follow_ups else doc.query
        reference = _reference(result)
        references = (doc.specific or {}).get("references")
        for name in filters:
            answer = _answer_text(result.filtered[name][0])
            for metric in metrics:
                assert metric.grader is not None
                try:
                    rubric = None
                    if metric.grader.kind == "rubric":
                        field = metric.grader.rubric_field
                        rubric = rubric_items((result.doc.row or {}).get(field), field)
                    given = JudgeInput(
                        question, answer, reference, rubric, list(result.history), references
                    )
                    prompts = metric.grader.prompts(given)
                except DataError as exc:
                    raise DataError(f"doc {result.doc_id}: {exc}") from None
                pending.append(_Pending(result, name, metric, given, prompts))
    requests: list[Request] = []
    for p in pending:
        assert p.metric.grader is not None
        k, room = p.metric.grader.samples, p.metric.grader.max_gen_toks
        # Greedy once; K > 1 samples at temperature 1, seeded (the sample index varies).
        params = (
            GenParams(max_gen_toks=room)
            if k == 1
            else GenParams(
                max_gen_toks=room, do_sample=True, temperature=SAMPLE_TEMPERATURE, seed=seed
            )
        )
        requests += [GenerateRequest(prompt, params, i) for i in range(k) for prompt in p.prompts]
    verdicts = [str(v) for v in ask(requests)] if requests else []
    out, at = [], 0
    for p in pending:
        grader = p.metric.grader
        assert grader is not None
        k, n = grader.samples, len(p.prompts)
        said = verdicts[at : at + k * n]
        at += k * n
        per_sample = [said[i * n : (i + 1) * n] for i in range(k)]
        parsed = [grader.score(v, p.given.rubric) for v in per_sample]
        labels = [grader.labels(v) for v in per_sample]
        out.append(
            Verdict(p.result, p.filter, p.metric, _combined(p.prompts, said, parsed, labels))
        )
    return out


def _combined(
    prompts: list[Prompt],
    said: list[str],
    parsed: list[tuple[float, str | None]],
    labels: list[list[str | None]],
) -> Judgement:
    """One answer's Judgement from its samples: the mean of the parsed scores (NaN, with the
    first reason, when none parsed)."""
    scores = [value for value, _ in parsed]
    if len(parsed) == 1:
        return Judgement(prompts, said, *parsed[0], scores, labels)
    kept = [v for v in scores if not math.isnan(v)]
    errors = [e for _, e in parsed if e is not None]
    if not kept:
        return Judgement(prompts, said, math.nan, errors[0], scores, labels)
    error = f"{len(errors)} of {len(parsed)} samples unparseable: {errors[0]}" if errors else None
    return Judgement(prompts, said, sum(kept) / len(kept), error, scores, labels)


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
