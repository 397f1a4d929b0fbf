"""Batched generation with a KV cache, where rows that finish leave the batch.

`model.generate` keeps decoding finished rows until the whole batch is done; this loop drops a
row (from the token batch, the attention mask and the cache) as soon as it emits EOS, produces
a stop string or reaches max_gen_toks, so long stragglers do not make short answers pay.

Outputs match lm-eval's HF backend: prompts are left-padded with an attention mask and position
ids counted from the first real token, decoding is greedy or sampled (temperature, then top-k,
then top-p, as transformers applies them), and the text is decoded without special tokens and cut
at the first occurrence of each stop string (EOS text included).

Sampling with a seed draws each row from its own generator seeded by (seed, sample index,
prompt), so a request's sample does not depend on which other requests share its batch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assay.errors import ModelError
from assay.models.hf.inputs import ExtraInputs, cache_keyword, joined
from assay.models.hf.memory import BatchSizer, ModelShape, one_cpu_thread, run_with_backoff
from assay.models.hf.prefix import Prefix, PrefixCache
from assay.models.hf.transfer import to_device
from assay.models.thinking import Thinking
from assay.models.thinking_tokens import TokenThinking, tokens_generation
from assay.models.tokens import TokenizerView
from assay.requests.types import FinishReason, Generation, GenParams

_NEUTRAL_EXTRAS = {"num_beams": 1, "num_return_sequences": 1, "repetition_penalty": 1.0}
"""Generation arguments that change nothing at these values: assay's own loop serves them."""
_OWN_EXTRAS = frozenset({"num_return_sequences"})
"""Generation arguments transformers takes that a backend returning one text per request
cannot honour with another value."""
_DEFAULT_TOP_K = 50
"""transformers' default top-k when sampling and neither the request nor the model sets one."""
_SMALL_STEP_MACS = 1e8
"""Below this many multiply-adds per decoding step, CPU threads cost more to synchronise than
they save (many times more when other processes share the cores), so steps run on one thread."""


@dataclass(frozen=True, slots=True)
class Sampling:
    """How the next token is picked."""

    greedy: bool
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None


@dataclass(frozen=True, slots=True)
class _Row:
    slot: int
    prompt: list[int]
    seed: int | None
    max_new: int
    """New tokens this row may generate at most."""
    inputs: ExtraInputs | None = None
    """The prompt's inputs besides tokens (its images), for the first forward pass."""
    opened: bool = False
    """The prompt leaves the model inside a thinking block (its template opened it)."""


