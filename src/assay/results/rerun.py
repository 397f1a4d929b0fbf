"""A run into an output folder that already holds results: the same run resumes, a different
one is refused (or, with --overwrite, replaces the earlier files), so one folder never mixes
the files of two runs."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from assay.errors import ConfigError

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
    run = earlier.get("assay", {}).get("run") if isinstance(earlier.get("assay"), dict) else None
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


_NOT_THE_RUN = frozenset(
    {
        # The model's identity is compared instead (it leaves out args that change no answer).
        "model_args",
        # Where and how fast requests run, and where files go: the same run either way.
        "batch_size", "device", "batch_api", "output_dir", "overwrite", "cache", "confirm_run_unsafe_code",
        "dataset_loading_processes", "show_progress", "executor", "replicas",
        "gpus_per_replica", "ray_address", "sandbox_workers",
        # What the run may spend: a re-run with a larger budget continues the same run.
        "max_cost",
        # Where the finished run is reported.
        "log_to", "log_to_args",
    }
)  # fmt: skip


def run_key(settings: Any, tasks: list[str]) -> dict[str, Any]:
    """What makes two runs the same run: the tasks and every setting that changes the numbers
    or the files (a new setting counts unless it is listed in _NOT_THE_RUN)."""
    from assay.settings import setting_names

    model = settings.model if isinstance(settings.model, str) else type(settings.model).__name__
    values = {n: getattr(settings, n) for n in setting_names() if n not in _NOT_THE_RUN}
    return _normal({**values, "model": model, "tasks": tasks})
