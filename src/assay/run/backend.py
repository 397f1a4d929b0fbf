"""The model and executor a run's settings name (--model, --model-args, --executor ...).

A backend is built from a `BackendSource`, made once: the run's own (`run_source`: --model
with --model-args, --device, --batch-api and the batch size) or a judge's (`judge_source`).
The executor takes the run's settings for where it runs (--executor, --replicas ...) only.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, get_type_hints

from assay.errors import ConfigError
from assay.execution.executor import Executor
from assay.execution.local import LocalExecutor
from assay.models.api.budget import SpendingLimit
from assay.models.args import to_bool
from assay.models.base import (
    LM,
    MODELS,
    BackendLike,
    ReplicaPlan,
    Unloaded,
    checked_backend,
    load_model,
)
from assay.requests.cache import CACHE_FILE
from assay.run import setting_checks as checks
from assay.run.deferred import DeferredBackend
from assay.run.settings import RunSettings, executor_names, unused_on_local, where

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class BackendSource:
    """What one backend is built from: a backend name with its arguments, or a model object
    (built already)."""

    model: str | LM | BackendLike
    args: Mapping[str, Any] | None = None
    """For a backend name: its model args with the run's flags merged (`backend_args`); None
    for a model object."""
    batch_size: int | str | None = None
    """The run's batch size (`run_batch_size`), handed to the builder as the backend's
    batch_size over its model args'; None: theirs. For a model object, the one results.json
    records."""
    device: str | None = None
    """The run's --device where it applies to this backend (the evaluated model's, not a
    judge's); without one, each rank of a data-parallel launch runs on its own GPU."""

    def factory_args(self) -> dict[str, Any]:
        """The arguments the backend's factory gets (the spending limit aside)."""
        sized = {} if self.batch_size is None else {"batch_size": self.batch_size}
        return {**(self.args or {}), **sized}


def run_source(settings: RunSettings, announce: bool = False) -> BackendSource:
    """The run's own backend: --model with --model-args, --device and --batch-api merged
    (`backend_args`), and the batch size (`run_batch_size`; `announce` as there)."""
    if not isinstance(settings.model, str):
        return BackendSource(model=settings.model, batch_size=settings.batch_size)
    return BackendSource(
        model=settings.model,
        args=backend_args(settings),
        batch_size=run_batch_size(settings, announce),
        device=settings.device,
    )


def judge_source(settings: RunSettings, model: str, model_args: Mapping[str, Any]) -> BackendSource:
    """A judge's backend `model`: its `model_args` with the run's --batch-api merged (the run's
    --device and --batch-size are the evaluated model's)."""
    return BackendSource(model=model, args=backend_args(settings, model, model_args))


