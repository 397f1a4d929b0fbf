"""`--model hf` known from its config and tokenizer files, without its weights.

The run reads the model's identity from it before any weight loads (an output folder written
by another model is refused first, the response cache is looked up under it) and loads the
weights only for a request the cache cannot answer. Each field is derived as loading derives
it: the dtype, the attention implementation and the parameter count from a skeleton of the
model built on torch's meta device (transformers resolves them there as it does when loading,
and allocates no weight), the context window, the weights fingerprint and the chat template
from the config and the files. What a skeleton cannot tell is not guessed: a PEFT adapter,
quantization, code shipped with the checkpoint, dtype=auto with a config that names no dtype
(transformers then reads it from the weights) and modules kept in float32 leave no stand-in,
and the run loads the model first, as before.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

from assay.models.base import ModelProvenance, TokenCounter, Unloaded
from assay.models.hf.args import HFArgs
from assay.models.hf.identity import chat_template_of, dtype_name, identity_of, provenance_of
from assay.models.hf.load import configure_pad_token, fingerprint, read_files, resolve_max_length
from assay.models.hf.prefix import loaded_attention
from assay.models.tokens import TokenizerView
from assay.prompts.chat import TokenizerChatTemplate

log = logging.getLogger(__name__)


class UnloadedHF(Unloaded):
    """A `--model hf` model as its files describe it: the identity, provenance, chat template,
    token counts and context window of the loaded model, and no weights."""

    accepts_tools = True
    """As the loaded `hf` model: the chat template's own tool support."""

    def __init__(
        self,
        args: HFArgs,
        tokenizer: Any,
        max_length: int,
        known: dict[str, Any],
        provenance: ModelProvenance,
    ) -> None:
        self.args, self.tokenizer = args, tokenizer
        self.max_length = max_length
        self.batch_size = args.batch_size
        self._identity, self._provenance = known, provenance
        self._view = TokenizerView(tokenizer, args.add_bos_token, args.prefix_token_id)

    @classmethod
    def read(cls, args: HFArgs) -> UnloadedHF | None:
        """The stand-in for the model `args` load, or None when its files cannot tell what
        loading would (the reason is logged at debug level)."""
        reason = _needs_weights(args)
        if reason is not None:
            log.debug("--model hf: %s: its identity is read once it has loaded", reason)
            return None
        files = read_files(args)
        configure_pad_token(files.tokenizer)
        skeleton = _skeleton(args, files.config)
        if skeleton is None:
            return None
        dtype = dtype_name(next(skeleton.parameters()).dtype)
        max_length = args.max_length or resolve_max_length(files.config, files.tokenizer)
        known = identity_of(
            args,
            dtype=dtype,
            max_length=max_length,
            attention=loaded_attention(skeleton),
            weights=fingerprint(args, files.config),
        )
        provenance = provenance_of(
            args,
            files.tokenizer,
            sha=getattr(files.config, "_commit_hash", None),
            dtype=dtype,
            num_parameters=sum(p.numel() for p in skeleton.parameters()),
            max_length=max_length,
        )
        return cls(args, files.tokenizer, max_length, known, provenance)

    def identity(self) -> dict[str, Any]:
        """The loaded model's identity (the response cache's key)."""
        return dict(self._identity)

    def provenance(self) -> ModelProvenance:
        """What results files record of the loaded model."""
        return ModelProvenance(**self._provenance)

    def chat_template(self) -> TokenizerChatTemplate:
        """The tokenizer's chat template, as the loaded model renders it."""
        return chat_template_of(self.args, self.tokenizer)

    def token_counter(self) -> TokenCounter:
        """Tokens of each text as the loaded model encodes a prompt."""
        return lambda texts: [len(ids) for ids in self._view.encode(texts)]


def _needs_weights(args: HFArgs) -> str | None:
    """Why the model must load before its identity is known, or None when its files tell."""
    if args.peft:
        return "peft adapters change the parameters"
    if args.quantized:
        return f"{args.quantized} changes the parameters as they load"
    if args.trust_remote_code:
        return "code shipped with the checkpoint builds the model"
    return None


def _skeleton(args: HFArgs, config: Any) -> Any | None:
    """The model built on the meta device as `args` load it (dtype, attention), or None when
    that is not how loading would resolve it."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype: Any = args.dtype
    if dtype == "auto":
        dtype = getattr(config, "dtype", None)
        if dtype is None:
            log.debug("--model hf: dtype=auto and the config names none: read from the weights")
            return None
    kwargs: dict[str, Any] = {"dtype": getattr(torch, dtype) if isinstance(dtype, str) else dtype}
    if args.attn_implementation is not None:
        kwargs["attn_implementation"] = args.attn_implementation
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(copy.deepcopy(config), **kwargs)
    except Exception as exc:  # loading reports the problem, with its own message
        log.debug("--model hf: no skeleton of the model (%s): it loads first", exc)
        return None
    if getattr(model, "_keep_in_fp32_modules", None) or getattr(
        model, "_keep_in_fp32_modules_strict", None
    ):
        log.debug("--model hf: modules kept in float32 are placed as the weights load")
        return None
    if _tied_but_stored(args, model):
        log.debug("--model hf: tied weights stored apart are tied only when their values agree")
        return None
    return model


def _tied_but_stored(args: HFArgs, skeleton: Any) -> bool:
    """Whether a weight the config ties to another (the output embedding to the input one)
    may be stored apart in the checkpoint: transformers then ties the two only when their
    values agree, which only loading tells. A local checkpoint's safetensors headers say
    whether it is; a hub checkpoint is taken to store a tied weight once, as
    save_pretrained writes it."""
    tied = {name for name, _ in skeleton.named_parameters(remove_duplicate=False)}
    tied -= {name for name, _ in skeleton.named_parameters()}
    folder = Path(args.pretrained).expanduser()
    if not tied or not folder.is_dir():
        return False
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return True  # other formats name their tensors only once loaded
    from safetensors import safe_open

    stored: set[str] = set()
    for file in files:
        with safe_open(str(file), framework="pt") as handle:  # reads the header only
            stored.update(handle.keys())
    return bool(tied & stored)
