"""What identifies a `--model hf` model and what results files record of it.

One function each, used by the loaded backend (`hf.model`) and by its weightless stand-in
(`hf.unloaded`), so the two write the same fields in the same order; only where each value
comes from differs (the loaded model, or the config and the arguments).
"""

from __future__ import annotations

from typing import Any

from assay.models.base import ModelProvenance
from assay.models.hf.args import HFArgs, identity_kwargs
from assay.prompts.chat import TokenizerChatTemplate, template_sha256


def identity_of(
    args: HFArgs, *, dtype: str, max_length: int, attention: str | None, weights: str
) -> dict[str, Any]:
    """The response cache's key for the model: `dtype` as torch names it without "torch.",
    `attention` the implementation as loaded, `weights` the checkpoint fingerprint."""
    thinking = ("think_start_token", "thinking_budget", "enable_thinking", "tool_parser")
    return {
        "backend": "hf",
        "pretrained": args.pretrained,
        "revision": args.revision,
        "tokenizer": args.tokenizer,
        "peft": args.peft,
        "dtype": dtype,
        "max_length": max_length,
        "add_bos_token": args.add_bos_token,
        "attn_implementation": attention,
        "weights": weights,
        # Only when set, so caches written before the arguments existed stay valid.
        **({"think_end_token": args.think_end_token} if args.think_end_token else {}),
        **{n: getattr(args, n) for n in thinking if getattr(args, n) is not None},
        **({} if args.use_fast_tokenizer else {"use_fast_tokenizer": False}),
        **{n: getattr(args, n) for n in _LOADED_AS if getattr(args, n) is not None},
        **({"from_pretrained": kwargs} if (kwargs := identity_kwargs(args)) else {}),
    }


_LOADED_AS = ("subfolder", "delta", "gguf_file", "prefix_token_id", "chat_template_args")
"""lm-eval's hf args that change what the model computes or is asked, in its identity when
set (so caches written before they existed stay valid)."""


def provenance_of(
    args: HFArgs,
    tokenizer: Any,
    *,
    sha: str | None,
    dtype: str,
    num_parameters: int,
    max_length: int,
) -> ModelProvenance:
    """Model id, revision and hub commit, dtype, parameter count, tokenizer and template."""
    return {
        "backend": "hf",
        "model": args.pretrained,
        "revision": args.revision,
        "sha": sha,
        "dtype": dtype,
        "num_parameters": num_parameters,
        "tokenizer": args.tokenizer or args.pretrained,
        "chat_template_sha256": template_sha256(tokenizer),
        "max_length": max_length,
        "add_bos_token": args.add_bos_token,
    }


def chat_template_of(args: HFArgs, tokenizer: Any) -> TokenizerChatTemplate:
    """The tokenizer's chat template (BOS included when the template writes it), with
    enable_thinking passed when given."""
    enable = args.enable_thinking
    return TokenizerChatTemplate(
        tokenizer,
        missing=f"--model hf: the tokenizer of {args.tokenizer or args.pretrained!r} "
        "has no chat template; run without a chat template or use an instruction-tuned "
        "model's tokenizer (tokenizer=...).",
        template_args={
            **(args.chat_template_args or {}),
            **({} if enable is None else {"enable_thinking": enable}),
        },
    )


def dtype_name(dtype: Any) -> str:
    """A torch dtype as identities record it ("bfloat16", not "torch.bfloat16")."""
    return str(dtype).removeprefix("torch.")
