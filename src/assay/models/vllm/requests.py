"""`--model vllm` arguments and request translation, as pure functions that need no vLLM.

Everything here runs (and is tested) on a machine without vLLM or a GPU: which keyword
arguments build the engine, which SamplingParams each request gets, and how prompt
log-probabilities become a loglikelihood.

Over 500 lines and still one job: the translation of assay's requests into vLLM's calls,
kept whole so that it is tested, without vLLM, as one surface.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from assay.errors import ConfigError, ModelError
from assay.images import IMAGE_PLACEHOLDER, DocImage, replace_placeholders
from assay.models._decoding import decoding_of
from assay.models.args import REQUIRED, Arg, AutoOrCount, BatchSize, typed_args
from assay.models.spans import ScoredSpan
from assay.models.thinking import thinking_args
from assay.prompts.chat import RESERVED_TEMPLATE_ARGS
from assay.requests.types import FinishReason, GenerateRequest

VLLM_ARGS: dict[str, Arg] = {
    "pretrained": Arg(str, REQUIRED),
    "revision": Arg(str, None, nullable=True),
    "tokenizer": Arg(str, None, nullable=True),
    "dtype": Arg(str, "auto"),
    "trust_remote_code": Arg(bool, False),
    "tensor_parallel_size": Arg(int, 1, minimum=1),
    "data_parallel_size": Arg(int, 1, minimum=1),
    "gpu_memory_utilization": Arg(float, 0.9, minimum=0.01),
    "max_model_len": Arg(int, None, nullable=True, minimum=3),
    "enable_prefix_caching": Arg(bool, True),
    "enforce_eager": Arg(bool, False),
    "quantization": Arg(str, None, nullable=True),
    "seed": Arg(int, 1234, nullable=True),
    "add_bos_token": Arg(bool, None, nullable=True),
    "chat_template_args": Arg(dict, None, nullable=True),
    "engine_args": Arg(dict, None, nullable=True),
    "batch_size": Arg(AutoOrCount, "auto"),
    "max_images": Arg(int, None, nullable=True, minimum=1),
    "image_token": Arg(str, IMAGE_PLACEHOLDER),
    "think_end_token": Arg(str, None, nullable=True),
    "think_start_token": Arg(str, None, nullable=True),
    "thinking_budget": Arg(int, None, nullable=True, minimum=0),
    "enable_thinking": Arg(bool, None, nullable=True),
    "tokenizer_mode": Arg(str, "auto"),
    "tokenizer_revision": Arg(str, None, nullable=True),
    "prefix_token_id": Arg(int, None, nullable=True, minimum=0),
    "max_batch_size": Arg(int, None, nullable=True, minimum=1),
    "lora_local_path": Arg(str, None, nullable=True),
    "max_lora_rank": Arg(int, 16, minimum=1),
    "tool_parser": Arg(str, None, nullable=True, choices=("hermes", "llama3", "mistral")),
}

REFUSED: dict[str, str] = {
    "max_gen_toks": "assay takes the generation length from the task, or from --gen_kwargs "
    "max_gen_toks=N, which wins over the task's (as in lm-eval); give it there",
    "device": "vLLM does not read it (lm-eval ignores it with a warning): choose the GPUs with "
    "CUDA_VISIBLE_DEVICES; drop device (or the --device flag, which sets it)",
    "swap_space": "vLLM no longer has it (lm-eval ignores it with a warning); drop it",
}
"""lm-eval vllm model args assay refuses, with the reason and what to use instead."""

SCORING_PARAMS: dict[str, Any] = {
    "temperature": 0.0,
    "max_tokens": 1,
    "prompt_logprobs": 1,
    "detokenize": False,
}
"""SamplingParams of a scoring call: the prompt's log-probabilities, plus one ignored token
(vLLM generates at least one), each position also reporting its most likely token. vLLM does not
read its prefix cache for such a request unless told (`skip_reading_prefix_cache` defaults to
True when `prompt_logprobs` is set). `detokenize` stays off: positions found cached may hold
arbitrary token ids (see `prompt_logprob_score`), which vLLM would otherwise try to decode."""

CACHED_SCORING_PARAMS: dict[str, Any] = {**SCORING_PARAMS, "skip_reading_prefix_cache": False}
"""SCORING_PARAMS for a span no prefix-cache hit can reach the scored part of
(`reads_prefix_cache`): vLLM reads the cached blocks of its context and computes the rest."""


@dataclass(frozen=True, slots=True)
class VLLMArgs:
    """Parsed `--model vllm` arguments."""

    pretrained: str
    """Model id or directory."""
    revision: str | None
    tokenizer: str | None
    """Tokenizer id or directory, if not the model's."""
    dtype: str
    trust_remote_code: bool
    tensor_parallel_size: int
    """GPUs per model replica."""
    data_parallel_size: int
    """Model replicas, each one engine loaded once; the harness runs them on its Ray executor
    (`VLLMLM.replica_plan`), which hands each idle replica the next chunk of requests."""
    gpu_memory_utilization: float
    max_model_len: int | None
    """Context window in tokens; None takes the engine's."""
    enable_prefix_caching: bool
    """Reuse the KV cache of shared prompt prefixes (multiple-choice contexts)."""
    enforce_eager: bool
    quantization: str | None
    seed: int | None
    """Engine seed, and the default seed of sampled generations."""
    add_bos_token: bool | None
    """Whether encoded text starts with BOS; None follows the tokenizer (as the hf backend)."""
    chat_template_args: dict[str, Any] | None
    """Extra keyword arguments of the tokenizer's apply_chat_template (e.g. enable_thinking)."""
    engine_args: dict[str, Any] | None
    """Further keyword arguments of vllm.LLM, passed as they are."""
    batch_size: BatchSize
    """Requests per engine call (each call's results are committed to the cache); "auto" hands
    the engine chunks of the executor's default size, which keeps its continuous batching full."""
    max_images: int | None
    """Images per prompt, at most (vLLM's `limit_mm_per_prompt`); the first ones are kept.
    None: vLLM's default limit."""
    image_token: str
    """What each `<image>` placeholder becomes in the prompt text: the model's image token
    (`<image>` for LLaVA-style models, which vLLM expands to the image's features)."""
    think_end_token: str | None
    """End of a reasoning model's thinking (`</think>`): the thinking is kept apart from the
    answer, which stop strings then apply to alone (they are not sent to the engine)."""
    think_start_token: str | None
    """Start of the thinking (`models.thinking.Thinking.start`)."""
    thinking_budget: int | None
    """Thinking tokens allowed: a generation that thought for more counts as unclosed."""
    enable_thinking: bool | None
    """Passed to chat templates that take it (Qwen3's `enable_thinking`)."""
    tokenizer_mode: str
    """vLLM's tokenizer_mode (auto, slow ...); slow also loads assay's tokenizer as the Python
    one, as lm-eval's vllm backend does."""
    tokenizer_revision: str | None
    """Hub revision of the tokenizer (lm-eval's; default the hub's main)."""
    prefix_token_id: int | None
    """Token that stands for an empty context (default BOS, else EOS), as lm-eval's."""
    max_batch_size: int | None
    """vLLM's max_num_seqs (sequences per engine step), as lm-eval passes it."""
    lora_local_path: str | None
    """A LoRA adapter directory applied to every request (lm-eval's: enable_lora on the engine,
    one LoRARequest)."""
    max_lora_rank: int
    """vLLM's max_lora_rank when lora_local_path is given."""
    tool_parser: str | None
    """How tool calls are read from generated text (hermes, llama3, mistral); None: the one
    the chat template's own tool format calls for (`models.template_tools`)."""

    def template_args(self) -> dict[str, Any] | None:
        """Keyword arguments of the chat template: `chat_template_args`, and
        `enable_thinking` when given."""
        if self.enable_thinking is None:
            return self.chat_template_args
        return {**(self.chat_template_args or {}), "enable_thinking": self.enable_thinking}


