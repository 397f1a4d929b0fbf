"""OpenAI-compatible backends (assay/models/api/openai.py on backend.py, and its _api_* helpers).

Fast tests cover argument checking, request translation, response parsing, retries and rate
limits without a network. Slow tests talk to real HTTP servers on 127.0.0.1 that the fixtures
start and stop: `transformers serve` (generation, completions and chat), and
`fixtures/openai_server.py` (prompt log-probabilities, which `transformers serve` lacks), the
latter also behind `fixtures/fault_proxy.py`. Server answers must equal the in-process hf
backend's on the same tiny model.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from types import SimpleNamespace

import pytest

from assay.errors import ConfigError, ModelError
from assay.execution.executor import DEFAULT_CHUNK_SIZE, commit_chunk
from assay.models.api.openai import OpenAIChatLM, OpenAICompletionsLM
from assay.models.api.pacing import Pacer
from assay.models.api.payloads import as_messages, echo_score, extra_fields, sampling_fields
from assay.models.api.runner import (
    APIRequestError,
    PermanentFailure,
    RetryPolicy,
    TransientFailure,
    run_calls,
    run_sync,
)
from assay.models.base import MODELS
from assay.models.spans import ScoredSpan, scored_span
from assay.requests.types import (
    GenerateRequest,
    GenParams,
    LoglikelihoodRequest,
    RollingRequest,
)

CLOSED_URL = "http://127.0.0.1:9/v1"
"""The discard port: nothing listens, so any request that is sent fails at once."""

# -- arguments ------------------------------------------------------------------------------


def test_both_names_are_registered():
    assert MODELS.get("openai-completions") is OpenAICompletionsLM
    assert MODELS.get("openai-chat") is OpenAIChatLM


def test_unknown_arg_is_an_error_listing_valid_args():
    with pytest.raises(ConfigError) as err:
        OpenAICompletionsLM(model="m", num_concurent=4)
    message = str(err.value)
    assert "num_concurent" in message
    assert "num_concurrent" in message and "api_key_env" in message and "tpm" in message


def test_string_values_are_converted():
    lm = OpenAICompletionsLM(
        model="m",
        num_concurrent="8",
        timeout="2.5",
        rpm="none",
        tpm="6000",
        seed="null",
        extra_body='{"top_k": 1}',
        add_bos_token="false",
        max_length=4096.0,
        batch_size="16",
    )
    s = lm.settings
    assert (s.num_concurrent, s.timeout, s.rpm, s.tpm, s.seed) == (8, 2.5, None, 6000.0, None)
    assert s.extra_body == {"top_k": 1}
    assert s.add_bos_token is False and s.max_length == 4096
    # The executor commits a fixed batch size's worth of questions at a time.
    assert commit_chunk(lm) == 16 and commit_chunk(OpenAIChatLM(model="m")) == DEFAULT_CHUNK_SIZE


@pytest.mark.parametrize(
    ("backend", "args", "fragment"),
    [
        (OpenAICompletionsLM, {"model": "m", "num_concurrent": "many"}, "whole number"),
        (OpenAICompletionsLM, {"model": "m", "num_concurrent": 0}, "at least 1"),
        (OpenAICompletionsLM, {"model": "m", "timeout": "-1"}, "at least"),
        (OpenAICompletionsLM, {"model": "m", "extra_body": "[1]"}, "JSON object"),
        (OpenAICompletionsLM, {"model": "m", "add_bos_token": "maybe"}, "true or false"),
        (OpenAICompletionsLM, {}, "'model' is required"),
        (OpenAIChatLM, {"model": "m", "max_tokens_field": "tokens"}, "max_completion_tokens"),
        (OpenAIChatLM, {"model": "m", "max_length": 10}, "unknown model arg"),
        (OpenAIChatLM, {"model": "m", "batch_size": 0}, "positive whole number or 'auto'"),
        (OpenAIChatLM, {"model": "m", "extra_body": {"temperature": 1}}, "--gen-kwargs"),
        (OpenAICompletionsLM, {"model": "m", "extra_body": {"seed": 1, "stop": []}}, "seed, stop"),
    ],
)
def test_bad_values_are_errors(backend, args, fragment):
    with pytest.raises(ConfigError, match="--model openai-") as err:
        backend(**args)
    assert fragment in str(err.value)


# -- request translation and response parsing -------------------------------------------------


def test_greedy_request_is_sent_at_temperature_zero_with_stops_capped():
    request = GenerateRequest(
        "p", GenParams(until=("\n", "", "a", "b", "c", "d"), temperature=0.7, top_p=0.9)
    )
    fields = sampling_fields(request, default_seed=1234, max_stop_sequences=4)
    assert fields == {"temperature": 0.0, "top_p": 0.9, "seed": 1234, "stop": ["\n", "a", "b", "c"]}


def test_each_sample_gets_its_own_seed():
    params = GenParams(do_sample=True, temperature=0.8, seed=7)
    first = sampling_fields(GenerateRequest("p", params, sample_index=0), 1234, 4)
    third = sampling_fields(GenerateRequest("p", params, sample_index=2), 1234, 4)
    assert (first["temperature"], first["seed"], third["seed"]) == (0.8, 7, 9)
    unseeded = GenerateRequest("p", GenParams(do_sample=True, temperature=1.0), sample_index=1)
    assert sampling_fields(unseeded, 1234, 4)["seed"] == 1235
    assert "seed" not in sampling_fields(unseeded, None, 4)
    assert "stop" not in sampling_fields(unseeded, None, 4)


def test_sampling_at_temperature_zero_is_greedy():
    request = GenerateRequest("p", GenParams(do_sample=True, temperature=0.0))
    assert sampling_fields(request, None, 4)["temperature"] == 0.0


def test_extra_fields_request_settings_win_over_defaults():
    request = GenerateRequest("p", GenParams(top_k=5, extra=(("repetition_penalty", 1.1),)))
    body = extra_fields(request, {"top_k": 1, "min_p": 0.1})
    assert body == {"top_k": 5, "min_p": 0.1, "repetition_penalty": 1.1}
    assert extra_fields(GenerateRequest("p"), {}) == {}


def test_plain_prompt_becomes_one_user_message():
    assert as_messages("hi") == [{"role": "user", "content": "hi"}]
    assert as_messages((("system", "s"), ("user", "u"))) == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
    ]


def _logprobs(token_logprobs, top_logprobs):
    return SimpleNamespace(token_logprobs=token_logprobs, top_logprobs=top_logprobs)


def test_echo_score_sums_continuation_and_ignores_generated_token():
    span = ScoredSpan((5, 6, 7, 8), n_context=2)
    lp = _logprobs(
        [None, -1.0, -0.5, -0.25, -9.0],
        [None, {"a": -0.1}, {"b": -0.5}, {"c": -0.25}, {"d": -0.1}],
    )
    assert echo_score(lp, span) == (-0.75, True)


def test_echo_score_is_not_greedy_when_a_token_is_not_the_top_one():
    span = ScoredSpan((5, 6, 7), n_context=1)
    lp = _logprobs([None, -0.5, -2.0], [None, {"x": -0.5}, {"y": -0.3}])
    assert echo_score(lp, span) == (-2.5, False)


@pytest.mark.parametrize(
    ("logprobs", "fragment"),
    [
        (None, "no prompt log-probabilities"),
        (_logprobs(None, None), "no prompt log-probabilities"),
        (_logprobs([None, -1.0], [None, {"a": -1.0}]), "echoed 2 token log-probabilities"),
        (_logprobs([None, None, -1.0], [None, None, {"a": -1.0}]), "null log-probabilities"),
        (_logprobs([None, -1.0, -1.0], None), "no top_logprobs"),
    ],
)
def test_echo_score_refuses_answers_without_prompt_logprobs(logprobs, fragment):
    with pytest.raises(PermanentFailure, match=fragment):
        echo_score(logprobs, ScoredSpan((1, 2, 3), n_context=1))


def test_scored_span_truncates_the_context_from_the_left():
    assert scored_span([1, 2, 3, 4], [5, 6], window=4) == ScoredSpan((3, 4, 5, 6), 2)
    assert scored_span([1], [5, 6], window=8) == ScoredSpan((1, 5, 6), 1)
    with pytest.raises(ValueError, match="no room for context"):
        scored_span([1, 2], [5, 6, 7], window=3)


# -- retries, rate limits, concurrency --------------------------------------------------------


def test_backoff_grows_exponentially_with_jitter_and_honours_retry_after():
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0)
    for retry, ceiling in [(0, 1.0), (1, 2.0), (2, 4.0), (5, 8.0)]:
        delays = [policy.backoff(retry) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1
    assert policy.backoff(0, retry_after=5.0) == 5.0
    assert policy.backoff(0, retry_after=100.0) == 8.0


def test_run_calls_retries_transient_failures_and_bounds_calls_in_flight():
    attempts: dict[int, int] = {}
    in_flight = [0, 0]  # now, peak

    async def attempt(i: int) -> int:
        attempts[i] = attempts.get(i, 0) + 1
        in_flight[0] += 1
        in_flight[1] = max(in_flight[1], in_flight[0])
        await asyncio.sleep(0.001)
        in_flight[0] -= 1
        if i % 3 == 0 and attempts[i] < 3:
            raise TransientFailure("HTTP 429: slow down", retry_after=0.0)
        return i * 10

    policy = RetryPolicy(max_retries=3, base_delay=0.001, max_delay=0.002)
    outcome = asyncio.run(run_calls(20, attempt, pacer=Pacer(3), retry=policy))
    assert outcome.ok and outcome.answers == [i * 10 for i in range(20)]
    assert outcome.retries == 2 * len(range(0, 20, 3))
    assert outcome.rate_limited == 0  # a TransientFailure is an "error" unless it says otherwise
    assert 1 <= in_flight[1] <= 3


def test_run_calls_stops_starting_calls_after_a_final_failure():
    started: list[int] = []

    async def attempt(i: int) -> int:
        started.append(i)
        if i == 1:
            raise PermanentFailure("HTTP 400: bad request")
        if i == 2:
            raise TransientFailure("HTTP 500: down")
        await asyncio.sleep(0.01)
        return i

    policy = RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.001)
    outcome = asyncio.run(run_calls(50, attempt, pacer=Pacer(2), retry=policy))
    assert outcome.failures[1] == "HTTP 400: bad request"
    assert not outcome.ok and outcome.abandoned
    assert len(set(started)) < 50
    assert set(outcome.failures) | set(outcome.abandoned) | {
        i for i, a in enumerate(outcome.answers) if a is not None
    } == set(range(50))


def test_transient_failure_gives_up_after_max_retries():
    async def attempt(i: int) -> int:
        raise TransientFailure("no answer within 1 s")

    policy = RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.001)
    outcome = asyncio.run(run_calls(1, attempt, pacer=Pacer(1), retry=policy))
    assert outcome.failures == {0: "no answer within 1 s (gave up after 3 attempts)"}


def test_run_sync_works_inside_a_running_event_loop():
    async def answer() -> int:
        return 42

    async def caller() -> int:
        return run_sync(answer)

    assert run_sync(answer) == 42
    assert asyncio.run(caller()) == 42


def test_request_error_names_failed_requests():
    err = APIRequestError("3 of 9 failed", {4: "HTTP 500: x.", 2: "HTTP 429: y"}, [7], [None] * 9)
    text = str(err)
    assert text.index("request 2: HTTP 429: y") < text.index("request 4: HTTP 500: x")
    assert "1 other request(s) were abandoned" in text
    assert isinstance(err, ModelError) and err.failures == {4: "HTTP 500: x.", 2: "HTTP 429: y"}


# -- errors that need no server ---------------------------------------------------------------


def test_chat_backend_refuses_loglikelihood_before_any_request():
    chat = OpenAIChatLM(model="m", base_url=CLOSED_URL, max_retries=0)
    for call, request in [
        (chat.loglikelihood, LoglikelihoodRequest("a", " b")),
        (chat.loglikelihood_rolling, RollingRequest("text")),
    ]:
        with pytest.raises(ModelError, match="openai-completions") as err:
            call([request])
        assert "echo" in str(err.value) and not isinstance(err.value, APIRequestError)


def test_completions_loglikelihood_needs_a_tokenizer():
    lm = OpenAICompletionsLM(model="m", base_url=CLOSED_URL)
    with pytest.raises(ModelError, match="tokenizer="):
        lm.loglikelihood([LoglikelihoodRequest("a", " b")])


def test_unreachable_server_accounts_for_every_request_by_index():
    lm = OpenAIChatLM(model="m", base_url=CLOSED_URL, max_retries=1, num_concurrent=1)
    with pytest.raises(APIRequestError) as err:
        lm.generate_until([GenerateRequest("a"), GenerateRequest("b")])
    # Both calls are under way at once (one backing off while the other connects), so either
    # may be the first to give up; each request is then either failed or abandoned.
    assert err.value.failures
    assert all("connection failed" in reason for reason in err.value.failures.values())
    assert set(err.value.failures) | set(err.value.abandoned) == {0, 1}
    assert err.value.partial == [None, None]


def test_key_is_not_in_identity_or_repr(monkeypatch):
    monkeypatch.setenv("ASSAY_TEST_KEY", "sk-planted-0123456789")
    lm = OpenAIChatLM(model="m", base_url=CLOSED_URL, api_key_env="ASSAY_TEST_KEY")
    shown = f"{lm!r} {lm.identity()} {vars(lm)}"
    assert "sk-planted" not in shown
    assert lm.identity()["backend"] == "openai-chat"
    assert lm.identity()["generation_defaults"]["max_tokens_field"] == "max_tokens"


# -- real servers on loopback -----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def transformers_serve(tiny_model_dir):
    """`transformers serve` for the tiny model in a child process; its base URL."""
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    code = "from transformers.cli.transformers import main; main()"
    args = [
        "serve",
        str(tiny_model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"transformers serve exited: {proc.stderr.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("transformers serve did not start within 90 s")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def stub_server(tiny_model_dir):
    from fixtures.openai_server import OpenAIStubServer

    with OpenAIStubServer(tiny_model_dir) as server:
        yield server


@pytest.fixture(scope="module")
def hf_lm(tiny_model_dir):
    return MODELS.get("hf")(pretrained=str(tiny_model_dir))


GENERATIONS = [
    GenerateRequest("The little village", GenParams(until=("\n",), max_gen_toks=12)),
    GenerateRequest(
        "Question: Natalia sold clips", GenParams(until=("Question:", "7"), max_gen_toks=16)
    ),
    GenerateRequest("How to clean a bicycle chain:", GenParams(max_gen_toks=10)),
    GenerateRequest((("user", "What is 2 + 2?"),), GenParams(max_gen_toks=8)),
    GenerateRequest(
        (("system", "Answer briefly."), ("user", "Name a river.")), GenParams(max_gen_toks=6)
    ),
]
LOGLIKELIHOODS = [
    LoglikelihoodRequest("The little village sat at the", " bottom"),
    LoglikelihoodRequest("The little village sat at the ", "bottom of a green valley"),
    LoglikelihoodRequest("Question: How many", " clips"),
    LoglikelihoodRequest("", "Every morning the baker"),
]
ROLLING = [
    RollingRequest("The weather today will be sunny in the north and cloudy in the south."),
    RollingRequest(" x"),
]


@pytest.mark.slow
def test_transformers_serve_generation_equals_hf_backend(transformers_serve, tiny_model_dir, hf_lm):
    expected = [str(a) for a in hf_lm.generate_until(GENERATIONS)]
    completions = OpenAICompletionsLM(
        model=str(tiny_model_dir), base_url=transformers_serve, tokenizer=str(tiny_model_dir)
    )
    chat = OpenAIChatLM(model=str(tiny_model_dir), base_url=transformers_serve, num_concurrent=2)
    assert [str(a) for a in completions.generate_until(GENERATIONS)] == expected
    # A plain prompt goes to a chat endpoint as one user message, rendered by the server's template.
    as_chat = [
        GenerateRequest((("user", r.prompt),), r.params) if isinstance(r.prompt, str) else r
        for r in GENERATIONS
    ]
    assert [str(a) for a in chat.generate_until(GENERATIONS)] == [
        str(a) for a in hf_lm.generate_until(as_chat)
    ]
    assert any(text for text in expected)


@pytest.mark.slow
def test_loglikelihoods_from_echoed_logprobs_equal_hf_backend(stub_server, tiny_model_dir, hf_lm):
    # A continuation equal to the model's own greedy output must come back greedy.
    continuation = str(
        hf_lm.generate_until([GenerateRequest("The little village", GenParams(max_gen_toks=3))])[0]
    )
    requests = [*LOGLIKELIHOODS, LoglikelihoodRequest("The little village", continuation)]
    lm = OpenAICompletionsLM(
        model="tiny", base_url=stub_server.base_url, tokenizer=str(tiny_model_dir), max_length=512
    )
    got, want = lm.loglikelihood(requests), hf_lm.loglikelihood(requests)
    assert [r.is_greedy for r in got] == [r.is_greedy for r in want]
    assert got[-1].is_greedy
    assert [r.logprob for r in got] == pytest.approx([r.logprob for r in want], rel=1e-5)
    got_rolling, want_rolling = (
        lm.loglikelihood_rolling(ROLLING),
        hf_lm.loglikelihood_rolling(ROLLING),
    )
    assert [r.n_tokens for r in got_rolling] == [r.n_tokens for r in want_rolling]
    assert [r.logprob for r in got_rolling] == pytest.approx(
        [r.logprob for r in want_rolling], rel=1e-5
    )


@pytest.mark.slow
def test_chat_only_endpoints_give_a_clear_error_for_loglikelihood(
    transformers_serve, tiny_model_dir
):
    from fixtures.openai_server import OpenAIStubServer

    with OpenAIStubServer(tiny_model_dir, chat_only=True) as chat_only:
        lm = OpenAICompletionsLM(
            model="tiny", base_url=chat_only.base_url, tokenizer=str(tiny_model_dir), max_retries=0
        )
        with pytest.raises(APIRequestError) as err:
            lm.loglikelihood(LOGLIKELIHOODS)
        assert "HTTP 404" in str(err.value) and "echoes their log-probabilities" in str(err.value)
        assert err.value.partial == [None] * len(LOGLIKELIHOODS)
    # transformers serve has /v1/completions but cannot score prompts: also an error, not a score.
    lm = OpenAICompletionsLM(
        model=str(tiny_model_dir), base_url=transformers_serve, tokenizer=str(tiny_model_dir)
    )
    with pytest.raises(APIRequestError, match="echo=True"):
        lm.loglikelihood(LOGLIKELIHOODS[:1])


@pytest.mark.slow
def test_faulty_network_gives_results_identical_to_a_clean_run(stub_server, tiny_model_dir):
    from fixtures.fault_proxy import FaultProxy

    words = [
        "village",
        "river",
        "mill",
        "baker",
        "bread",
        "children",
        "school",
        "bench",
        "fountain",
        "harvest",
    ]
    loglikelihoods = [
        LoglikelihoodRequest(f"The {a} and the", f" {b}") for a in words for b in words[:4]
    ]
    generations = [
        GenerateRequest(f"The {w}", GenParams(until=("\n",), max_gen_toks=4)) for w in words
    ]
    settings = {
        "model": "tiny",
        "tokenizer": str(tiny_model_dir),
        "max_length": 512,
        "num_concurrent": 4,
    }

    clean = OpenAICompletionsLM(base_url=stub_server.base_url, **settings)
    expected = (clean.loglikelihood(loglikelihoods), clean.generate_until(generations))
    with FaultProxy(
        stub_server.port, fault_rate=0.2, seed=3, stall_seconds=2.0, max_seconds=60
    ) as proxy:
        faulty = OpenAICompletionsLM(
            base_url=proxy.base_url, timeout=0.5, max_retries=8, **settings
        )
        got = (faulty.loglikelihood(loglikelihoods), faulty.generate_until(generations))
    assert got == expected
    assert set(proxy.faults) == {"429", "500", "stall"}
    # Every fault cost one retry (a slow answer may cost another, so the count is a lower bound).
    assert proxy.requests >= len(loglikelihoods) + len(generations) + sum(proxy.faults.values())


@pytest.mark.slow
def test_requests_that_keep_failing_fail_the_call_by_index(stub_server, tiny_model_dir):
    from fixtures.fault_proxy import FaultProxy

    with FaultProxy(
        stub_server.port, fault_rate=1.0, seed=0, stall_seconds=0.5, max_seconds=30
    ) as proxy:
        lm = OpenAICompletionsLM(
            model="tiny",
            base_url=proxy.base_url,
            tokenizer=str(tiny_model_dir),
            timeout=0.3,
            max_retries=1,
            num_concurrent=2,
        )
        with pytest.raises(APIRequestError) as err:
            lm.generate_until(GENERATIONS[:3])
    assert err.value.failures and set(err.value.failures) | set(err.value.abandoned) == {0, 1, 2}
    assert all("gave up after 2 attempts" in reason for reason in err.value.failures.values())
    assert "generation request(s)" in str(err.value)


@pytest.mark.slow
def test_chat_api_receives_the_conversation_with_apply_chat_template(tiny_model_dir):
    from fixtures.openai_server import OpenAIStubServer

    from assay.doc import Doc
    from assay.run.evaluation import Evaluation
    from assay.run.settings import RunSettings
    from assay.tasks.config import TaskConfig
    from assay.tasks.registry import Resolved, TaskRequest

    rows = [{"q": f"Question {i}?", "a": f"answer {i}"} for i in range(3)]
    task = TaskConfig(
        name="chat_gen",
        prompt_function=lambda row, name: Doc(row["q"], [row["a"]], 0),
        dataset_loader=lambda **_: {"train": rows, "validation": rows[:1]},
        metrics=["exact_match"],
        generation_size=4,
        num_fewshots=1,
    )

    def messages_sent(**settings):
        with OpenAIStubServer(tiny_model_dir, chat_only=True) as server:
            lm = OpenAIChatLM(model="tiny", base_url=server.base_url)
            run = RunSettings(model=lm, system_instruction="Be brief.", show_progress=False)
            Evaluation(Resolved([TaskRequest(task)]), replace(run, **settings)).run()
        return server.chat_messages

    (turns,) = messages_sent(apply_chat_template=True)
    shot = next(r for r in rows[1:] if r["q"] in turns[1]["content"])
    assert turns == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": shot["q"]},
        {"role": "assistant", "content": shot["a"]},
        {"role": "user", "content": "Question 0?"},
    ]
    # Without the flag, lm-eval's habit: the whole plain prompt is one user message.
    (plain,) = messages_sent()
    assert plain == [
        {"role": "user", "content": f"Be brief.{shot['q']} {shot['a']}\n\nQuestion 0?"}
    ]


@pytest.mark.slow
def test_planted_api_key_never_leaks(tiny_model_dir, monkeypatch, caplog):
    from fixtures.openai_server import OpenAIStubServer

    planted = "sk-planted-4f9c2e7a1b"
    monkeypatch.setenv("ASSAY_TEST_KEY", planted)
    caplog.set_level(logging.DEBUG)
    # The server rejects the key and echoes it back in its error body, as some services do.
    with OpenAIStubServer(tiny_model_dir, api_key="sk-the-right-one") as server:
        lm = OpenAIChatLM(model="tiny", base_url=server.base_url, api_key_env="ASSAY_TEST_KEY")
        with pytest.raises(APIRequestError) as err:
            lm.generate_until([GenerateRequest("hello")])
    assert "HTTP 401" in str(err.value) and "ASSAY_TEST_KEY" in str(err.value)
    for shown in (
        str(err.value),
        repr(err.value),
        str(err.value.failures),
        repr(lm),
        str(lm.identity()),
    ):
        assert planted not in shown
    assert planted not in caplog.text
