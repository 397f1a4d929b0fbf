"""--model-args of the transformers backend: parsed and checked before anything is loaded."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, fields
from typing import Any

from assay.errors import ConfigError
from assay.models._arg_types import BatchSize, to_batch_size

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


VALID_ARGS = tuple(f.name for f in fields(HFArgs))


def parse_hf_args(raw: dict[str, Any]) -> HFArgs:
    """Check names, types and combinations of `raw` (strings or Python values) and build HFArgs.

    Values set to None count as not given. Every problem raises ConfigError naming the argument.
    """
    given = {k: v for k, v in raw.items() if v is not None}
    unknown = sorted(set(given) - set(VALID_ARGS))
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, VALID_ARGS, n=1)
            hints.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
        raise ConfigError(
            f"--model hf: unknown model arg {', '.join(hints)}. "
            f"Valid model args: {', '.join(VALID_ARGS)}."
        )
    if "pretrained" not in given or not str(given["pretrained"]).strip():
        raise ConfigError(
            "--model hf needs pretrained=<model directory or hub id>, "
            "e.g. --model-args pretrained=EleutherAI/pythia-160m."
        )
    args = HFArgs(
        pretrained=_text(given, "pretrained"),
        revision=_text(given, "revision", "main"),
        tokenizer=_text(given, "tokenizer", None),
        dtype=_choice(given, "dtype", DTYPES, "auto"),
        device=_device(given),
        trust_remote_code=_bool(given, "trust_remote_code", False),
        max_length=_positive_int(given, "max_length", None),
        add_bos_token=_bool(given, "add_bos_token", None),
        peft=_text(given, "peft", None),
        attn_implementation=_text(given, "attn_implementation", None),
        batch_size=_batch_size(given),
        max_batch_size=_positive_int(given, "max_batch_size", 64),
    )
    if isinstance(args.batch_size, int) and args.batch_size > args.max_batch_size:
        raise ConfigError(
            f"--model hf: batch_size={args.batch_size} is larger than max_batch_size="
            f"{args.max_batch_size}; max_batch_size only bounds batch_size=auto, so drop it or "
            "raise it."
        )
    return args


def _text(given: dict[str, Any], name: str, default: Any = ...) -> Any:
    if name not in given:
        return default
    value = given[name]
    if not isinstance(value, str | int | float):
        raise ConfigError(f"--model hf: {name} must be a string, got {type(value).__name__}.")
    return str(value)


def _choice(given: dict[str, Any], name: str, choices: tuple[str, ...], default: str) -> str:
    value = str(given.get(name, default)).strip().lower()
    if value.startswith("torch."):
        value = value[len("torch.") :]
    if value not in choices:
        raise ConfigError(f"--model hf: {name}={given[name]!r} is not one of {', '.join(choices)}.")
    return value


def _bool(given: dict[str, Any], name: str, default: bool | None) -> bool | None:
    if name not in given:
        return default
    value = given[name]
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"--model hf: {name}={value!r} must be true or false.")


def _positive_int(given: dict[str, Any], name: str, default: int | None) -> int | None:
    if name not in given:
        return default
    value = given[name]
    try:
        number = int(str(value).strip()) if not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None or number < 1:
        raise ConfigError(f"--model hf: {name}={value!r} must be a positive whole number.")
    return number


def _batch_size(given: dict[str, Any]) -> BatchSize:
    value = given.get("batch_size", 1)
    try:
        return to_batch_size(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"--model hf: batch_size={value!r} must be a positive whole number or 'auto'."
        ) from None


def _device(given: dict[str, Any]) -> str | None:
    if "device" not in given:
        return None
    value = str(given["device"]).strip().lower()
    kind, _, index = value.partition(":")
    if kind not in ("cpu", "cuda", "mps", "xpu", "npu") or (index and not index.isdigit()):
        raise ConfigError(
            f"--model hf: device={given['device']!r} is not a device; use cpu, cuda, cuda:N or mps."
        )
    return value
