"""Loading a transformers causal LM and its tokenizer, with errors a person can act on."""

from __future__ import annotations

import hashlib
import inspect
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.errors import ConfigError, ModelError
from assay.models.hf.args import FROM_PRETRAINED, HFArgs

log = logging.getLogger(__name__)

DEFAULT_MAX_LENGTH = 2048
"""Context window used when neither the config nor the tokenizer states one (as lm-eval)."""
_TOKENIZER_UNSET_LENGTH = 1e29
"""Tokenizers without a limit report a huge model_max_length (about 1e30)."""
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


@dataclass
class Loaded:
    """A ready model, its tokenizer and facts derived from them."""

    model: Any
    tokenizer: Any
    device: Any
    max_length: int
    fingerprint: str
    """Hash of the checkpoint files (or the hub commit), so re-saved weights change identity."""


@dataclass
class ModelFiles:
    """What a model's light files hold: its config and tokenizer (no weights)."""

    config: Any
    tokenizer: Any


def read_files(args: HFArgs) -> ModelFiles:
    """The model's config (checked to be a causal LM) and tokenizer; ModelError on any failure."""
    _check_source(args.pretrained, "pretrained")
    if args.tokenizer:
        _check_source(args.tokenizer, "tokenizer")
    if args.peft:
        _check_source(args.peft, "peft")
    config = _guarded(
        "read the model config of", args.pretrained, _load_config, args.pretrained, args
    )
    _check_causal(config, args.pretrained)
    _check_config_overrides(config, args)
    tokenizer = _guarded(
        "load the tokenizer of",
        args.tokenizer or args.pretrained,
        _load_tokenizer,
        args.tokenizer or args.pretrained,
        args,
    )
    return ModelFiles(config, tokenizer)


def load(args: HFArgs) -> Loaded:
    """Load tokenizer, model (and adapter) onto the chosen device; ModelError on any failure."""
    import torch

    device = _pick_device(args.device)
    check_quantization(args)
    placement = placement_kwargs(args, device)  # a bad quantization_config fails here, early
    _use_physical_cores(device)
    files = read_files(args)
    config, tokenizer = files.config, files.tokenizer
    dtype = "auto" if args.dtype == "auto" else getattr(torch, args.dtype)
    model = _guarded(
        "load the weights of",
        args.pretrained,
        _load_model,
        args.pretrained,
        args,
        dtype,
        device,
        placement,
    )
    if args.parallelize or args.device_map or args.quantized:
        # accelerate placed the weights: inputs go where the first layers are.
        device = model.device
    if args.delta:
        _guarded("add the delta weights of", args.delta, _apply_delta, model, args, dtype)
    if args.peft:
        model = _guarded("apply the PEFT adapter", args.peft, _apply_peft, model, tokenizer, args)
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    configure_pad_token(tokenizer)
    return Loaded(
        model=model,
        tokenizer=tokenizer,
        device=device,
        max_length=args.max_length or resolve_max_length(model.config, tokenizer),
        fingerprint=fingerprint(args, config),
    )


def resolve_max_length(config: Any, tokenizer: Any) -> int:
    """Context window from the (text) config, then the tokenizer, then 2048, as lm-eval does."""
    cfg = getattr(config, "text_config", None) or config
    for attr in ("n_positions", "max_position_embeddings", "n_ctx"):
        value = getattr(cfg, attr, None)
        if value is not None:
            return int(value)
    limit = getattr(tokenizer, "model_max_length", None)
    if limit is not None and limit < _TOKENIZER_UNSET_LENGTH:
        return int(limit)
    return DEFAULT_MAX_LENGTH


def _pick_device(requested: str | None) -> Any:
    import torch

    if requested is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    kind = requested.split(":")[0]
    available = {
        "cpu": True,
        "cuda": torch.cuda.is_available(),
        "mps": torch.backends.mps.is_available(),
        "xpu": hasattr(torch, "xpu") and torch.xpu.is_available(),
        "npu": hasattr(torch, "npu") and torch.npu.is_available(),
    }
    if not available.get(kind, False):
        raise ModelError(
            f"--model hf: device={requested!r} is not available on this machine; "
            "use device=cpu or leave device unset."
        )
    return torch.device(requested)


def _check_source(source: str, arg: str) -> None:
    """A path that is not a directory and cannot be a hub id fails here, before any loading."""
    path = Path(source).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ModelError(f"--model hf: {arg}={source!r} is a file; give the model directory.")
        return
    if source.startswith((".", "/", "~")) or not _HUB_ID.match(source):
        raise ModelError(
            f"--model hf: {arg}={source!r}: no such directory. Give a directory written by "
            "save_pretrained() or a Hugging Face Hub id such as EleutherAI/pythia-160m."
        )