def parse_vllm_args(model_args: Mapping[str, Any]) -> VLLMArgs:
    """Checked, converted arguments; a ConfigError names any invalid one.

    lm-eval's names are taken with lm-eval's meaning (`max_length` is `max_model_len`); a name
    that is no argument here is a `vllm.LLM` keyword, passed on as lm-eval passes its **kwargs
    (checked against vLLM's EngineArgs when the engine starts), unless it looks like a typo of
    one of ours.
    """
    given = {k: v for k, v in model_args.items() if v is not None}
    for name, why in REFUSED.items():
        if name in given:
            raise ConfigError(f"--model vllm: model arg {name}={given[name]!r}: {why}.")
    side = str(given.pop("truncation_side", "left")).strip().lower()
    if side != "left":
        raise ConfigError(
            f"--model vllm: model arg truncation_side={side!r}: assay cuts long prompts from the "
            "left (lm-eval's default) in every backend, so scores do not depend on the backend; "
            "give truncation_side=left or drop it."
        )
    if "max_length" in given:
        if "max_model_len" in given:
            raise ConfigError(
                "--model vllm: max_length and max_model_len are both given; give one "
                "(max_length is lm-eval's other name of max_model_len)."
            )
        given["max_model_len"] = given.pop("max_length")
    passed = {k: given.pop(k) for k in list(given) if k not in VLLM_ARGS}
    _refuse_typos(passed)
    if passed:
        repeated = sorted(set(passed) & set(given.get("engine_args") or {}))
        if repeated:
            raise ConfigError(
                f"--model vllm: {', '.join(repeated)} given both as model args and in "
                "engine_args; give each once."
            )
        engine = given.get("engine_args") or {}
        if isinstance(engine, str):
            import json

            try:
                engine = json.loads(engine)
            except json.JSONDecodeError:
                engine = None
        if not isinstance(engine, dict):
            raise ConfigError(
                f"--model vllm: engine_args={given['engine_args']!r} is not a JSON object; "
                "give engine_args='{\"name\": value}' or the names as model args."
            )
        given["engine_args"] = {**engine, **passed}
    args = VLLMArgs(**typed_args("vllm", given, VLLM_ARGS))
    named = {k for k, v in _named_engine_kwargs(args).items() if v is not None}
    clashes = sorted(set(args.engine_args or {}) & (named | set(VLLM_ARGS)))
    if clashes:
        raise ConfigError(
            f"--model vllm: engine_args (or a vllm.LLM keyword given as a model arg) repeats "
            f"{', '.join(clashes)}, which a model arg of the backend sets; set each once."
        )
    reserved = sorted(RESERVED_TEMPLATE_ARGS & set(args.chat_template_args or {}))
    if reserved:
        raise ConfigError(
            f"--model vllm: chat_template_args sets {', '.join(reserved)}, which the chat template "
            "renderer sets itself; drop them (a final assistant message is continued, any other "
            "conversation gets the generation prompt)."
        )
    if args.enable_thinking is not None and "enable_thinking" in (args.chat_template_args or {}):
        raise ConfigError(
            "--model vllm: enable_thinking is given both as a model arg and in "
            "chat_template_args; give it once."
        )
    if args.enable_thinking and args.think_end_token is None:
        raise ConfigError(
            "--model vllm: enable_thinking=true needs think_end_token=<the marker that ends the "
            "thinking, e.g. </think>>: without it the thinking would be scored as the answer."
        )
    thinking_args("vllm", args.think_end_token, args.think_start_token, args.thinking_budget)
    return args


