"""Eval config dicts: expansion of a config group into leaves, and validation of each leaf.

A leaf is RapidFire's config dict with every knob resolved: ``pipeline`` (or ``vllm_config`` /
``api_config`` / ``hf_config``, renamed to ``pipeline``), ``batch_size``, ``preprocess_fn``,
``postprocess_fn``, ``compute_metrics_fn``, ``accumulate_metrics_fn`` and
``online_strategy_kwargs``. Other keys are carried along as knobs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assay.errors import ConfigError
from assay.pipelines.configs.fingerprint import fingerprint
from assay.pipelines.configs.knobs import flatten_knobs
from assay.pipelines.configs.model_configs import ModelConfig
from assay.pipelines.configs.search import GridSearch, RandomSearch
from assay.requests.types import GenParams
from assay.stats.online import OnlineSettings
from assay.util.redact import find_secrets, redact, scrub

MODEL_KEYS = ("pipeline", "vllm_config", "api_config", "hf_config")
FUNCTION_KEYS = ("preprocess_fn", "postprocess_fn", "compute_metrics_fn", "accumulate_metrics_fn")


@dataclass(slots=True)
class EvalConfig:
    """One leaf config, validated."""

    config_id: int
    leaf: dict[str, Any]
    """The leaf dict as the user functions see it (model under ``pipeline``)."""
    model: ModelConfig
    batch_size: int
    gen_params: GenParams
    settings: OnlineSettings
    preprocess_fn: Callable[..., Any] | None
    postprocess_fn: Callable[..., Any] | None
    compute_metrics_fn: Callable[..., Any] | None
    accumulate_metrics_fn: Callable[..., Any] | None
    parent_id: int | None = None

    @property
    def rag(self) -> Any:
        return self.model.rag

    @property
    def prompt_manager(self) -> Any:
        return self.model.prompt_manager

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.leaf)

    def knobs(self) -> dict[str, Any]:
        """Flattened knob values, secrets redacted (for tables and the store)."""
        secrets = find_secrets(self.model.knob_params())
        flat = redact(flatten_knobs(self.leaf))
        return {k: scrub(v, secrets) if isinstance(v, str) else v for k, v in flat.items()}


def expand(config_group: Any, seed: int) -> list[dict[str, Any]]:
    """Leaf dicts of a GridSearch / RandomSearch / config dict / list of config dicts."""
    if isinstance(config_group, GridSearch | RandomSearch):
        leaves = config_group.get_runs(seed)
    elif isinstance(config_group, Mapping) or (
        isinstance(config_group, Sequence) and not isinstance(config_group, str)
    ):
        leaves = GridSearch(config_group).get_runs(seed)
    elif hasattr(config_group, "get_runs"):
        leaves = config_group.get_runs(seed)
    else:
        raise ConfigError(
            "run_evals config_group must be a GridSearch, RandomSearch, a config dict or a list "
            f"of config dicts, got {type(config_group).__name__}"
        )
    leaves = [_rename_model_key(leaf) for leaf in leaves]
    kept = [leaf for leaf in leaves if _consistent(leaf)]
    if leaves and not kept:
        raise ConfigError(
            "every config combination has a reranker top_n larger than its search k; "
            "lower reranker_cfg top_n or raise search_cfg k"
        )
    return kept


def _rename_model_key(leaf: Mapping[str, Any]) -> dict[str, Any]:
    present = [k for k in MODEL_KEYS if leaf.get(k) is not None]
    if len(present) > 1:
        raise ConfigError(f"eval config has several model keys {present}; give exactly one")
    out = {k: v for k, v in leaf.items() if k not in MODEL_KEYS and v is not None}
    if present:
        out = {"pipeline": leaf[present[0]], **out}
    return out


def _consistent(leaf: Mapping[str, Any]) -> bool:
    rag = getattr(leaf.get("pipeline"), "rag", None)
    return rag is None or not hasattr(rag, "is_consistent") or rag.is_consistent()


def validate(leaf: dict[str, Any], config_id: int, parent_id: int | None = None) -> EvalConfig:
    """Check one leaf and build its EvalConfig; errors name the config and the field."""
    where = f"config {config_id}"
    model = leaf.get("pipeline")
    if model is None:
        raise ConfigError(
            f"{where}: no model; set 'pipeline' (or 'vllm_config' / 'api_config') to a model "
            "config such as VLLMModelConfig(...), HFModelConfig(...) or ModelConfig('dummy')"
        )
    if not isinstance(model, ModelConfig):
        raise ConfigError(
            f"{where}: 'pipeline' must be a model config (ModelConfig, HFModelConfig, "
            f"VLLMModelConfig, OpenAIAPIModelConfig), got {type(model).__name__}"
        )
    if "batch_size" not in leaf:
        raise ConfigError(f"{where}: 'batch_size' is required (rows per generation call)")
    batch_size = leaf["batch_size"]
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"{where}: batch_size must be a positive integer, got {batch_size!r}")
    functions: dict[str, Any] = {}
    for key in FUNCTION_KEYS:
        fn = leaf.get(key)
        if fn is not None and not callable(fn):
            raise ConfigError(f"{where}: {key} must be a function, got {type(fn).__name__}")
        functions[key] = fn
    if functions["accumulate_metrics_fn"] is not None and functions["compute_metrics_fn"] is None:
        raise ConfigError(
            f"{where}: accumulate_metrics_fn needs a compute_metrics_fn to accumulate"
        )
    settings = OnlineSettings.from_kwargs(leaf.get("online_strategy_kwargs"))
    try:
        gen_params = model.gen_params()
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return EvalConfig(
        config_id=config_id,
        leaf=leaf,
        model=model,
        batch_size=batch_size,
        gen_params=gen_params,
        settings=settings,
        parent_id=parent_id,
        **functions,
    )
