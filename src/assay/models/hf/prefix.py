"""Key/value caches of token prefixes shared by many docs, computed once and kept across batches.

Few-shot tasks put the same description and solved examples in front of every doc of a task (or
of a subject, or of a class's few-shot set). The backend tokenises each request as lm-eval does,
then looks for the longest *token* prefix its input shares with others: a prefix of every
member's own token ids, so a shared text that ends mid-word or splits differently under BPE is
simply shared up to the last token all members agree on, never re-tokenised.

Two tries over token ids find the prefixes:
- `PrefixStore` keeps the key/value cache of prefixes already computed (least recently used
  evicted beyond a memory budget). A request matching a stored prefix for `k` tokens reuses its
  first `k` positions: in a causal model the keys and values of position `i` depend on tokens
  `0..i` only, so a cropped prefix is exact.
- `shared_cuts` finds new prefixes among a batch's inputs: a trie node visited by two or more
  distinct inputs is a shared prefix; a deeper node becomes a cut of its own only when it adds at
  least `min_tokens` tokens to the cut above it, so per-subset prefixes (a description shared by
  all docs, then each subject's examples) each get their cache without splitting batches over
  prefixes a few tokens apart.

Every input keeps at least one token of its own after the prefix: the last input position
predicts the first continuation (or generated) token, so it must run with the batch.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from assay.models.hf.inputs import cache_keyword

MIN_SHARED_TOKENS = 32
"""Shorter shared prefixes are recomputed: their saving does not pay for a separate pass."""

MIN_SAVED_SHARE = 0.1
"""Reuse runs only where it would save at least this share of a call's input tokens. Where docs
share no prefix worth the name (0-shot HellaSwag: a few near-duplicate contexts save ~4 % of the
tokens), the machinery cost 6-10 % of the run (a prefix pass and a batch group of their own per
near-duplicate): a smaller saving cannot pay for it, so such a call runs as if reuse were off."""


class _Node:
    """A trie node: how many inputs pass through it, its children by token id, and a label."""

    __slots__ = ("children", "count", "label")

    def __init__(self) -> None:
        self.count = 0
        self.children: dict[int, _Node] = {}
        self.label: Any = None


def shared_cuts(inputs: Sequence[Sequence[int]], min_tokens: int = MIN_SHARED_TOKENS) -> list[int]:
    """Per input, the length of the prefix it shares with other inputs (0: none).

    Equal inputs count once. A cut is the end of a run of tokens that two or more distinct
    inputs share; it is kept when it lies at least `min_tokens` below the kept cut above it.
    Each input takes the deepest kept cut on its path, capped to leave it one token of its own.
    """
    root = _Node()
    distinct = list(dict.fromkeys(tuple(tokens) for tokens in inputs))
    for tokens in distinct:
        node = root
        for token in tokens:
            child = node.children.get(token)
            if child is None:
                child = node.children[token] = _Node()
            child.count += 1
            node = child
    cut_of: dict[tuple[int, ...], int] = {}
    for tokens in distinct:
        node, kept = root, 0
        for depth, token in enumerate(tokens, start=1):
            node = node.children[token]
            if node.count < 2:
                break
            # The end of a shared run: the next node is visited by fewer inputs, or it ends here.
            ends_run = depth == len(tokens) or node.children[tokens[depth]].count < node.count
            if ends_run and depth - kept >= min_tokens:
                kept = depth
        cut_of[tokens] = min(kept, len(tokens) - 1) if kept >= min_tokens else 0
    return [cut_of[tuple(tokens)] for tokens in inputs]


def longest_shared_run(inputs: Sequence[Sequence[int]]) -> int:
    """The most leading tokens two distinct inputs have in common (0 for fewer than two).

    In sorted order the input sharing the longest prefix with another sits next to it, so
    neighbours alone are compared: a cheap test, before any trie is built, of whether any prefix
    is shared at all.
    """
    ordered = sorted(set(map(tuple, inputs)))
    longest = 0
    for left, right in pairwise(ordered):
        common = 0
        for a, b in zip(left, right, strict=False):
            if a != b:
                break
            common += 1
        longest = max(longest, common)
    return longest


@dataclass
class Prefix:
    """A computed prefix: its tokens and per-layer (keys, values), each [1, heads, len, dim]."""

    tokens: tuple[int, ...]
    layers: list[tuple[Any, Any]]
    nbytes: int


@dataclass
class PrefixStats:
    """What the prefix cache saved, for a run's record."""

    prefixes_computed: int = 0
    """Prefix passes run (a prefix extending a stored one counts once, for its new tokens)."""
    prefix_tokens_computed: int = 0
    """Tokens run through those passes."""
    inputs_reusing: int = 0
    """Distinct inputs (contexts, prompts) continued from a cached prefix."""
    tokens_reused: int = 0
    """Prefix tokens those inputs did not recompute."""
    evictions: int = 0
    """Prefixes dropped from the store to stay within the memory budget."""

    def as_dict(self) -> dict[str, int]:
        """Plain numbers for results.json."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass
class PrefixStore:
    """Computed prefixes by token ids, least recently used first out beyond `budget_bytes`."""

    budget_bytes: int
    stats: PrefixStats = field(default_factory=PrefixStats)
    _entries: OrderedDict[tuple[int, ...], Prefix] = field(default_factory=OrderedDict)
    _root: _Node = field(default_factory=_Node)

    def match(self, tokens: Sequence[int]) -> tuple[Prefix | None, int]:
        """The stored prefix sharing the most leading tokens with `tokens`, and how many."""
        node, depth = self._root, 0
        for token in tokens:
            child = node.children.get(token)
            if child is None:
                break
            node, depth = child, depth + 1
        if depth == 0:
            return None, 0
        prefix = self._entries[node.label]
        self._entries.move_to_end(prefix.tokens)
        return prefix, depth

    def add(self, prefix: Prefix) -> None:
        """Keep `prefix` (if it fits the budget at all), evicting the least recently used."""
        if prefix.nbytes > self.budget_bytes or prefix.tokens in self._entries:
            return
        self._entries[prefix.tokens] = prefix
        while sum(p.nbytes for p in self._entries.values()) > self.budget_bytes:
            self._entries.popitem(last=False)
            self.stats.evictions += 1
        self._index()

    def clear(self) -> None:
        """Drop every stored prefix (the statistics stay)."""
        self._entries.clear()
        self._index()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Memory held by the stored prefixes."""
        return sum(p.nbytes for p in self._entries.values())

    def _index(self) -> None:
        """Rebuild the trie: each node is labelled with a stored prefix that passes through it."""
        self._root = _Node()
        for key in self._entries:
            node = self._root
            for token in key:
                node = node.children.setdefault(token, _Node())
                node.label = key