def _refuse_typos(passed: Mapping[str, Any]) -> None:
    """A pass-through name close to one of the backend's own is taken as its typo."""
    import difflib

    for name in passed:
        close = difflib.get_close_matches(name, list(VLLM_ARGS), n=1, cutoff=0.8)
        if close:
            raise ConfigError(
                f"--model vllm: unknown model arg(s) {name!r}; did you mean {close[0]!r}? "
                f"Valid: {', '.join(VLLM_ARGS)}, or any vllm.LLM keyword (they pass through)."
            )


def engine_kwargs(args: VLLMArgs) -> dict[str, Any]:
    """Keyword arguments of `vllm.LLM(...)` for one model replica."""
    kwargs = {k: v for k, v in _named_engine_kwargs(args).items() if v is not None}
    kwargs.update(args.engine_args or {})
    # The engine's metrics hold the prefix-cache counters results.json reports (engine_args
    # may still turn them off).
    kwargs.setdefault("disable_log_stats", False)
    return kwargs


def _named_engine_kwargs(args: VLLMArgs) -> dict[str, Any]:
    named: dict[str, Any] = {
        "model": args.pretrained,
        "tokenizer": args.tokenizer or args.pretrained,
        "revision": args.revision,
        "dtype": args.dtype,
        "trust_remote_code": args.trust_remote_code,
        "tensor_parallel_size": args.tensor_parallel_size,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "max_model_len": args.max_model_len,
        "enable_prefix_caching": args.enable_prefix_caching,
        "enforce_eager": args.enforce_eager,
        "quantization": args.quantization,
        "seed": args.seed,
        "tokenizer_mode": None if args.tokenizer_mode == "auto" else args.tokenizer_mode,
        "tokenizer_revision": args.tokenizer_revision,
        "max_num_seqs": args.max_batch_size,
    }
    if args.lora_local_path is not None:
        named["enable_lora"] = True
        named["max_lora_rank"] = args.max_lora_rank
    if args.max_images is not None:
        named["limit_mm_per_prompt"] = {"image": args.max_images}
    return named


