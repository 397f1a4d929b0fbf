"""The config columns RapidFire puts at the head of each config's metrics.

``run_evals`` returns, per config, ``run_id``, ``model_name``, then the knobs under RapidFire's
names (`HEADER_KEYS`: ``text_splitter_cfg``, ``search_cfg``, ``reranker_cfg``,
``sampling_params``, ``prompt_manager_config``, ...), each ``{"value": ...}`` with JSON-friendly
values, so notebooks that read ``metrics["search_cfg"]["value"]["k"]`` or build a DataFrame of
values work unchanged. Secrets are never among them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assay.pipelines.configs.knobs import describe_value
from assay.util.redact import redact

HEADER_KEYS = (
    "text_splitter_cfg",
    "embedding_cfg",
    "vector_store_cfg",
    "search_cfg",
    "reranker_cfg",
    "sampling_params",
    "prompt_manager_config",
    "model_config",
    "endpoint_config",
    "client_config",
    "rpm_limit",
    "tpm_limit",
    "itpm_limit",
    "otpm_limit",
    "max_completion_tokens",
)
"""RapidFire's knob columns, in its order."""

_INSTRUCTIONS_PREVIEW = 60


def text_splitter_cfg(splitter: Any) -> dict[str, Any]:
    """Class, chunk settings and tokenizer of a LangChain text splitter.

    ``from_tiktoken_encoder`` and ``from_huggingface_tokenizer`` keep their tokenizer in the
    length function's closure; its name is added to the type (``...(tiktoken:gpt2)``).
    """
    name = type(splitter).__name__
    cfg: dict[str, Any] = {
        "type": name,
        "chunk_size": getattr(splitter, "_chunk_size", None),
        "chunk_overlap": getattr(splitter, "_chunk_overlap", None),
        "keep_separator": getattr(splitter, "_keep_separator", False),
        "add_start_index": getattr(splitter, "_add_start_index", False),
        "strip_whitespace": getattr(splitter, "_strip_whitespace", True),
    }
    length_function = getattr(splitter, "_length_function", None)
    closure = getattr(length_function, "__closure__", None) or ()
    names = getattr(getattr(length_function, "__code__", None), "co_freevars", ())
    captured = {}
    for var, cell in zip(names, closure):
        try:
            captured[var] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    if getattr(captured.get("enc"), "name", None):
        cfg["type"] = f"{name}(tiktoken:{captured['enc'].name})"
    elif getattr(captured.get("tokenizer"), "name_or_path", None):
        cfg["type"] = f"{name}(hf:{captured['tokenizer'].name_or_path})"
    return cfg


def _class_cfg(cfg: Any) -> Any:
    """``{"class": Cls, **kwargs}`` with the class by name (other values described)."""
    if not isinstance(cfg, Mapping):
        return describe_value(cfg)
    return {k: describe_value(v) for k, v in cfg.items()}


def rag_headers(rag: Any) -> dict[str, Any]:
    """RapidFire's RAG columns of a RAG spec."""
    params = rag.knob_params()
    out: dict[str, Any] = {}
    if params.get("text_splitter") is not None:
        out["text_splitter_cfg"] = text_splitter_cfg(params["text_splitter"])
    if params.get("embedding_cfg") is not None:
        out["embedding_cfg"] = _class_cfg(params["embedding_cfg"])
    if params.get("vector_store_cfg") is not None:
        out["vector_store_cfg"] = describe_value(params["vector_store_cfg"])
    out["search_cfg"] = describe_value(rag.search_settings())
    if params.get("reranker_cfg"):
        out["reranker_cfg"] = _class_cfg(params["reranker_cfg"])
    return out


def prompt_manager_config(manager: Any) -> dict[str, Any]:
    """k, an instructions preview, the selector, embedding and example count."""
    params = manager.knob_params()
    cfg: dict[str, Any] = {}
    if params.get("k") is not None:
        cfg["k"] = params["k"]
    instructions = params.get("instructions")
    if instructions:
        text = str(instructions)
        cut = len(text) > _INSTRUCTIONS_PREVIEW
        cfg["instructions"] = text[:_INSTRUCTIONS_PREVIEW] + ("..." if cut else "")
    if params.get("example_selector_cls") is not None:
        cfg["example_selector"] = describe_value(params["example_selector_cls"])
    if params.get("embedding_cfg") is not None:
        cfg["embedding_cfg"] = _class_cfg(params["embedding_cfg"])
    if params.get("examples") is not None:
        cfg["num_examples"] = len(params["examples"])
    return cfg


def config_headers(model: Any, leaf: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """RapidFire's knob columns of a model config (and its RAG spec and prompt manager), then
    the leaf's own settings (``batch_size``, ``online_strategy_kwargs``, any key of the user's),
    functions left out."""
    params = model.knob_params()
    out: dict[str, Any] = {}
    if model.rag is not None:
        out.update(rag_headers(model.rag))
    if "sampling_params" in params and params["sampling_params"] is not None:
        out["sampling_params"] = describe_value(params["sampling_params"])
    if model.prompt_manager is not None:
        out["prompt_manager_config"] = prompt_manager_config(model.prompt_manager)
    model_config = params.get("model_config")
    if isinstance(model_config, Mapping):
        rest = {k: v for k, v in model_config.items() if k != "model"}
        if rest:
            out["model_config"] = describe_value(rest)
    for key in ("endpoint_config", "client_config"):
        if params.get(key):
            out[key] = describe_value(params[key])
    for key in ("rpm_limit", "tpm_limit", "itpm_limit", "otpm_limit", "max_completion_tokens"):
        if params.get(key) is not None:
            out[key] = params[key]
    ordered = {k: out[k] for k in HEADER_KEYS if k in out}
    for key, value in (leaf or {}).items():
        if key != "pipeline" and not callable(value) and key not in ordered:
            ordered[key] = describe_value(value)
    return redact(ordered)
