"""Generated token ids as a `Generation`, for the backends that generate tokens themselves
(`hf`, `hf-multimodal`, `vllm`).

The text follows `models.thinking` (lm-eval's rule); the token counts come from the ids: the
thinking is every token before the last end-of-thinking marker, the answer every token after
it (the marker and a final EOS counted in neither). A marker the tokenizer holds as one token
is found by id, so a special token that decoding drops is still found.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from assay.models.thinking import Thinking, split_thinking
from assay.models.tokens import TokenizerView
from assay.requests.types import FinishReason, Generation


@dataclass(frozen=True, slots=True)
class TokenThinking:
    """A reasoning model's markers: as text (`thinking`) and as single token ids."""

    thinking: Thinking
    end_id: int | None = None
    """The end marker's token id, when the tokenizer holds it as one token."""
    start_id: int | None = None
    """The start marker's token id, when the tokenizer holds it as one token."""

    def starts_thinking(self, tokens: Sequence[int]) -> bool:
        """Whether a generation opens a thinking block itself (its start marker first)."""
        return self.start_id is not None and list(tokens[:1]) == [self.start_id]


def tokens_generation(
    tokens: list[int],
    ending: FinishReason | None,
    stops: Sequence[str],
    *,
    view: TokenizerView,
    eos_ids: set[int],
    thinking: TokenThinking | None,
    opened: bool = False,
) -> Generation:
    """Generated `tokens` as a Generation: the answer cut at `stops`, for a reasoning model
    the thinking apart, and token counts. `ending` becomes "stop_sequence" when a stop string
    cuts the answer here (the answer had ended there, whatever stopped the generation);
    `opened`: the prompt left the model inside a thinking block."""
    spent = len(tokens) - (1 if tokens and tokens[-1] in eos_ids else 0)
    if thinking is None:
        return split_thinking(
            view.decode(tokens), stops, None, finish_reason=ending, answer_tokens=spent
        )
    end = thinking.thinking.end
    ends = [i for i, token in enumerate(tokens) if token == thinking.end_id]
    if ends:
        # A special end token is dropped by decoding: its text is put back where it was.
        last = ends[-1]
        raw = view.decode(tokens[:last]) + end + view.decode(tokens[last + 1 :])
        reasoning, answer = last, spent - last - 1
    else:
        raw = view.decode(tokens)
        reasoning, answer = _split_counts(tokens, spent, raw, end, view)
    generation = split_thinking(
        raw,
        stops,
        thinking.thinking,
        opened=opened or thinking.starts_thinking(tokens),
        finish_reason=ending,
        reasoning_tokens=reasoning,
        answer_tokens=answer,
    )
    if generation.thinking_closed is None:  # it did not think: every token is the answer's
        return replace(generation, answer_tokens=spent)
    return generation


def _split_counts(
    tokens: list[int], spent: int, text: str, marker: str, view: TokenizerView
) -> tuple[int, int]:
    """(thinking, answer) tokens when the end marker is text: the thinking is every token
    before the one that completes the last marker, less the marker's own tokens; without a
    marker, every token is thinking."""
    wanted = text.count(marker)
    if not wanted:
        return spent, 0
    low, high = 1, len(tokens)  # the shortest prefix holding every marker
    while low < high:
        middle = (low + high) // 2
        if view.decode(tokens[:middle]).count(marker) >= wanted:
            high = middle
        else:
            low = middle + 1
    own = len(view.tokenizer.encode(marker, add_special_tokens=False))
    return max(0, low - own), max(0, spent - low)


__all__ = ["TokenThinking", "tokens_generation"]
