"""Cross-doc prefix reuse in the transformers backend (assay/models/hf/prefix.py).

The trie rules are checked on token lists built here. The backend is checked on the tiny model
three ways: against the same backend with `prefix_cache=false` (the unshared path), against a
naive one-row forward pass per request written here, and through its statistics, so that each
test also proves the shared path really ran.
"""

from __future__ import annotations

import pytest

from assay.errors import ConfigError
from assay.models.hf import prefix as prefix_module
from assay.models.hf.model import hf
from assay.models.hf.prefix import Prefix, PrefixStore, longest_shared_run, shared_cuts
from assay.requests.types import GenerateRequest, GenParams, LoglikelihoodRequest

TOLERANCE = 1e-4
"""Shared against unshared loglikelihoods (float noise only)."""

# Descriptions long enough to be shared (>= 32 tokens of the tiny tokenizer). The first ends in
# the middle of a word (" Natal|ia" is one token of its own), so its text is not a token prefix
# of every doc.
VILLAGE = (
    "The little village sat at the bottom of a green valley, where a slow river turned a "
    "wooden mill. Every morning the girl Natal"
)
KITCHEN = (
    "A man is standing in a kitchen. He picks up a knife and begins to cut the vegetables "
    "into small pieces. Then he puts them in a pan with some oil.\n\n"
)
ENDINGS = ["ia sold clips.", "ie baked bread.", "ly, a small town."]


# -- the trie rules (no model) ------------------------------------------------------------------


def seq(start: int, n: int) -> list[int]:
    return list(range(start, start + n))


def test_inputs_sharing_a_run_of_tokens_cut_at_its_end():
    shared = seq(100, 40)
    inputs = [[*shared, 1, 2, 3], [*shared, 4, 5], [*shared, 1, 2, 3]]
    assert shared_cuts(inputs, min_tokens=32) == [40, 40, 40]


def test_equal_inputs_count_once_and_short_runs_are_not_shared():
    alone = seq(100, 50)
    assert shared_cuts([alone, alone], min_tokens=8) == [0, 0]
    short = seq(100, 10)
    assert shared_cuts([[*short, 1], [*short, 2]], min_tokens=32) == [0, 0]


def test_subsets_get_their_own_cut_below_a_common_one():
    description, shots_a, shots_b = seq(100, 40), seq(300, 40), seq(500, 40)
    a1, a2 = description + shots_a + [1], description + shots_a + [2]
    b1, b2 = description + shots_b + [1], description + shots_b + [2]
    lone = [*description, 7, 8, 9]
    assert shared_cuts([a1, b1, a2, b2, lone], min_tokens=32) == [80, 80, 80, 80, 40]


def test_a_few_more_shared_tokens_do_not_make_a_new_cut():
    base = seq(100, 40)
    inputs = [[*base, 1, 2, 3, 4], [*base, 1, 2, 3, 5], [*base, 9]]
    assert shared_cuts(inputs, min_tokens=32) == [40, 40, 40]


def test_a_cut_leaves_each_input_one_token_of_its_own():
    shared = seq(100, 40)
    assert shared_cuts([shared, [*shared, 5]], min_tokens=32) == [39, 40]


def test_longest_shared_run_compares_sorted_neighbours():
    shared = seq(100, 40)
    assert longest_shared_run([[*shared, 1], seq(5, 50), [*shared, 2]]) == 40
    assert longest_shared_run([seq(100, 50), seq(100, 50)]) == 0  # equal inputs count once
    assert longest_shared_run([[1, 2, 3], [1, 2], [9]]) == 2
    assert longest_shared_run([seq(1, 5)]) == 0


def test_store_matches_partial_prefixes_and_evicts_least_recently_used():
    store = PrefixStore(budget_bytes=250)
    first, second, third = (Prefix(tuple(seq(s, 10)), [], 100) for s in (100, 200, 300))
    store.add(first)
    store.add(second)
    assert store.match([*seq(100, 6), 999]) == (first, 6)
    store.add(third)  # 300 bytes > 250: the least recently used (second) goes
    assert store.stats.evictions == 1 and len(store) == 2
    assert store.match(seq(200, 10)) == (None, 0)
    assert store.match(seq(300, 10)) == (third, 10)
    store.add(Prefix(tuple(seq(400, 10)), [], 300))  # larger than the whole budget: not kept
    assert store.match(seq(400, 10)) == (None, 0) and len(store) == 2


