"""`assay run --log-to mlflow,wandb,trackio,hub`: a finished run logged as one run of each tracker.

Each tracker gets the same things: the metrics (one per task, metric and filter, keyed
`task/metric/filter`), the run's configuration as params, results.json as an artifact, and one
samples table per task. Secrets never leave: model_args values under secret-looking keys are
redacted, and the secret strings are scrubbed from every file before a tracker sees it.

Each tracker's library is an optional extra, imported only when its run is logged;
`check_trackers` refuses an unknown name, a missing library or a wrong --log-to-args key before
any model is built.
"""

from __future__ import annotations

import importlib.util
import json
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from assay.errors import ConfigError, TrackerError
from assay.results.layout import RunFiles, safe_name
from assay.results.strict_json import strict_results
from assay.util.redact import clean, clean_text, find_secrets, remember


@dataclass(frozen=True)
class TrackedRun:
    """What every tracker logs of one finished run (secrets already removed)."""

    name: str
    metrics: dict[str, float]
    """`task/metric/filter` -> value, for every numeric entry of results.json `results`."""
    params: dict[str, str]
    """The run's config and provenance, flattened to `a.b` keys with string values."""
    results_file: Path
    """results.json, redacted."""
    samples_files: dict[str, Path] = field(default_factory=dict)
    """Per task: its samples_<task>.jsonl, scrubbed."""

    def samples_rows(self, task: str) -> list[dict[str, Any]]:
        """A task's samples as flat table rows: nested values as JSON text."""
        with self.samples_files[task].open(encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle if line.strip()]
        return [{k: _cell(v) for k, v in record.items()} for record in records]


class Tracker(Protocol):
    """One experiment tracker: logs a TrackedRun as one of its runs."""

    name: ClassVar[str]
    extra: ClassVar[str]
    """The assay extra that installs its library."""
    module: ClassVar[str]
    """The library's import name."""
    arg_names: ClassVar[frozenset[str]]
    """The --log-to-args keys it reads."""

    def log(self, run: TrackedRun, args: Mapping[str, Any]) -> str:
        """Log `run`; returns where it went (for the user)."""
        ...


class MlflowTracker:
    """An MLflow run: metrics, params, results.json and a `log_table` per task."""

    name: ClassVar[str] = "mlflow"
    extra: ClassVar[str] = "mlflow"
    module: ClassVar[str] = "mlflow"
    arg_names: ClassVar[frozenset[str]] = frozenset({"name", "project", "tracking_uri"})

    def log(self, run: TrackedRun, args: Mapping[str, Any]) -> str:
        import mlflow
        import pandas as pd

        if args.get("tracking_uri"):
            mlflow.set_tracking_uri(str(args["tracking_uri"]))
        # The experiment is looked up in this store each time (the fluent API's active
        # experiment may belong to another store set earlier in the process).
        client = mlflow.MlflowClient()
        name = str(args.get("project") or "Default")
        found = client.get_experiment_by_name(name)
        experiment = found.experiment_id if found else client.create_experiment(name)
        with mlflow.start_run(experiment_id=experiment, run_name=run.name) as active:
            # MLflow caps params at 6000 characters.
            mlflow.log_params({k: v[:6000] for k, v in run.params.items()})
            mlflow.log_metrics(run.metrics)
            mlflow.log_artifact(str(run.results_file))
            for task in run.samples_files:
                mlflow.log_table(pd.DataFrame(run.samples_rows(task)), f"samples/{task}.json")
            return f"mlflow run {active.info.run_id} ({mlflow.get_tracking_uri()})"