Assignment = tuple[Prefix | None, int]
"""The prefix an input starts from and how many of its tokens it covers ((None, 0): none)."""


@dataclass(frozen=True, slots=True)
class _Step:
    """Where one input would start: a stored prefix, a new one to compute, or nothing."""

    length: int
    """Leading tokens of the input the prefix covers (0: none)."""
    stored: Prefix | None = None
    compute: tuple[int, ...] = ()
    """Tokens of a new shared prefix to compute (empty: none)."""


class PrefixCache:
    """Finds, computes and hands out shared prefixes for one causal language model."""

    def __init__(
        self,
        model: Any,
        device: Any,
        budget_bytes: int,
        min_tokens: int = MIN_SHARED_TOKENS,
        keep_logits: bool = True,
    ) -> None:
        self.model = model
        self.device = device
        self.min_tokens = min_tokens
        self.min_saved_share = MIN_SAVED_SHARE
        """Share of a call's input tokens reuse must save to run at all."""
        self.keep_logits = keep_logits
        self.store = PrefixStore(budget_bytes)
        self.enabled = reusable_cache(model)
        self.split = False
        """Whether scoring rows attend to the prefix through `split_attention` (no copies)."""

    @property
    def stats(self) -> PrefixStats:
        """What the cache saved so far."""
        return self.store.stats

    def assign(self, inputs: Sequence[Sequence[int]]) -> list[Assignment]:
        """Per input (token ids), the prefix to start from; new shared prefixes are computed.

        A call whose inputs share no prefix of `min_tokens` (and match none stored) builds no
        trie; a call where reuse would save less than `min_saved_share` of its input tokens
        computes nothing and starts every input from scratch (see `MIN_SAVED_SHARE`).
        """
        nothing: list[Assignment] = [(None, 0)] * len(inputs)
        if not self.enabled:
            return nothing
        distinct = list(dict.fromkeys(tuple(tokens) for tokens in inputs))
        if not self.store and longest_shared_run(distinct) < self.min_tokens:
            return nothing
        plan = self._plan(distinct)
        total = sum(map(len, distinct))
        fresh_tokens = sum(len(key) for key in {step.compute for step in plan.values()})
        saved = sum(step.length for step in plan.values()) - fresh_tokens
        if saved < self.min_saved_share * total:
            return nothing
        fresh: dict[tuple[int, ...], Prefix] = {}
        chosen: dict[tuple[int, ...], Assignment] = {}
        for tokens, step in plan.items():
            if step.compute:
                if step.compute not in fresh:
                    fresh[step.compute] = self._compute(step.compute)
                chosen[tokens] = (fresh[step.compute], step.length)
            else:
                chosen[tokens] = (step.stored, step.length)
            if chosen[tokens][0] is not None:
                self.stats.inputs_reusing += 1
                self.stats.tokens_reused += step.length
        return [chosen[tuple(tokens)] for tokens in inputs]

    def _plan(self, distinct: Sequence[tuple[int, ...]]) -> dict[tuple[int, ...], _Step]:
        """Per distinct input, where it would start from; nothing is computed yet."""
        cuts = shared_cuts(distinct, self.min_tokens)
        plan: dict[tuple[int, ...], _Step] = {}
        for tokens, cut in zip(distinct, cuts, strict=True):
            stored, matched = self.store.match(tokens[: len(tokens) - 1])
            if matched < self.min_tokens:
                stored, matched = None, 0
            # A stored prefix wins unless this batch shares markedly more than it covers.
            if cut - matched < self.min_tokens:
                plan[tokens] = _Step(stored=stored, length=matched)
            else:
                plan[tokens] = _Step(compute=tokens[:cut], length=cut)
        return plan

    def past(self, prefix: Prefix, length: int, batch: int) -> Any:
        """A fresh DynamicCache holding the first `length` prefix positions for `batch` rows.

        Rows share the prefix tensors (an expanded view); the model's update concatenates new
        positions onto them without writing into the stored prefix.
        """
        from transformers import DynamicCache

        cache = DynamicCache(
            ddp_cache_data=[(k[:, :, :length], v[:, :, :length]) for k, v in prefix.layers]
        )
        if batch > 1:
            for layer in cache.layers:
                layer.keys = layer.keys.expand(batch, -1, -1, -1)
                layer.values = layer.values.expand(batch, -1, -1, -1)
        return cache

    def layers(self, prefix: Prefix, length: int) -> list[tuple[Any, Any]]:
        """Per layer, the first `length` prefix positions' (keys, values), as stored (views)."""
        return [(k[:, :, :length], v[:, :, :length]) for k, v in prefix.layers]

    def reset(self) -> None:
        """Forget every stored prefix and what was saved so far."""
        self.store.clear()
        self.store.stats = PrefixStats()

    def _compute(self, tokens: tuple[int, ...]) -> Prefix:
        """Run the prefix through the model, starting from the longest stored part of it."""
        import torch

        base, start = self.store.match(tokens)
        if base is None or start < self.min_tokens:
            base, start = None, 0
        start = min(start, len(tokens) - 1)
        cache = self.past(base, start, 1) if base is not None else None
        ids = torch.tensor([list(tokens[start:])], device=self.device)
        positions = torch.arange(start, len(tokens), device=self.device)[None]
        kwargs: dict[str, Any] = {"logits_to_keep": 1} if self.keep_logits else {}
        if cache is None:
            from transformers import DynamicCache

            cache = DynamicCache()
        with torch.inference_mode():
            self.model(
                input_ids=ids,
                position_ids=positions,
                use_cache=True,
                **{cache_keyword(self.model): cache},
                **kwargs,
            )
        layers = [(layer.keys, layer.values) for layer in cache.layers]
        nbytes = sum(k.nbytes + v.nbytes for k, v in layers)
        prefix = Prefix(tokens, layers, nbytes)
        self.stats.prefixes_computed += 1
        self.stats.prefix_tokens_computed += len(tokens) - start
        self.store.add(prefix)
        return prefix