# -- the backend on the tiny model ---------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_lm(tiny_model_dir):
    return hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4)


@pytest.fixture(scope="module")
def unshared_lm(tiny_model_dir):
    return hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4, prefix_cache=False)


def naive_loglikelihood(lm, context: str, continuation: str, max_length=None) -> float:
    """lm-eval's token split, one unpadded forward pass, log_softmax, gather."""
    import torch

    tokenizer = lm.tokenizer
    stripped = context.rstrip()
    context_ids = tokenizer(stripped)["input_ids"]
    whole = tokenizer(stripped + context[len(stripped) :] + continuation)["input_ids"]
    target = whole[len(context_ids) :]
    if max_length is not None:
        whole = whole[-(max_length + 1) :]
    with torch.no_grad():
        logits = lm.model(torch.tensor([whole[:-1]])).logits[0, -len(target) :]
    logprobs = torch.log_softmax(logits.double(), dim=-1)
    return float(logprobs.gather(1, torch.tensor(target)[:, None]).sum())


def questions(description: str, n: int, offset: int = 0) -> list[str]:
    return [
        f"{description}Question {i}: what is {i} times {i * 7}?\nAnswer:"
        for i in range(offset, offset + n)
    ]


def mc_requests(contexts: list[str]) -> list[LoglikelihoodRequest]:
    choices = [" A", " B", " 72 clips", " the bread"]
    return [LoglikelihoodRequest(c, x) for c in contexts for x in choices]


def assert_same_scores(got, want) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert abs(g.logprob - w.logprob) <= TOLERANCE, (g, w)
        assert g.is_greedy == w.is_greedy


def assert_same_choices(got, want, n_choices: int) -> None:
    """acc: the argmax choice of every doc is the same."""

    def picks(results):
        scores = [r.logprob for r in results]
        return [
            max(range(n_choices), key=lambda k: scores[d + k])
            for d in range(0, len(scores), n_choices)
        ]

    assert picks(got) == picks(want)


def test_prefix_ending_mid_word_is_shared_up_to_the_last_common_token(shared_lm, unshared_lm):
    tokenizer = shared_lm.tokenizer
    description_ids = tokenizer(VILLAGE)["input_ids"]
    contexts = [VILLAGE + ending for ending in ENDINGS]
    token_lists = [tokenizer(c)["input_ids"] for c in contexts]
    # BPE merges across the boundary: the description's own tokens are not a prefix of a doc's.
    assert any(ids[: len(description_ids)] != description_ids for ids in token_lists)
    common = 0
    while all(ids[common] == token_lists[0][common] for ids in token_lists):
        common += 1
    assert common >= 32

    before = shared_lm.scorer.prefixes.stats.tokens_reused
    requests = [LoglikelihoodRequest(c, " and") for c in contexts] + [
        LoglikelihoodRequest(contexts[0], " the bread was warm")
    ]
    got = shared_lm.loglikelihood(requests)
    # Each distinct context reused exactly the tokens all three share.
    assert shared_lm.scorer.prefixes.stats.tokens_reused - before == common * len(contexts)
    assert_same_scores(got, unshared_lm.loglikelihood(requests))
    for g, r in zip(got, requests, strict=True):
        assert abs(g.logprob - naive_loglikelihood(shared_lm, r.context, r.continuation)) <= 1e-5


def test_prefix_ending_mid_token_is_scored_as_the_unshared_path(shared_lm, unshared_lm):
    # The shared text ends inside what the tokenizer writes as one token ("clip|s", "4|8").
    description = KITCHEN + "Natalia sold cli"
    contexts = [description + "ps to 48 friends.", description + "p art.", description + "ck"]
    tokenizer = shared_lm.tokenizer
    cut = len(tokenizer(description)["input_ids"])
    assert tokenizer(contexts[0])["input_ids"][:cut] != tokenizer(description)["input_ids"]
    requests = mc_requests(contexts)
    got = shared_lm.loglikelihood(requests)
    assert_same_scores(got, unshared_lm.loglikelihood(requests))
    assert_same_choices(got, unshared_lm.loglikelihood(requests), 4)


