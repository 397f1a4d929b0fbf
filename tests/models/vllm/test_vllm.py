"""vLLM backend (assay/models/vllm/model.py, engine.py, requests.py), on machines without vLLM or a GPU.

Argument checking and request translation are pure functions. The backend itself runs on
`TransformersEngine`, which implements the engine interface (token-id prompts in, generated ids
or prompt log-probabilities out) with the tiny transformers model; its answers must equal the
hf backend's, so tokenisation, truncation, windows, chat templates and decoding are checked.
"""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest

from assay.errors import ConfigError, ModelError
from assay.models.base import MODELS, ReplicaPlan
from assay.models.spans import ScoredSpan, loglikelihood_spans
from assay.models.vllm.engine import prefix_counts
from assay.models.vllm.model import VLLMLM
from assay.models.vllm.requests import (
    CACHED_SCORING_PARAMS,
    SCORING_PARAMS,
    EngineGeneration,
    PromptScores,
    engine_kwargs,
    generation_params,
    parse_vllm_args,
    prefix_leaders,
    prompt_logprob_score,
    prompt_order,
    reads_prefix_cache,
)
from assay.requests.types import (
    GenerateRequest,
    GenParams,
    LoglikelihoodRequest,
    RollingRequest,
)
from assay.run.backend import build_executor
from assay.run.settings import RunSettings

# -- arguments ------------------------------------------------------------------------------


def test_unknown_arg_is_an_error_listing_valid_args():
    with pytest.raises(ConfigError) as err:
        parse_vllm_args({"pretrained": "m", "tensor_parallel": 2})
    assert "tensor_parallel" in str(err.value)
    assert "tensor_parallel_size" in str(err.value) and "data_parallel_size" in str(err.value)


def test_values_given_as_strings_are_converted():
    args = parse_vllm_args(
        {
            "pretrained": "m",
            "tensor_parallel_size": "2",
            "data_parallel_size": 4,
            "gpu_memory_utilization": "0.5",
            "max_model_len": "none",
            "enable_prefix_caching": "false",
            "chat_template_args": '{"enable_thinking": false}',
            "batch_size": "32",
        }
    )
    assert (args.tensor_parallel_size, args.data_parallel_size) == (2, 4)
    assert args.batch_size == 32 and parse_vllm_args({"pretrained": "m"}).batch_size == "auto"
    assert args.gpu_memory_utilization == 0.5 and args.max_model_len is None
    assert args.enable_prefix_caching is False
    assert args.chat_template_args == {"enable_thinking": False}


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({}, "'pretrained' is required"),
        ({"pretrained": "m", "tensor_parallel_size": 0}, "at least 1"),
        ({"pretrained": "m", "data_parallel_size": "two"}, "whole number"),
        ({"pretrained": "m", "engine_args": {"seed": 1}}, "repeats seed"),
        ({"pretrained": "m", "engine_args": {"enable_prefix_caching": False}}, "repeats"),
        ({"pretrained": "m", "batch_size": "max"}, "positive whole number or 'auto'"),
        ({"pretrained": "m", "device": "cuda"}, "CUDA_VISIBLE_DEVICES"),
    ],
)
def test_bad_arguments_are_errors(args, fragment):
    with pytest.raises(ConfigError, match="--model vllm") as err:
        parse_vllm_args(args)
    assert fragment in str(err.value)


def test_engine_kwargs_enable_prefix_caching_and_pass_parallelism():
    args = parse_vllm_args(
        {"pretrained": "org/m", "tensor_parallel_size": 2, "engine_args": {"max_num_seqs": 64}}
    )
    kwargs = engine_kwargs(args)
    assert kwargs["model"] == kwargs["tokenizer"] == "org/m"
    assert kwargs["enable_prefix_caching"] is True
    assert kwargs["tensor_parallel_size"] == 2 and kwargs["max_num_seqs"] == 64
    assert (
        "max_model_len" not in kwargs and "quantization" not in kwargs and "revision" not in kwargs
    )
    # Replicas are assay's business (Ray actors), not an engine argument.
    assert "data_parallel_size" not in kwargs


