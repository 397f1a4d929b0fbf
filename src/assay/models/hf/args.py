"""--model-args of the transformers backend: parsed and checked before anything is loaded."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from assay.errors import ConfigError
from assay.models.args import REQUIRED, Arg, AutoOrCount, BatchSize, refuse_unknown, typed_args

DTYPES = ("auto", "float32", "bfloat16", "float16")
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")


@dataclass(frozen=True, slots=True)
class HFArgs:
    """Validated model arguments of `--model hf`."""

    pretrained: str
    """Local directory or Hugging Face Hub id of a causal language model."""
    revision: str = "main"
    """Hub branch, tag or commit (ignored for local directories)."""
    tokenizer: str | None = None
    """Tokenizer directory or id, when it differs from `pretrained`."""
    dtype: str = "auto"
    """Weight dtype: auto (as saved), float32, bfloat16 or float16."""
    device: str | None = None
    """cpu, cuda, cuda:N or mps; default cuda when available, else cpu."""
    trust_remote_code: bool = False
    """Allow model code shipped with the checkpoint to run."""
    max_length: int | None = None
    """Context window in tokens; default from the model config (2048 if it has none)."""
    add_bos_token: bool | None = None
    """Force adding (True) or not adding (False) BOS; default: the tokenizer's own behaviour."""
    peft: str | None = None
    """Directory or id of a PEFT adapter applied on top of the weights."""
    attn_implementation: str | None = None
    """transformers' attention kernel (eager, sdpa, flash_attention_2...); default its choice.
    Only eager and sdpa take the masks that let a question's choices share their context."""
    batch_size: BatchSize = 1
    """Rows per forward pass, or "auto" to size batches from free memory."""
    max_batch_size: int = 64
    """Upper bound for automatically sized batches."""
    parallelize: bool = False
    """Shard the model over every visible GPU through accelerate (device_map="auto"), as
    lm-eval's parallelize=True."""
    device_map: str | None = None
    """accelerate's placement (auto, balanced, balanced_low_0, sequential); implies sharding."""
    load_in_4bit: bool = False
    """Quantize the weights to 4 bits with bitsandbytes (CUDA only)."""
    load_in_8bit: bool = False
    """Quantize the weights to 8 bits with bitsandbytes (CUDA only)."""
    quantization_config: dict[str, Any] | None = None
    """transformers quantization settings (JSON), e.g. {"load_in_4bit": true,
    "bnb_4bit_compute_dtype": "bfloat16"}; a "quant_method" key picks another method."""
    think_end_token: str | int | None = None
    """End of a reasoning model's thinking (text or token id): generated text up to and
    including its last occurrence is the thinking, kept apart from the answer that stop
    strings, filters and metrics see (docs/reasoning-models.md)."""
    think_start_token: str | None = None
    """Start of the thinking: given, a generation thinks only when it starts with it or its
    prompt ends with it (a template that opens the block); default: every generation is taken
    to start in thinking once think_end_token is set, as lm-eval assumes."""
    thinking_budget: int | None = None
    """Thinking tokens allowed: a generation that thinks for more is counted as unclosed."""
    tool_parser: str | None = None
    """How tool calls are read from generated text (hermes, llama3, mistral); None: the one
    the chat template's own tool format calls for."""
    enable_thinking: bool | None = None
    """Passed to chat templates that take it (Qwen3's `enable_thinking`); needs
    think_end_token when true."""
    prefix_cache: bool = True
    """Compute a token prefix shared by several docs (few-shot examples, a description) once
    and continue every doc from its key/value cache; false recomputes it for every doc."""
    prefix_cache_mb: float = 1024.0
    """Memory (MiB, on the model's device) that cached prefixes may hold; the least recently
    used are dropped beyond it."""
    backend: str = "default"
    """lm-eval's model class choice: default and causal load a decoder-only model."""
    use_fast_tokenizer: bool = True
    """The fast (Rust) tokenizer, as lm-eval; false loads the Python one."""
    subfolder: str | None = None
    """Folder of the checkpoint inside the repository or directory."""
    delta: str | None = None
    """Directory or id of delta weights, added to `pretrained`'s (lm-eval's delta)."""
    prefix_token_id: int | None = None
    """Token that stands for an empty context (default BOS, else EOS), as lm-eval's."""
    max_memory_per_gpu: str | None = None
    """parallelize: memory per GPU for the weights ("10GiB" or bytes), as lm-eval's."""
    max_cpu_memory: str | None = None
    """parallelize: CPU memory the weights may spill to."""
    offload_folder: str | None = None
    """parallelize: folder of weights offloaded to disk."""
    gguf_file: str | None = None
    """A GGUF file in `pretrained` to load (dequantized by transformers)."""
    chat_template_args: dict[str, Any] | None = None
    """Keyword arguments of the chat template (JSON), as lm-eval's."""
    from_pretrained: dict[str, Any] | None = None
    """Other model args: transformers' from_pretrained keywords (low_cpu_mem_usage, variant,
    cache_dir ...) or config overrides of this model, passed on as lm-eval passes them."""

    @property
    def quantized(self) -> str | None:
        """The model arg that asks for quantization, if any."""
        for name in ("load_in_4bit", "load_in_8bit", "quantization_config"):
            if getattr(self, name):
                return name
        return None


