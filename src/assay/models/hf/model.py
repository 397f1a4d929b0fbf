"""`--model hf`: transformers causal language models, scored exactly as lm-eval's HF backend.

Numbers match lm-eval (same tokenisation, truncation and rolling windows), while the work is
smaller: contexts shared by several continuations run once (see `hf.score`), a token prefix
shared by many docs is computed once and reused from its key/value cache (`hf.prefix`), only
continuation positions reach the vocabulary projection, and generation drops finished rows
(see `hf.generate`). This module is imported only when a run asks for `--model hf`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from assay.errors import ModelError
from assay.models.base import LM, ModelProvenance, TokenCounter, register_model
from assay.models.hf.args import HFArgs, parse_hf_args
from assay.models.hf.generate import Generator
from assay.models.hf.identity import chat_template_of, dtype_name, identity_of, provenance_of
from assay.models.hf.load import load
from assay.models.hf.memory import BatchSizer
from assay.models.hf.prefix import loaded_attention
from assay.models.hf.score import Scorer
from assay.models.template_tools import read_calls, tool_parser, tool_prompt
from assay.models.thinking import Thinking, thinking_args
from assay.models.tokens import TokenizerView, rolling_windows
from assay.prompts.chat import TokenizerChatTemplate, as_messages, render_chat
from assay.requests.tools import is_conversation, plain_prompt
from assay.requests.types import (
    GenerateRequest,
    Generation,
    GenParams,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    Messages,
    RollingRequest,
    RollingResult,
)


class HuggingFaceLM(LM):
    """A transformers causal LM behind assay's LM protocol.

    Attributes:
        max_length: context window in tokens (model arg, else from the model config).
        batch_sizes: batch sizes picked by batch_size=auto, in the order they were chosen.
        model, tokenizer: the loaded transformers objects.
    """

    backend_name: ClassVar[str] = "hf"
    """The --model name its messages give."""

    accepts_tools = True
    """Tools go through the chat template's own tool support; calls are read from the text by
    `tool_parser` (see `models.tool_parsers`)."""

    def __init__(self, args: HFArgs) -> None:
        loaded = load(args)
        self.args = args
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.device = loaded.device
        self.max_length: int = loaded.max_length
        self.batch_size = args.batch_size
        self._fingerprint = loaded.fingerprint
        self._view = TokenizerView(self.tokenizer, args.add_bos_token, args.prefix_token_id)
        self._sizer = BatchSizer(args.batch_size, args.max_batch_size, self.device)
        pad_id = self.tokenizer.pad_token_id
        self.scorer = Scorer(
            self.model,
            self.device,
            self.max_length,
            self._sizer,
            pad_id,
            prefix_budget_bytes=_budget_bytes(args) if args.prefix_cache else None,
        )
        self._generator = Generator(
            self.model,
            self._view,
            self.device,
            self._sizer,
            eos_token_ids=self._eos_token_ids(),
            eos_text=self.tokenizer.decode([self.tokenizer.eos_token_id], skip_special_tokens=False)
            if self.tokenizer.eos_token_id is not None
            else "",
            pad_token_id=self.scorer.pad_id,
            think_end=self._think_end(args.think_end_token),
            prefixes=self.scorer.prefixes,
            thinking=self._thinking(),
            think_start_id=self._single_token(args.think_start_token),
        )

    @property
    def batch_sizes(self) -> list[int]:
        """Batch sizes chosen automatically so far (empty for a fixed batch size)."""
        return list(self._sizer.chosen)

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` as a prompt is encoded (BOS included when the tokenizer adds it)."""
        return self.count_tokens_many([text])[0]

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        """`count_tokens` of each text, tokenised in one batch."""
        return [len(ids) for ids in self._view.encode(texts)]

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """log P(continuation | context) and greediness, per request, in request order."""
        pairs = self._view.encode_pairs([(r.context, r.continuation) for r in requests])
        return [LoglikelihoodResult(lp, greedy) for lp, greedy in self.scorer.score(pairs)]

    def loglikelihood_rolling(self, requests: Sequence[RollingRequest]) -> list[RollingResult]:
        """log P(text) summed over lm-eval's disjoint rolling windows, and the tokens scored."""
        token_lists = self._view.encode([r.text for r in requests])
        windows, owners = [], []
        for owner, tokens in enumerate(token_lists):
            for window in rolling_windows(tokens, self._view.prefix_token_id, self.max_length):
                windows.append(window)
                owners.append(owner)
        totals = [0.0] * len(requests)
        for owner, (logprob, _) in zip(owners, self.scorer.score(windows), strict=True):
            totals[owner] += logprob
        return [
            RollingResult(t, len(tokens)) for t, tokens in zip(totals, token_lists, strict=True)
        ]

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        """Generations per request, cut at the first stop string, in request order: finish
        reason, answer token count and, for a reasoning model, its thinking apart."""
        texts, groups = self._generation_groups(requests)
        out: list[Generation] = [Generation("")] * len(requests)
        for params, members in groups.items():
            limits = None
            if params.fit_context:
                # The fit-context rule: the prompt stays whole (left-truncated only past the
                # window, keeping room for one token) and generates what room it leaves.
                prompts = self._view.encode_prompts(
                    [texts[i] for i in members], self.max_length - 1
                )
                limits = [min(params.max_gen_toks, self.max_length - len(p)) for p in prompts]
            else:
                prompts = self._view.encode_prompts(
                    [texts[i] for i in members], self.max_length - params.max_gen_toks
                )
            generated = self._generator.generate(
                prompts,
                [texts[i] for i in members],
                params,
                [requests[i].sample_index for i in members],
                limits,
            )
            for i, text in zip(members, generated, strict=True):
                out[i] = self._read_calls(text) if requests[i].tools else text
        return out

    def _generation_groups(
        self, requests: Sequence[GenerateRequest]
    ) -> tuple[list[str], dict[GenParams, list[int]]]:
        """The requests' prompt texts, and their indices grouped by generation settings, each
        group's settings checked before any compute."""
        texts = [self._request_text(r) for r in requests]
        groups: dict[GenParams, list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(request.params, []).append(i)
        for params in groups:
            self._generator.sampling(params)
            if params.max_gen_toks >= self.max_length and not params.fit_context:
                raise ModelError(
                    f"--model {self.backend_name}: max_gen_toks={params.max_gen_toks} leaves no "
                    f"room for the prompt in max_length={self.max_length}; lower max_gen_toks or "
                    "raise max_length."
                )
        return texts, groups

    def _request_text(self, request: GenerateRequest) -> str:
        """The prompt text of one request: through the chat template's tool support when it
        offers tools or carries a conversation, else as any prompt."""
        if self.accepts_tools and (request.tools or is_conversation(request.prompt)):
            return self._tool_prompt(request)
        return self._prompt_text(plain_prompt(request.prompt, self.backend_name))

    def _tool_prompt(self, request: GenerateRequest) -> str:
        """A conversation with tools through the chat template's own tool support."""
        return tool_prompt(request, self.chat_template(), self.args.tool_parser, self.backend_name)

    def _read_calls(self, generation: Generation) -> Generation:
        """The calls in a generation's answer, taken out of its text."""
        return read_calls(
            generation, tool_parser(self.args.tool_parser, self.tokenizer, self.backend_name)
        )

    def chat_template(self) -> TokenizerChatTemplate:
        """The tokenizer's chat template (BOS included when the template writes it)."""
        return chat_template_of(self.args, self.tokenizer)

    def token_counter(self) -> TokenCounter:
        """Tokens of each text as a prompt is encoded (BOS included when the tokenizer adds it)."""
        return self.count_tokens_many

    def scoring_choice(self) -> dict[str, Any] | None:
        """Whether a doc's choices ran behind one context pass, and the timings that chose it
        (None until a call had such docs, or when the model cannot pack them)."""
        packing = self.scorer.packing
        return packing.as_dict() if packing is not None else None

    def prefix_cache_stats(self) -> dict[str, int] | None:
        """What the cross-doc prefix cache saved so far (None with prefix_cache=false)."""
        prefixes = self.scorer.prefixes
        return prefixes.stats.as_dict() if prefixes is not None and prefixes.enabled else None

    def provenance(self) -> ModelProvenance:
        """Model id, revision and hub commit, dtype, parameter count, tokenizer and template."""
        return provenance_of(
            self.args,
            self.tokenizer,
            sha=getattr(self.model.config, "_commit_hash", None),
            dtype=dtype_name(self._dtype()),
            num_parameters=sum(p.numel() for p in self.model.parameters()),
            max_length=self.max_length,
        )

    def identity(self) -> dict[str, Any]:
        """Everything that changes this backend's outputs (the response cache keys on it)."""
        return identity_of(
            self.args,
            dtype=dtype_name(self._dtype()),
            max_length=self.max_length,
            attention=loaded_attention(self.model),
            weights=self._fingerprint,
        )

    @classmethod
    def unloaded(cls, model_args: Mapping[str, Any]) -> LM | None:
        """The model read from its config and tokenizer files, without its weights (None for
        what those cannot tell: see `hf.unloaded`)."""
        from assay.models.hf.unloaded import UnloadedHF

        return UnloadedHF.read(parse_hf_args(model_args))

    def _thinking(self) -> Thinking | None:
        """How the thinking is told from the answer (None without think_end_token)."""
        token = self.args.think_end_token
        end = (
            self.tokenizer.decode([token], skip_special_tokens=False)
            if isinstance(token, int)
            else token
        )
        return thinking_args("hf", end, self.args.think_start_token, self.args.thinking_budget)

    def _single_token(self, text: str | None) -> int | None:
        """The id of `text` when the tokenizer holds it as one token (special tokens, which
        decoding drops, are found by id)."""
        if text is None:
            return None
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return ids[0] if len(ids) == 1 else None

    def _think_end(self, token: str | int | None) -> tuple[int | None, str | None]:
        """The think-end marker as (token id, text): a text the tokenizer holds as one token is
        also looked for by id, so a special token (which decoding drops) is still found."""
        if token is None or isinstance(token, int):
            return token, None
        ids = self.tokenizer.encode(token, add_special_tokens=False)
        return (ids[0] if len(ids) == 1 else None), token

    def _dtype(self) -> Any:
        return next(self.model.parameters()).dtype

    def _prompt_text(self, prompt: str | Messages) -> str:
        return (
            prompt
            if isinstance(prompt, str)
            else render_chat(self.chat_template(), as_messages(prompt))
        )

    def _eos_token_ids(self) -> set[int]:
        """Tokens that end a generation: the model's generation config, else the tokenizer's EOS."""
        config = getattr(self.model, "generation_config", None)
        ids = getattr(config, "eos_token_id", None)
        if ids is None:
            ids = self.tokenizer.eos_token_id
        if ids is None:
            return set()
        return {int(i) for i in ids} if isinstance(ids, list | tuple) else {int(ids)}


def _budget_bytes(args: HFArgs) -> int:
    """prefix_cache_mb in bytes (inf: no limit)."""
    mib = args.prefix_cache_mb
    return sys.maxsize if math.isinf(mib) else int(mib * 2**20)


@register_model("hf")
def hf(**model_args: Any) -> HuggingFaceLM:
    """`--model hf --model-args pretrained=DIR_OR_ID[,dtype=...,batch_size=auto,...]`.

    Arguments are checked before anything is loaded; see `HFArgs` for the full list.
    """
    return HuggingFaceLM(parse_hf_args(model_args))