def image_prompt_text(text: str, images: Sequence[DocImage], args: VLLMArgs) -> str:
    """A prompt's text with its `<image>` placeholders as the model's image token: the first
    `max_images` of them; later ones stay as text, or vanish when the image token is `<image>`
    itself (lm-eval's `replace_placeholders`).

    A prompt without any placeholder is left as written: the model's vLLM processor places its
    images (BLIP-2 and PaliGemma put them before the text; a model that needs placeholders,
    such as LLaVA, is refused by the engine). A ModelError when there are placeholders but
    they do not pair up one to one with the images: vLLM matches each image to an image token.
    """
    found = text.count(IMAGE_PLACEHOLDER)
    if found == 0:
        return text
    if found != len(images):
        raise ModelError(
            f"--model vllm: a prompt has {found} {IMAGE_PLACEHOLDER} placeholder(s) for "
            f"{len(images)} image(s); each image needs its own {IMAGE_PLACEHOLDER} in the prompt "
            "(or none, for models whose processor places the images)."
        )
    return replace_placeholders(text, args.image_token, _kept(images, args))


def multi_modal_data(images: Sequence[DocImage], args: VLLMArgs) -> dict[str, Any] | None:
    """vLLM's `multi_modal_data` of a prompt: its first `max_images` images, decoded (None for a
    text prompt)."""
    kept = images[: _kept(images, args)]
    return {"image": [image.load() for image in kept]} if kept else None


def _kept(images: Sequence[DocImage], args: VLLMArgs) -> int:
    return len(images) if args.max_images is None else min(args.max_images, len(images))


_DECODED_HERE = (
    "assay decodes the generated token ids itself, with the tokenizer, as the hf backend does "
    "(so both give the same text); drop it"
)
REFUSED_SAMPLING: dict[str, str] = {
    "n": "several texts per request: give the task repeats instead",
    "best_of": "several texts per request: give the task repeats instead",
    "stop": "stop strings are `until` (lm-eval's name, which lm-eval's vllm passes as stop)",
    "detokenize": _DECODED_HERE,
    "output_kind": "assay reads each request's final output",
    "skip_special_tokens": _DECODED_HERE,
    "spaces_between_special_tokens": _DECODED_HERE,
    "include_stop_str_in_output": _DECODED_HERE,
}
"""vLLM SamplingParams settings a --gen_kwargs entry may not set, with the reason."""