def backend_args(
    settings: RunSettings, model: str | None = None, model_args: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """--model-args with the run-level --device and --batch-api merged in; for a judge, its
    backend `model` and `model_args` with --batch-api only. The batch size is merged apart
    (`run_batch_size`).

    A flag and a model arg that disagree are refused: either choice would ignore one of them."""
    if model is None:
        assert isinstance(settings.model, str)
        model, args, device = settings.model, dict(settings.model_args), settings.device
    else:
        args, device = dict(model_args or {}), None
    if device is not None:
        _check_device(device, "--device", args)
        args["device"] = device
    _batch_api_args(settings, model, args)
    return args


def _check_device(device: str, flag: str, args: Mapping[str, Any]) -> None:
    """Refuse a model arg `device` other than `device` (given as `flag`)."""
    given = args.get("device")
    if given is not None and str(given) != str(device):
        raise ConfigError(
            f"{flag} {device} and --model-args device={given} disagree; give one of them."
        )


def run_batch_size(settings: RunSettings, announce: bool = False) -> int | str | None:
    """The batch size the run's backend is built with and results.json records: --batch-size
    where given, otherwise --model-args batch_size= (lm-eval's spelling, still accepted),
    otherwise None (the backend's default).

    When both are given and differ, --batch-size wins; with `announce`, a line on stderr says
    so (the plan announces it once per run). The model arg it overrides is still checked: a
    value no backend would take is refused, not dropped."""
    given = settings.model_args.get("batch_size") if isinstance(settings.model, str) else None
    if settings.batch_size is None or given is None:
        return settings.batch_size if given is None else given
    checked = checks.batch_size(given, "--model-args batch_size")
    if announce and str(checked) != str(settings.batch_size):
        print(
            f"assay: --batch-size {settings.batch_size} wins over --model-args "
            f"batch_size={given}: the run setting is what the backend gets and results.json "
            "records.",
            file=sys.stderr,
        )
    return settings.batch_size


def _batch_api_args(settings: RunSettings, model: str, args: dict[str, Any]) -> None:
    """--batch-api merged into `args`, the arguments of backend `model`, with where submitted
    batches are recorded: the output folder's `batches/` and the response cache (which
    downloaded answers enter at once)."""
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
    backend = registered_class(model)
    if backend is not None and not backend.has_batch_api:
        flag = "--batch-api" if settings.batch_api else f"--model-args batch_api={given}"
        raise ConfigError(
            f"{flag}: --model {model} has no provider batch API; it applies to "
            "openai-chat, openai-completions and anthropic-chat (OpenAI's Batch API, "
            f"Anthropic's Message Batches). Drop {flag} to run --model {model}."
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


def build_model(source: BackendSource, spending: SpendingLimit | None = None) -> LM:
    """The backend `source` names (or the model object it holds), built with the run's
    spending limit where it spends (`LM.spends`)."""
    if not isinstance(source.model, str):
        return checked_backend(source.model, "model")
    return load_model(source.model, _build_args(source, spending))


def described_model(source: BackendSource, spending: SpendingLimit | None = None) -> LM | None:
    """The backend `source` names as known before any weight loads (`LM.unloaded`): a stand-in
    without weights, or the backend itself where building it loads nothing. None for a model
    object (built already) and for a backend that must be built to be known (logged)."""
    if not isinstance(source.model, str):
        return None
    backend = registered_class(source.model)
    described = backend.unloaded(_build_args(source, spending)) if backend is not None else None
    if described is None:
        log.debug("--model %s tells its identity once built: it is built first", source.model)
    return described


def _build_args(source: BackendSource, spending: SpendingLimit | None) -> dict[str, Any]:
    """The arguments the backend `source` names is built with: its arguments, and the run's
    spending limit for a backend that spends (`LM.spends`: the API backends)."""
    assert isinstance(source.model, str)
    args = source.factory_args()
    backend = registered_class(source.model)
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
    source: BackendSource | None = None,
    spending: SpendingLimit | None = None,
) -> Executor:
    """The executor named by settings.executor, holding `model`, or the backend `source` names
    (default: the run's own, `run_source`) built with the run's `spending` limit where it
    spends. Of the settings, only where the executor runs is read (--executor, --replicas,
    --gpus-per-replica, --ray-address).

    Model args that ask for replicas run them on the Ray executor, as --executor ray would.
    The local executor holds `described` (from `described_model`) where it was given: a
    stand-in without weights builds the backend only for a request the response cache cannot
    answer."""
    s = settings
    source = source or run_source(s)
    plan = None
    if model is None and isinstance(source.model, str):
        plan = replica_plan(source.model, source.factory_args())
    if s.executor == "ray" or plan is not None:
        if model is not None or not isinstance(source.model, str):
            raise ConfigError(
                "--executor ray builds one model replica per Ray actor from --model and "
                "--model-args: pass a backend name, not a model object."
            )
        from assay.execution.ray import replica_executor

        return replica_executor(
            source.model,
            source.factory_args(),
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
        return LocalExecutor(model or _local_model(source, described, spending))
    # Started by accelerate/torchrun: one model per rank, on the rank's own GPU when there are GPUs.
    from assay.execution.distributed import DataParallelExecutor

    if model is None and isinstance(source.model, str) and source.device is None and _has_cuda():
        # The rank's device joins the backend's arguments.
        device = f"cuda:{launch.local_rank}"
        args = dict(source.args or {})
        _check_device(device, "--device", args)
        source = replace(source, args={**args, "device": device}, device=device)
    return DataParallelExecutor(model or build_model(source, spending), launch)


def _local_model(source: BackendSource, described: LM | None, spending: SpendingLimit | None) -> LM:
    """The model of a run in this process: `described` itself when it is the built backend, a
    deferred backend when it is a stand-in, the backend `source` names built now without one."""
    if isinstance(described, Unloaded):
        return DeferredBackend(described, lambda: build_model(source, spending))
    return described or build_model(source, spending)


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()
