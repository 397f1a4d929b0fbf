"""RunStats: what an executor call reports about the work it did."""

from __future__ import annotations

from assay.execution.local import LocalExecutor
from assay.execution.stats import RunStats, counter_delta
from assay.models.dummy import DummyLM
from assay.requests.cache import ResponseCache
from assay.requests.types import GenerateRequest, GenParams, LoglikelihoodRequest, RollingRequest


class AutoBatchingLM(DummyLM):
    """Picks a new automatic batch size on every call, as batch_size=auto may."""

    def __init__(self) -> None:
        super().__init__()
        self.picked: list[int] = []

    @property
    def batch_sizes(self) -> list[int]:
        return list(self.picked)

    def loglikelihood(self, requests):
        self.picked.append(len(requests))
        return super().loglikelihood(requests)


def test_an_executor_call_reports_requests_cache_hits_and_characters(tmp_path):
    model = AutoBatchingLM()
    cache = ResponseCache(tmp_path / "cache.sqlite", model.identity())
    first = LoglikelihoodRequest("ctx", " a")
    LocalExecutor(model).run([first], cache=cache)
    requests = [
        first,
        first,
        LoglikelihoodRequest("ctx", " bb"),
        RollingRequest("hello"),
        GenerateRequest("p?", GenParams(until=("\n",))),
    ]
    answers = LocalExecutor(model).run(requests, cache=cache)
    stats = answers.stats
    # Four distinct requests, one of them already in the cache.
    assert (stats.requests, stats.unique_requests, stats.from_cache, stats.computed) == (5, 4, 1, 3)
    # DummyLM counts no tokens: lengths are in characters, of each distinct request's texts.
    assert stats.token_unit == "characters"
    assert stats.input_tokens == (3 + 2) + (3 + 3) + 5 + 2
    assert stats.generated_tokens == len(answers[4])
    # One chunk per kind left to compute; the second call picked one batch size.
    assert stats.batches == 3
    assert stats.batch_sizes == [1]
    cache.close()


def test_task_stats_add_up_and_report_tokens_once_measured():
    total = RunStats()
    assert total.counts() == {"requests": 0, "unique_requests": 0, "from_cache": 0, "computed": 0}
    total += RunStats(2, 2, 0, 2, "tokens", 10, 4, 1, [8])
    total += RunStats(3, 1, 1, 0, "tokens", 5, 0, 0, [])
    assert total.counts() == {
        "requests": 5,
        "unique_requests": 3,
        "from_cache": 1,
        "computed": 2,
        "token_unit": "tokens",
        "input_tokens": 15,
        "generated_tokens": 4,
    }
    assert (total.batches, total.batch_sizes) == (1, [8])


def test_prefix_cache_counters_are_reported_per_task_with_a_hit_rate():
    before = {"queries": 100, "hits": 40}
    after = {"queries": 400, "hits": 190}
    stats = RunStats(prefix_cache=counter_delta(before, after))
    stats += RunStats(prefix_cache={"queries": 100, "hits": 10})
    # (300 + 100) tokens looked up, (150 + 10) found: 160 / 400.
    assert stats.counts()["prefix_cache"] == {"queries": 400, "hits": 160, "hit_rate": 0.4}
    assert "prefix_cache" not in RunStats().counts()
    assert counter_delta(None, None) == {} and counter_delta(None, {"hits": 3}) == {"hits": 3}
