"""A run into an output folder that already holds results: the same run resumes, a different
one is refused (or, with --overwrite, replaces the earlier files), so one folder never mixes
the files of two runs."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from assay.errors import ConfigError
from assay.run.settings import RECORDED, RUN_IDENTITY, names_changing

log = logging.getLogger(__name__)

RESULTS = "results.json"


def _normal(value: Any) -> Any:
    """`value` as results.json stores it, so a key read back compares equal."""
    return json.loads(json.dumps(value, default=str))


def _earlier(folder: Path) -> dict[str, Any] | None:
    """The results.json in `folder`, {} when it is not assay's, None when there is none."""
    path = folder / RESULTS
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _differences(before: dict[str, Any], now: dict[str, Any]) -> str:
    keys = [k for k in now if before.get(k) != now[k]] + [k for k in before if k not in now]
    return "; ".join(f"{k}: {before.get(k)!r} there, {now.get(k)!r} now" for k in keys[:4])


def check_folder(
    folder: str | Path, key: dict[str, Any], identity: dict[str, Any] | None, overwrite: bool
) -> bool:
    """Check that a run with `key` (and, once the model is built, model `identity`) may write
    into `folder`. Returns True when the folder holds a different run's files that --overwrite
    will replace; raises ConfigError when it holds one and `overwrite` is False."""
    earlier = _earlier(Path(folder))
    if earlier is None:
        return False
    run = _stored_key(earlier)
    if run is None:
        why = "results.json written by another tool or an older assay"
    elif run != _normal(key):
        why = f"the results of a different run ({_differences(run, _normal(key))})"
    elif identity is not None and earlier.get("config", {}).get("model_identity") != _normal(
        identity
    ):
        why = "the results of a different model (its model identity differs)"
    else:
        log.info("%s holds this run's results: resuming (answers come from its cache)", folder)
        return False
    if overwrite:
        return True
    raise ConfigError(
        f"--output-dir {folder} holds {why}. Re-run with --overwrite to replace its results and "
        "samples files, or choose another --output-dir."
    )


def clear_folder(folder: str | Path) -> None:
    """Remove an earlier run's results and samples files (the response cache stays: it is keyed
    by model identity, so answers of another model are never reused)."""
    folder = Path(folder)
    for path in [folder / RESULTS, *folder.glob("samples_*.jsonl")]:
        log.warning("--overwrite: removing %s of an earlier run", path)
        path.unlink()


def _shared_settings() -> list[str]:
    """The identity settings results.json records among its provenance settings: `assay.run`
    leaves them out, so each setting is stored once."""
    return [name for name in names_changing(*RUN_IDENTITY) if name in names_changing(*RECORDED)]


def stored_run_key(key: dict[str, Any]) -> dict[str, Any]:
    """What results.json's `assay.run` holds of a run key: the rest is in `provenance`."""
    shared = set(_shared_settings())
    return {name: value for name, value in key.items() if name not in shared}


def _stored_key(results: dict[str, Any]) -> dict[str, Any] | None:
    """The run key of a results.json (`assay.run` with the settings `provenance` holds), or None
    when it has none."""
    assay = results.get("assay")
    run = assay.get("run") if isinstance(assay, dict) else None
    if not isinstance(run, dict):
        return None
    provenance = results.get("provenance")
    recorded = provenance.get("settings") if isinstance(provenance, dict) else None
    if not isinstance(recorded, dict):
        return None
    shared = _shared_settings()
    if not all(name in recorded for name in shared):
        return None
    return {**run, **{name: recorded[name] for name in shared}}


def run_key(settings: Any, tasks: list[str]) -> dict[str, Any]:
    """What makes two runs the same run: the tasks and every setting that changes the numbers,
    names the model or seeds, or changes the files (`settings.RUN_IDENTITY`)."""
    model = settings.model if isinstance(settings.model, str) else type(settings.model).__name__
    values = {n: getattr(settings, n) for n in names_changing(*RUN_IDENTITY)}
    return _normal({**values, "model": model, "tasks": tasks})
