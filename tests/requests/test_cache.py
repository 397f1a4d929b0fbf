"""Response cache: keys, model identity, round trips, schema and corrupt files."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.errors import ConfigError
from assay.execution.local import run_requests
from assay.models.base import LM
from assay.requests.cache import ResponseCache, _encode, model_key, request_key
from assay.requests.types import (
    GenerateRequest,
    GenParams,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingRequest,
    RollingResult,
)


def test_request_keys_distinguish_kind_text_params_and_sample_index():
    greedy = GenParams(until=("\n",))
    sampled = GenParams(do_sample=True, temperature=1.0, seed=1)
    keys = {
        request_key(LoglikelihoodRequest("a", "b")),
        request_key(LoglikelihoodRequest("a", " b")),
        request_key(LoglikelihoodRequest("ab", "")),
        request_key(RollingRequest("ab")),
        request_key(GenerateRequest("ab", greedy)),
        request_key(GenerateRequest("ab", GenParams(until=("\n",), max_gen_toks=5))),
        request_key(GenerateRequest("ab", sampled, 0)),
        request_key(GenerateRequest("ab", sampled, 1)),
        request_key(GenerateRequest((("user", "ab"),), greedy)),
    }
    assert len(keys) == 9
    # A greedy request's sample index does not matter: all its samples are the same.
    assert request_key(GenerateRequest("ab", greedy, 0)) == request_key(
        GenerateRequest("ab", greedy, 3)
    )


def test_model_key_is_order_independent_and_identity_sensitive():
    assert model_key({"a": 1, "b": 2}) == model_key({"b": 2, "a": 1})
    assert model_key({"a": 1}) != model_key({"a": 2})


def test_round_trip_of_every_result_kind(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path, {"backend": "x"})
    items = [
        ("k1", LoglikelihoodResult(-1.25, True)),
        ("k2", RollingResult(-7.5, 4)),
        ("k3", "generated text"),
    ]
    cache.put_many(items)
    cache.close()
    again = ResponseCache(path, {"backend": "x"})
    found = again.get_many(["k1", "k2", "k3", "missing"])
    assert found == dict(items)
    assert isinstance(found["k1"], LoglikelihoodResult)
    assert isinstance(found["k2"], RollingResult)
    again.close()


def test_a_different_model_identity_never_hits(tmp_path):
    path = tmp_path / "c.sqlite"
    first = ResponseCache(path, {"backend": "dummy", "seed": 1})
    first.put_many([("k", "from seed 1")])
    first.close()
    other = ResponseCache(path, {"backend": "dummy", "seed": 2})
    assert other.get_many(["k"]) == {}
    other.close()


class CountingLM(LM):
    def __init__(self):
        self.calls = []

    def loglikelihood(self, requests):
        self.calls += list(requests)
        return [LoglikelihoodResult(-float(len(r.continuation)), False) for r in requests]

    def loglikelihood_rolling(self, requests):
        self.calls += list(requests)
        return [RollingResult(-1.0, 1) for _ in requests]

    def generate_until(self, requests):
        self.calls += list(requests)
        return [f"out:{r.prompt}" for r in requests]

    def identity(self):
        return {"backend": "counting"}


def test_executor_dedupes_restores_order_and_resumes_from_the_cache(tmp_path):
    requests = [
        LoglikelihoodRequest("c", " aaa"),
        GenerateRequest("p1"),
        LoglikelihoodRequest("c", " a"),
        LoglikelihoodRequest("c", " aaa"),
        RollingRequest("t"),
        GenerateRequest("p1"),
    ]
    lm = CountingLM()
    cache = ResponseCache(tmp_path / "c.sqlite", lm.identity())
    out = run_requests(lm, requests, cache=cache, chunk_size=2)
    assert out == [
        LoglikelihoodResult(-4.0, False),
        "out:p1",
        LoglikelihoodResult(-2.0, False),
        LoglikelihoodResult(-4.0, False),
        RollingResult(-1.0, 1),
        "out:p1",
    ]
    assert len(lm.calls) == 4  # each distinct request once
    fresh = CountingLM()
    assert run_requests(fresh, requests, cache=cache) == out
    assert fresh.calls == []
    cache.close()


def test_schema_mismatch_and_corrupt_file_are_config_errors(tmp_path):
    path = tmp_path / "old.sqlite"
    ResponseCache(path, {}).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value='other-1' WHERE key='schema'")
    with pytest.raises(ConfigError, match="another assay version"):
        ResponseCache(path, {})
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ConfigError, match="not a usable SQLite cache"):
        ResponseCache(junk, {})


def test_image_requests_key_on_each_images_content_hash_never_its_pixels():
    import hashlib

    from PIL import Image

    from assay.images import DocImage
    from assay.requests.types import canonical_json

    red, blue = Image.new("RGB", (2, 2), "red"), Image.new("RGB", (2, 2), "blue")
    plain = LoglikelihoodRequest("<image>c", " x")
    with_red = LoglikelihoodRequest("<image>c", " x", (DocImage(red),))
    # text-only keys are what they always were
    expected = hashlib.sha256(canonical_json(["ll", "<image>c", " x"]).encode()).hexdigest()
    assert request_key(plain) == expected
    assert request_key(with_red) != request_key(plain)
    assert request_key(with_red) != request_key(
        LoglikelihoodRequest("<image>c", " x", (DocImage(blue),))
    )
    # the same pixels from another source are the same request
    assert request_key(with_red) == request_key(
        LoglikelihoodRequest("<image>c", " x", (DocImage(red.copy()),))
    )
    gen = GenerateRequest("<image>p", GenParams(), images=(DocImage(red),))
    assert request_key(gen) != request_key(GenerateRequest("<image>p", GenParams()))
    assert request_key(gen) != request_key(
        GenerateRequest("<image>p", GenParams(), images=(DocImage(blue),))
    )


class _Text(str):
    pass


@settings(max_examples=300)
@given(st.text(), st.text())
def test_loglikelihood_keys_are_the_canonical_json_digest(context: str, continuation: str):
    # The direct text is canonical_json's: keys written by earlier versions still hit.
    for request in (
        LoglikelihoodRequest(context, continuation),
        LoglikelihoodRequest(_Text(context), continuation),  # the canonical_json path itself
    ):
        payload = json.dumps(["ll", context, continuation], sort_keys=True, default=str)
        assert request_key(request) == hashlib.sha256(payload.encode()).hexdigest()


@settings(max_examples=300)
@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(), st.booleans() | st.none())
def test_stored_loglikelihood_text_is_json_dumps(logprob, greedy):
    result = LoglikelihoodResult(logprob, greedy)  # type: ignore[arg-type]
    assert _encode(result) == json.dumps(["ll", logprob, greedy])


def test_a_value_moved_to_another_request_fails_its_checksum(tmp_path, caplog):
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path, {"m": 1})
    cache.put_many(
        [("a", LoglikelihoodResult(-1.5, True)), ("b", LoglikelihoodResult(-9.0, False))]
    )
    with sqlite3.connect(path) as db:
        (value,) = db.execute("SELECT value FROM responses WHERE key='a'").fetchone()
        db.execute("UPDATE responses SET value=? WHERE key='b'", (value,))
    assert cache.get_many(["a", "b"]) == {"a": LoglikelihoodResult(-1.5, True)}
    assert "1 stored response(s) failed their checksum" in caplog.text
    cache.close()