class WandbTracker:
    """A Weights & Biases run: summary metrics, config, a results artifact, a Table per task."""

    name: ClassVar[str] = "wandb"
    extra: ClassVar[str] = "wandb"
    module: ClassVar[str] = "wandb"
    arg_names: ClassVar[frozenset[str]] = frozenset({"name", "project", "entity", "group"})

    def log(self, run: TrackedRun, args: Mapping[str, Any]) -> str:
        import wandb

        active = wandb.init(
            project=args.get("project", "assay"),
            entity=args.get("entity"),
            group=args.get("group"),
            name=run.name,
            config=run.params,
            job_type="eval",
        )
        try:
            active.log(run.metrics)
            active.summary.update(run.metrics)
            artifact = wandb.Artifact("results", type="eval_results")
            artifact.add_file(str(run.results_file))
            for task, path in run.samples_files.items():
                artifact.add_file(str(path), name=path.name)
                rows = run.samples_rows(task)
                names = sorted({k for row in rows for k in row})
                columns: list[str | int] = list(names)
                table = wandb.Table(columns=columns, data=[[r.get(c) for c in names] for r in rows])
                active.log({f"{task}/samples": table})
            active.log_artifact(artifact)
            where = active.url or active.dir
        finally:
            active.finish()
        return f"wandb run {run.name} ({where})"


class TrackioTracker:
    """A trackio run (stored locally in TRACKIO_DIR, or a Space with space_id): metrics,
    config, results.json as an artifact, a Table per task."""

    name: ClassVar[str] = "trackio"
    extra: ClassVar[str] = "trackio"
    module: ClassVar[str] = "trackio"
    arg_names: ClassVar[frozenset[str]] = frozenset({"name", "project", "group", "space_id"})

    def log(self, run: TrackedRun, args: Mapping[str, Any]) -> str:
        import pandas as pd
        import trackio

        trackio.init(
            project=str(args.get("project", "assay")),
            name=run.name,
            group=args.get("group"),
            space_id=args.get("space_id"),
            config=dict(run.params),
            auto_log_cpu=False,  # one finished run: no system metrics to sample
            auto_log_gpu=False,
        )
        try:
            trackio.log(dict(run.metrics))
            for task in run.samples_files:
                table = trackio.Table(dataframe=pd.DataFrame(run.samples_rows(task)))
                trackio.log({f"{task}/samples": table})
            trackio.log_artifact(run.results_file, name="results", type="eval_results")
        finally:
            trackio.finish()
        return f"trackio run {run.name} (project {args.get('project', 'assay')})"


class HubTracker:
    """A Hugging Face dataset repo: results.json and the samples files under a folder named
    after the run (as lm-eval's --hf_hub_log_args pushes them)."""

    name: ClassVar[str] = "hub"
    extra: ClassVar[str] = "hub"
    module: ClassVar[str] = "huggingface_hub"
    arg_names: ClassVar[frozenset[str]] = frozenset({"name", "repo", "private"})

    def log(self, run: TrackedRun, args: Mapping[str, Any]) -> str:
        from huggingface_hub import HfApi

        repo = args["repo"]  # check_trackers refuses hub without it
        api = HfApi()
        api.create_repo(
            str(repo), repo_type="dataset", private=bool(args.get("private", False)), exist_ok=True
        )
        api.upload_folder(
            repo_id=str(repo),
            repo_type="dataset",
            folder_path=str(run.results_file.parent),
            path_in_repo=run.name,
            commit_message=f"assay run {run.name}",
        )
        return f"https://huggingface.co/datasets/{repo}/tree/main/{run.name}"


TRACKERS: dict[str, type[Tracker]] = {
    t.name: t for t in (MlflowTracker, WandbTracker, TrackioTracker, HubTracker)
}


def check_trackers(names: Sequence[str], args: Mapping[str, Any]) -> list[Tracker]:
    """The trackers --log-to names, each with its library importable; else a ConfigError naming
    the flag, the value and the extra to install. Imports nothing heavy."""
    chosen: list[Tracker] = []
    for name in names:
        if name not in TRACKERS:
            raise ConfigError(
                f"--log-to {name!r}: not a tracker; choose from {', '.join(sorted(TRACKERS))}."
            )
        tracker = TRACKERS[name]()
        if importlib.util.find_spec(tracker.module) is None:
            raise ConfigError(
                f"--log-to {name}: the {tracker.module} package is not installed; "
                f"install it with pip install 'assay[{tracker.extra}]'."
            )
        if name == "hub" and not args.get("repo"):
            raise ConfigError(
                "--log-to hub needs the dataset repo: --log-to-args repo=ORG/NAME "
                "(the token comes from HF_TOKEN or `hf auth login`)."
            )
        chosen.append(tracker)
    known = set().union(*(t.arg_names for t in chosen)) if chosen else set()
    unknown = sorted(set(args) - known)
    if unknown:
        raise ConfigError(
            f"--log-to-args {unknown[0]!r}: not read by --log-to {','.join(names) or '(none)'}; "
            f"keys: {', '.join(sorted(known)) or 'none without --log-to'}."
        )
    return chosen