DTYPE_ALIASES = {"half": "float16", "float": "float32", "bf16": "bfloat16", "fp16": "float16"}
"""Other names of the dtypes: torch's attribute aliases (lm-eval's `dtype=half` is
`getattr(torch, "half")`) and the usual short forms."""


def _dtype(value: str) -> str:
    name = value.strip().lower().removeprefix("torch.")
    return DTYPE_ALIASES.get(name, name)


def _token(value: str) -> str | int:
    """A token id given as digits (lm-eval's rule), else the token's text."""
    return int(value) if value.strip().isdigit() else value


def _mebibytes(value: float) -> float:
    if math.isnan(value):
        raise ValueError(value)
    return value


def _device(value: str) -> str:
    device = value.strip().lower()
    kind, _, index = device.partition(":")
    if kind not in ("cpu", "cuda", "mps", "xpu", "npu") or (index and not index.isdigit()):
        raise ValueError(value)
    return device


HF_ARGS: dict[str, Arg] = {
    "pretrained": Arg(str, REQUIRED),
    "revision": Arg(str, "main"),
    "tokenizer": Arg(str, None, nullable=True),
    "dtype": Arg(str, "auto", choices=DTYPES, normalise=_dtype),
    "device": Arg(str, None, nullable=True, normalise=_device, expected="cpu, cuda, cuda:N or mps"),
    "trust_remote_code": Arg(bool, False),
    "max_length": Arg(int, None, nullable=True, minimum=1),
    "add_bos_token": Arg(bool, None, nullable=True),
    "peft": Arg(str, None, nullable=True),
    "attn_implementation": Arg(str, None, nullable=True),
    "batch_size": Arg(AutoOrCount, 1),
    "max_batch_size": Arg(int, 64, minimum=1),
    "parallelize": Arg(bool, False),
    "device_map": Arg(str, None, nullable=True, choices=DEVICE_MAPS),
    "load_in_4bit": Arg(bool, False),
    "load_in_8bit": Arg(bool, False),
    "quantization_config": Arg(dict, None, nullable=True),
    "think_end_token": Arg(str, None, nullable=True, normalise=_token),
    "think_start_token": Arg(str, None, nullable=True),
    "thinking_budget": Arg(int, None, nullable=True, minimum=0),
    "enable_thinking": Arg(bool, None, nullable=True),
    "tool_parser": Arg(str, None, nullable=True, choices=("hermes", "llama3", "mistral")),
    "prefix_cache": Arg(bool, True),
    "prefix_cache_mb": Arg(
        float, 1024.0, minimum=0, normalise=_mebibytes, expected="a number of MiB, 0 or more"
    ),
    "backend": Arg(str, "default", choices=("default", "causal"), normalise=str.lower),
    "use_fast_tokenizer": Arg(bool, True),
    "subfolder": Arg(str, None, nullable=True),
    "delta": Arg(str, None, nullable=True),
    "prefix_token_id": Arg(int, None, nullable=True, minimum=0),
    "max_memory_per_gpu": Arg(str, None, nullable=True),
    "max_cpu_memory": Arg(str, None, nullable=True),
    "offload_folder": Arg(str, None, nullable=True),
    "gguf_file": Arg(str, None, nullable=True),
    "chat_template_args": Arg(dict, None, nullable=True),
}


def _refuse_typos(passed: Mapping[str, Any]) -> None:
    """A pass-through name close to one of the hf backend's own is taken as its typo."""
    import difflib

    typos = {
        name: value
        for name, value in passed.items()
        if name not in FROM_PRETRAINED
        and difflib.get_close_matches(name, list(HF_ARGS), n=1, cutoff=0.8)
    }
    refuse_unknown("hf", typos, list(HF_ARGS))


def identity_kwargs(args: HFArgs) -> dict[str, Any]:
    """The from_pretrained pass-through that can change what the model computes."""
    return {k: v for k, v in (args.from_pretrained or {}).items() if k not in _LOADING_ONLY}


REFUSED: dict[str, str] = {
    "autogptq": "transformers loads GPTQ checkpoints itself (their config.json carries the "
    "quantization_config, read with the gptqmodel package): drop autogptq and give the GPTQ "
    "checkpoint as pretrained",
    "gptqmodel": "transformers loads GPTQ checkpoints through the gptqmodel package itself: "
    "drop gptqmodel and give the GPTQ checkpoint as pretrained",
    "tp_plan": "tensor parallelism needs torchrun's process group; shard with parallelize=true "
    "or device_map=auto, or run the vllm backend with tensor_parallel_size",
    "mixed_precision_dtype": "assay runs the model in the dtype it loads (dtype=...); autocast "
    "would make scores depend on kernels chosen per batch shape",
}
"""lm-eval hf model args assay refuses, with the reason and what to use instead."""

