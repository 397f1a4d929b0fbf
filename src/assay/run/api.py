"""evaluate(): a benchmark run from Python, with the command line's forms of every argument."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assay.models.base import LM, BackendLike
from assay.run.evaluation import Evaluation
from assay.run.settings import RunSettings, parse_cluster_by, parse_samples, setting_names
from assay.sandbox import SandboxMode
from assay.seeds import Seeds
from assay.tasks.names import split_csv
from assay.tasks.registry import Registry


def evaluate(
    model: str | LM | BackendLike,
    tasks: str | Sequence[str],
    *,
    model_args: dict[str, Any] | str | None = None,
    include_path: str | Path | Sequence[str | Path] = (),
    custom_tasks: str | Path | Sequence[str | Path] = (),
    num_fewshot: int | None = RunSettings.num_fewshot,
    limit: int | float | None = RunSettings.limit,
    samples: dict[str, list[int]] | str | None = None,
    cluster_by: dict[str, str] | str | None = None,
    batch_size: int | str | None = RunSettings.batch_size,
    device: str | None = RunSettings.device,
    batch_api: bool = RunSettings.batch_api,
    max_cost: float | None = RunSettings.max_cost,
    output_path: str | Path | None = RunSettings.output_path,
    output_dir: str | Path | None = RunSettings.output_dir,
    log_samples: bool = RunSettings.log_samples,
    predict_only: bool = RunSettings.predict_only,
    log_samples_reasoning: str = RunSettings.log_samples_reasoning,
    unclosed_thinking: str = RunSettings.unclosed_thinking,
    seed: Seeds | int | str | Sequence[int | None] | None = RunSettings.seed,
    apply_chat_template: bool = RunSettings.apply_chat_template,
    system_instruction: str | None = RunSettings.system_instruction,
    fewshot_keep_self: bool = RunSettings.fewshot_keep_self,
    fewshot_as_multiturn: bool | None = RunSettings.fewshot_as_multiturn,
    gen_kwargs: dict[str, Any] | str | None = None,
    metadata: dict[str, Any] | str | None = None,
    bootstrap_iters: int = RunSettings.bootstrap_iters,
    cache: str | Path | bool | None = RunSettings.cache,
    confirm_run_unsafe_code: bool = RunSettings.confirm_run_unsafe_code,
    sandbox: SandboxMode = RunSettings.sandbox,
    sandbox_image: str | None = RunSettings.sandbox_image,
    sandbox_workers: int | None = RunSettings.sandbox_workers,
    dataset_loading_processes: int = RunSettings.dataset_loading_processes,
    show_progress: bool = RunSettings.show_progress,
    executor: str = RunSettings.executor,
    replicas: int | None = RunSettings.replicas,
    gpus_per_replica: float | None = RunSettings.gpus_per_replica,
    ray_address: str | None = RunSettings.ray_address,
    overwrite: bool = RunSettings.overwrite,
    judge_model: str | None = RunSettings.judge_model,
    judge_model_args: dict[str, Any] | str | None = None,
    second_judge_model: str | None = RunSettings.second_judge_model,
    second_judge_model_args: dict[str, Any] | str | None = None,
    log_to: str | Sequence[str] | None = None,
    log_to_args: dict[str, Any] | str | None = None,
) -> dict[str, Any]:
    """Evaluate `model` (a backend name such as "hf", an LM object, or any object with LM's
    request methods and `identity`: `BackendLike`) on `tasks` and return the results dict
    (lm-eval layout).

    Arguments take the command line's forms too: `tasks="a,b"`, `model_args` and `gen_kwargs`
    as "k=v,k2=v2" strings, a single include path or custom task file. The keywords after
    `custom_tasks` are the fields of RunSettings, with its defaults (documented there).
    """
    from assay.models.args import parse_kv

    settings = {k: v for k, v in locals().items() if k in _KEYWORD_SETTINGS}
    run = RunSettings(
        **settings,
        model=model,
        model_args=parse_kv(model_args, "model_args"),
        judge_model_args=parse_kv(judge_model_args, "judge_model_args"),
        second_judge_model_args=parse_kv(second_judge_model_args, "second_judge_model_args"),
        gen_kwargs=parse_kv(gen_kwargs, "gen_kwargs"),
        metadata=parse_kv(metadata, "metadata"),
        samples=parse_samples(samples, "samples"),
        cluster_by=parse_cluster_by(cluster_by),
        log_to=split_csv([log_to] if isinstance(log_to, str) else list(log_to or [])),
        log_to_args=parse_kv(log_to_args, "log_to_args"),
    )
    registry = Registry(_paths(include_path), _paths(custom_tasks))
    names = split_csv([tasks] if isinstance(tasks, str) else list(tasks))
    evaluation = Evaluation(registry.resolve(names), run)
    return evaluation.run()


_KEYWORD_SETTINGS = frozenset(setting_names()) - {
    "model",
    "model_args",
    "judge_model_args",
    "second_judge_model_args",
    "gen_kwargs",
    "metadata",
    "samples",
    "cluster_by",
    "log_to",
    "log_to_args",
}
"""The RunSettings fields evaluate() takes as plain keywords (the rest are parsed first)."""


def _paths(value: str | Path | Sequence[str | Path]) -> list[str | Path]:
    """One path or several (a lone string is a path, not a sequence of characters)."""
    return [value] if isinstance(value, str | Path) else list(value)
