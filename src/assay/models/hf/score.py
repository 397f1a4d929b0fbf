"""Loglikelihood scoring with shared prefixes: each context runs through the model once.

Requests with the same context tokens (every choice of a multiple-choice question) are packed
into one row: the context, then each continuation's tokens but the last. A 4-D attention mask
lets every continuation see the context and itself only, and position ids restart after the
context for each continuation, so each is scored exactly as if it ran alone. The first
continuation token is predicted by the context's last position, so single-token continuations
(MMLU-style answer letters) add no tokens at all: all choices are read from one context pass.

Across docs, a token prefix many contexts share (a task's description and few-shot examples)
runs once: `hf.prefix` finds it, keeps its key/value cache, and rows hold only what follows it,
attending to the cached positions first (see that module).

Only the positions that predict continuation tokens are projected onto the vocabulary
(`logits_to_keep`), and log-probabilities are taken there only, in float32. The last layer's
feed-forward block runs at those positions only (see `hf.last_layer`).

Whether a model honours custom masks, position ids, `logits_to_keep` and the pruned last layer
is checked once on a tiny input against the plain one-row-per-request computation; any mismatch
turns the feature off.

Over 500 lines and still one job: packing, masks, positions and reading the log-probabilities
back are one computation whose parts must agree index for index.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from assay.errors import ModelError
from assay.models.hf.choice_cost import (
    MEASURED_DOCS,
    ChoicePacking,
    calibrated,
    measure_choice_packing,
)
from assay.models.hf.inputs import ExtraInputs, cache_keyword, joined
from assay.models.hf.last_layer import last_feed_forward
from assay.models.hf.memory import BatchSizer, ModelShape, one_cpu_thread, run_with_backoff
from assay.models.hf.prefix import PREFIX_KWARG, Prefix, PrefixCache, use_split_attention
from assay.models.hf.transfer import to_device

log = logging.getLogger(__name__)

Tokens = Sequence[int]

PASS_OVERHEAD_TOKENS = 384
"""A forward pass's fixed cost, in tokens of one row: a batch splits where padding costs more.
Measured on the ~38M benchmark model after a 448-token prefix (one CPU thread): a pass of B rows
of 140 tokens took 0.39 s + 0.196 s per row, so a pass costs what about 2.8 rows do. A CPU
figure: see `pass_overhead_tokens` for other devices."""

_MASK_STYLES = {"sdpa": "bool", "eager": "additive"}
"""Attention implementations that accept a custom 4-D mask, and the mask form each expects."""


@dataclass
class _Row:
    """One model input row: a shared base, then segments that each see the base and themselves."""

    tokens: list[int]
    positions: list[int]
    segment_ids: list[int]
    n_segments: int = 0
    # Per scored continuation: (result slot, row indices that predict its tokens, its tokens).
    targets: list[tuple[list[int], list[int], tuple[int, ...]]] = field(default_factory=list)
    inputs: ExtraInputs | None = None
    """The base's inputs besides tokens (its images)."""