def _guarded(action: str, source: str, fn: Any, *args: Any) -> Any:
    """Run a loading step; turn the library's exceptions into one ModelError naming the source."""
    try:
        return fn(*args)
    except ModelError:
        raise
    except ImportError as exc:
        raise ModelError(
            f"--model hf: could not {action} {source!r}: {exc}. "
            "Install the extra with: pip install 'assay[hf]'."
        ) from exc
    except Exception as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = ""
        if "trust_remote_code" in str(exc):
            hint = (
                " This checkpoint ships its own code: add trust_remote_code=true if you trust it."
            )
        elif Path(source).is_dir():
            hint = (
                " Check that the directory was written by save_pretrained() "
                "(config.json, weights, tokenizer files) and is complete."
            )
        else:
            hint = (
                f" {source!r} is not a local directory, so it was looked up on the Hugging Face "
                "Hub; check the id, the revision and your network (or HF_HUB_OFFLINE cache)."
            )
        raise ModelError(f"--model hf: could not {action} {source!r}: {detail}.{hint}") from exc


def _load_config(source: str, args: HFArgs) -> Any:
    from transformers import AutoConfig

    if Path(source).is_dir() and not (Path(source) / "config.json").is_file():
        raise ModelError(
            f"--model hf: {source!r} has no config.json; give a directory written by "
            "save_pretrained()."
        )
    return AutoConfig.from_pretrained(
        source, revision=args.revision, trust_remote_code=args.trust_remote_code, **_located(args)
    )


def _located(args: HFArgs) -> dict[str, Any]:
    """Where in the source the checkpoint is: subfolder, GGUF file (when given)."""
    return {k: v for k, v in (("subfolder", args.subfolder), ("gguf_file", args.gguf_file)) if v}


def _check_config_overrides(config: Any, args: HFArgs) -> None:
    """Model args passed on to from_pretrained must be its keywords or settings of this
    model's config: transformers would otherwise store a typo on the config unnoticed."""
    unknown = [
        k
        for k in (args.from_pretrained or {})
        if k not in FROM_PRETRAINED and not hasattr(config, k)
    ]
    if unknown:
        raise ConfigError(
            f"--model hf: unknown model arg(s) {', '.join(map(repr, unknown))}: neither an hf "
            "backend argument, a from_pretrained keyword "
            f"({', '.join(sorted(FROM_PRETRAINED))}) nor a setting of {args.pretrained!r}'s "
            f"config ({type(config).__name__})."
        )


def _check_causal(config: Any, source: str) -> None:
    from transformers.models.auto.modeling_auto import MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES

    if getattr(config, "model_type", None) in MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES:
        raise ModelError(
            f"--model hf: {source!r} is an encoder-decoder ({config.model_type}); this backend "
            "evaluates decoder-only (causal) language models."
        )


def _load_tokenizer(source: str, args: HFArgs) -> Any:
    from transformers import AutoTokenizer

    kwargs: dict[str, Any] = {
        "revision": args.revision,
        "trust_remote_code": args.trust_remote_code,
        "use_fast": args.use_fast_tokenizer,
        **_located(args),
    }
    if args.add_bos_token is not None:
        # Passed at construction, as lm-eval does, so the tokenizer's post-processor follows it.
        kwargs["add_bos_token"] = args.add_bos_token
    return AutoTokenizer.from_pretrained(source, **kwargs)


def _load_model(
    source: str, args: HFArgs, dtype: Any, device: Any, placement: dict[str, Any]
) -> Any:
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {
        "revision": args.revision,
        "trust_remote_code": args.trust_remote_code,
        "dtype": dtype,
    }
    if args.attn_implementation is not None:
        kwargs["attn_implementation"] = args.attn_implementation
    kwargs.update(_located(args))
    kwargs.update(args.from_pretrained or {})
    kwargs.update(placement)
    model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    return model if "device_map" in kwargs else model.to(device)


def placement_kwargs(args: HFArgs, device: Any) -> dict[str, Any]:
    """from_pretrained's device_map and quantization_config for the model args.

    parallelize=true shards over every visible GPU as lm-eval does (accelerate's "auto");
    device_map names another accelerate strategy; otherwise the whole model goes to `device`.
    """
    kwargs: dict[str, Any] = {}
    if args.parallelize or args.device_map:
        kwargs["device_map"] = args.device_map or "auto"
        kwargs.update(_spill(args))
    elif device.type != "cpu" or args.quantized:
        kwargs["device_map"] = {"": str(device)}
    if args.quantized:
        from transformers import BitsAndBytesConfig
        from transformers.quantizers import AutoQuantizationConfig

        settings = dict(args.quantization_config or {args.quantized: True})
        if "quant_method" in settings:
            kwargs["quantization_config"] = AutoQuantizationConfig.from_dict(settings)
        else:
            # BitsAndBytesConfig takes **kwargs and ignores names it does not know: refuse them.
            known = set(inspect.signature(BitsAndBytesConfig.__init__).parameters) - {"self"}
            unknown = sorted(set(settings) - known)
            if unknown:
                raise ConfigError(
                    f"--model hf: quantization_config has {', '.join(map(repr, unknown))}, which "
                    f"bitsandbytes does not take; it takes {', '.join(sorted(known - {'kwargs'}))}."
                )
            kwargs["quantization_config"] = BitsAndBytesConfig(**settings)
    return kwargs


