"""Text to tokens exactly as lm-eval's HF backend does it, batched through the fast tokenizer.

The numbers of a loglikelihood evaluation depend on where the context ends and the continuation
begins in token space, so these rules copy lm-eval's `TemplateLM` and `HFLM` behaviour:

- trailing whitespace of the context moves to the continuation, so the continuation's first word
  keeps its leading space and BPE merges match lm-eval's;
- continuation tokens are `enc(context + continuation)[len(enc(context)):]`;
- an empty context is replaced by the prefix token (BOS, else EOS);
- BOS follows `add_bos_token` (tokenizer default when unset) and is never added to a text that
  already starts with it (chat templates usually write it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Tokens = list[int]


class TokenizerView:
    """lm-eval-compatible encoding on top of a transformers tokenizer."""

    def __init__(
        self, tokenizer: Any, add_bos_token: bool | None, prefix_token_id: int | None = None
    ) -> None:
        self.tokenizer = tokenizer
        self.add_bos_token = add_bos_token
        bos = tokenizer.bos_token_id
        # lm-eval's prefix_token_id: given, else BOS, else EOS.
        default = bos if bos is not None else tokenizer.eos_token_id
        self.prefix_token_id: int = prefix_token_id if prefix_token_id is not None else default
        # lm-eval detects "already starts with BOS" through the decoded prefix token when scoring,
        # and through the bos_token string when generating; keep both rules.
        self._prefix_text = tokenizer.decode([self.prefix_token_id])
        self._bos_text = tokenizer.bos_token

    def encode(self, texts: Sequence[str], add_special_tokens: bool | None = None) -> list[Tokens]:
        """Token ids of each text with lm-eval's `tok_encode` rules (one batched tokenizer call)."""

        def flag(text: str) -> bool | None:
            if add_special_tokens is not None:
                return add_special_tokens
            if self._prefix_text and text.startswith(self._prefix_text):
                return False
            return self.add_bos_token

        return self._encode_by_flag(texts, [flag(t) for t in texts])

    def encode_prompts(self, texts: Sequence[str], max_tokens: int) -> list[Tokens]:
        """Generation prompts as lm-eval's `tok_batch_encode`, left-truncated to `max_tokens`."""

        def flag(text: str) -> bool | None:
            if self._bos_text and text.startswith(self._bos_text):
                return False
            return self.add_bos_token

        encoded = self._encode_by_flag(texts, [flag(t) for t in texts])
        return [ids[-max_tokens:] for ids in encoded]

    def _encode_by_flag(self, texts: Sequence[str], flags: list[bool | None]) -> list[Tokens]:
        out: dict[int, Tokens] = {}
        for value in (None, True, False):
            members = [i for i, f in enumerate(flags) if f is value]
            if not members:
                continue
            kwargs = {} if value is None else {"add_special_tokens": value}
            unique = list(dict.fromkeys(texts[i] for i in members))
            ids = dict(zip(unique, self.tokenizer(unique, **kwargs)["input_ids"], strict=True))
            for i in members:
                out[i] = list(ids[texts[i]])
        return [out[i] for i in range(len(texts))]  # every flag is one of the three values

    def encode_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[Tokens, Tokens]]:
        """(context tokens, continuation tokens) of each (context, continuation), as lm-eval.

        The continuation may come back empty (empty text, or merged into the context); the caller
        scores that as log P = 0.
        """
        moved: list[tuple[str, str]] = []
        for context, continuation in pairs:
            stripped = context.rstrip()
            moved.append((stripped, context[len(stripped) :] + continuation))
        with_context = [i for i, (ctx, _) in enumerate(moved) if ctx]
        without = [i for i, (ctx, _) in enumerate(moved) if not ctx]

        texts = [moved[i][0] for i in with_context] + [
            moved[i][0] + moved[i][1] for i in with_context
        ]
        encoded = self.encode(texts)
        n = len(with_context)
        out: dict[int, tuple[Tokens, Tokens]] = {}
        for k, i in enumerate(with_context):
            context_ids, whole = encoded[k], encoded[n + k]
            out[i] = (context_ids, whole[len(context_ids) :])
        # A context that is empty (or only whitespace) conditions on the prefix token alone; when
        # the continuation itself starts with that token, it serves as the context instead.
        bare = self.encode([moved[i][1] for i in without], add_special_tokens=False)
        for i, ids in zip(without, bare, strict=True):
            if ids and ids[0] == self.prefix_token_id:
                out[i] = (ids[:1], ids[1:])
            else:
                out[i] = ([self.prefix_token_id], ids)
        return [out[i] for i in range(len(pairs))]  # each pair has a context or has none

    def decode(self, ids: Sequence[int]) -> str:
        """Text of generated tokens, special tokens removed (as lm-eval decodes generations)."""
        return self.tokenizer.decode(ids, skip_special_tokens=True)


def rolling_windows(
    tokens: Tokens, prefix_token: int, max_length: int
) -> list[tuple[Tokens, Tokens]]:
    """Disjoint (context, continuation) windows that score every token of `tokens` exactly once.

    Same windows as lm-eval's `get_rolling_token_windows(context_len=1)` + `make_disjoint_window`:
    the first window predicts up to `max_length` tokens from the prefix token; each later window
    predicts the next block of up to `max_length` tokens, conditioned on as many preceding tokens
    as fit in the window.
    """
    if not tokens:
        return []
    first = min(max_length, len(tokens))
    windows = [([prefix_token], tokens[:first])]
    done = first
    while done < len(tokens):
        size = min(len(tokens) - done, max_length)
        end = done + size
        # The window holds max_length + 1 tokens: the scored block and what precedes it.
        windows.append((tokens[end - max_length - 1 : end - size], tokens[end - size : end]))
        done = end
    return windows