class Generator:
    """generate_until over token prompts, one GenParams group at a time."""

    def __init__(
        self,
        model: Any,
        view: TokenizerView,
        device: Any,
        sizer: BatchSizer,
        eos_token_ids: set[int],
        eos_text: str,
        pad_token_id: int,
        think_end: tuple[int | None, str | None] = (None, None),
        prefixes: PrefixCache | None = None,
        thinking: Thinking | None = None,
        think_start_id: int | None = None,
    ) -> None:
        self.model = model
        self.think_end = think_end
        self.thinking = thinking
        """How thinking is told from the answer (None: the model is not a reasoning model)."""
        self.think_start_id = think_start_id
        self.view = view
        self.device = device
        self.sizer = sizer
        self.eos_token_ids = eos_token_ids
        self.eos_text = eos_text
        self.pad_id = pad_token_id
        self.prefixes = prefixes
        self.shape = ModelShape.of(model)
        self.n_params = sum(p.numel() for p in model.parameters())

    def generate(
        self,
        prompts: Sequence[list[int]],
        texts: Sequence[str],
        params: GenParams,
        sample_indices: Sequence[int],
        limits: Sequence[int] | None = None,
        extras: Sequence[ExtraInputs | None] | None = None,
    ) -> list[Generation]:
        """Generations for token prompts that share `params` (`texts`, the prompts as text,
        seed sampling and tell whether a template opened the thinking).

        `limits`: each prompt's own maximum of new tokens (GenParams.fit_context), else
        max_gen_toks for all. `extras` gives each prompt's inputs besides tokens (its images),
        fed to the first forward pass; such prompts never continue a cached prefix.
        """
        sampling = self.sampling(params)
        stops = [s for s in dict.fromkeys([*params.until, self.eos_text]) if s]
        passed = library_kwargs(params)
        caps = list(limits) if limits is not None else [params.max_gen_toks] * len(prompts)
        rows = [
            _Row(
                i,
                list(ids),
                row_seed(params.seed, index, text) if params.seed is not None else None,
                cap,
                extras[i] if extras else None,
                self.thinking is not None and self.thinking.opened_by(text),
            )
            for i, (ids, text, index, cap) in enumerate(
                zip(prompts, texts, sample_indices, caps, strict=True)
            )
        ]
        max_new = max(caps, default=0)
        if max_new < 1:
            return [Generation("", finish_reason="length", answer_tokens=0) for _ in rows]
        if passed:
            # As lm-eval passes gen_kwargs: through model.generate(), one prompt at a time so
            # that no answer depends on its batch.
            return [self._library_decode(row, params, passed, stops) for row in rows]
        if self.prefixes is not None and not any(extras or ()):
            assigned = self.prefixes.assign([row.prompt for row in rows])
        else:
            assigned = [(None, 0)] * len(rows)
        # Rows continuing the same cached prefix decode together.
        groups: dict[tuple[int, int], list[int]] = {}
        for i, (prefix, length) in enumerate(assigned):
            groups.setdefault((id(prefix), length), []).append(i)
        out: list[Generation] = [Generation("")] * len(rows)
        for members in groups.values():
            prefix, past = assigned[members[0]]
            texts_out = run_with_backoff(
                [rows[i] for i in members],
                lambda batch, p=prefix, m=past: self._decode(  # type: ignore[misc]
                    batch, sampling, stops, p, m
                ),
                length=lambda row, m=past: len(row.prompt) - m,  # type: ignore[misc]
                row_bytes=lambda n, m=past: self.shape.generation_row_bytes(  # type: ignore[misc]
                    m + n, max_new
                ),
                sizer=self.sizer,
            )
            for i, text in zip(members, texts_out, strict=True):
                out[i] = text
        return out

    def sampling(self, params: GenParams) -> Sampling:
        """Decoding settings; unset top-k / top-p come from the model's generation config.
        Generation arguments beyond assay's own (repetition_penalty, num_beams ...) are checked
        against transformers' GenerationConfig: `generate` passes them to model.generate()."""
        library_kwargs(params)
        if not params.do_sample or params.temperature <= 0:
            return Sampling(greedy=True)
        config = getattr(self.model, "generation_config", None)
        top_k = params.top_k if params.top_k is not None else getattr(config, "top_k", None)
        top_p = params.top_p if params.top_p is not None else getattr(config, "top_p", None)
        return Sampling(
            greedy=False,
            temperature=params.temperature,
            top_k=_DEFAULT_TOP_K if top_k is None else top_k,
            top_p=top_p,
        )

    def _decode(
        self,
        rows: Sequence[_Row],
        sampling: Sampling,
        stops: list[str],
        prefix: Prefix | None = None,
        past: int = 0,
    ) -> list[Generation]:
        """Decode a batch; with a prefix, rows continue its first `past` cached positions."""
        import torch
        from transformers import DynamicCache

        # Left padding sits between the cached prefix and each row's own tokens, masked out.
        prompts = [r.prompt[past:] for r in rows]
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[self.pad_id] * (width - len(p)) + p for p in prompts])
        own = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        positions = (own.cumsum(-1) - 1 + past).masked_fill_(own == 0, 1)
        attention = torch.cat([own.new_ones(len(rows), past), own], dim=1)
        ids, attention, positions = (to_device(t, self.device) for t in (ids, attention, positions))
        generators = [
            torch.Generator(device=self.device).manual_seed(r.seed) if r.seed is not None else None
            for r in rows
        ]
        window = max((len(s.encode()) for s in stops), default=0) + 2
        generated: list[list[int]] = [[] for _ in rows]
        endings: list[FinishReason] = ["length"] * len(rows)
        active = list(range(len(rows)))
        max_new = max((row.max_new for row in rows), default=0)
        if prefix is not None:
            cache = self.prefixes.past(prefix, past, len(rows))  # type: ignore[union-attr]
        else:
            cache = DynamicCache(config=self.model.config)
        next_position = positions[:, -1:] + 1
        step_macs = len(rows) * (
            self.n_params
            + 2
            * self.shape.layers
            * self.shape.kv_heads
            * self.shape.head_dim
            * (past + width + max_new)
        )
        with torch.inference_mode():
            logits = self.model(
                input_ids=ids,
                attention_mask=attention,
                position_ids=positions,
                use_cache=True,
                logits_to_keep=1,
                **{cache_keyword(self.model): cache},
                **joined([r.inputs for r in rows], self.device),
            ).logits[:, -1, :]
        with torch.inference_mode(), one_cpu_thread(self.device, step_macs < _SMALL_STEP_MACS):
            while True:
                chosen = self._choose(logits, sampling, [generators[a] for a in active])
                keep = []
                for j, (a, token) in enumerate(zip(active, chosen.tolist(), strict=True)):
                    generated[a].append(token)
                    if token in self.eos_token_ids:
                        endings[a] = "stop"
                    elif self._stopped(generated[a], stops, window, rows[a].opened):
                        endings[a] = "stop_sequence"
                    elif len(generated[a]) < rows[a].max_new:
                        keep.append(j)
                if not keep:
                    break
                if len(keep) < len(active):
                    index = to_device(torch.tensor(keep), self.device)
                    cache.batch_select_indices(index)
                    attention, next_position = attention[index], next_position[index]
                    chosen = chosen[index]
                    active = [active[j] for j in keep]
                attention = torch.cat([attention, attention.new_ones(len(active), 1)], dim=1)
                logits = self.model(
                    input_ids=chosen[:, None],
                    attention_mask=attention,
                    position_ids=next_position,
                    use_cache=True,
                    **{cache_keyword(self.model): cache},
                ).logits[:, -1, :]
                next_position = next_position + 1
        return [
            self._generation(tokens, ending, stops, row.opened)
            for tokens, ending, row in zip(generated, endings, rows, strict=True)
        ]

    def _library_decode(
        self, row: _Row, params: GenParams, passed: dict[str, Any], stops: list[str]
    ) -> Generation:
        """One prompt through transformers' model.generate() with `passed` (lm-eval's
        `_model_generate`: greedy unless sampling is asked for, stopped at the stop strings)."""
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        generator = self
        window = max((len(s.encode()) for s in stops), default=0) + 2
        start = len(row.prompt)

        class AtStops(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                done = [
                    generator._stopped(ids[start:].tolist(), stops, window, row.opened)
                    for ids in input_ids
                ]
                return torch.tensor(done, device=input_ids.device)

        sampling: dict[str, Any] = {"do_sample": False}
        if params.do_sample and params.temperature > 0:
            sampling = {"do_sample": True, "temperature": params.temperature}
            sampling.update({k: v for k, v in (("top_k", params.top_k), ("top_p", params.top_p))
                             if v is not None})  # fmt: skip
            if row.seed is not None:
                torch.manual_seed(row.seed)
        ids = to_device(torch.tensor([row.prompt]), self.device)
        with torch.inference_mode():
            output = self.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=row.max_new,
                stopping_criteria=StoppingCriteriaList([AtStops()]),
                pad_token_id=self.pad_id,
                use_cache=True,
                **{**passed, **sampling},
            )
        tokens = output[0, start:].tolist()
        ending: FinishReason = "length"
        for i, token in enumerate(tokens):
            if token in self.eos_token_ids:
                tokens, ending = tokens[: i + 1], "stop"
                break
        if ending == "length" and self._stopped(tokens, stops, window, row.opened):
            ending = "stop_sequence"
        return self._generation(tokens, ending, stops, row.opened)

    def _generation(
        self, tokens: list[int], ending: FinishReason, stops: list[str], opened: bool
    ) -> Generation:
        """The generated tokens as a Generation (`models.thinking_tokens`)."""
        return tokens_generation(
            tokens,
            ending,
            stops,
            view=self.view,
            eos_ids=self.eos_token_ids,
            thinking=self._token_thinking,
            opened=opened,
        )

    @property
    def _token_thinking(self) -> TokenThinking | None:
        if self.thinking is None:
            return None
        return TokenThinking(self.thinking, self.think_end[0], self.think_start_id)

    def _stopped(self, tokens: list[int], stops: list[str], window: int, opened: bool) -> bool:
        """Whether the text so far contains a stop string (cheap tail check, then confirmed).
        A reasoning model's stop strings apply to its answer only, as lm-eval's vLLM backend
        applies them: a stop string inside the thinking ("\n\n", "Question:") must not cut
        the thinking short."""
        if not stops:
            return False
        tail = self.view.decode(tokens[-window:])
        if not any(stop in tail for stop in stops):
            return False
        text = self.view.decode(tokens)
        if self.thinking is not None:
            text = self._answer_so_far(tokens, text, opened)
        return any(stop in text for stop in stops)

    def _answer_so_far(self, tokens: list[int], text: str, opened: bool) -> str:
        """The part of a generation in progress that stop strings apply to: after the thinking
        once it closed, nothing while it is open, everything when the model does not think."""
        assert self.thinking is not None
        think_id, end = self.think_end[0], self.thinking.end
        if think_id is not None and think_id in tokens:
            last = len(tokens) - 1 - tokens[::-1].index(think_id)
            return self.view.decode(tokens[last + 1 :])
        if end in text:
            return text.split(end)[-1]
        start = self.thinking.start
        thinks = (
            opened
            or start is None
            or text.lstrip().startswith(start)
            or TokenThinking(self.thinking, think_id, self.think_start_id).starts_thinking(tokens)
        )
        return "" if thinks else text

    @staticmethod
    def _choose(logits: Any, sampling: Sampling, generators: list[Any]) -> Any:
        import torch

        if sampling.greedy:
            return logits.argmax(dim=-1)
        scores = logits.float() / sampling.temperature
        if sampling.top_k is not None and 0 < sampling.top_k < scores.shape[-1]:
            kth = torch.topk(scores, sampling.top_k, dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if sampling.top_p is not None and sampling.top_p < 1.0:
            ordered, order = torch.sort(scores, dim=-1)
            tail_mass = ordered.softmax(dim=-1).cumsum(dim=-1)
            drop = tail_mass <= 1 - sampling.top_p
            drop[:, -1] = False
            scores = scores.masked_fill(
                torch.zeros_like(drop).scatter(1, order, drop), float("-inf")
            )
        probs = scores.softmax(dim=-1)
        picks = [
            torch.multinomial(probs[j], 1, generator=g)
            if g is not None
            else torch.multinomial(probs[j], 1)
            for j, g in enumerate(generators)
        ]
        return torch.cat(picks)


def library_kwargs(params: GenParams) -> dict[str, Any]:
    """The generation arguments of `params` that assay's own decoding loop does not implement
    and model.generate() does (what lm-eval passes on to it); {} when there are none. A name
    transformers' GenerationConfig does not know, or one that would return several texts per
    request, is refused (ModelError) before anything runs."""
    passed = {k: v for k, v in params.extra if _NEUTRAL_EXTRAS.get(k, object()) != v}
    if not passed:
        return {}
    from transformers import GenerationConfig

    known = GenerationConfig()
    unknown = [k for k in passed if not hasattr(known, k) or k in _OWN_EXTRAS]
    if unknown:
        raise ModelError(
            f"--model hf: generation argument(s) {', '.join(unknown)} are not transformers "
            "generate() settings that return one text per request; assay's own: until, "
            "max_gen_toks, do_sample, temperature, top_p, top_k, seed, and any other "
            "GenerationConfig setting (repetition_penalty, num_beams, no_repeat_ngram_size ...)."
        )
    return passed


def row_seed(seed: int, sample_index: int, prompt: str) -> int:
    """A 63-bit seed for one sampled row, stable across runs, batches and processes."""
    digest = hashlib.sha256(f"{seed}\x1f{sample_index}\x1f{prompt}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1
