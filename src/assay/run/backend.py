"""The model and executor a run's settings name (--model, --model-args, --executor ...)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, get_type_hints

from assay.errors import ConfigError
from assay.execution.executor import Executor
from assay.execution.local import LocalExecutor
from assay.models.api.budget import SpendingLimit
from assay.models.args import to_bool
from assay.models.base import LM, MODELS, ReplicaPlan, Unloaded, checked_backend, load_model
from assay.requests.cache import CACHE_FILE
from assay.run.deferred import DeferredBackend
from assay.run.settings import RunSettings, executor_names, unused_on_local, where

log = logging.getLogger(__name__)


def backend_args(settings: RunSettings) -> dict[str, Any]:
    """--model-args with the run-level --batch-size and --device merged in.

    A flag and a model arg that disagree are refused: either choice would ignore one of them."""
    args = dict(settings.model_args)
    for key, value in (("batch_size", settings.batch_size), ("device", settings.device)):
        if value is None:
            continue
        if key in args and str(args[key]) != str(value):
            flag = "--" + key.replace("_", "-")
            raise ConfigError(
                f"{flag} {value} and --model-args {key}={args[key]} disagree; give one of them."
            )
        args.setdefault(key, value)
    _batch_api_args(settings, args)
    return args


def _batch_api_args(settings: RunSettings, args: dict[str, Any]) -> None:
    """--batch-api merged into `args`, with where submitted batches are recorded: the output
    folder's `batches/` and the response cache (which downloaded answers enter at once)."""
    given = args.get("batch_api")
    try:
        given_on = given is not None and to_bool(given)
    except (TypeError, ValueError):
        return  # the backend refuses the value itself, naming the arg
    if not (settings.batch_api or given_on):
        if settings.batch_failed != "resubmit":
            raise ConfigError(
                f"--batch-failed {settings.batch_failed} applies to runs through a provider "
                "batch API: add --batch-api, or drop --batch-failed."
            )
        return
    if settings.batch_api and given is not None and not given_on:
        raise ConfigError(
            f"--batch-api and --model-args batch_api={given} disagree; give one of them."
        )
    backend = backend_class(settings)
    if backend is not None and not backend.has_batch_api:
        flag = "--batch-api" if settings.batch_api else f"--model-args batch_api={given}"
        raise ConfigError(
            f"{flag}: --model {settings.model} has no provider batch API; it applies to "
            "openai-chat, openai-completions and anthropic-chat (OpenAI's Batch API, "
            f"Anthropic's Message Batches). Drop {flag} to run --model {settings.model}."
        )
    from assay.models.api.batches import JOURNAL_FOLDER

    args["batch_api"] = True
    failed = args.get("batch_failed")
    if (
        failed is not None
        and settings.batch_failed != "resubmit"
        and failed != settings.batch_failed
    ):
        raise ConfigError(
            f"--batch-failed {settings.batch_failed} and --model-args batch_failed={failed} "
            "disagree; give one of them."
        )
    if settings.batch_failed != "resubmit":
        args["batch_failed"] = settings.batch_failed
    output = Path(settings.output_dir) if settings.output_dir is not None else None
    if output is not None:
        args.setdefault("batch_dir", str(output / JOURNAL_FOLDER))
    cache = settings.cache
    if isinstance(cache, str | Path):
        args.setdefault("batch_cache", str(cache))
    elif cache is None and output is not None:
        args.setdefault("batch_cache", str(output / CACHE_FILE))
    # With --output-path, the run's state folder is known once the tasks are (`Evaluation`
    # passes it as output_dir).
    if "batch_dir" not in args and "batch_cache" not in args and settings.output_path is None:
        raise ConfigError(
            "--batch-api needs --output-path, --output-dir or --cache: submitted batches are "
            "recorded there, "
            "so that a re-run after an exit or a crash follows them instead of paying twice."
        )


def build_model(
    settings: RunSettings,
    args: Mapping[str, Any] | None = None,
    spending: SpendingLimit | None = None,
) -> LM:
    """The backend named by the settings (or the LM object given), built with the run's
    spending limit where it spends (`LM.spends`); `args`: its `backend_args`, when computed
    already."""
    if not isinstance(settings.model, str):
        return checked_backend(settings.model, "model")
    return load_model(settings.model, _build_args(settings, args, spending))