def reusable_cache(model: Any) -> bool:
    """Whether the model's KV cache is plain full attention in every layer.

    Sliding-window, recurrent or hybrid layers keep state a prefix cannot be cropped or shared
    by, so such models recompute every prefix.
    """
    try:
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        cache = DynamicCache(config=model.config)
    except Exception:  # any failure means the cache API is not the one we know
        return False
    return bool(cache.layers) and all(type(layer) is DynamicLayer for layer in cache.layers)


SPLIT_ATTENTION = "assay_prefix_sdpa"
"""The attention implementation rows continuing a cached prefix run with (see `split_attention`)."""

PREFIX_KWARG = "assay_prefix_layers"
"""Model keyword carrying, per layer, the prefix's (keys, values) to attend to."""


def split_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """SDPA over a shared prefix and each row's own positions, without copying the prefix.

    Rows continuing a cached prefix would otherwise each get a copy of its keys and values
    (the cache concatenates them in front of every row's own). Instead attention runs twice:
    every row's queries against the one stored prefix (the batch folded into the query length),
    and each row against its own keys under the model's mask; the two softmax parts are merged
    by their log-sum-exps, which is exactly attention over the concatenation. Without prefix
    layers in `kwargs` this is transformers' SDPA unchanged (generation, plain rows).
    """
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    layers = kwargs.pop(PREFIX_KWARG, None)
    if layers is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs
        )
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    prefix_keys, prefix_values = layers[module.layer_idx]
    rows, heads, width, dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    # Every row sees the whole prefix: one query block of all rows against one prefix copy.
    folded = query.view(rows, kv_heads, group, width, dim).permute(1, 2, 0, 3, 4)
    out1, lse1 = flash(
        folded.reshape(1, kv_heads, group * rows * width, dim),
        prefix_keys,
        prefix_values,
        scale=scaling,
    )[:2]
    out1 = out1.view(kv_heads, group, rows, width, dim).permute(2, 0, 1, 3, 4)
    out1 = out1.reshape(rows, heads, width, dim)
    lse1 = lse1.view(kv_heads, group, rows, width).permute(2, 0, 1, 3).reshape(rows, heads, width)
    if group > 1:
        key = key.repeat_interleave(group, dim=1)
        value = value.repeat_interleave(group, dim=1)
    if attention_mask is None:
        out2, lse2 = flash(query, key, value, is_causal=True, scale=scaling)[:2]
    else:
        mask = attention_mask
        if mask.dtype == torch.bool:
            mask = torch.zeros(mask.shape, dtype=query.dtype).masked_fill_(~mask, float("-inf"))
        out2, lse2 = flash(query, key, value, attn_mask=mask.to(query.dtype), scale=scaling)[:2]
    top = torch.maximum(lse1, lse2)
    w1 = (lse1 - top).exp()
    w2 = torch.nan_to_num((lse2 - top).exp())  # a row seeing none of its own keys: weight 0
    out = out1 * w1[..., None] + torch.nan_to_num(out2) * w2[..., None]
    out = out / (w1 + w2)[..., None]
    return out.transpose(1, 2).contiguous(), None


def use_split_attention(model: Any, device: Any) -> bool:
    """Switch `model` to `split_attention` when it runs transformers' SDPA on the CPU.

    The CPU flash kernel returns the log-sum-exp the merge needs; elsewhere rows keep copying
    the prefix (through the cache). Returns whether the switch was made.
    """
    import torch

    config = model.config
    if device.type != "cpu" or getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    if not hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu"):
        return False
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

        AttentionInterface.register(SPLIT_ATTENTION, split_attention)
        AttentionMaskInterface.register(SPLIT_ATTENTION, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
        config._attn_implementation = SPLIT_ATTENTION
    except Exception:  # any failure means the attention API is not the one we know
        return False
    return config._attn_implementation == SPLIT_ATTENTION


def loaded_attention(model: Any) -> str | None:
    """The model's attention implementation as loaded (`split_attention` is SDPA's numbers)."""
    attn = getattr(model.config, "_attn_implementation", None)
    return "sdpa" if attn == SPLIT_ATTENTION else attn
