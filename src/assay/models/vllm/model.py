"""`--model vllm`: the vLLM engine (optional extra `assay[vllm]`).

Every call hands its whole request list to the engine at once (vLLM schedules and batches
continuously), unlike lm-eval, whose CLI sends one request per engine call unless told
`batch_size=auto`. A call's list is one executor chunk: `batch_size=N` requests, or with
`auto` (the default) the executor's default chunk, which is larger than vLLM's default
max_num_seqs; each chunk's results are committed to the cache as it returns. Loglikelihoods
come from prompt log-probabilities; scoring spans are sent in token order so that choices sharing
a context (and docs sharing a task's description and few-shot examples) hit the prefix cache
(`enable_prefix_caching`, on by default). vLLM does not read its prefix cache for prompt
log-probabilities unless told, since it computes them only for the positions it runs; a span is
told to when no cache hit can reach its continuation (`reads_prefix_cache`), so every scored
position is still computed, and the numbers are those of an uncached run. Tokenisation,
truncation and rolling windows follow the hf backend, so the numbers mean the same.

Docs with images go to the engine as `multi_modal_data` beside the token-id prompt, whose `<image>`
placeholders became the model's `image_token`; vLLM expands each into the image's features.
`max_images` sets vLLM's `limit_mm_per_prompt` and keeps each prompt's first images.

A reasoning model's thinking (`think_end_token`, `think_start_token`, `thinking_budget`,
`enable_thinking` for its chat template) is split from the generated token ids as the hf
backend splits it (`models.thinking_tokens`); each generation's finish reason is vLLM's
(`CompletionOutput.finish_reason` and `stop_reason`), its token counts those of its
`token_ids`.

`data_parallel_size=N` asks for N replicas of the model (`replica_plan`); the harness runs them
on its Ray executor (`execution.ray`), the one place that owns Ray actors: each actor builds this
backend with one engine on `tensor_parallel_size` GPUs, loads the model once and keeps it, and
takes the executor's chunks, the same chunks one engine would get. (lm-eval reloads the model in
fresh Ray tasks on every call.) `tensor_parallel_size` is vLLM's own. The engine glue is in
`engine.py`, argument and request translation in `requests.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from assay.errors import ConfigError, ModelError
from assay.images import IMAGE_PLACEHOLDER, DocImage
from assay.models.base import LM, ModelProvenance, ReplicaPlan, TokenCounter, register_model
from assay.models.spans import ScoredSpan, loglikelihood_spans, rolling_spans
from assay.models.template_tools import read_calls, tool_parser, tool_prompt
from assay.models.thinking import thinking_args
from assay.models.thinking_tokens import TokenThinking, tokens_generation
from assay.models.tokens import TokenizerView
from assay.models.vllm.engine import (
    Engine,
    LocalEngine,
    MultiModalData,
    load_tokenizer,
    require_vllm,
)
from assay.models.vllm.requests import (
    CACHED_SCORING_PARAMS,
    SCORING_PARAMS,
    EngineGeneration,
    VLLMArgs,
    continuation_computed,
    generation_params,
    image_prompt_text,
    multi_modal_data,
    parse_vllm_args,
    prefix_leaders,
    prompt_logprob_score,
    prompt_order,
    reads_prefix_cache,
    token_order,
)
from assay.prompts.chat import TokenizerChatTemplate, as_messages, render_chat, template_sha256
from assay.requests.tools import is_conversation, plain_prompt
from assay.requests.types import (
    GenerateRequest,
    Generation,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    Messages,
    RollingRequest,
    RollingResult,
)

log = logging.getLogger(__name__)

_UNCUT = 1 << 62
"""A token budget no prompt reaches: encode without cutting."""


class VLLMLM(LM):
    """vLLM behind assay's LM protocol.

    `engine` and `tokenizer` are normally built from `args`; passing them runs the backend on
    another engine with the same interface (tests do, on machines without vLLM).
    """

    accepts_images = True
    accepts_tools = True
    """Tools go through the chat template's own tool support; calls are read from the text by
    `tool_parser`, as on the hf backend (`models.template_tools`)."""

    def __init__(self, args: VLLMArgs, engine: Engine | None = None, tokenizer: Any = None) -> None:
        if args.data_parallel_size > 1:
            # Replicas are started by the executor factory (see replica_plan), never here.
            raise ConfigError(
                f"--model vllm: data_parallel_size={args.data_parallel_size} asks for replicas, "
                "which the harness starts on its Ray executor: pass the model by name "
                "(assay run --model vllm, evaluate(model='vllm', ...)), or build this object "
                "with data_parallel_size=1."
            )
        self.args = args
        if engine is None:
            require_vllm()
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(args)
        self._view = TokenizerView(self.tokenizer, args.add_bos_token, args.prefix_token_id)
        self.engine = engine if engine is not None else LocalEngine(args)
        self.max_length: int = args.max_model_len or self.engine.max_model_len
        self.batch_size = args.batch_size
        self._thinking = self._token_thinking()
        eos = self.tokenizer.eos_token_id
        self._eos_ids: set[int] = set() if eos is None else {int(eos)}

    @classmethod
    def replica_plan(cls, model_args: Mapping[str, Any]) -> ReplicaPlan | None:
        """`data_parallel_size=N` (N > 1): N one-engine replicas on `tensor_parallel_size`
        GPUs each."""
        args = parse_vllm_args(model_args)
        if args.data_parallel_size == 1:
            return None
        return ReplicaPlan(
            replicas=args.data_parallel_size,
            gpus_per_replica=float(args.tensor_parallel_size),
            replica_args={**model_args, "data_parallel_size": 1},
            asked_by=f"data_parallel_size={args.data_parallel_size}",
        )

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """log P(continuation | context) and greediness, from prompt log-probabilities."""
        texts = [
            replace(r, context=image_prompt_text(r.context, r.images, self.args)) if r.images else r
            for r in requests
        ]
        try:
            spans = loglikelihood_spans(self._view, texts, self.max_length - 1)
        except ValueError as exc:
            raise ModelError(f"--model vllm: {exc} (max_model_len={self.max_length}).") from None
        for span, request in zip(spans, texts, strict=True):
            if request.images and loglikelihood_spans(self._view, [request], _UNCUT)[0] != span:
                raise self._cut_images()
        images = [r.images for r in requests]
        scores = self._score([[s] for s in spans], images)
        return [LoglikelihoodResult(*parts[0]) for parts in scores]

    def loglikelihood_rolling(self, requests: Sequence[RollingRequest]) -> list[RollingResult]:
        """Total log P(text) over disjoint windows of max_model_len - 2 tokens (as lm-eval's vLLM)."""
        per_request = rolling_spans(self._view, requests, self.max_length - 2)
        return [
            RollingResult(sum(lp for lp, _ in parts), sum(s.n_scored for s in spans))
            for parts, spans in zip(self._score(per_request), per_request, strict=True)
        ]

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        """A Generation per request: the text cut at its stop strings, a reasoning model's
        thinking apart, how it ended and its token counts (two engine calls: one prompt per
        shared prefix, then the rest)."""
        texts = [self._request_text(r) for r in requests]
        prompts: list[list[int]] = []
        thinks = self._thinking is not None
        params = [generation_params(r, self.args.seed, send_stops=not thinks) for r in requests]
        for request, text, sampling in zip(requests, texts, params, strict=True):
            if request.params.fit_context:
                # The fit-context rule (GenParams.fit_context): the prompt stays whole and generates
                # the room it leaves, at most max_gen_toks.
                room = self.max_length - 1
            else:
                room = self.max_length - request.params.max_gen_toks
            if room < 1:
                raise ModelError(
                    f"--model vllm: max_gen_toks={request.params.max_gen_toks} leaves no room for "
                    f"the prompt in max_model_len={self.max_length}; lower max_gen_toks."
                )
            if not request.images:
                ids = self._view.encode_prompts([text], room)[0]
            else:
                ids = self._view.encode_prompts(
                    [image_prompt_text(text, request.images, self.args)], _UNCUT
                )[0]
                if len(ids) > room:
                    raise self._cut_images()
            if request.params.fit_context:
                sampling["max_tokens"] = min(
                    request.params.max_gen_toks, self.max_length - len(ids)
                )
            prompts.append(ids)
        # One prompt per shared prefix runs first, so the others find the prefix cached; then
        # the rest side by side in token order, as the engine's prefix cache serves them best.
        leaders = prefix_leaders(prompts) if self.args.enable_prefix_caching else []
        first = set(leaders)
        rest = [i for i in token_order(prompts) if i not in first]
        generated: list[EngineGeneration] = [EngineGeneration([], None, None)] * len(requests)
        for order in (leaders, rest):
            if not order:
                continue
            media = self._media([requests[i].images for i in order])
            sent = self.engine.generate(
                [prompts[i] for i in order], [params[i] for i in order], *media
            )
            for i, output in zip(order, sent, strict=True):
                generated[i] = output
        # Decoding here, as the hf backend does, keeps the texts identical: vLLM's incremental
        # detokenizer would hold back a trailing partial UTF-8 character that decode() renders.
        out = [
            tokens_generation(
                list(output.token_ids),
                output.ending(),
                r.params.until,
                view=self._view,
                eos_ids=self._eos_ids,
                thinking=self._thinking,
                opened=self._thinking is not None and self._thinking.thinking.opened_by(text),
            )
            for output, r, text in zip(generated, requests, texts, strict=True)
        ]
        return [
            read_calls(g, tool_parser(self.args.tool_parser, self.tokenizer, "vllm"))
            if r.tools
            else g
            for g, r in zip(out, requests, strict=True)
        ]

    def _request_text(self, request: GenerateRequest) -> str:
        """The prompt text of one request: through the chat template's tool support when it
        offers tools or carries a conversation, else as any prompt."""
        if request.tools or is_conversation(request.prompt):
            return tool_prompt(request, self.chat_template(), self.args.tool_parser, "vllm")
        return self._prompt_text(plain_prompt(request.prompt, "vllm"))

    def _token_thinking(self) -> TokenThinking | None:
        """The thinking markers of the model args, with their token ids when the tokenizer
        holds each as one token; None without think_end_token."""
        a = self.args
        thinking = thinking_args("vllm", a.think_end_token, a.think_start_token, a.thinking_budget)
        if thinking is None:
            return None
        return TokenThinking(
            thinking, self._single_token(thinking.end), self._single_token(thinking.start)
        )

    def _single_token(self, text: str | None) -> int | None:
        if text is None:
            return None
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return int(ids[0]) if len(ids) == 1 else None

    def chat_template(self) -> TokenizerChatTemplate:
        """The tokenizer's chat template, with `chat_template_args`."""
        return TokenizerChatTemplate(
            self.tokenizer,
            missing=f"--model vllm: the tokenizer of {self.args.tokenizer or self.args.pretrained!r} "
            "has no chat template; run without a chat template or pass tokenizer=...",
            template_args=self.args.template_args(),
        )

    def token_counter(self) -> TokenCounter:
        """Tokens of each text as a prompt is encoded (the hf backend's rules)."""
        return lambda texts: [len(ids) for ids in self._view.encode(texts)]

    def prefix_cache_stats(self) -> dict[str, int] | None:
        """vLLM's prefix-cache lookups and hits, in prompt tokens.

        Scoring prompts that may read the cache (`reads_prefix_cache`) and generation prompts
        count; the other scoring prompts skip the lookup (vLLM 0.32's
        `SamplingParams.skip_reading_prefix_cache`) and count as neither.
        """
        return self.engine.prefix_cache_counts()

    def provenance(self) -> ModelProvenance:
        """Model id, revision, dtype, tokenizer, template and window."""
        return {
            "backend": "vllm",
            "model": self.args.pretrained,
            "revision": self.args.revision,
            "dtype": self.args.dtype,
            "tokenizer": self.args.tokenizer or self.args.pretrained,
            "chat_template_sha256": template_sha256(self.tokenizer),
            "max_length": self.max_length,
            "add_bos_token": self.args.add_bos_token,
        }

    def identity(self) -> dict[str, Any]:
        """Everything that changes this backend's outputs (the response cache keys on it)."""
        a = self.args
        # Image settings only when changed, so that caches of text runs keep their keys.
        images: dict[str, Any] = {"max_images": a.max_images} if a.max_images is not None else {}
        if a.image_token != IMAGE_PLACEHOLDER:
            images["image_token"] = a.image_token
        return {
            "backend": "vllm",
            "pretrained": a.pretrained,
            "revision": a.revision,
            "tokenizer": a.tokenizer,
            "dtype": a.dtype,
            "quantization": a.quantization,
            "max_model_len": self.max_length,
            "tensor_parallel_size": a.tensor_parallel_size,
            "add_bos_token": a.add_bos_token,
            "seed": a.seed,
            "chat_template_args": a.chat_template_args or {},
            "engine_args": a.engine_args or {},
            **images,
            **self._thinking_identity(),
            **self._lm_eval_identity(),
            # Only when set, so that caches of runs without tools keep their keys.
            **({"tool_parser": a.tool_parser} if a.tool_parser is not None else {}),
        }

    def _lm_eval_identity(self) -> dict[str, Any]:
        """lm-eval's model args that change outputs, when set (unset ones leave earlier caches
        valid)."""
        a = self.args
        out: dict[str, Any] = {}
        if a.tokenizer_mode != "auto":
            out["tokenizer_mode"] = a.tokenizer_mode
        if a.tokenizer_revision is not None:
            out["tokenizer_revision"] = a.tokenizer_revision
        if a.prefix_token_id is not None:
            out["prefix_token_id"] = a.prefix_token_id
        if a.lora_local_path is not None:
            out["lora_local_path"] = a.lora_local_path
        return out

    def _thinking_identity(self) -> dict[str, Any]:
        """The thinking arguments that are set (unset ones leave earlier caches valid)."""
        names = ("think_end_token", "think_start_token", "thinking_budget", "enable_thinking")
        return {n: getattr(self.args, n) for n in names if getattr(self.args, n) is not None}

    def _score(
        self,
        per_request: list[list[ScoredSpan]],
        images: Sequence[tuple[DocImage, ...]] | None = None,
    ) -> list[list[tuple[float, bool]]]:
        """(logprob, is_greedy) of every span; each distinct (span, images) goes to the engine
        once. `images`: per request, the images its spans are scored with."""
        shown = images if images is not None else [()] * len(per_request)
        index: dict[tuple[ScoredSpan, tuple[DocImage, ...]], int] = {}
        for spans, pictures in zip(per_request, shown, strict=True):
            for span in spans:
                index.setdefault((span, pictures), len(index))
        unique = list(index)
        order = prompt_order([span for span, _ in unique])
        media = self._media([unique[i][1] for i in order])
        prompts = [list(unique[i][0].input_ids) for i in order]
        # Images are expanded inside the context, out of reach of the block arithmetic.
        block = self.engine.prefix_block_size
        reads = [not unique[i][1] and reads_prefix_cache(unique[i][0], block) for i in order]
        results = self.engine.prompt_logprobs(
            prompts, [CACHED_SCORING_PARAMS if r else SCORING_PARAMS for r in reads], *media
        )
        # A hit that reached the continuation all the same (a model whose hits are not whole
        # blocks) left its log-probabilities uncomputed: those prompts run again uncached.
        again = [
            k
            for k, i in enumerate(order)
            if reads[k] and not continuation_computed(unique[i][0], results[k].cached)
        ]
        if again:
            redone = self.engine.prompt_logprobs(
                [prompts[k] for k in again], [SCORING_PARAMS] * len(again)
            )
            for k, result in zip(again, redone, strict=True):
                results[k], reads[k] = result, False
        scores: list[tuple[float, bool]] = [(0.0, True)] * len(unique)
        for i, result, read in zip(order, results, reads, strict=True):
            span, pictures = unique[i]
            try:
                scores[i] = prompt_logprob_score(
                    result.logprobs,
                    span,
                    expanded=bool(pictures),
                    cached=result.cached if read else None,
                )
            except ValueError as exc:
                raise ModelError(f"--model vllm: {exc}.") from None
        return [
            [scores[index[(s, pictures)]] for s in spans]
            for spans, pictures in zip(per_request, shown, strict=True)
        ]

    def _media(self, images: list[tuple[DocImage, ...]]) -> tuple[list[MultiModalData], ...]:
        """The engine call's `media` argument: empty when no prompt has images (text engines are
        called as before), else per prompt its multi_modal_data."""
        if not any(images):
            return ()
        return ([multi_modal_data(pictures, self.args) for pictures in images],)

    def _cut_images(self) -> ModelError:
        """A prompt with images does not fit the window: cutting it (as text prompts are cut)
        could drop image tokens, and vLLM needs one per image."""
        return ModelError(
            f"--model vllm: a prompt with images is longer than max_model_len={self.max_length} "
            "allows (with its generation budget); it is not cut, since cutting could drop image "
            "tokens. Raise max_model_len or lower max_gen_toks."
        )

    def _prompt_text(self, prompt: str | Messages) -> str:
        if isinstance(prompt, str):
            return prompt
        return render_chat(self.chat_template(), as_messages(prompt))


@register_model("vllm")
def vllm(**model_args: Any) -> VLLMLM:
    """`--model vllm --model-args pretrained=ID_OR_DIR[,tensor_parallel_size=N,...]`.

    Arguments are checked before vLLM is imported; see `VLLMArgs` for the full list.
    """
    return VLLMLM(parse_vllm_args(model_args))