def described_model(
    settings: RunSettings,
    args: Mapping[str, Any] | None = None,
    spending: SpendingLimit | None = None,
) -> LM | None:
    """The settings' backend as known before any weight loads (`LM.unloaded`): a stand-in
    without weights, or the backend itself where building it loads nothing. None for a model
    object (built already) and for a backend that must be built to be known (logged). `args`:
    the settings' `backend_args`, when computed already."""
    if not isinstance(settings.model, str):
        return None
    backend = registered_class(settings.model)
    described = (
        backend.unloaded(_build_args(settings, args, spending)) if backend is not None else None
    )
    if described is None:
        log.debug("--model %s tells its identity once built: it is built first", settings.model)
    return described


def _build_args(
    settings: RunSettings, args: Mapping[str, Any] | None, spending: SpendingLimit | None
) -> dict[str, Any]:
    """The arguments the settings' backend is built with: its model args (`args`, when
    computed already), and the run's spending limit for a backend that spends (`LM.spends`:
    the API backends)."""
    args = dict(backend_args(settings) if args is None else args)
    backend = registered_class(settings.model) if isinstance(settings.model, str) else None
    if spending is not None and backend is not None and backend.spends:
        args.setdefault("spending", spending)  # a model arg of that name is refused by the backend
    return args


def backend_class(settings: RunSettings) -> type[LM] | None:
    """The class of the run's backend, known before it is built (None when its factory does
    not declare one)."""
    if isinstance(settings.model, LM):
        return type(settings.model)
    if not isinstance(settings.model, str):
        return None
    return registered_class(settings.model)


def registered_class(name: str) -> type[LM] | None:
    """The class the backend registered as `name` builds (None when its factory does not
    declare one)."""
    factory = MODELS.get(name)
    if isinstance(factory, type):
        declared: Any = factory
    else:
        # A backend registered through a function declares its class as the return type; a
        # plugin's unresolvable annotation leaves the check to request building.
        try:
            declared = get_type_hints(factory).get("return")
        except (NameError, TypeError):
            return None
    return declared if isinstance(declared, type) and issubclass(declared, LM) else None


def replica_plan(name: str, model_args: dict[str, Any]) -> ReplicaPlan | None:
    """The replicas the model args of backend `name` ask for (`LM.replica_plan`, e.g. vLLM's
    data_parallel_size); None when they ask for none."""
    backend = registered_class(name)
    return backend.replica_plan(model_args) if backend is not None else None


def build_executor(
    settings: RunSettings,
    model: LM | None = None,
    described: LM | None = None,
    args: Mapping[str, Any] | None = None,
    spending: SpendingLimit | None = None,
) -> Executor:
    """The executor named by settings.executor, holding the settings' model (or `model`),
    built with the run's `spending` limit where it spends.

    Model args that ask for replicas run them on the Ray executor, as --executor ray would.
    The local executor holds `described` (from `described_model`) where it was given: a
    stand-in without weights builds the backend only for a request the response cache cannot
    answer. `args`: the settings' `backend_args`, when computed already."""
    s = settings
    if args is None and isinstance(s.model, str):
        args = backend_args(s)
    plan = None
    if model is None and isinstance(s.model, str):
        assert args is not None
        plan = replica_plan(s.model, dict(args))
    if s.executor == "ray" or plan is not None:
        if model is not None or not isinstance(s.model, str):
            raise ConfigError(
                "--executor ray builds one model replica per Ray actor from --model and "
                "--model-args: pass a backend name, not a model object."
            )
        from assay.execution.ray import replica_executor

        assert args is not None
        return replica_executor(
            s.model,
            dict(args),
            plan,
            replicas=s.replicas,
            gpus_per_replica=s.gpus_per_replica,
            address=s.ray_address,
        )
    for name in unused_on_local({name: getattr(s, name) for name in executor_names()}):
        raise ConfigError(f"{where(name)} applies to --executor ray only; add --executor ray.")
    from assay.execution.distributed import launch_rank

    launch = launch_rank()
    if launch is None:
        return LocalExecutor(model or _local_model(s, described, args, spending))
    # Started by accelerate/torchrun: one model per rank, on the rank's own GPU when there are GPUs.
    from assay.execution.distributed import DataParallelExecutor

    if model is None and s.device is None and _has_cuda():
        # The rank's device joins the backend's arguments.
        s, args = replace(s, device=f"cuda:{launch.local_rank}"), None
    return DataParallelExecutor(model or build_model(s, args, spending), launch)


def _local_model(
    settings: RunSettings,
    described: LM | None,
    args: Mapping[str, Any] | None,
    spending: SpendingLimit | None,
) -> LM:
    """The model of a run in this process: `described` itself when it is the built backend, a
    deferred backend when it is a stand-in, the settings' backend built now without one."""
    if isinstance(described, Unloaded):
        return DeferredBackend(described, lambda: build_model(settings, args, spending))
    return described or build_model(settings, args, spending)


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()
