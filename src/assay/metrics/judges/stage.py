"""The judge stage of a shard: judge prompts out, verdicts filed under their docs.

Runs between filters and metrics for tasks with judge metrics: for every doc, filter pipeline
and judge metric it builds the judge prompts from the doc and its filtered answer, has `ask`
(the judge model's executor and cache) answer them all at once, and stores a Judgement per
metric in `DocResult.judged[filter][metric]`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from assay.errors import DataError
from assay.metrics.judges.grading import Judgement, JudgeMetric
from assay.requests.types import GenerateRequest, GenParams, Request
from assay.scoring import DocResult

JUDGE_PARAMS = GenParams(max_gen_toks=1024)
"""Greedy decoding, room for a short explanation before the verdict."""

Ask = Callable[[list[Request]], Sequence[object]]
"""Answers judge requests in order (the judge model behind the run's executor and cache)."""


def run_judges(
    results: Sequence[DocResult],
    metrics: Sequence[JudgeMetric],
    filters: Sequence[str],
    ask: Ask,
) -> None:
    """Judge every doc's filtered answer for every judge metric and filter pipeline."""
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
    requests: list[Request] = [
        GenerateRequest(prompt, JUDGE_PARAMS) for *_, prompts in pending for prompt in prompts
    ]
    verdicts = [str(v) for v in ask(requests)] if requests else []
    at = 0
    for result, name, metric, prompts in pending:
        said = verdicts[at : at + len(prompts)]
        at += len(prompts)
        assert metric.grader is not None
        score, error = metric.grader.score(said)
        result.judged.setdefault(name, {})[metric.name] = Judgement(prompts, said, score, error)


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
