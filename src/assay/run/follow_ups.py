"""The multi-turn stage: docs with follow-up turns (`Doc.follow_ups`, MT-Bench) are asked each
turn in the conversation so far, turn by turn for the whole shard; the last answer becomes the
doc's response and the earlier exchanges its `history`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from assay.errors import DataError, FailedRequests
from assay.execution.stats import RunStats
from assay.requests.build import follow_up_request
from assay.requests.cache import ResponseCache
from assay.requests.doc_result import AskedDoc, DocAnswers
from assay.requests.types import Generation
from assay.run.answering import Answering, name_failed_docs
from assay.run.plan import TaskPlan


def ask_follow_ups(
    answering: Answering,
    plan: TaskPlan,
    asked: Sequence[AskedDoc],
    answers: Sequence[DocAnswers],
    cache: ResponseCache | None,
) -> tuple[list[DocAnswers], RunStats]:
    """Ask the follow-up turns of the shard's multi-turn docs (after their first turn was
    answered); returns every doc's answers (those of docs without follow-ups as given) and the
    requests' statistics."""
    stats = RunStats()
    pending = [k for k, doc in enumerate(asked) if doc.doc.follow_ups]
    for k in pending:
        if len(asked[k].instances) != 1 or len(answers[k].resps[0]) != 1:
            raise DataError(
                f"task {plan.name}: doc {asked[k].doc_id} has follow-up turns, which need "
                "exactly one generation per doc (no repeats, num_samples 1)."
            )
    exchanges: dict[int, list[tuple[str, str]]] = {k: [] for k in pending}
    last = {k: str(answers[k].resps[0][0]) for k in pending}
    last_generation: dict[int, Generation | None] = {
        k: answers[k].generations.get((0, 0)) for k in pending
    }
    turn = 0
    while active := [k for k in pending if turn < len(asked[k].doc.follow_ups or [])]:
        requests = []
        for k in active:
            doc = asked[k]
            follow_up = (doc.doc.follow_ups or [])[turn]
            exchanges[k].append((last[k], follow_up))
            requests.append(
                follow_up_request(plan.requests, doc.doc, doc.instances[0].request, exchanges[k])
            )
        try:
            replies = answering.executor.run(requests, cache=cache)
        except FailedRequests as exc:
            owners = [(asked[k].doc_id, turn + 1) for k in active]
            raise name_failed_docs(plan.name, exc, owners) from None
        stats += replies.stats
        for k, answer, request in zip(active, replies, requests, strict=True):
            seen, last_generation[k] = answering.filed(plan.name, answer, request)
            last[k] = str(seen)
        answering.refuse_unclosed(
            plan.name,
            [(asked[k].doc_id, _kept(last_generation[k])) for k in active],
        )
        turn += 1
    out = list(answers)
    for k in pending:
        said = exchanges[k]
        users = [asked[k].doc.query, *(follow_up for _, follow_up in said)]
        answers_in_order = [answer for answer, _ in said]
        generation = last_generation[k]  # the doc's response is the last turn's
        out[k] = replace(
            answers[k],
            resps=[[last[k]]],
            history=list(zip(users[:-1], answers_in_order, strict=True)),
            generations={(0, 0): generation} if generation is not None else {},
        )
    return out, stats


def _kept(generation: Generation | None) -> list[Generation]:
    return [generation] if generation is not None else []