def log_run(
    trackers: Sequence[Tracker],
    results: Mapping[str, Any],
    files: RunFiles | str | Path,
    args: Mapping[str, Any],
) -> list[str]:
    """Log the run written to `files` (its results and samples files; a path: an --output-dir
    folder) to every tracker; returns where each run went. The run's default name is its
    folder's (--output-dir) or its results file's."""
    if not isinstance(files, RunFiles):
        files = RunFiles.one_run_folder(files)
    folder = files.results.parent
    default = folder.resolve().name if files.kind == "folder" else files.results.stem
    name = str(args.get("name") or default)
    with _staged(results, files, default) as (results_file, samples):
        run = TrackedRun(name, metrics_of(results), params_of(results), results_file, samples)
        logged, failed = [], []
        for tracker in trackers:
            try:
                logged.append(tracker.log(run, args))
            except Exception as exc:  # the tracker's own errors: told, after the others ran
                failed.append(f"{tracker.name}: {type(exc).__name__}: {exc}")
    if failed:
        done = f" (logged to {'; '.join(logged)})" if logged else ""
        raise TrackerError(
            f"--log-to: the run finished and its files are in {folder}, but logging it failed: "
            f"{' | '.join(failed)}{done}. Fix the tracker's settings (--log-to-args, its "
            "environment variables) and log the run again."
        )
    return logged


def metrics_of(results: Mapping[str, Any]) -> dict[str, float]:
    """Every numeric value of results.json `results` and `groups`, keyed `task/metric/filter`
    (lm-eval's "acc,none" split at its comma, which trackers' keys do not allow)."""
    out: dict[str, float] = {}
    for section in ("results", "groups"):
        for task, entry in (results.get(section) or {}).items():
            for key, value in entry.items():
                if isinstance(value, bool) or not isinstance(value, int | float):
                    continue
                metric, _, filter_name = key.partition(",")
                out["/".join(p for p in (task, metric, filter_name) if p)] = float(value)
    return out


def params_of(results: Mapping[str, Any]) -> dict[str, str]:
    """The run's config, versions and provenance, flattened to `a.b` keys (redacted)."""
    picked = {
        k: results[k]
        for k in ("config", "versions", "n-shot", "provenance", "git_hash", "date")
        if k in results
    }
    flat: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping) and value:
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            flat[prefix] = value if isinstance(value, str) else json.dumps(value, default=str)

    walk("", clean(picked))
    return flat


@contextmanager
def _staged(
    results: Mapping[str, Any], files: RunFiles, name: str
) -> Iterator[tuple[Path, dict[str, Path]]]:
    """results.json and the samples files copied to a temporary folder `name`, secrets
    removed."""
    remember(*find_secrets(results))
    with tempfile.TemporaryDirectory(prefix="assay-log-") as tmp:
        staging = Path(tmp) / safe_name(name)
        staging.mkdir()
        results_file = staging / "results.json"
        text = json.dumps(
            strict_results(clean(dict(results))),
            indent=2,
            ensure_ascii=False,
            default=str,
            allow_nan=False,
        )
        results_file.write_text(text, encoding="utf-8")
        samples: dict[str, Path] = {}
        for task in results.get("n-samples") or {}:
            source = files.samples(task)
            if source.is_file():  # written with --log-samples
                target = staging / f"samples_{safe_name(task)}.jsonl"
                target.write_text(clean_text(source.read_text("utf-8")), encoding="utf-8")
                samples[task] = target
        yield results_file, samples


def _cell(value: Any) -> Any:
    """A table cell: scalars as they are, anything nested as JSON text."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)