class Scorer:
    """Sums of continuation log-probabilities and greediness for token-level requests."""

    def __init__(
        self,
        model: Any,
        device: Any,
        max_length: int,
        sizer: BatchSizer,
        pad_token_id: int | None,
        share_prefixes: bool = True,
        prefix_budget_bytes: int | None = None,
    ) -> None:
        self.model = model
        self.device = device
        self.max_length = max_length
        self.sizer = sizer
        self.shape = ModelShape.of(model)
        self.parameters = sum(p.numel() for p in model.parameters())
        """Model size, the calibration table's key beside the device type."""
        self.pad_id = (
            pad_token_id if pad_token_id is not None and pad_token_id < self.shape.vocab else 0
        )
        attn = getattr(model.config, "_attn_implementation", None) or ""
        self.mask_style = _MASK_STYLES.get(attn)
        self.keep_logits = True
        self.last_layer = last_feed_forward(model)
        self.pass_overhead = pass_overhead_tokens(device)
        """Fixed cost of a pass in row tokens, for splitting padded batches (None: never split)."""
        self.share_prefixes = share_prefixes and self.mask_style is not None
        self.packing: ChoicePacking | None = None
        """Set by the first call with docs whose choices can share a context pass, from the
        calibration table or measured (`choice_cost`); until then, and without sharing, None."""
        self._choose: str | None = None
        """How that call sets `packing`: "table", "measure" (opted in), or None during the
        start-up probes (they check packing itself)."""
        self.prefixes: PrefixCache | None = None
        # The probes run a dozen tokens at a time: threads would only wait for each other.
        with one_cpu_thread(device):
            self._probe()
            if prefix_budget_bytes is not None:
                self.prefixes = PrefixCache(
                    model, device, prefix_budget_bytes, keep_logits=self.keep_logits
                )
                self.prefixes.split = self.prefixes.enabled and use_split_attention(model, device)
                self._probe_prefixes()
                if self.prefixes.split and not self.prefixes.enabled:
                    # The split attention did not reproduce plain rows: copy the prefix instead.
                    self.prefixes.split, self.prefixes.enabled = False, True
                    self._probe_prefixes()
        self._choose = "measure" if measure_choice_packing() else "table"

    def score(
        self,
        pairs: Sequence[tuple[Tokens, Tokens]],
        extras: Sequence[ExtraInputs | None] | None = None,
    ) -> list[tuple[float, bool]]:
        """(log P(continuation | context), greedy?) per (context tokens, continuation tokens).

        The input is left-truncated to max_length + 1 tokens as lm-eval does; an empty
        continuation scores (0.0, True). `extras` gives each pair's inputs besides tokens (its
        images): contexts are shared only between pairs with equal extras, and never through
        the cross-doc prefix cache (equal image tokens may stand for different images).
        """
        results: list[tuple[float, bool]] = [(0.0, True)] * len(pairs)
        placed = [
            (i, *self._truncate(i, context, continuation))
            for i, (context, continuation) in enumerate(pairs)
            if continuation
        ]
        if self.prefixes is not None and not any(extras or ()):
            assigned = self.prefixes.assign([context for _, context, _ in placed])
        else:
            assigned = [(None, 0)] * len(placed)
        work = list(zip(placed, assigned, strict=True))
        if self.share_prefixes and self._choose is not None and self.packing is None:
            docs = self._choice_docs(work, extras)
            if docs and self._choose == "measure":
                measured = self._measure_packing(work, docs, extras, results)
                work = [item for item in work if item[0][0] not in measured]
            elif docs:
                self.packing = calibrated(
                    str(self.device),
                    getattr(self.device, "type", str(self.device)),
                    self.parameters,
                )
        context_once = self.share_prefixes and (self.packing is None or self.packing.context_once)
        self._run_groups(self._group(work, extras, context_once), results)
        return results

    def _group(
        self, work: Sequence[tuple[tuple[int, Tokens, Tokens], Any]], extras: Any, packed: bool
    ) -> list[tuple[Prefix | None, int, list[_Row]]]:
        """Rows per cross-doc prefix (and how much of it they use); `packed`: a context's
        continuations share one row behind it, else each runs after its own copy."""
        groups: dict[tuple[int, int], dict[tuple, dict[tuple, list[tuple[int, Tokens]]]]] = {}
        starts: dict[tuple[int, int], tuple[Prefix | None, int]] = {}
        inputs: dict[Any, ExtraInputs] = {}
        for (i, context, continuation), (prefix, length) in work:
            start = (id(prefix), length)
            starts[start] = (prefix, length)
            if packed:
                base, segment = tuple(context[length:]), tuple(continuation[:-1])
            else:
                base, segment = tuple([*context, *continuation][length:-1]), ()
            extra = extras[i] if extras else None
            if extra is not None:
                inputs[extra.key] = extra
            bases = groups.setdefault(start, {})
            key = (extra.key if extra is not None else None, base)
            bases.setdefault(key, {}).setdefault(segment, []).append((i, continuation))
        return [
            (
                *starts[start],
                [
                    row
                    for (extra_key, base), segments in bases.items()
                    for row in self._rows(base, segments, inputs.get(extra_key))
                ],
            )
            for start, bases in groups.items()
        ]

    def _run_groups(
        self,
        grouped: Sequence[tuple[Prefix | None, int, list[_Row]]],
        results: list[tuple[float, bool]],
    ) -> None:
        """Score every row of `grouped` into `results` (by slot)."""
        for prefix, length, rows in grouped:
            scored = run_with_backoff(
                rows,
                partial(self._run_rows, prefix=prefix, past=length),
                length=lambda row: len(row.tokens),
                row_bytes=partial(self.shape.scoring_row_bytes, past=length),
                sizer=self.sizer,
                pass_overhead=self.pass_overhead,
            )
            for row, row_scores in zip(rows, scored, strict=True):
                for (slots, _, _), value in zip(row.targets, row_scores, strict=True):
                    for slot in slots:
                        results[slot] = value

    def _choice_docs(
        self, work: Sequence[tuple[tuple[int, Tokens, Tokens], Any]], extras: Any
    ) -> list[list[int]]:
        """Docs of `work` where the choice between packing and one row per choice matters, as
        lists of their indices in `work`: contexts with two or more multi-token continuations
        (after the same cross-doc prefix), the only place the two ways compute different
        tokens."""
        # A cheap key first (length and last tokens): whole contexts are compared only where it
        # is shared, so a call of long distinct contexts (rolling windows) costs little.
        rough: dict[tuple, list[int]] = {}
        for k, ((i, context, continuation), (prefix, length)) in enumerate(work):
            if len(continuation) > 1:
                extra = extras[i] if extras else None
                key = (id(prefix), length, extra.key if extra is not None else None)
                rough.setdefault((*key, len(context), tuple(context[-8:])), []).append(k)
        docs: list[list[int]] = []
        for members in rough.values():
            if len(members) < 2:
                continue
            by_context: dict[tuple, list[int]] = {}
            for k in members:
                by_context.setdefault(tuple(work[k][0][1]), []).append(k)
            docs += [same for same in by_context.values() if len(same) > 1]
        return sorted(docs)

    def _measure_packing(
        self,
        work: Sequence[tuple[tuple[int, Tokens, Tokens], Any]],
        docs: Sequence[list[int]],
        extras: Any,
        results: list[tuple[float, bool]],
    ) -> set[int]:
        """Time a few of `docs` (`_choice_docs`) packed and one row per choice, set `packing`,
        and return the slots scored (their results are the packed way's: within float noise of
        the other)."""
        docs = docs[:MEASURED_DOCS]
        sample = [work[k] for members in docs for k in members]
        timings, tokens = [], []
        # One row per choice first: the packed way, timed second, is the one kept.
        for packed in (False, True):
            grouped = self._group(sample, extras, packed)
            tokens.append(sum(len(row.tokens) for _, _, rows in grouped for row in rows))
            began = time.perf_counter()
            self._run_groups(grouped, results)
            timings.append(time.perf_counter() - began)
        self.packing = ChoicePacking.of(
            (timings[1], timings[0]),
            (tokens[1], tokens[0]),
            len(docs),
            str(self.device),
            self.parameters,
        )
        log.info(
            "choices of %d docs: %.3f s behind one context, %.3f s one row each: %s",
            len(docs),
            timings[1],
            timings[0],
            "one context pass per doc" if self.packing.context_once else "one row per choice",
        )
        return {i for (i, _, _), _ in sample}

    def _truncate(self, index: int, context: Tokens, continuation: Tokens) -> tuple[Tokens, Tokens]:
        """(context, continuation) after lm-eval's left truncation to max_length + 1 tokens."""
        if len(continuation) > self.max_length:
            raise ModelError(
                f"--model hf: request {index} has a continuation of {len(continuation)} tokens, "
                f"longer than max_length={self.max_length}; raise max_length or shorten it."
            )
        whole = [*context, *continuation]
        if len(whole) > self.max_length + 1:
            whole = whole[-(self.max_length + 1) :]
        return whole[: len(whole) - len(continuation)], continuation

    def _rows(
        self, base: tuple[int, ...], segments: dict, inputs: ExtraInputs | None = None
    ) -> list[_Row]:
        """Pack a base and its segments into as few rows as keep attention cost reasonable."""
        longest = max(len(s) for s in segments)
        limit = max(2 * len(base), 256, len(base) + longest)
        rows: list[_Row] = []
        row: _Row | None = None
        for segment, members in segments.items():
            if row is None or len(row.tokens) + len(segment) > limit:
                row = _Row(list(base), list(range(len(base))), [0] * len(base), inputs=inputs)
                rows.append(row)
            offset = len(row.tokens)
            if segment:
                row.n_segments += 1
                row.tokens.extend(segment)
                row.positions.extend(range(len(base), len(base) + len(segment)))
                row.segment_ids.extend([row.n_segments] * len(segment))
            by_tokens: dict[tuple[int, ...], list[int]] = {}
            for slot, continuation in members:
                by_tokens.setdefault(tuple(continuation), []).append(slot)
            for continuation, slots in by_tokens.items():
                end = len(base) + len(segment)
                virtual = range(end - len(continuation), end)
                indices = [v if v < len(base) else offset + v - len(base) for v in virtual]
                row.targets.append((slots, indices, continuation))
        return rows

    def _run_rows(
        self, rows: Sequence[_Row], prefix: Prefix | None = None, past: int = 0
    ) -> list[list[tuple[float, bool]]]:
        """Scores of each row's targets; rows continue the first `past` tokens of `prefix`."""
        import torch

        width = max(len(row.tokens) for row in rows)
        ids = torch.tensor([row.tokens + [self.pad_id] * (width - len(row.tokens)) for row in rows])
        keep = torch.zeros(len(rows), width, dtype=torch.bool)
        where_b: list[int] = []
        where_t: list[int] = []
        tokens: list[int] = []
        owner: list[int] = []
        n_targets = 0
        for b, row in enumerate(rows):
            for _, indices, continuation in row.targets:
                where_b.extend([b] * len(indices))
                where_t.extend(indices)
                tokens.extend(continuation)
                owner.extend([n_targets] * len(indices))
                n_targets += 1
        keep[where_b, where_t] = True
        # Kept positions come out flattened in row-major order: map (row, index) to that order.
        flat = keep.view(-1).cumsum(0).sub_(1)
        picked = flat[torch.tensor(where_b) * width + torch.tensor(where_t)]
        # Queued before the pass (pinned, on CUDA), so the copies overlap the host's work.
        picked = to_device(picked, self.device)
        tokens_t = to_device(torch.tensor(tokens), self.device)
        owner_t = to_device(torch.tensor(owner), self.device)

        kwargs: dict[str, Any] = joined([row.inputs for row in rows], self.device)
        split = prefix is not None and self.prefixes is not None and self.prefixes.split
        if any(row.n_segments > 1 for row in rows):
            kwargs.update(self._packing_inputs(rows, width, past, prefix_columns=not split))
        if prefix is not None and split:
            kwargs[PREFIX_KWARG] = self.prefixes.layers(prefix, past)  # type: ignore[union-attr]
        elif prefix is not None:
            kwargs[cache_keyword(self.model)] = self.prefixes.past(prefix, past, len(rows))  # type: ignore[union-attr]
        if prefix is not None and "position_ids" not in kwargs:
            # One row of positions for the whole batch: rotary tables are built once.
            kwargs["position_ids"] = torch.arange(past, past + width, device=self.device)[None]
        logits = self._forward(ids, keep, kwargs)

        device = logits.device
        picked, tokens_t, owner_t = picked.to(device), tokens_t.to(device), owner_t.to(device)
        logits = logits.float()
        logprobs = logits[picked, tokens_t] - torch.logsumexp(logits, dim=-1)[picked]
        misses = logits.argmax(dim=-1)[picked] != tokens_t
        sums = torch.zeros(n_targets, dtype=torch.float64, device=device)
        sums.index_add_(0, owner_t, logprobs.double())
        wrong = torch.zeros(n_targets, dtype=torch.float64, device=device)
        wrong.index_add_(0, owner_t, misses.double())
        # Reduced on the device; one copy to the host (one wait) per batch.
        summed, missed = torch.stack([sums, wrong]).tolist()
        flat_scores = [(total, n == 0) for total, n in zip(summed, missed, strict=True)]
        out, start = [], 0
        for row in rows:
            out.append(flat_scores[start : start + len(row.targets)])
            start += len(row.targets)
        return out

    def _packing_inputs(
        self, rows: Sequence[_Row], width: int, past: int = 0, prefix_columns: bool = True
    ) -> dict[str, Any]:
        """4-D mask (causal, each segment sees the base and itself) and restarting positions.

        With `past` cached prefix positions in front, positions start after them, and every row
        sees all of them: the mask has a column per prefix position (`prefix_columns`), unless
        the prefix is attended apart (`split_attention`).
        """
        import torch

        segments = torch.tensor([r.segment_ids + [-1] * (width - len(r.tokens)) for r in rows])
        positions = torch.tensor([r.positions + [0] * (width - len(r.tokens)) for r in rows])
        causal = torch.ones(width, width, dtype=torch.bool).tril_()
        visible = (segments[:, :, None] == segments[:, None, :]) | (segments[:, None, :] == 0)
        # Padding queries see the base (never nothing), so no row of the softmax is all -inf.
        mask = (visible & causal)[:, None]
        if past and prefix_columns:
            seen = torch.ones(len(rows), 1, width, past, dtype=torch.bool)
            mask = torch.cat([seen, mask], dim=-1)
        if past:
            positions = positions + past
        if self.mask_style == "additive":
            dtype = next(self.model.parameters()).dtype
            mask = torch.zeros(mask.shape, dtype=dtype).masked_fill_(~mask, torch.finfo(dtype).min)
        return {
            "attention_mask": to_device(mask, self.device),
            "position_ids": to_device(positions, self.device),
        }

    def _forward(self, ids: Any, keep: Any, kwargs: dict[str, Any]) -> Any:
        """Logits at the kept positions, shape [kept, vocab]."""
        import torch

        # Rows continuing a cached prefix need the cache; otherwise none is built.
        kwargs = {"use_cache": cache_keyword(self.model) in kwargs, **kwargs}
        with torch.inference_mode():
            # Kept positions as flat indices, found on the host: no count read from the device.
            index = to_device(keep.view(-1).nonzero().squeeze(1), self.device)
            ids, keep = to_device(ids, self.device), to_device(keep, self.device)
            if self.keep_logits:
                with self.last_layer.only(keep, index) if self.last_layer else nullcontext():
                    out = self.model(input_ids=ids, logits_to_keep=keep, **kwargs)
                return out.logits
            out = self.model(input_ids=ids, **kwargs)
            return out.logits[keep.to(out.logits.device)]

    def _probe(self) -> None:
        """Check `logits_to_keep` and packing on a tiny input against one row per request."""
        import torch

        generator = torch.Generator().manual_seed(0)
        high = min(self.shape.vocab, 30000)
        draw = lambda n: torch.randint(3, high, (n,), generator=generator).tolist()  # noqa: E731
        base = draw(6)
        pairs = [(base, draw(4)), (base, draw(3)), (base, draw(1)), (draw(5), draw(2))]
        reference = [self._alone(ctx, cont) for ctx, cont in pairs]
        tolerance = 1e-3 if self.shape.dtype_bytes >= 4 else 0.1

        def agrees() -> bool:
            try:
                got = self.score(pairs)
            except (TypeError, ValueError, RuntimeError, IndexError) as exc:
                log.debug("scoring probe failed: %s", exc)
                return False
            return all(abs(g[0] - r) <= tolerance for g, r in zip(got, reference, strict=True))

        sizer, self.sizer = self.sizer, BatchSizer(len(pairs), len(pairs), self.device)
        sharing, self.share_prefixes = self.share_prefixes, False
        agreed = agrees()
        if not agreed and self.last_layer is not None:
            self.last_layer.remove()
            self.last_layer = None
            log.info("model needs its last layer at every position; the layer runs whole")
            agreed = agrees()
        if not agreed:
            self.keep_logits = False
            log.info("model ignores logits_to_keep masks; computing full logits")
            if not agrees():
                log.warning("batched scores differ from single-row scores beyond %g", tolerance)
        self.share_prefixes = sharing
        if sharing and not agrees():
            self.share_prefixes = False
            log.info("model does not honour custom attention masks; prefix sharing is off")
        self.sizer = sizer

    def _probe_prefixes(self) -> None:
        """Check rows continuing a cached prefix against one plain row per request."""
        import torch

        prefixes = self.prefixes
        if prefixes is None or not prefixes.enabled:
            return
        generator = torch.Generator().manual_seed(1)
        high = min(self.shape.vocab, 30000)
        draw = lambda n: torch.randint(3, high, (n,), generator=generator).tolist()  # noqa: E731
        shared = draw(5)
        pairs = [([*shared, *draw(3)], draw(2)), ([*shared, *draw(2)], draw(1))]
        pairs.append((pairs[0][0], draw(3)))  # packed with the first: a 4-D mask
        reference = [self._alone(ctx, cont) for ctx, cont in pairs]
        tolerance = 1e-3 if self.shape.dtype_bytes >= 4 else 0.1
        sizer, self.sizer = self.sizer, BatchSizer(len(pairs), len(pairs), self.device)
        min_tokens, prefixes.min_tokens = prefixes.min_tokens, 4
        try:
            # Plain rows (one continuation each), then packed rows, each after a cached prefix.
            got = self.score(pairs[:2])
            prefixes.reset()
            got += self.score(pairs)[2:]
            agrees = all(abs(g[0] - r) <= tolerance for g, r in zip(got, reference, strict=True))
            used = prefixes.stats.inputs_reusing > 0
        except (TypeError, ValueError, RuntimeError, IndexError) as exc:
            log.debug("prefix probe failed: %s", exc)
            agrees = used = False
        finally:
            self.sizer, prefixes.min_tokens = sizer, min_tokens
            prefixes.reset()
        if not (agrees and used):
            prefixes.enabled = False
            log.info("the model does not continue cached prefixes exactly; prefix reuse is off")

    def _alone(self, context: Tokens, continuation: Tokens) -> float:
        """log P(continuation | context) from a plain forward pass of one unpadded row."""
        import torch

        ids = torch.tensor([[*context, *continuation][:-1]], device=self.device)
        with torch.inference_mode():
            logits = self.model(input_ids=ids, use_cache=False).logits[0, -len(continuation) :]
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        return float(logprobs[torch.arange(len(continuation)), torch.tensor(continuation)].sum())


def pass_overhead_tokens(device: Any) -> int | None:
    """A pass's fixed cost in row tokens on `device`, or None to keep batches whole.

    `PASS_OVERHEAD_TOKENS` was measured on the CPU, where a pass's time grows with its padded
    tokens. A GPU runs a batch's rows in parallel until its cores are busy, so padding costs far
    less and a split adds a pass of launch latency: nothing measured says splitting pays there,
    so batches stay whole (as lm-eval runs them) unless a measurement shows otherwise
    (benchmarks/gpu_check.py times it).
    """
    return PASS_OVERHEAD_TOKENS if getattr(device, "type", None) == "cpu" else None
