"""A run into output files that already exist: the same run resumes; a different one gets
files of its own (--output-path folder: a new timestamp) or, where the path names one run's
files (--output-dir, an --output-path .json file), is refused, or with --overwrite replaces
them. So a results file never mixes two runs."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from assay.errors import ConfigError
from assay.results.layout import OutputPlace, RunFiles
from assay.run.settings import RECORDED, RUN_IDENTITY, names_changing
from assay.util.redact import clean

log = logging.getLogger(__name__)


def _normal(value: Any) -> Any:
    """`value` as results.json stores it (secrets hidden), so a key read back compares equal."""
    return clean(json.loads(json.dumps(value, default=str)))


def _earlier(path: Path) -> dict[str, Any] | None:
    """The results file at `path`, {} when it is not assay's, None when there is none."""
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


def _other_model(earlier: dict[str, Any], identity: dict[str, Any] | None) -> bool:
    """Whether `earlier` was written by another model than the one of `identity` (unknown:
    not yet)."""
    recorded = earlier.get("config", {}).get("model_identity")
    return identity is not None and recorded != _normal(identity)


def check_place(
    place: OutputPlace, key: dict[str, Any], identity: dict[str, Any] | None, overwrite: bool
) -> bool:
    """Before the model is built: refuse a run whose files are another run's (`check_files`);
    an --output-path folder always has room (a different run gets files of its own). Returns
    whether --overwrite replaces the files there."""
    if place.kind == "lm-eval":
        return False
    return check_files(place.files(), place.flag, key, identity, overwrite)


def run_files(
    place: OutputPlace,
    key: dict[str, Any],
    identity: dict[str, Any],
    overwrite: bool,
    replaces: bool | None = None,
) -> RunFiles:
    """The files the run with `key` and model `identity` writes at `place`, after checking
    what is there (unless `replaces` says what `check_place` found with this identity, under
    the run's lock): an earlier run's files that --overwrite replaces are removed. Raises
    ConfigError where a different run's files are in the way and `overwrite` is False."""
    if place.kind == "lm-eval":
        return _timestamped(place, key, identity)
    files = place.files()
    if replaces is None:
        replaces = check_files(files, place.flag, key, identity, overwrite)
    if replaces:
        clear_files(files)
    return files


def _timestamped(place: OutputPlace, key: dict[str, Any], identity: dict[str, Any]) -> RunFiles:
    """The lm-eval layout: this run's earlier timestamp when it has one (it resumes), a new
    one otherwise."""
    stamp = place.recorded_stamp()
    if stamp is not None:
        files = place.files(stamp)
        earlier = _earlier(files.results)
        if earlier and _other_model(earlier, identity):
            _note(
                f"{place.flag} {place.given}: {files.results.name} holds this run's tasks and "
                "settings for another model identity (other weights under the same name); this "
                "run writes files of its own."
            )
            stamp = None
        elif earlier is not None:
            _note(
                f"{place.flag} {place.given}: resuming this run's files "
                f"({files.results}); answers already given come from its cache."
            )
    if stamp is None:
        stamp = place.new_stamp(key)
    return place.files(stamp)


def _note(text: str) -> None:
    sys.stderr.write(f"assay: note: {text}\n")


def check_files(
    files: RunFiles,
    flag: str,
    key: dict[str, Any],
    identity: dict[str, Any] | None,
    overwrite: bool,
) -> bool:
    """Check that a run with `key` (and, once the model is built, model `identity`) may write
    `files`. Returns True when they hold a different run's results that --overwrite will
    replace; raises ConfigError when they hold one and `overwrite` is False."""
    earlier = _earlier(files.results)
    if earlier is None:
        return False
    run = _stored_key(earlier)
    if run is None:
        why = f"a {files.results.name} written by another tool or an older assay"
    elif run != _normal(key):
        why = f"the results of a different run ({_differences(run, _normal(key))})"
    elif _other_model(earlier, identity):
        why = "the results of a different model (its model identity differs)"
    else:
        log.info("%s holds this run's results: resuming (answers come from its cache)", flag)
        return False
    if overwrite:
        return True
    where = files.results.parent if files.kind == "folder" else files.results
    raise ConfigError(
        f"{flag} {where} holds {why}. Re-run with --overwrite to replace its results and "
        f"samples files, or write elsewhere (--output-path FOLDER keeps any number of runs "
        "side by side)."
    )


def clear_files(files: RunFiles) -> None:
    """Remove an earlier run's results and samples files (the response cache stays: it is keyed
    by model identity, so answers of another model are never reused)."""
    for path in [files.results, *files.samples_files()]:
        if path.exists():
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