def _spill(args: HFArgs) -> dict[str, Any]:
    """lm-eval's parallelize limits: max_memory per visible GPU and for the CPU, and the
    folder of weights offloaded to disk."""
    import torch

    memory: dict[Any, str] = {}
    if args.max_memory_per_gpu is not None:
        memory.update(dict.fromkeys(range(torch.cuda.device_count()), args.max_memory_per_gpu))
    if args.max_cpu_memory is not None:
        memory["cpu"] = args.max_cpu_memory
    kwargs: dict[str, Any] = {"max_memory": memory} if memory else {}
    if args.offload_folder is not None:
        kwargs["offload_folder"] = args.offload_folder
    return kwargs


def _apply_delta(model: Any, args: HFArgs, dtype: Any) -> None:
    """Add the delta checkpoint's weights to the model's, parameter by parameter (lm-eval's
    delta)."""
    from transformers import AutoModelForCausalLM

    assert args.delta is not None
    delta = AutoModelForCausalLM.from_pretrained(
        args.delta, revision=args.revision, dtype=dtype, trust_remote_code=args.trust_remote_code
    )
    weights = delta.state_dict()
    for name, param in model.state_dict().items():
        if name not in weights:
            raise ModelError(f"--model hf: delta={args.delta!r} has no weights for {name!r}.")
        param.data += weights[name].to(param.device)


def check_quantization(args: HFArgs) -> None:
    """bitsandbytes quantization needs a CUDA GPU and the package: refuse before loading."""
    name = args.quantized
    if name is None or (args.quantization_config or {}).get("quant_method", "bitsandbytes") != (
        "bitsandbytes"
    ):
        return
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            f"--model hf: {name} quantizes with bitsandbytes, which needs a CUDA GPU; this "
            "machine has none. Drop it (dtype=bfloat16 halves memory on CPU)."
        )
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ConfigError(
            f"--model hf: {name} needs the bitsandbytes package: pip install bitsandbytes."
        )


def _apply_peft(model: Any, tokenizer: Any, args: HFArgs) -> Any:
    from peft import PeftModel

    config = getattr(model.config, "text_config", None) or model.config
    if getattr(config, "vocab_size", len(tokenizer)) != len(tokenizer):
        # Adapters trained with added tokens need the embedding resized first (as lm-eval does).
        model.resize_token_embeddings(len(tokenizer))
    return PeftModel.from_pretrained(model, args.peft, revision=args.revision)


def configure_pad_token(tokenizer: Any) -> None:
    """Pick a pad token as lm-eval does (pad, else unk, else eos, else a new '<|pad|>')."""
    if tokenizer.pad_token_id is not None:
        return
    if tokenizer.unk_token is not None:
        tokenizer.pad_token_id = tokenizer.unk_token_id
    elif tokenizer.eos_token is not None:
        tokenizer.pad_token_id = tokenizer.eos_token_id
    else:
        tokenizer.add_special_tokens({"pad_token": "<|pad|>"})


def _use_physical_cores(device: Any) -> None:
    """One intra-op thread per physical core: hyper-threads slow matrix multiplies down."""
    if device.type != "cpu" or "OMP_NUM_THREADS" in os.environ:
        return
    import torch

    try:
        import psutil

        cores = psutil.cpu_count(logical=False)
    except ImportError:
        cores = None
    cores = cores or os.cpu_count() or 1
    if torch.get_num_threads() != cores:
        torch.set_num_threads(cores)


def fingerprint(args: HFArgs, config: Any) -> str:
    """What the weights are: the hub commit, or names, sizes and mtimes of local files."""
    digest = hashlib.sha256()
    for source in (args.pretrained, args.tokenizer, args.peft, args.delta):
        if not source:
            continue
        path = Path(source).expanduser()
        if path.is_dir():
            for file in sorted(p for p in path.rglob("*") if p.is_file()):
                stat = file.stat()
                digest.update(
                    f"{file.relative_to(path)}:{stat.st_size}:{stat.st_mtime_ns};".encode()
                )
        else:
            commit = getattr(config, "_commit_hash", None) if source == args.pretrained else None
            digest.update(f"{source}@{commit or args.revision};".encode())
    return digest.hexdigest()[:16]
