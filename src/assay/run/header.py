"""The run's header in results.json: what produced it (config, settings, seeds, versions,
backend, judges), taken once when the run starts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from assay.models.base import LM
from assay.results.builder import RunInfo, git_hash
from assay.results.provenance import backend_identity, library_versions, plain
from assay.results.schema import BackendIdentity, Provenance, TaskProvenance
from assay.run.plan import prompt_settings
from assay.run.resume import stored_run_key
from assay.run.settings import RECORDED, RunSettings, names_changing
from assay.seeds import SEED_KEYS

if TYPE_CHECKING:
    from assay.run.judging import JudgeSpec


def run_info(
    settings: RunSettings,
    model: LM,
    run_key: dict[str, Any],
    started: float,
    date: float,
    judges: Sequence[tuple[JudgeSpec, dict[str, Any]]] = (),
    *,
    batch_size: int | str | None,
) -> RunInfo:
    """What produced this run: `run_key` from `run.resume.run_key`, `started` from
    time.perf_counter(), `date` from time.time(); `judges` are the run's judges with their
    identities (those a flag names are recorded in the config; a task's own judge is recorded
    under assay.judges); `batch_size` the one the backend was asked for
    (`RunPlan.backend.batch_size`)."""
    s = settings
    config: Any = {
        "model": s.model if isinstance(s.model, str) else type(s.model).__name__,
        "model_args": s.model_args,
        "batch_size": batch_size,
        "batch_sizes": [],  # those batch_size=auto picks, as tasks run
        "device": s.device,
        "use_cache": str(s.cache) if s.cache else None,
        "limit": s.limit,
        "bootstrap_iters": s.bootstrap_iters,
        "gen_kwargs": s.gen_kwargs,
        **dict(zip(SEED_KEYS, s.seed, strict=True)),
        "model_identity": model.identity(),
    }
    for spec, identity in judges:
        if spec.source.startswith("--"):
            flag = spec.source[2:].replace("-", "_")
            config[flag] = spec.model
            config[f"{flag}_args"] = spec.model_args
            config[f"{flag}_identity"] = identity
    return RunInfo(
        config=config,
        git_hash=git_hash(),
        date=date,
        system_instruction=s.system_instruction,
        fewshot_as_multiturn=prompt_settings(s).multiturn,
        chat_template_applied=s.apply_chat_template,
        provenance=run_provenance(backend_identity(model), s, {}),
        run_key=stored_run_key(run_key),
        started=started,
    )


def run_provenance(
    backend: BackendIdentity, settings: RunSettings, tasks: dict[str, TaskProvenance]
) -> Provenance:
    """The run's provenance block (`backend` from `results.provenance.backend_identity`)."""
    return {
        "versions": library_versions(),
        "backend": backend,
        "settings": {name: plain(getattr(settings, name)) for name in names_changing(*RECORDED)},
        "seeds": dict(zip(SEED_KEYS, settings.seed, strict=True)),
        "tasks": dict(tasks),
    }
