"""Clone-and-modify: a parent config's leaf with changes applied, in assay's form or RapidFire's.

assay's changes merge key by key (`apply_changes`); RapidFire's clone payload is recognised
and applied by its own rules (`apply_clone_payload`).

RapidFire's control panel (and its autopilot) clone a run with a JSON object such as::

    {"pipeline_type": "vllm", "sampling_params": {"temperature": 0.2},
     "rag_config": {"search_cfg": {"type": "mmr", "k": 8}}, "batch_size": 16}

Each model section (``model_config``, ``sampling_params`` for vLLM; ``client_config``,
``endpoint_config``, ``model_config``, rate limits, ``max_completion_tokens`` for API models)
is merged key by key over the parent's; ``rag_config`` may change ``search_cfg`` (a new search
``type`` starts from that type's defaults) and ``reranker_cfg`` (``"class"`` by name);
``online_strategy_kwargs`` merges key by key; ``batch_size`` replaces. As in RapidFire,
functions, index settings and the prompt manager are inherited unchanged. Anything else is
refused with the list of what a payload may hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assay.errors import ConfigError
from assay.pipelines.configs.knobs import Configurable
from assay.pipelines.configs.model_configs import (
    HFModelConfig,
    ModelConfig,
    OpenAIAPIModelConfig,
    VLLMModelConfig,
)

SEARCH_DEFAULTS: dict[str, dict[str, Any]] = {
    "similarity": {"k": 5},
    "similarity_score_threshold": {"k": 5, "score_threshold": 0.5},
    "mmr": {"k": 5, "fetch_k": 20, "lambda_mult": 0.5},
}
"""Settings a search type starts from when a clone switches to it (RapidFire's defaults)."""

_MODEL_SECTIONS = {
    "vllm": ("model_config", "sampling_params"),
    "hf": ("model_config", "sampling_params"),
    "api": ("client_config", "endpoint_config", "model_config"),
}
_API_SCALARS = ("rpm_limit", "max_completion_tokens")
_LIMITS = ("tpm_limit", "itpm_limit", "otpm_limit")
_COMMON = ("pipeline_type", "rag_config", "batch_size", "online_strategy_kwargs")
_RAPIDFIRE_KEYS = frozenset(
    (*_COMMON, "model_config", "sampling_params", "client_config", "endpoint_config")
) | frozenset(_API_SCALARS + _LIMITS)


def is_clone_payload(changes: Mapping[str, Any]) -> bool:
    """Whether `changes` is RapidFire's payload rather than assay's nested leaf changes."""
    return "pipeline" not in changes and bool(set(changes) & (_RAPIDFIRE_KEYS - {"batch_size"}))


def pipeline_type(model: ModelConfig) -> str:
    """RapidFire's name of a model config's kind."""
    if isinstance(model, VLLMModelConfig):
        return "vllm"
    if isinstance(model, HFModelConfig):
        return "hf"
    if isinstance(model, OpenAIAPIModelConfig):
        return "api"
    raise ConfigError(
        f"clone: {type(model).__name__} configs take assay's changes "
        '({"pipeline": {...}}), not a RapidFire payload'
    )


def apply_clone_payload(leaf: Mapping[str, Any], payload: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `leaf` with RapidFire's clone payload applied (see the module docstring)."""
    model = leaf["pipeline"]
    kind = pipeline_type(model)
    given = str(payload.get("pipeline_type") or kind).lower()
    if given != kind:
        raise ConfigError(
            f"clone: pipeline_type {given!r} does not match the parent's {kind!r}; a clone keeps "
            "its parent's kind of model"
        )
    allowed = set(_COMMON) | set(_MODEL_SECTIONS[kind])
    if kind == "api":
        allowed |= set(_API_SCALARS) | set(_LIMITS)
    unknown = sorted(set(payload) - allowed)
    if unknown:
        raise ConfigError(
            f"clone: a {kind!r} payload cannot change {unknown}; it may hold {sorted(allowed)}"
        )
    params = model.knob_params()
    new = dict(params)
    for section in _MODEL_SECTIONS[kind]:
        if section in payload:
            new[section] = {**(params.get(section) or {}), **_object(payload[section], section)}
    if kind == "api":
        new.update(_limits(params, payload))
        for key in _API_SCALARS:
            if key in payload:
                new[key] = payload[key]
    if "rag_config" in payload:
        new["rag"] = _rag_changes(model.rag, _object(payload["rag_config"], "rag_config"))
    out = dict(leaf)
    out["pipeline"] = type(model)(**new)
    if "batch_size" in payload:
        out["batch_size"] = payload["batch_size"]
    if "online_strategy_kwargs" in payload:
        out["online_strategy_kwargs"] = {
            **(leaf.get("online_strategy_kwargs") or {}),
            **_object(payload["online_strategy_kwargs"], "online_strategy_kwargs"),
        }
    return out


def _object(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"clone: {name} must be a JSON object, got {value!r}")
    return dict(value)


def _limits(params: Mapping[str, Any], payload: Mapping[str, Any]) -> dict[str, Any]:
    """Token limits: a payload that switches scheme (tpm vs itpm/otpm) drops the other one."""
    tpm = "tpm_limit" in payload
    split = "itpm_limit" in payload or "otpm_limit" in payload
    if tpm and not split:
        return {"tpm_limit": payload["tpm_limit"], "itpm_limit": None, "otpm_limit": None}
    if split and not tpm:
        return {
            "tpm_limit": None,
            "itpm_limit": payload.get("itpm_limit", params.get("itpm_limit")),
            "otpm_limit": payload.get("otpm_limit", params.get("otpm_limit")),
        }
    return {key: payload.get(key, params.get(key)) for key in _LIMITS if key in params}


def _rag_changes(rag: Any, rag_config: Mapping[str, Any]) -> Any:
    if rag is None:
        raise ConfigError("clone: rag_config given, but the parent config has no RAG spec")
    unknown = sorted(set(rag_config) - {"search_cfg", "reranker_cfg"})
    if unknown:
        raise ConfigError(
            f"clone: rag_config may change search_cfg and reranker_cfg (retrieval, no "
            f"re-indexing), not {unknown}"
        )
    params = rag.knob_params()
    changes: dict[str, Any] = {}
    if "search_cfg" in rag_config:
        search = _object(rag_config["search_cfg"], "search_cfg")
        parent = dict(params.get("search_cfg") or {"type": "similarity"})
        kind = str(search.get("type", parent.get("type", "similarity")))
        if kind != parent.get("type", "similarity"):
            defaults: dict[str, Any] = SEARCH_DEFAULTS.get(kind, {})
            parent = {"type": kind, **defaults}
        changes["search_cfg"] = {**parent, **search}
    if "reranker_cfg" in rag_config:
        reranker = _object(rag_config["reranker_cfg"], "reranker_cfg")
        parent = dict(params.get("reranker_cfg") or {})
        if isinstance(reranker.get("class"), str):
            reranker["class"] = _reranker_class(reranker["class"], parent.get("class"))
        changes["reranker_cfg"] = {**parent, **reranker}
    return rag.replace(**changes)


def _reranker_class(name: str, parent_class: Any) -> Any:
    """The reranker class a payload names: the parent's, or a known one."""
    if parent_class is not None and name in (
        getattr(parent_class, "__name__", None),
        getattr(parent_class, "__qualname__", None),
    ):
        return parent_class
    if name == "CrossEncoderReranker":
        from assay.pipelines.rag.retrieval import CrossEncoderReranker

        return CrossEncoderReranker
    raise ConfigError(
        f"clone: reranker class {name!r} is unknown; name the parent's reranker class or "
        "'CrossEncoderReranker', or clone with assay's changes and the class itself"
    )


def apply_changes(leaf: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `leaf` with `changes` merged key by key (clone-and-modify).

    Nested dicts merge recursively; for the model config and its RAG spec / prompt manager,
    a dict of changes rebuilds the object with those constructor arguments changed, e.g.
    ``{"pipeline": {"sampling_params": {"temperature": 0.7}, "rag": {"search_cfg": {"k": 3}}}}``.
    RapidFire's clone payload (``{"pipeline_type": "vllm", "sampling_params": {...},
    "rag_config": {...}}``) is accepted too (`apply_clone_payload`).
    """
    if is_clone_payload(changes):
        return apply_clone_payload(leaf, changes)
    return _merge(dict(leaf), changes)


def _merge(base: Any, change: Any) -> Any:
    if isinstance(change, Mapping) and isinstance(base, Configurable):
        params = base.knob_params()
        unknown = sorted(set(change) - set(params))
        if unknown:
            raise ConfigError(
                f"clone: {type(base).__name__} has no argument(s) {unknown}; "
                f"its arguments: {sorted(params)}"
            )
        return base.replace(**{k: _merge(params[k], v) for k, v in change.items()})
    if isinstance(change, Mapping) and isinstance(base, Mapping):
        merged = dict(base)
        for key, value in change.items():
            merged[key] = _merge(base.get(key), value) if key in base else value
        return merged
    return change
