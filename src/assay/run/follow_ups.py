"""The multi-turn stage: docs with follow-up turns (`Doc.follow_ups`, MT-Bench) are asked each
turn in the conversation so far, turn by turn for the whole shard; the last answer becomes the
doc's response and the earlier exchanges its `history`."""

from __future__ import annotations

from assay.errors import DataError, FailedRequests
from assay.execution.stats import RunStats
from assay.requests.build import follow_up_request
from assay.requests.cache import ResponseCache
from assay.requests.doc_result import DocResult
from assay.requests.types import Generation
from assay.run.answering import Answering, name_failed_docs
from assay.run.plan import TaskPlan


def ask_follow_ups(
    answering: Answering, plan: TaskPlan, results: list[DocResult], cache: ResponseCache | None
) -> RunStats:
    """Ask the follow-up turns of the shard's multi-turn docs (after their first turn was
    answered); returns the requests' statistics."""
    stats = RunStats()
    pending = [r for r in results if r.doc.follow_ups]
    for result in pending:
        if len(result.instances) != 1 or len(result.resps[0]) != 1:
            raise DataError(
                f"task {plan.name}: doc {result.doc_id} has follow-up turns, which need "
                "exactly one generation per doc (no repeats, num_samples 1)."
            )
    exchanges: dict[int, list[tuple[str, str]]] = {id(r): [] for r in pending}
    last = {id(r): str(r.resps[0][0]) for r in pending}
    last_generation: dict[int, Generation | None] = {
        id(r): r.generations.get((0, 0)) for r in pending
    }
    turn = 0
    while active := [r for r in pending if turn < len(r.doc.follow_ups or [])]:
        requests = []
        for result in active:
            follow_up = (result.doc.follow_ups or [])[turn]
            exchanges[id(result)].append((last[id(result)], follow_up))
            requests.append(
                follow_up_request(
                    plan.requests,
                    result.doc,
                    result.instances[0].request,
                    exchanges[id(result)],
                )
            )
        try:
            answers = answering.executor.run(requests, cache=cache)
        except FailedRequests as exc:
            raise name_failed_docs(plan.name, exc, [(r.doc_id, turn + 1) for r in active]) from None
        stats += answers.stats
        for result, answer, request in zip(active, answers, requests, strict=True):
            result.generations.pop((0, 0), None)
            last[id(result)] = str(answering.filed(plan.name, result, (0, 0), answer, request))
            last_generation[id(result)] = result.generations.get((0, 0))
        answering.refuse_unclosed(plan.name, active)
        turn += 1
    for result in pending:
        said = exchanges[id(result)]
        users = [result.doc.query, *(follow_up for _, follow_up in said)]
        answers_in_order = [answer for answer, _ in said]
        result.history = list(zip(users[:-1], answers_in_order, strict=True))
        result.resps[0] = [last[id(result)]]
        generation = last_generation[id(result)]
        if generation is not None:  # the doc's response is the last turn's
            result.generations[(0, 0)] = generation
    return stats
