"""Provider batch APIs (assay/models/api/batches.py, batch_providers.py) against the loopback
fake of OpenAI's and Anthropic's batch endpoints (fixtures/provider_fakes.py)."""

from __future__ import annotations

import json

import pytest
from fixtures.provider_fakes import FakeProviders

from assay.errors import ConfigError, ModelError
from assay.models.api.anthropic_chat import AnthropicChatLM
from assay.models.api.batches import BatchLimits, ItemResult, split_batches
from assay.models.api.openai import OpenAIChatLM
from assay.models.api.runner import APIRequestError
from assay.requests.cache import ResponseCache, request_key
from assay.requests.types import GenerateRequest, GenParams

REQUESTS = [GenerateRequest(f"question {i}", GenParams(max_gen_toks=8)) for i in range(5)]


def test_batches_are_cut_at_the_request_and_byte_limits():
    lines = [b"x" * 9] * 5  # 10 bytes each with the newline
    assert split_batches(lines, BatchLimits(2, 1000)) == [[0, 1], [2, 3], [4]]
    assert split_batches(lines, BatchLimits(100, 30)) == [[0, 1, 2], [3, 4]]
    with pytest.raises(ValueError, match="more than a batch may hold"):
        split_batches([b"y" * 50], BatchLimits(10, 20))


def test_batch_api_needs_a_journal_folder():
    with pytest.raises(ConfigError, match="batch_dir="):
        OpenAIChatLM(model="m", batch_api=True)


def _openai(fake, tmp_path, **args):
    settings = {"batch_dir": str(tmp_path / "batches"), "batch_poll_interval": 0.01}
    return OpenAIChatLM(
        model="gpt-test", base_url=fake.openai_url, batch_api=True, **{**settings, **args}
    )


def test_openai_batches_answer_as_the_online_api_does(tmp_path, capsys):
    with FakeProviders(polls_per_state=2) as fake:
        online = OpenAIChatLM(model="gpt-test", base_url=fake.openai_url).generate_until(REQUESTS)
        batched = _openai(fake, tmp_path, batch_max_requests=2).generate_until(REQUESTS)
        # Generations alike, finish reasons and token counts included (one reading function).
        assert batched == online
        assert [str(a) for a in online] == [f"answer: question {i}" for i in range(5)]
        assert fake.creates == 3
        # Each item is the online request body, under OpenAI's batch line shape.
        line = fake.batch_lines[0]
        assert line["method"] == "POST" and line["url"] == "/v1/chat/completions"
        assert line["body"] in fake.bodies  # online requests arrive in any order
    journal = sorted((tmp_path / "batches").glob("*.json"))
    assert [json.loads(p.read_text())["batch_id"] for p in journal] == [
        "batch_1",
        "batch_2",
        "batch_3",
    ]
    progress = capsys.readouterr().err
    for state in ("validating", "in_progress", "finalizing"):
        assert state in progress
    assert "waited" in progress


def test_a_rerun_follows_the_journal_instead_of_submitting_again(tmp_path):
    with FakeProviders() as fake:
        first = _openai(fake, tmp_path).generate_until(REQUESTS)
        again = _openai(fake, tmp_path).generate_until(REQUESTS[::-1])
        assert again == first[::-1]
        assert fake.creates == 1
        # A request the journal does not hold is the only one submitted.
        extra = GenerateRequest("question 9", GenParams(max_gen_toks=8))
        answers = _openai(fake, tmp_path).generate_until([*REQUESTS, extra])
        assert str(answers[-1]) == "answer: question 9"
        assert fake.creates == 2 and len(fake.batch_lines) == 6


def test_expired_and_transient_items_are_resubmitted_within_the_bound(tmp_path):
    def fate(cid, body, submission):
        text = body["messages"][0]["content"]
        if text == "question 1":
            return "expired" if submission == 1 else "ok"
        if text == "question 2":
            return "server_error" if submission <= 2 else "ok"
        if text == "question 3":
            return "expired"
        return "ok"

    with FakeProviders(fate=fate) as fake:
        with pytest.raises(APIRequestError) as err:
            _openai(fake, tmp_path, batch_resubmits=2).generate_until(REQUESTS)
        assert err.value.failures.keys() == {3}
        assert "batch_expired" in err.value.failures[3]
        assert "submitted 3 times" in err.value.failures[3]
        assert [str(a) for a in err.value.partial[:3]] == [
            "answer: question 0", "answer: question 1", "answer: question 2"
        ]  # fmt: skip
        assert fake.creates == 3


def test_a_rejected_request_is_reported_by_index_and_never_resubmitted(tmp_path):
    def fate(cid, body, submission):
        return "invalid" if body["messages"][0]["content"] == "question 4" else "ok"

    with FakeProviders(fate=fate) as fake:
        with pytest.raises(APIRequestError) as err:
            _openai(fake, tmp_path).generate_until(REQUESTS)
        assert err.value.failures == {4: "HTTP 400: fake invalid"}
        assert fake.creates == 1