_NEUTRAL: dict[str, tuple[Any, str]] = {
    "logits_cache": (None, "assay reuses shared prefixes itself (prefix_cache)"),
    "truncation": (False, "assay left-truncates prompts to max_length, as lm-eval by default"),
    "softmax_dtype": ("float32", "assay computes log-probabilities in float32 always"),
}
"""lm-eval hf model args accepted with the value that is assay's behaviour (None: any)."""

_LOADING_ONLY = frozenset(
    {"cache_dir", "force_download", "local_files_only", "token", "proxies", "low_cpu_mem_usage",
     "offload_state_dict", "offload_buffers", "disable_mmap", "weights_only", "use_safetensors"}
)  # fmt: skip
"""from_pretrained keywords that change where and how weights are read, not what they are."""
FROM_PRETRAINED = _LOADING_ONLY | {
    "variant", "key_mapping", "ignore_mismatched_sizes", "use_kernels", "experts_implementation",
    "generation_config",
}  # fmt: skip
"""transformers' from_pretrained keywords a model arg may carry (besides config overrides)."""


def parse_hf_args(raw: Mapping[str, Any]) -> HFArgs:
    """Check names, types and combinations of `raw` (strings or Python values) and build HFArgs.

    Values set to None count as not given. Every problem raises ConfigError naming the argument.
    lm-eval's names are taken with lm-eval's meaning (`torch_dtype` is `dtype`); a name that is
    no argument here is passed to from_pretrained (checked against the model's config when it
    loads), unless it looks like a typo of one.
    """
    given = {k: v for k, v in raw.items() if v is not None}
    for name, why in REFUSED.items():
        if name in given and given[name] not in (False, "false", "False", 0):
            raise ConfigError(f"--model hf: model arg {name}={given[name]!r}: {why}.")
        given.pop(name, None)
    for name, (value, why) in _NEUTRAL.items():
        if name in given and value is not None and str(given[name]).lower() != str(value).lower():
            raise ConfigError(
                f"--model hf: model arg {name}={given[name]!r}: {why}; give {name}={value} or "
                "drop it."
            )
        given.pop(name, None)
    if "torch_dtype" in given:
        if "dtype" in given and str(given["dtype"]) != str(given["torch_dtype"]):
            raise ConfigError(
                f"--model hf: dtype={given['dtype']!r} and torch_dtype={given['torch_dtype']!r} "
                "disagree; give one (torch_dtype is transformers' older name of dtype)."
            )
        given["dtype"] = given.pop("torch_dtype")
    if str(given.get("backend", "default")).lower() == "seq2seq":
        raise ConfigError(
            "--model hf: backend=seq2seq: the hf backend evaluates decoder-only (causal) models; "
            "give backend=causal or drop it."
        )
    passed = {k: given.pop(k) for k in list(given) if k not in HF_ARGS}
    _refuse_typos(passed)
    args = HFArgs(**typed_args("hf", given, HF_ARGS), from_pretrained=passed or None)
    if not args.pretrained.strip():
        raise ConfigError(
            "--model hf needs pretrained=<model directory or hub id>, "
            "e.g. --model-args pretrained=EleutherAI/pythia-160m."
        )
    if isinstance(args.batch_size, int) and args.batch_size > args.max_batch_size:
        raise ConfigError(
            f"--model hf: batch_size={args.batch_size} is larger than max_batch_size="
            f"{args.max_batch_size}; max_batch_size only bounds batch_size=auto, so drop it or "
            "raise it."
        )
    if args.delta and args.peft:
        raise ConfigError(
            f"--model hf: delta={args.delta!r} and peft={args.peft!r} both change the weights; "
            "give one (lm-eval refuses the pair too): merge the adapter or the delta first."
        )
    spill = [n for n in ("max_memory_per_gpu", "max_cpu_memory", "offload_folder") if given.get(n)]
    if spill and not args.parallelize:
        raise ConfigError(
            f"--model hf: {spill[0]} applies to parallelize=true (as in lm-eval); add it."
        )
    sharded = args.parallelize or args.device_map is not None
    if sharded and args.device is not None:
        raise ConfigError(
            f"--model hf: device={args.device} and "
            f"{'parallelize=true' if args.parallelize else 'device_map=' + str(args.device_map)} "
            "both place the model; sharding puts it on every visible GPU, so drop one of them."
        )
    chosen = [n for n in ("load_in_4bit", "load_in_8bit", "quantization_config") if given.get(n)]
    if len(chosen) > 1:
        raise ConfigError(
            f"--model hf: {' and '.join(chosen)} both ask for quantization; give one "
            "(quantization_config can carry load_in_4bit or load_in_8bit)."
        )
    if args.enable_thinking and args.think_end_token is None:
        raise ConfigError(
            "--model hf: enable_thinking=true needs think_end_token=<the marker that ends the "
            "thinking, e.g. </think>>: without it the thinking would be scored as the answer."
        )
    return args
