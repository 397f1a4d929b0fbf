"""The work plan every executor runs: dedupe, cache lookups, kind-pure longest-first chunks."""

from __future__ import annotations

import pytest

from assay.errors import ConfigError, ModelError
from assay.execution.executor import Executor, compute_chunk, plan_requests
from assay.execution.local import LocalExecutor, run_requests
from assay.models.dummy import DummyLM
from assay.requests.cache import ResponseCache, request_key
from assay.requests.types import (
    GenerateRequest,
    GenParams,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RequestKind,
    RollingRequest,
    kind_of,
)
from assay.run.backend import build_executor
from assay.run.settings import RunSettings


def mixed_requests() -> list:
    return [
        LoglikelihoodRequest("short", " a"),
        RollingRequest("some text to score"),
        LoglikelihoodRequest("a much longer context", " b"),
        LoglikelihoodRequest("short", " a"),  # a duplicate
        GenerateRequest("prompt", GenParams(until=["\n"]), 0),
        LoglikelihoodRequest("a much longer context", " c"),
        LoglikelihoodRequest("mid context", " d"),
    ]


def test_plan_computes_each_distinct_request_once_in_kind_pure_chunks():
    requests = mixed_requests()
    plan = plan_requests(requests, chunk_size=2)
    planned = [r for chunk in plan.chunks for r in chunk.requests]
    assert len(planned) == 6
    assert len({request_key(r) for r in planned}) == 6
    for chunk in plan.chunks:
        assert {kind_of(r) for r in chunk.requests} == {chunk.kind}
        # At most two groups: requests sharing a context count once.
        assert len({getattr(r, "context", id(r)) for r in chunk.requests}) <= 2
    assert [len(c.requests) for c in plan.chunks] == [3, 1, 1, 1]
    lls = [r for c in plan.chunks if c.kind == RequestKind.LOGLIKELIHOOD for r in c.requests]
    # Longest first, and the two continuations of the long context side by side.
    assert lls[:2] == [
        LoglikelihoodRequest("a much longer context", " b"),
        LoglikelihoodRequest("a much longer context", " c"),
    ]
    assert lls[-1] == LoglikelihoodRequest("short", " a")


def test_choices_sharing_a_context_are_never_split_across_chunks():
    questions = {f"question {q} " + "x" * q: [f" choice {c}" for c in range(4)] for q in range(5)}
    requests = [
        LoglikelihoodRequest(ctx, cont) for ctx, conts in questions.items() for cont in conts
    ]
    plan = plan_requests(requests, chunk_size=2)
    seen: dict[str, int] = {}
    for index, chunk in enumerate(plan.chunks):
        for request in chunk.requests:
            assert seen.setdefault(request.context, index) == index
    # Two questions (eight requests) per chunk: a batch of two rows for a prefix-sharing backend.
    assert [len(c.requests) for c in plan.chunks] == [8, 8, 4]
    # Whole questions, longest first.
    firsts = [r.context for c in plan.chunks for r in c.requests[::4]]
    assert firsts == sorted(questions, key=len, reverse=True)


def test_plan_serves_cached_requests_and_counts_their_duplicates(tmp_path):
    model = DummyLM()
    requests = mixed_requests()
    cache = ResponseCache(tmp_path / "c.sqlite", model.identity())
    cache.put_many([(request_key(requests[0]), LoglikelihoodResult(-1.5, True))])
    plan = plan_requests(requests, cache, chunk_size=3)
    assert plan.cached == 2
    assert requests[0] not in [r for c in plan.chunks for r in c.requests]
    for chunk in plan.chunks:
        plan.complete(chunk, compute_chunk(model, chunk.kind, chunk.requests), cache)
    results = plan.results()
    assert results[0] == results[3] == LoglikelihoodResult(-1.5, True)
    assert results[2] == model.loglikelihood([requests[2]])[0]
    # Completed chunks were committed.
    assert len(cache.get_many([request_key(r) for r in requests])) == 6
    cache.close()


def test_complete_reports_how_many_caller_requests_a_chunk_answered():
    plan = plan_requests(mixed_requests(), chunk_size=10)
    chunk = next(c for c in plan.chunks if c.kind == RequestKind.LOGLIKELIHOOD)
    answered = plan.complete(chunk, DummyLM().loglikelihood(chunk.requests), None)
    assert answered == 5  # four distinct requests, one asked twice


def test_a_backend_returning_too_few_results_is_a_model_error():
    plan = plan_requests(mixed_requests(), chunk_size=10)
    with pytest.raises(ModelError, match="returned 1 results for 4 loglikelihood"):
        plan.complete(plan.chunks[0], [LoglikelihoodResult(0.0, True)], None)


def test_local_executor_gives_run_requests_results():
    model = DummyLM(seed=7)
    executor = LocalExecutor(model)
    assert isinstance(executor, Executor)
    requests = mixed_requests()
    assert executor.run(requests) == run_requests(model, requests)
    assert executor.describe() == {"name": "local"}


def test_ray_flags_without_the_ray_executor_are_config_errors():
    for field, flag in (
        ("replicas", "--replicas"),
        ("gpus_per_replica", "--gpus-per-replica"),
        ("ray_address", "--ray-address"),
    ):
        settings = RunSettings(model="dummy", **{field: 2 if field != "ray_address" else "auto"})
        with pytest.raises(ConfigError, match=f"{flag} applies to --executor ray"):
            build_executor(settings)


def test_unknown_executor_is_a_config_error():
    with pytest.raises(ConfigError, match="--executor 'spark': choose one of local, ray"):
        RunSettings(model="dummy", executor="spark")
