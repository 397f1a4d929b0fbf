"""--model-args of the transformers backend: parsed and checked before anything is loaded."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from assay.errors import ConfigError
from assay.models.args import REQUIRED, Arg, AutoOrCount, BatchSize, typed_args

DTYPES = ("auto", "float32", "bfloat16", "float16")


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


def _dtype(value: str) -> str:
    return value.strip().lower().removeprefix("torch.")


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
}


def parse_hf_args(raw: Mapping[str, Any]) -> HFArgs:
    """Check names, types and combinations of `raw` (strings or Python values) and build HFArgs.

    Values set to None count as not given. Every problem raises ConfigError naming the argument.
    """
    given = {k: v for k, v in raw.items() if v is not None}
    args = HFArgs(**typed_args("hf", given, HF_ARGS))
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
    return args