def test_missing_vllm_is_a_clear_error(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a)
    )
    with pytest.raises(ModelError, match=r"assay\[vllm\]"):
        MODELS.get("vllm")(pretrained="some/model")


def test_data_parallel_without_ray_is_a_clear_error(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    settings = RunSettings(
        model="vllm", model_args={"pretrained": "some/model", "data_parallel_size": 2}
    )
    with pytest.raises(ConfigError) as err:
        build_executor(settings)
    assert str(err.value) == (
        "--model-args data_parallel_size=2 needs Ray, which is not installed. Install it with "
        "`pip install 'assay[ray]'` (on every node of the cluster), or use data_parallel_size=1."
    )


def test_data_parallel_asks_for_one_engine_replicas_on_tensor_parallel_gpus():
    args = {"pretrained": "m", "data_parallel_size": "4", "tensor_parallel_size": 2}
    assert VLLMLM.replica_plan(args) == ReplicaPlan(
        replicas=4,
        gpus_per_replica=2.0,
        replica_args={**args, "data_parallel_size": 1},
        asked_by="data_parallel_size=4",
    )
    assert VLLMLM.replica_plan({"pretrained": "m"}) is None
    assert VLLMLM.replica_plan({"pretrained": "m", "data_parallel_size": 1}) is None
    with pytest.raises(ConfigError, match="data_parallel_size"):  # checked before any replica
        VLLMLM.replica_plan({"pretrained": "m", "data_parallel_size": 0})


def test_a_backend_object_holds_one_engine_and_refuses_data_parallel():
    with pytest.raises(ConfigError, match="data_parallel_size=2 asks for replicas"):
        MODELS.get("vllm")(pretrained="some/model", data_parallel_size=2)


def test_replicas_disagreeing_with_data_parallel_size_are_refused():
    settings = RunSettings(
        model="vllm",
        model_args={"pretrained": "some/model", "data_parallel_size": 2},
        executor="ray",
        replicas=3,
    )
    with pytest.raises(ConfigError) as err:
        build_executor(settings)
    assert str(err.value) == (
        "--replicas 3 and --model-args data_parallel_size=2 disagree; give one of them."
    )


# -- request translation --------------------------------------------------------------------


def test_greedy_generation_params_carry_every_stop_string():
    request = GenerateRequest(
        "p", GenParams(until=("\n\n", "", "Q:", "A:", "B:", "C:"), max_gen_toks=32, top_k=5)
    )
    assert generation_params(request, default_seed=1234) == {
        "max_tokens": 32,
        "temperature": 0.0,
        "top_k": 5,
        "seed": 1234,
        "stop": ["\n\n", "Q:", "A:", "B:", "C:"],
    }


def test_sampled_generation_params_seed_each_sample_and_pass_extras():
    params = GenParams(do_sample=True, temperature=0.7, top_p=0.9, extra=(("min_p", 0.05),))
    first = generation_params(GenerateRequest("p", params, sample_index=0), default_seed=10)
    second = generation_params(GenerateRequest("p", params, sample_index=1), default_seed=10)
    assert first["temperature"] == 0.7 and first["top_p"] == 0.9 and first["min_p"] == 0.05
    assert (first["seed"], second["seed"]) == (10, 11)
    assert "seed" not in generation_params(GenerateRequest("p", params), default_seed=None)


def test_scoring_params_ask_for_prompt_logprobs():
    assert SCORING_PARAMS["prompt_logprobs"] == 1 and SCORING_PARAMS["temperature"] == 0.0
    assert SCORING_PARAMS["max_tokens"] >= 1


def test_prompt_logprob_score_sums_scored_positions_and_checks_greediness():
    span = ScoredSpan((7, 3, 4, 5), n_context=2)
    entries = [None, {3: -1.0}, {4: -0.5, 9: -2.0}, {5: -0.25}]
    assert prompt_logprob_score(entries, span) == (-0.75, True)
    entries[3] = {5: -1.5, 8: -0.5}
    assert prompt_logprob_score(entries, span) == (-2.0, False)
    with pytest.raises(ValueError, match="prompt position 3"):
        prompt_logprob_score([None, {3: -1.0}, {4: -0.5}, {8: -0.1}], span)
    with pytest.raises(ValueError, match="3 prompt log-probabilities for 4 tokens"):
        prompt_logprob_score(entries[:3], span)


def test_cached_positions_are_never_read_whichever_way_vllm_returns_them():
    span = ScoredSpan((7, 3, 4, 5, 6), n_context=3)
    computed = [{5: -0.5, 9: -2.0}, {6: -0.25}]
    # Two cached tokens: V1's model runner leaves their positions as uninitialised memory, V2's
    # leaves them out.
    garbage = [None, {-17: float("nan")}, {0: 0.0}, *computed]
    assert prompt_logprob_score(garbage, span, cached=2) == (-0.75, True)
    assert prompt_logprob_score([None, *computed], span, cached=2) == (-0.75, True)
    # V2 after a preemption: the list lacks the hit it resumed from, unreported.
    assert prompt_logprob_score([None, {4: -1.0}, *computed], span, cached=0) == (-0.75, True)
    with pytest.raises(ValueError, match="leaves the log-probability of prompt position 3"):
        prompt_logprob_score(garbage, span, cached=3)
    with pytest.raises(ValueError, match="2 prompt log-probabilities for 5 tokens"):
        prompt_logprob_score([None, computed[1]], span, cached=2)
    with pytest.raises(ValueError, match="6 prompt log-probabilities for 5 tokens"):
        prompt_logprob_score([*garbage, None], span, cached=2)


@pytest.mark.parametrize(
    ("n_ids", "n_context", "block", "reads"),
    [
        (9, 8, 4, False),  # the context is two whole blocks: a hit can cover all of it
        (8, 7, 4, True),  # a hit stops at 4 tokens, short of position 6
        (10, 5, 4, False),  # a block boundary (8) inside the continuation
        (8, 6, 4, True),  # the continuation (positions 6, 7) inside one block
        (4, 3, 4, True),  # one block: a hit never takes the last token, so no whole block
        (8, 7, None, False),  # prefix caching off
    ],
)
def test_a_span_reads_the_prefix_cache_when_no_hit_reaches_its_continuation(
    n_ids, n_context, block, reads
):
    span = ScoredSpan(tuple(range(n_ids)), n_context)
    assert reads_prefix_cache(span, block) is reads
    assert CACHED_SCORING_PARAMS == {**SCORING_PARAMS, "skip_reading_prefix_cache": False}


def test_prompt_order_puts_shared_prefixes_side_by_side():
    spans = [ScoredSpan((5, 1, 2), 2), ScoredSpan((9, 9), 1), ScoredSpan((5, 1, 3), 2)]
    assert prompt_order(spans) == [0, 2, 1]


# -- the backend on a transformers engine ---------------------------------------------------


class TransformersEngine:
    """The vLLM engine interface computed by transformers: greedy or seeded sampling, and
    prompt log-probabilities with each position's most likely token, as vLLM reports them."""

    prefix_block_size: int | None = None

    def __init__(self, model_dir, max_model_len: int) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.max_model_len = max_model_len
        self.calls: list[tuple[str, list[list[int]], list[dict]]] = []

    def prompt_logprobs(self, prompts, params):
        import torch

        self.calls.append(("prompt_logprobs", prompts, params))
        out = []
        for ids in prompts:
            assert len(ids) + params[0]["max_tokens"] <= self.max_model_len
            with torch.no_grad():
                logprobs = torch.log_softmax(self.model(torch.tensor([ids])).logits[0].float(), -1)
            entries = [None]
            for k in range(1, len(ids)):
                best = int(logprobs[k - 1].argmax())
                entries.append(
                    {ids[k]: float(logprobs[k - 1, ids[k]]), best: float(logprobs[k - 1, best])}
                )
            out.append(PromptScores(entries, 0))
        return out

    def prefix_cache_counts(self):
        return None

    def generate(self, prompts, params):
        import torch

        self.calls.append(("generate", prompts, params))
        out = []
        for ids, p in zip(prompts, params, strict=True):
            assert len(ids) + p["max_tokens"] <= self.max_model_len
            sample = p["temperature"] > 0
            if sample:
                torch.manual_seed(p["seed"])
            with torch.no_grad():
                generated = self.model.generate(
                    torch.tensor([ids]),
                    attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                    max_new_tokens=p["max_tokens"],
                    do_sample=sample,
                    temperature=p["temperature"] if sample else None,
                    top_k=None,
                    top_p=None,
                )
            new = generated[0, len(ids) :].tolist()
            # Stop strings are not applied here (the backend cuts the text, and says a stop
            # string ended it): vLLM's "length" when every token allowed was generated.
            finish = "length" if len(new) >= p["max_tokens"] else "stop"
            out.append(EngineGeneration(new, finish, None))
        return out


def endings(generations):
    """Each generation's text and finish reason (the engine here generates past a stop string,
    which the hf backend stops at, so their token counts differ)."""
    return [(g.text, g.finish_reason) for g in generations]


@pytest.fixture(scope="module")
def hf_lm(tiny_model_dir):
    """Scores with the same windows as the engine's 64 tokens (see the rolling test)."""
    return MODELS.get("hf")(pretrained=str(tiny_model_dir), max_length=62)


@pytest.fixture(scope="module")
def hf_lm_64(tiny_model_dir):
    """Generates with the same context window as the engine."""
    return MODELS.get("hf")(pretrained=str(tiny_model_dir), max_length=64)


@pytest.fixture(scope="module")
def vllm_lm(tiny_model_dir):
    from transformers import AutoTokenizer

    args = parse_vllm_args({"pretrained": str(tiny_model_dir)})
    engine = TransformersEngine(tiny_model_dir, max_model_len=64)
    return VLLMLM(args, engine=engine, tokenizer=AutoTokenizer.from_pretrained(tiny_model_dir))


LOGLIKELIHOODS = [
    LoglikelihoodRequest("The little village sat at the", " bottom"),
    LoglikelihoodRequest("The little village sat at the", " top"),
    LoglikelihoodRequest("The little village sat at the ", "bottom of a green valley"),
    LoglikelihoodRequest("", "Every morning the baker"),
    LoglikelihoodRequest("The little village sat at the", " bottom"),
]


@pytest.mark.slow
def test_loglikelihood_equals_hf_backend_in_one_sorted_engine_call(vllm_lm, hf_lm):
    vllm_lm.engine.calls.clear()
    got, want = vllm_lm.loglikelihood(LOGLIKELIHOODS), hf_lm.loglikelihood(LOGLIKELIHOODS)
    assert [r.logprob for r in got] == pytest.approx([r.logprob for r in want], rel=1e-5)
    assert [r.is_greedy for r in got] == [r.is_greedy for r in want]
    [(method, prompts, params)] = vllm_lm.engine.calls
    assert method == "prompt_logprobs" and params == [SCORING_PARAMS] * 4  # the repeat sent once
    assert prompts == sorted(prompts)


class PrefixCacheEngine(TransformersEngine):
    """TransformersEngine with vLLM's prefix cache as seen from outside. A prompt sent with
    `skip_reading_prefix_cache=False` finds the longest prefix an earlier prompt shared (prompts
    run one after another), in whole `unit`s (the block size unless given), never its last
    token; those positions get no computed log-probability: garbage claiming the top token with
    log-probability 0 (vLLM's V1 model runner), or left out (`drop`: its V2 runner)."""

    def __init__(self, model_dir, block_size: int, unit: int | None = None, drop: bool = False):
        super().__init__(model_dir, max_model_len=64)
        self.prefix_block_size = block_size
        self.unit = unit or block_size
        self.drop = drop
        self.seen: list[list[int]] = []
        self.hits: list[int] = []

    def prompt_logprobs(self, prompts, params):
        out = []
        for ids, p, result in zip(prompts, params, super().prompt_logprobs(prompts, params)):
            hit = 0
            if p.get("skip_reading_prefix_cache") is False:
                shared = max((_common_prefix(ids, seen) for seen in self.seen), default=0)
                hit = min(shared, len(ids) - 1) // self.unit * self.unit
            self.seen.append(ids)
            self.hits.append(hit)
            entries = result.logprobs
            if self.drop:
                entries = [None, *entries[hit + 1 :]]
            else:
                entries = [None, *({7: 0.0} for _ in range(hit)), *entries[hit + 1 :]]
            out.append(PromptScores(entries, hit))
        return out


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


# MMLU-shaped: one shared opening, per-doc questions of several lengths, the same choices.
CACHED_REQUESTS = [
    LoglikelihoodRequest(f"The little village sat at the bottom of {place}:", choice)
    for place in ("a valley", "a green valley", "the green valley", "a very green valley", "it")
    for choice in (" a", " b", " c", " where a slow river turned a wooden mill")
]


@pytest.mark.slow
@pytest.mark.parametrize("drop", [False, True], ids=["v1-runner", "v2-runner"])
def test_loglikelihood_reads_the_prefix_cache_where_no_hit_reaches_a_continuation(
    tiny_model_dir, hf_lm, drop
):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    engine = PrefixCacheEngine(tiny_model_dir, block_size=4, drop=drop)
    lm = VLLMLM(parse_vllm_args({"pretrained": str(tiny_model_dir)}), engine, tokenizer)
    engine.calls.clear()
    got, want = lm.loglikelihood(CACHED_REQUESTS), hf_lm.loglikelihood(CACHED_REQUESTS)
    assert [r.logprob for r in got] == pytest.approx([r.logprob for r in want], rel=1e-5)
    assert [r.is_greedy for r in got] == [r.is_greedy for r in want]
    # One engine call; a span reads the cache exactly when no hit can reach its continuation,
    # and both kinds are here, as are hits.
    [(_, prompts, params)] = engine.calls
    spans = {s.input_ids: s for s in loglikelihood_spans(lm._view, CACHED_REQUESTS, 62)}
    reads = [reads_prefix_cache(spans[tuple(ids)], 4) for ids in prompts]
    assert params == [CACHED_SCORING_PARAMS if r else SCORING_PARAMS for r in reads]
    assert any(reads) and not all(reads)
    assert any(engine.hits)


@pytest.mark.slow
def test_a_cache_hit_that_reaches_a_continuation_is_scored_again_uncached(tiny_model_dir, hf_lm):
    """A model whose hits are finer than its blocks: the spans whose continuation a hit reached
    after all are sent again without reading the cache."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    engine = PrefixCacheEngine(tiny_model_dir, block_size=4, unit=1)
    lm = VLLMLM(parse_vllm_args({"pretrained": str(tiny_model_dir)}), engine, tokenizer)
    engine.calls.clear()
    got, want = lm.loglikelihood(CACHED_REQUESTS), hf_lm.loglikelihood(CACHED_REQUESTS)
    assert [r.logprob for r in got] == pytest.approx([r.logprob for r in want], rel=1e-5)
    assert [r.is_greedy for r in got] == [r.is_greedy for r in want]
    (_, first, _), (_, again, params) = engine.calls
    assert 0 < len(again) < len(first) and params == [SCORING_PARAMS] * len(again)


@pytest.mark.slow
def test_rolling_windows_equal_hf_backend(vllm_lm, hf_lm):
    # 64-token engine windows hold 62 scored tokens plus context and the generated token, the
    # same windows as the hf backend's at max_length=62; the first text needs several.
    text = "The weather today will be sunny in the north and cloudy in the south. " * 4
    requests = [RollingRequest(text), RollingRequest(" x")]
    got, want = vllm_lm.loglikelihood_rolling(requests), hf_lm.loglikelihood_rolling(requests)
    assert [r.n_tokens for r in got] == [r.n_tokens for r in want]
    assert got[0].n_tokens > 2 * 62
    assert [r.logprob for r in got] == pytest.approx([r.logprob for r in want], rel=1e-5)


@pytest.mark.slow
def test_generation_equals_hf_backend_with_chat_template_and_truncation(vllm_lm, hf_lm_64):
    requests = [
        GenerateRequest("The little village", GenParams(until=("\n",), max_gen_toks=12)),
        GenerateRequest(
            "Question: Natalia sold clips", GenParams(until=("7", "Q"), max_gen_toks=16)
        ),
        GenerateRequest(
            (("system", "Be brief."), ("user", "Name a river.")), GenParams(max_gen_toks=8)
        ),
        GenerateRequest("How to clean a bicycle chain: " * 8, GenParams(max_gen_toks=10)),
    ]
    vllm_lm.engine.calls.clear()
    assert endings(vllm_lm.generate_until(requests)) == endings(hf_lm_64.generate_until(requests))
    [(method, prompts, params)] = vllm_lm.engine.calls
    assert method == "generate" and len(prompts) == 4
    by_budget = {p["max_tokens"]: ids for ids, p in zip(prompts, params, strict=True)}
    assert len(by_budget[10]) == 64 - 10  # left-truncated to leave room for max_gen_toks
    chat = by_budget[8]
    assert chat[0] == vllm_lm.tokenizer.bos_token_id != chat[1]  # one BOS only
    assert {p["max_tokens"]: p.get("stop") for p in params}[16] == ["7", "Q"]


@pytest.mark.slow
def test_fit_context_generation_equals_hf_backend(vllm_lm, hf_lm_64):
    fitted = GenParams(until=(), max_gen_toks=1000, fit_context=True)
    requests = [
        GenerateRequest("The little village", fitted),
        GenerateRequest("How to clean a bicycle chain: " * 12, fitted),
        GenerateRequest("Scientists", GenParams(until=(), max_gen_toks=5, fit_context=True)),
    ]
    vllm_lm.engine.calls.clear()
    assert endings(vllm_lm.generate_until(requests)) == endings(hf_lm_64.generate_until(requests))
    [(_, prompts, params)] = vllm_lm.engine.calls
    budgets = sorted((len(ids), p["max_tokens"]) for ids, p in zip(prompts, params, strict=True))
    # Each prompt kept whole (the long one to 63 tokens) and given the room it leaves, or 5.
    assert budgets[-1] == (63, 1) and all(n + m <= 64 for n, m in budgets)
    assert [m for _, m in budgets].count(5) == 1


def test_generation_prompts_sharing_a_prefix_reach_the_engine_side_by_side(vllm_lm):
    shots = "Question: Natalia sold clips to 48 of her friends.\nAnswer: 72\n\n"
    texts = [shots + "Question: 1 + 1?", "The little village", shots + "Question: 2 + 2?"]
    texts.append("The weather today")
    requests = [GenerateRequest(t, GenParams(until=("\n",), max_gen_toks=4)) for t in texts]
    vllm_lm.engine.calls.clear()
    got = vllm_lm.generate_until(requests)
    [(_, prompts, _)] = vllm_lm.engine.calls
    sent = [vllm_lm.tokenizer.decode(ids, skip_special_tokens=True) for ids in prompts]
    # Each pair sharing a prefix is adjacent, and the answers come back in request order.
    assert abs(sent.index(texts[0]) - sent.index(texts[2])) == 1
    assert sorted(prompts) == prompts
    alone = [vllm_lm.generate_until([r])[0] for r in requests]
    assert got == alone


@pytest.mark.slow
def test_samples_are_seeded_per_sample_index(vllm_lm):
    params = GenParams(do_sample=True, temperature=1.0, seed=5, max_gen_toks=8)
    requests = [GenerateRequest("The little village", params, sample_index=i) for i in (0, 1, 0)]
    first, second, again = vllm_lm.generate_until(requests)
    assert first == again and first != second


@pytest.mark.slow
def test_prompts_that_leave_no_room_are_errors(vllm_lm):
    with pytest.raises(ModelError, match="max_gen_toks=64"):
        vllm_lm.generate_until([GenerateRequest("x", GenParams(max_gen_toks=64))])
    with pytest.raises(ModelError, match="loglikelihood request 0"):
        vllm_lm.loglikelihood([LoglikelihoodRequest("a", " b" * 80)])


@pytest.mark.slow
def test_identity_names_what_changes_outputs(vllm_lm):
    identity = vllm_lm.identity()
    assert identity["backend"] == "vllm" and identity["max_model_len"] == 64
    assert identity["tensor_parallel_size"] == 1
    assert "gpu_memory_utilization" not in identity and "data_parallel_size" not in identity
    assert identity["engine_args"] == {}


def test_prefix_cache_counters_are_read_from_vllm_metrics():
    # vLLM's get_metrics() snapshot: counters by name, one per engine, among other metrics.
    metrics = [
        SimpleNamespace(name="vllm:prefix_cache_queries", value=300),
        SimpleNamespace(name="vllm:prefix_cache_hits", value=120),
        SimpleNamespace(name="vllm:prefix_cache_queries", value=100),
        SimpleNamespace(name="vllm:prefix_cache_hits", value=0),
        SimpleNamespace(name="vllm:num_requests_running", value=2),
    ]
    assert prefix_counts(metrics) == {"queries": 400, "hits": 120}
    assert prefix_counts(metrics[-1:]) is None


def test_engine_keeps_its_metrics_unless_engine_args_turn_them_off():
    assert engine_kwargs(parse_vllm_args({"pretrained": "m"}))["disable_log_stats"] is False
    args = parse_vllm_args({"pretrained": "m", "engine_args": {"disable_log_stats": True}})
    assert engine_kwargs(args)["disable_log_stats"] is True


def test_one_prompt_per_shared_prefix_leads():
    subject_a, subject_b = list(range(100, 140)), list(range(200, 240))
    prompts = [
        [*subject_a, 1], [*subject_b, 2], [*subject_a, 3], [7, 8, 9], [*subject_b, 4],
        [*subject_a, 5],
    ]  # fmt: skip
    # The first prompt of each 40-token prefix; the short loner leads nothing.
    assert prefix_leaders(prompts) == [0, 1]
    assert prefix_leaders([[*subject_a, 1], [7, 8]]) == []


def test_lm_eval_vllm_model_args_take_lm_eval_meaning():
    """lm-eval's vllm_causallms.VLLM.__init__: max_length is max_model_len, max_batch_size is
    vLLM's max_num_seqs, lora_local_path turns enable_lora on with max_lora_rank, tokenizer_mode
    and tokenizer_revision go to the engine, and any other keyword goes to vllm.LLM as given."""
    args = parse_vllm_args(
        {"pretrained": "org/m", "max_length": "512", "max_batch_size": "8",
         "lora_local_path": "/adapters/a", "max_lora_rank": "32", "tokenizer_mode": "slow",
         "tokenizer_revision": "v2", "prefix_token_id": "3", "truncation_side": "left",
         "enable_expert_parallel": True, "kv_cache_dtype": "fp8"}
    )  # fmt: skip
    kwargs = engine_kwargs(args)
    assert kwargs["max_model_len"] == 512 and kwargs["max_num_seqs"] == 8
    assert kwargs["enable_lora"] is True and kwargs["max_lora_rank"] == 32
    assert kwargs["tokenizer_mode"] == "slow" and kwargs["tokenizer_revision"] == "v2"
    assert kwargs["enable_expert_parallel"] is True and kwargs["kv_cache_dtype"] == "fp8"
    assert args.prefix_token_id == 3
    plain = engine_kwargs(parse_vllm_args({"pretrained": "org/m"}))
    assert not {"max_num_seqs", "enable_lora", "tokenizer_mode", "tokenizer_revision"} & set(plain)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"max_gen_toks": 64}, "--gen_kwargs max_gen_toks=N"),
        ({"swap_space": 4}, "drop it"),
        ({"truncation_side": "middle"}, "truncation_side=left"),
        ({"max_length": 64, "max_model_len": 64}, "give one"),
        ({"tensor_paralel_size": 2}, "did you mean 'tensor_parallel_size'"),
        ({"kv_cache_dtype": "fp8", "engine_args": {"kv_cache_dtype": "auto"}}, "give each once"),
        ({"max_batch_size": 8, "max_num_seqs": 16}, "repeats max_num_seqs"),
    ],
)
def test_lm_eval_vllm_model_args_assay_refuses_say_why(args, fragment):
    with pytest.raises(ConfigError, match="--model vllm") as err:
        parse_vllm_args({"pretrained": "m", **args})
    assert fragment in str(err.value)


def test_gen_kwargs_reach_sampling_params_as_lm_eval_passes_them():
    """--gen_kwargs entries that are not assay's own go to SamplingParams unchanged (lm-eval's
    modify_gen_kwargs passes them on), and stay in the request's key (its gen_kwargs)."""
    from assay.requests.types import normalize_gen_kwargs

    params = normalize_gen_kwargs(
        {"repetition_penalty": 1.1, "min_p": 0.05, "max_new_tokens": 20, "until": ["\n"]},
        default_until=[],
    )
    sent = generation_params(GenerateRequest("p", params), default_seed=1234)
    assert sent["repetition_penalty"] == 1.1 and sent["min_p"] == 0.05
    assert sent["max_tokens"] == 20 and sent["stop"] == ["\n"]
    other = normalize_gen_kwargs({"repetition_penalty": 1.2}, default_until=[])
    assert GenerateRequest("p", params) != GenerateRequest("p", other)
    assert params.as_dict()["repetition_penalty"] == 1.1
    for key in ("n", "best_of", "skip_special_tokens", "stop"):
        refused = normalize_gen_kwargs({key: 2}, default_until=[])
        with pytest.raises(ModelError, match=f"{key}: "):
            generation_params(GenerateRequest("p", refused), default_seed=None)


@pytest.mark.slow
def test_prefix_token_id_scores_an_empty_context_as_the_hf_backend(tiny_model_dir):
    """prefix_token_id stands for an empty context in both backends (lm-eval's meaning)."""
    from transformers import AutoTokenizer

    requests = [LoglikelihoodRequest("", " the little village")]
    scores = {}
    for token in (None, 7):
        extra = {} if token is None else {"prefix_token_id": token}
        hf = MODELS.get("hf")(pretrained=str(tiny_model_dir), max_length=62, **extra)
        args = parse_vllm_args({"pretrained": str(tiny_model_dir), **extra})
        engine = TransformersEngine(tiny_model_dir, max_model_len=64)
        lm = VLLMLM(args, engine=engine, tokenizer=AutoTokenizer.from_pretrained(tiny_model_dir))
        got, want = lm.loglikelihood(requests)[0], hf.loglikelihood(requests)[0]
        assert got.logprob == pytest.approx(want.logprob, rel=1e-5)
        scores[token] = got.logprob
    assert scores[None] != pytest.approx(scores[7])
    assert VLLMLM(args, engine=engine, tokenizer=lm.tokenizer).identity()["prefix_token_id"] == 7