def test_multiple_choice_over_many_chunks_computes_the_prefix_once(tiny_model_dir):
    shared = hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4)
    unshared = hf(pretrained=str(tiny_model_dir), dtype="float32", prefix_cache=False)
    stats = shared.scorer.prefixes.stats
    contexts = questions(KITCHEN, 12)
    got = []
    for start in range(0, 12, 4):  # three executor chunks: later ones reuse the stored prefix
        got += shared.loglikelihood(mc_requests(contexts[start : start + 4]))
    want = unshared.loglikelihood(mc_requests(contexts))
    assert_same_scores(got, want)
    assert_same_choices(got, want, 4)
    assert stats.prefixes_computed == 1 and stats.inputs_reusing == 12
    # On the CPU the rows attend to the one stored prefix (split attention, no copies), packed
    # rows under their 4-D masks included; the model's identity still names SDPA.
    assert shared.scorer.prefixes.split and not unshared.scorer.prefixes
    assert shared.identity()["attn_implementation"] == "sdpa"


def test_each_subset_reuses_its_own_prefix(tiny_model_dir, unshared_lm):
    shared = hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4)
    stats = shared.scorer.prefixes.stats
    village, kitchen = questions(VILLAGE + "ia.\n\n", 6), questions(KITCHEN, 6)
    mixed = [c for pair in zip(village, kitchen, strict=True) for c in pair]
    requests = mc_requests(mixed)
    assert_same_scores(shared.loglikelihood(requests), unshared_lm.loglikelihood(requests))
    assert stats.prefixes_computed == 2
    # New docs of both subsets, one per call: both prefixes come from the store.
    more = questions(VILLAGE + "ia.\n\n", 2, offset=20) + questions(KITCHEN, 2, offset=20)
    for context in more:
        requests = mc_requests([context])
        assert_same_scores(shared.loglikelihood(requests), unshared_lm.loglikelihood(requests))
    assert stats.prefixes_computed == 2 and stats.inputs_reusing == 16


def test_prefix_longer_than_max_length_is_left_truncated_as_unshared(tiny_model_dir):
    shared = hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4, max_length=40)
    unshared = hf(
        pretrained=str(tiny_model_dir), dtype="float32", max_length=40, prefix_cache=False
    )
    description = KITCHEN + VILLAGE  # far more than 40 tokens
    assert len(shared.tokenizer(description)["input_ids"]) > 40
    contexts = [*questions(description, 4), description + "er.", description + "ed."]
    requests = mc_requests(contexts)
    got = shared.loglikelihood(requests)
    assert_same_scores(got, unshared.loglikelihood(requests))
    for g, r in zip(got, requests, strict=True):
        want = naive_loglikelihood(shared, r.context, r.continuation, max_length=40)
        assert abs(g.logprob - want) <= 1e-5


def test_greedy_generation_from_a_cached_prefix_is_identical(tiny_model_dir, unshared_lm):
    shared = hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=3)
    params = GenParams(until=("\n\n",), max_gen_toks=10)
    prompts = [*questions(KITCHEN, 5), KITCHEN + "Natalia sold cli"]
    requests = [GenerateRequest(p, params) for p in prompts]
    got = shared.generate_until(requests)
    assert got == unshared_lm.generate_until(requests)
    assert len(set(got)) > 1  # the prompts really lead to different texts
    assert shared.scorer.prefixes.stats.prefixes_computed == 1


def test_memory_budget_evicts_prefixes_and_scores_stay_the_same(tiny_model_dir, unshared_lm):
    # One prefix of ~70 tokens holds about 70 * 2 layers * 2 (k, v) * 2 heads * 16 * 4 bytes
    # (36 KB): a 0.05 MiB budget keeps one, so alternating subjects evicts every time.
    shared = hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4, prefix_cache_mb=0.05)
    stats = shared.scorer.prefixes.stats
    subjects = [VILLAGE + "ia.\n\n", KITCHEN, VILLAGE + "ia.\n\n", KITCHEN]
    for round_, description in enumerate(subjects):
        requests = mc_requests(questions(description, 2, offset=10 * round_))
        assert_same_scores(shared.loglikelihood(requests), unshared_lm.loglikelihood(requests))
    assert stats.evictions >= 3
    assert len(shared.scorer.prefixes.store) == 1
    assert shared.scorer.prefixes.store.nbytes <= 0.05 * 2**20
    # Every call had to compute its subject's prefix again.
    assert stats.prefixes_computed == 4


