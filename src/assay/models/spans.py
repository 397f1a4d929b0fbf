"""Token spans for servers and engines that score a prompt (API echo, vLLM prompt logprobs).

A loglikelihood request becomes one span: context ids then continuation ids, left-truncated to
the window the server accepts, with the continuation's ids marked as the scored part. The
tokenisation itself follows lm-eval through `_hf_tokens.TokenizerView`, as the hf backend's does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from assay.models.tokens import TokenizerView, rolling_windows
from assay.requests.types import LoglikelihoodRequest, RollingRequest


@dataclass(frozen=True, slots=True)
class ScoredSpan:
    """Token ids to feed a model, and which of them are scored."""

    input_ids: tuple[int, ...]
    """Context then continuation, left-truncated to the model's window."""
    n_context: int
    """The first `n_context` ids condition the rest; the ids after them are scored."""

    @property
    def n_scored(self) -> int:
        """How many ids are scored."""
        return len(self.input_ids) - self.n_context


def scored_span(
    context_ids: Sequence[int], continuation_ids: Sequence[int], window: int
) -> ScoredSpan:
    """Context + continuation left-truncated to `window` ids; the dropped ids come off the context.

    Raises ValueError when the continuation leaves no room for even one context id (the first
    id of a prompt has no log-probability).
    """
    ids = [*context_ids, *continuation_ids]
    kept = ids[-window:]
    n_context = len(context_ids) - (len(ids) - len(kept))
    if n_context < 1:
        raise ValueError(
            f"the continuation is {len(continuation_ids)} tokens, which leaves no room for context "
            f"in a window of {window} tokens"
        )
    return ScoredSpan(tuple(kept), n_context)


def loglikelihood_spans(
    view: TokenizerView, requests: Sequence[LoglikelihoodRequest], window: int
) -> list[ScoredSpan]:
    """One span per request, tokenised as lm-eval and left-truncated to `window` ids.

    Raises ValueError naming the request whose continuation alone fills the window.
    """
    pairs = view.encode_pairs([(r.context, r.continuation) for r in requests])
    spans = []
    for i, (context, continuation) in enumerate(pairs):
        try:
            spans.append(scored_span(context, continuation, window))
        except ValueError as exc:
            raise ValueError(f"loglikelihood request {i}: {exc}") from None
    return spans


def rolling_spans(
    view: TokenizerView, requests: Sequence[RollingRequest], window: int
) -> list[list[ScoredSpan]]:
    """Per request, the disjoint rolling windows (of up to `window` scored ids) as spans."""
    return [
        [
            ScoredSpan((*ctx, *cont), len(ctx))
            for ctx, cont in rolling_windows(ids, view.prefix_token_id, window)
        ]
        for ids in view.encode([r.text for r in requests])
    ]