def generation_params(
    request: GenerateRequest, default_seed: int | None, *, send_stops: bool = True
) -> dict[str, Any]:
    """SamplingParams keyword arguments of one generation request.

    vLLM takes any number of stop strings, so all of them stop the engine; the text is still
    cut afterwards, as every backend does. Without `send_stops` (a reasoning model, whose stop
    strings apply to the answer alone) none is sent. `GenParams.extra` entries pass through
    unchanged; parameters marked `as_given` are exactly the SamplingParams arguments.
    """
    if request.params.as_given:
        return dict(request.params.extra)
    refused = [k for k, _ in request.params.extra if k in REFUSED_SAMPLING]
    if refused:
        raise ModelError(
            "--model vllm: generation argument(s) "
            + "; ".join(f"{k}: {REFUSED_SAMPLING[k]}" for k in refused)
            + ". Other SamplingParams settings (repetition_penalty, min_p, presence_penalty ...) "
            "pass to vLLM as lm-eval passes them."
        )
    decoding = decoding_of(request, default_seed)
    params: dict[str, Any] = {
        "max_tokens": request.params.max_gen_toks,
        "temperature": decoding.temperature,
    }
    if decoding.top_p is not None:
        params["top_p"] = decoding.top_p
    if decoding.top_k is not None:
        params["top_k"] = decoding.top_k
    if decoding.seed is not None:
        params["seed"] = decoding.seed
    if decoding.stops and send_stops:
        params["stop"] = list(decoding.stops)
    params.update(dict(request.params.extra))
    return params


class EngineGeneration(NamedTuple):
    """What vLLM's `CompletionOutput` says of one generation."""

    token_ids: list[int]
    finish_reason: str | None
    """vLLM's: "stop", "length" or "abort"."""
    stop_reason: str | int | None
    """The stop string (str) or token id (int) that ended it; None: end of sequence."""

    def ending(self) -> FinishReason | None:
        """The finish reason as a Generation says it: "stop_sequence" when a stop string
        ended it, "stop" at a stop token or the end of sequence, "length" at max_tokens;
        None for an aborted request."""
        if self.finish_reason == "length":
            return "length"
        if self.finish_reason == "stop":
            return "stop_sequence" if isinstance(self.stop_reason, str) else "stop"
        return None


PromptLogprobs = Sequence[Mapping[int, float] | None]
"""Per prompt position, token id to log-probability (the first position has none)."""


@dataclass(frozen=True, slots=True)
class PromptScores:
    """vLLM's answer to one scoring prompt."""

    logprobs: list[dict[int, float] | None]
    """Per prompt position, token id to log-probability (which positions hold real values:
    `prompt_logprob_score`)."""
    cached: int | None
    """Prompt tokens vLLM read from its prefix cache instead of computing them (its
    `num_cached_tokens`); None when it did not say."""


def reads_prefix_cache(span: ScoredSpan, block_size: int | None) -> bool:
    """Whether a span can be scored exactly with vLLM's prefix cache read
    (`CACHED_SCORING_PARAMS`): no cache hit can cover the position whose logits score the first
    continuation token (`n_context - 1`).

    vLLM computes prompt log-probabilities only for the positions it runs. A hit is whole blocks
    of `block_size` tokens and stops at least one token short of the prompt (vLLM 0.32,
    `KVCacheManager.get_computed_blocks`: `max_cache_hit_length = request.num_tokens - 1`), so it
    covers at most `(len - 1) // block_size * block_size` tokens, whatever is cached and even
    after a preemption. False when the prefix cache is off (`block_size` None). Single-token
    continuations (multiple-choice letters) qualify unless the context is a whole number of
    blocks; a longer continuation, unless a block boundary falls inside it.
    """
    if block_size is None:
        return False
    longest_hit = (len(span.input_ids) - 1) // block_size * block_size
    return longest_hit <= span.n_context - 1


def continuation_computed(span: ScoredSpan, cached: int | None) -> bool:
    """Whether vLLM, having read `cached` prompt tokens from its prefix cache, computed every
    scored position of the span (False when it did not say how many it read)."""
    return cached is not None and cached <= span.n_context - 1