def test_prefix_cache_false_turns_reuse_off(unshared_lm):
    assert unshared_lm.scorer.prefixes is None


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"prefix_cache": "sometimes"}, "prefix_cache"),
        ({"prefix_cache_mb": "-1"}, "prefix_cache_mb"),
        ({"prefix_cache_mb": "lots"}, "prefix_cache_mb"),
        ({"prefix_cache_mb": "nan"}, "prefix_cache_mb"),
    ],
)
def test_bad_prefix_cache_args_are_refused(args, expected):
    with pytest.raises(ConfigError, match=expected):
        hf(pretrained="unused", **args)


def test_results_json_reports_what_the_prefix_cache_saved_per_task(tiny_model_dir, tmp_path):
    import json

    from assay.run.api import evaluate

    rows = [{"q": q, "a": "A"} for q in questions(KITCHEN, 6)]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "shared.yaml").write_text(
        "task: shared_prefix\ndataset_path: json\ndataset_kwargs:\n"
        f"  data_files:\n    test: {data}\ntest_split: test\noutput_type: multiple_choice\n"
        'doc_to_text: "{{q}}"\ndoc_to_choice: [" A", " B"]\ndoc_to_target: 0\n'
        "metric_list:\n  - metric: acc\n",
        encoding="utf-8",
    )
    model_args = f"pretrained={tiny_model_dir},dtype=float32,batch_size=6"
    runs = {}
    for label, extra in (("on", ""), ("off", ",prefix_cache=false")):
        evaluate(
            "hf", "shared_prefix", model_args=model_args + extra, include_path=tmp_path,
            output_dir=tmp_path / label, cache=False, show_progress=False,
        )  # fmt: skip
        results = json.loads((tmp_path / label / "results.json").read_text())
        runs[label] = results["assay"]["requests"]["shared_prefix"]
    reuse = runs["on"]["prefix_cache"]
    # One call of six questions sharing the description: one prefix pass, six reuses.
    assert reuse["prefixes_computed"] == 1 and reuse["inputs_reusing"] == 6
    assert reuse["tokens_reused"] == 6 * reuse["prefix_tokens_computed"] > 0
    assert "prefix_cache" not in runs["off"]


# -- whether reuse pays, decided per call ---------------------------------------------------------


def distinct_contexts(n: int) -> list[str]:
    """Contexts that differ from their second token on: no prefix worth sharing."""
    return [f"{i * 7919} {VILLAGE}ia. {KITCHEN}" for i in range(n)]


def test_calls_without_a_shared_prefix_build_no_trie_and_score_as_unshared(
    tiny_model_dir, unshared_lm, monkeypatch
):
    lm = hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4)

    def no_trie(*args, **kwargs):
        raise AssertionError("a trie was built for inputs that share no prefix")

    monkeypatch.setattr(prefix_module, "shared_cuts", no_trie)
    requests = mc_requests(distinct_contexts(6))
    assert_same_scores(lm.loglikelihood(requests), unshared_lm.loglikelihood(requests))
    params = GenParams(until=("\n\n",), max_gen_toks=4)
    prompts = [GenerateRequest(c, params) for c in distinct_contexts(3)]
    assert lm.generate_until(prompts) == unshared_lm.generate_until(prompts)
    assert lm.scorer.prefixes.stats.as_dict() == prefix_module.PrefixStats().as_dict()
    assert len(lm.scorer.prefixes.store) == 0


def test_a_few_near_duplicates_do_not_pay_for_reuse_and_a_shared_description_does(
    tiny_model_dir, unshared_lm
):
    lm = hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4)
    stats = lm.scorer.prefixes.stats
    # 0-shot HellaSwag's shape: two docs of one source share a long context, the rest nothing.
    twins = [KITCHEN + "Natalia sold clips.", KITCHEN + "The bread was warm."]
    contexts = distinct_contexts(12) + twins
    ids = [lm.tokenizer(c)["input_ids"] for c in contexts]
    assert shared_cuts(ids)[-2:] != [0, 0]  # the twins do share a prefix worth a cut...
    requests = mc_requests(contexts)
    assert_same_scores(lm.loglikelihood(requests), unshared_lm.loglikelihood(requests))
    assert stats.prefixes_computed == 0 and stats.inputs_reusing == 0  # ...that is not used
    # Every doc behind one description: reuse runs, and scores stay those of the plain path.
    requests = mc_requests(questions(KITCHEN, 6))
    assert_same_scores(lm.loglikelihood(requests), unshared_lm.loglikelihood(requests))
    assert stats.prefixes_computed == 1 and stats.inputs_reusing == 6