def test_answers_enter_the_response_cache_as_they_download(tmp_path):
    cache_path = tmp_path / "cache" / "cache.sqlite"
    with FakeProviders() as fake:
        lm = _openai(fake, tmp_path, batch_dir=None, batch_cache=str(cache_path))
        lm.generate_until(REQUESTS)
    cache = ResponseCache(cache_path, lm.identity())
    stored = cache.get_many([request_key(r) for r in REQUESTS])
    assert sorted(str(a) for a in stored.values()) == [f"answer: question {i}" for i in range(5)]
    # The journal sits beside the cache when no batch_dir is given.
    assert list((cache_path.parent / "batches").glob("*.json"))


def test_a_server_without_a_batch_api_is_refused_before_any_request(tmp_path):
    with FakeProviders(no_batches=True) as fake:
        with pytest.raises(ModelError, match="has no batch API") as err:
            _openai(fake, tmp_path).generate_until(REQUESTS)
        assert fake.openai_url in str(err.value) and "--batch-api" in str(err.value)
        assert fake.bodies == [] and fake.creates == 0


def test_anthropic_message_batches(tmp_path):
    def fate(cid, body, submission):
        return (
            "expired"
            if body["messages"][0]["content"] == "question 0" and submission == 1
            else "ok"
        )

    with FakeProviders(fate=fate) as fake:
        lm = AnthropicChatLM(
            model="claude-test",
            base_url=fake.anthropic_url,
            batch_api=True,
            batch_dir=str(tmp_path / "batches"),
            batch_poll_interval=0.01,
            thinking_budget=1024,
        )
        answers = lm.generate_until(REQUESTS)
        assert [a.text for a in answers] == [f"answer: question {i}" for i in range(5)]
        assert answers[0].reasoning == "thinking about question 0"
        assert fake.creates == 2  # the expired item went again
        assert fake.batch_lines[0]["params"]["thinking"]["budget_tokens"] == 1024
        assert len(fake.batch_lines[0]["custom_id"]) == 64


def test_batch_answers_are_priced_at_the_batch_discount(tmp_path):
    with FakeProviders() as fake:
        lm = _openai(fake, tmp_path, price_in=1.0, price_out=2.0, batch_discount=0.5)
        lm.generate_until(REQUESTS)
    stats = lm.usage_stats()
    # The fake's usage: 3 prompt tokens and one per answer word ("answer: question i").
    online_price = 5 * (3 * 1.0 + 3 * 2.0) / 1e6
    assert stats["requests"] == 5 and stats["input_tokens"] == 15
    assert stats["cost_usd"] == pytest.approx(online_price / 2)


class _MemoryProvider:
    """A provider whose batches end at once, with scripted statuses."""

    name = "memory"
    route = "mem /v1/x"
    limits = BatchLimits(100, 10_000)

    def __init__(self, statuses):
        self.statuses = statuses  # batch number -> BatchStatus or None
        self.submitted: list[list[str]] = []

    def check(self):
        pass

    def line(self, custom_id, body):
        return {"custom_id": custom_id, "body": body}

    def submit(self, lines):
        self.submitted.append([json.loads(x)["custom_id"] for x in lines])
        return f"b{len(self.submitted)}"

    def status(self, batch_id):
        return self.statuses[int(batch_id[1:])]

    def results(self, batch_id):
        for cid in self.submitted[int(batch_id[1:]) - 1]:
            yield cid, ItemResult({"text": cid[:4]})

    def contents(self, batch_id):
        return None


def test_a_forgotten_batch_is_resubmitted_and_a_rejected_one_fails_its_requests(tmp_path):
    from assay.models.api.batches import BatchJournal, BatchRun, BatchStatus

    done = BatchStatus("completed", True)
    rejected = BatchStatus("failed", True, problem="line 1: bad model")
    # Batch 1 is unknown to the provider when polled (purged), so its requests go again.
    provider = _MemoryProvider({1: None, 2: done})
    run = BatchRun(provider, BatchJournal([tmp_path]), poll_interval=0, report=lambda _: None)
    arrived: dict[int, dict] = {}
    assert run.run(2, lambda j: {"q": j}, arrived.update) == {}
    assert sorted(arrived) == [0, 1] and len(provider.submitted) == 2

    provider = _MemoryProvider({1: rejected})
    run = BatchRun(provider, BatchJournal([tmp_path / "other"]), poll_interval=0,
                   report=lambda _: None)  # fmt: skip
    failures = run.run(2, lambda j: {"q": j}, arrived.update)
    assert failures == {0: "batch b1 failed: line 1: bad model",
                        1: "batch b1 failed: line 1: bad model"}  # fmt: skip
    assert len(provider.submitted) == 1
