"""The last layer's feed-forward block at kept positions only (assay/models/hf/last_layer.py).

Scores with the pruned layer are checked against one plain forward pass per request written
here, and the hooks are watched to prove the block really ran on the kept positions alone.
"""

from __future__ import annotations

import pytest

from assay.models.hf.last_layer import LastFeedForward, last_feed_forward
from assay.models.hf.model import hf
from assay.requests.types import LoglikelihoodRequest

TOLERANCE = 1e-4

CONTEXTS = [
    "A man is standing in a kitchen. He picks up a knife and",
    "The girl sold clips to her friends in April, and then she",
    "Question: what is 3 times 7?\nAnswer:",
]
CHOICES = [" A", " B", " cuts the bread.", " sold half as many in May."]


def plain_loglikelihood(lm, context: str, continuation: str) -> float:
    """One unpadded forward pass over context + continuation (lm-eval's split), log_softmax."""
    import torch

    context_ids = lm.tokenizer(context)["input_ids"]
    whole = lm.tokenizer(context + continuation)["input_ids"]
    target = whole[len(context_ids) :]
    with torch.no_grad():
        logits = lm.model(torch.tensor([whole[:-1]])).logits[0, -len(target) :]
    logprobs = torch.log_softmax(logits.double(), dim=-1)
    return float(logprobs.gather(1, torch.tensor(target)[:, None]).sum())


def requests() -> list[LoglikelihoodRequest]:
    return [LoglikelihoodRequest(c, x) for c in CONTEXTS for x in CHOICES]


@pytest.fixture(scope="module")
def lm(tiny_model_dir):
    return hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4, prefix_cache=False)


def test_feed_forward_runs_on_kept_positions_and_scores_equal_plain_passes(lm):
    pruned = lm.scorer.last_layer
    assert pruned is not None, "the tiny Llama's last layer has an mlp"
    fed: list[int] = []  # positions the last feed-forward block ran at, per pass
    projected: list[int] = []  # positions projected onto the vocabulary, per pass
    inputs: list[int] = []  # positions the model ran at, per pass
    hooks = [
        pruned.module.register_forward_pre_hook(
            lambda module, args: fed.append(args[0].shape[:-1].numel())
        ),
        lm.model.get_output_embeddings().register_forward_pre_hook(
            lambda module, args: projected.append(args[0].shape[:-1].numel())
        ),
        lm.model.get_input_embeddings().register_forward_pre_hook(
            lambda module, args: inputs.append(args[0].numel())
        ),
    ]
    try:
        got = lm.loglikelihood(requests())
    finally:
        for hook in hooks:
            hook.remove()
    for request, result in zip(requests(), got, strict=True):
        want = plain_loglikelihood(lm, request.context, request.continuation)
        assert abs(result.logprob - want) <= TOLERANCE, (request, result, want)
    # The block ran exactly where logits were read, a small part of the positions run.
    assert fed and fed == projected
    assert 2 * sum(fed) < sum(inputs)


def test_outside_scoring_the_block_runs_at_every_position(lm):
    import torch

    ids = torch.tensor([lm.tokenizer(CONTEXTS[0])["input_ids"]])
    pruned = lm.scorer.last_layer
    with torch.no_grad():
        hooked = lm.model(ids).logits
        pruned.remove()
        try:
            bare = lm.model(ids).logits
        finally:
            lm.scorer.last_layer = last_feed_forward(lm.model)
    assert torch.equal(hooked, bare)


def test_the_probe_turns_pruning_off_when_it_changes_scores(tiny_model_dir, monkeypatch):
    # A pruning that loses the kept positions' values: the probe must catch it and run whole.
    def broken(self, module, args, output):
        if self._shape is None:
            return None
        return output.new_zeros((*self._shape[:-1], output.shape[-1]))

    monkeypatch.setattr(LastFeedForward, "_scatter", broken)
    lm = hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4, prefix_cache=False)
    assert lm.scorer.last_layer is None
    assert lm.scorer.keep_logits, "only the pruning was at fault"
    got = lm.loglikelihood(requests()[:4])
    for request, result in zip(requests()[:4], got, strict=True):
        want = plain_loglikelihood(lm, request.context, request.continuation)
        assert abs(result.logprob - want) <= TOLERANCE


def test_a_model_without_a_known_feed_forward_block_gets_no_pruning():
    import torch

    class Layer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.dense = torch.nn.Linear(4, 4)

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = type("Config", (), {"num_hidden_layers": 2})()
            self.layers = torch.nn.ModuleList([Layer(), Layer()])

    assert last_feed_forward(Model()) is None