def prompt_logprob_score(
    prompt_logprobs: PromptLogprobs,
    span: ScoredSpan,
    expanded: bool = False,
    cached: int | None = None,
) -> tuple[float, bool]:
    """(sum of log-probabilities, is greedy) of a span's scored tokens.

    Each scored position's entry holds the prompt token and the most likely token; the span is
    greedy when every prompt token is the most likely one at its position. `expanded`: the
    prompt carried images, which vLLM expands into many tokens inside the context, so the
    scored tokens are the last entries rather than the span's own positions.

    `cached`: the prompt was sent to read vLLM's prefix cache (`CACHED_SCORING_PARAMS`), and
    vLLM says it read that many tokens. Positions read from the cache get no computed
    log-probability: vLLM 0.32's V1 model runner (`GPUModelRunner._get_prompt_logprobs_dict`,
    which the CPU build uses) leaves them as the uninitialised memory of `torch.empty`, its V2
    runner (`PromptLogprobsWorker`) leaves them out of the list. Either way the scored tokens
    are the last entries, which must all have been computed (a ValueError otherwise). A V2 list
    can be shorter than `cached` says: a request preempted in its prefill starts again from the
    hit it then finds, which `num_cached_tokens` does not report; so the list may lack any of the
    context's positions but the last (`reads_prefix_cache` keeps every hit short of it).
    """
    n_ids = len(span.input_ids)
    if cached is not None and not continuation_computed(span, cached):
        raise ValueError(
            f"vLLM read {cached} prompt tokens from its prefix cache, which leaves the "
            f"log-probability of prompt position {span.n_context} uncomputed"
        )
    fewest = n_ids if cached is None else n_ids - span.n_context + 1
    if len(prompt_logprobs) < fewest or (cached is not None and len(prompt_logprobs) > n_ids):
        raise ValueError(
            f"vLLM returned {len(prompt_logprobs)} prompt log-probabilities for {n_ids} tokens"
        )
    # The entries' offset from the span's positions: images' expansion (more), or cached
    # positions left out (fewer).
    shift = len(prompt_logprobs) - n_ids if expanded or cached is not None else 0
    total, greedy = 0.0, True
    for position in range(span.n_context, n_ids):
        entry = prompt_logprobs[position + shift]
        token = span.input_ids[position]
        if not entry or token not in entry:
            raise ValueError(f"vLLM returned no log-probability for prompt position {position}")
        total += entry[token]
        greedy = greedy and max(entry, key=entry.__getitem__) == token
    return total, greedy


def prompt_order(spans: Sequence[ScoredSpan]) -> list[int]:
    """Indices of `spans` sorted by token ids, so spans sharing a prefix run back to back.

    Neighbours with a common context then hit vLLM's prefix cache while it is still warm, and a
    contiguous split across replicas keeps them on the same replica.
    """
    return token_order([span.input_ids for span in spans])


def token_order(prompts: Sequence[Sequence[int]]) -> list[int]:
    """Indices of token-id prompts in lexicographic order: prompts sharing a prefix (a task's
    few-shot examples, one subject's description) become neighbours, which is what lets
    vLLM's automatic prefix caching find their blocks still cached."""
    return sorted(range(len(prompts)), key=lambda i: tuple(prompts[i]))


def prefix_leaders(prompts: Sequence[Sequence[int]]) -> list[int]:
    """Indices of one prompt per shared prefix (the first of each), to run before the others.

    vLLM caches a prompt's blocks only once they are computed: prompts scheduled in the same step
    all compute their shared prefix. Running one prompt per prefix first lets the rest find it
    cached. Prompts sharing fewer than `hf.prefix.MIN_SHARED_TOKENS` tokens with any other lead
    nothing.
    """
    from assay.models.hf.prefix import shared_cuts

    leaders: dict[tuple[int, ...], int] = {}
    for i, cut in enumerate(shared_cuts(prompts)):
        if cut:
            leaders.setdefault(tuple(prompts[i][:cut]), i)
    return sorted(leaders.values())
