"""Run folders, of assay or of lm-eval, read into typed runs.

Two layouts are read:

- assay: `DIR/results.json` and `DIR/samples_<task>.jsonl` (task names made file-safe);
- lm-eval 0.4.x: `results_<ts>.json` and `samples_<task>_<ts>.jsonl` sharing one timestamp,
  directly in DIR or in its model subfolder (`DIR/<model_name_sanitized>/`), as
  `lm_eval --output_path DIR --log_samples` writes them. A results file may be given itself,
  which picks one run of a folder holding several.

Samples are read only when asked for (a report of the numbers needs none).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from assay.errors import ResultsError
from assay.results.schema import ResultsFile, SampleRecord, docs_fingerprint
from assay.results.strict_json import restore_non_finite
from assay.results.writer import safe_name
from assay.seeds import SEED_KEYS

Layout = Literal["assay", "lm-eval"]

_LM_EVAL_RESULTS = re.compile(r"^results_(?P<ts>.+)\.json$")


@dataclass
class TaskSamples:
    """A task's samples records: per filter, per doc id."""

    task: str
    path: Path
    by_filter: dict[str, dict[int, SampleRecord]]

    def docs(self) -> dict[int, SampleRecord]:
        """One record per doc (of the first filter: every filter sees the same docs)."""
        return next(iter(self.by_filter.values()), {})

    def fingerprint(self) -> str:
        """`docs_fingerprint` of the docs in this file."""
        return docs_fingerprint((i, r["doc_hash"]) for i, r in self.docs().items())


@dataclass
class Run:
    """One evaluation run read from disk."""

    path: Path
    """The folder or results file given."""
    label: str
    """How tables name the run (the basename of the path given, unless labelled)."""
    layout: Layout
    results_path: Path
    results: ResultsFile
    samples_paths: dict[str, Path]
    """Per task: the samples file where it would be (it may be missing)."""
    _samples: dict[str, TaskSamples] = field(default_factory=dict, repr=False)

    # ---------------------------------------------------------------- tasks and groups
    def entry(self, name: str) -> dict[str, Any] | None:
        """The results entry of a task or group (None when the run has none)."""
        return cast(dict[str, Any] | None, self.results.get("results", {}).get(name))

    def tasks(self) -> list[str]:
        """The run's tasks (not groups), in results order."""
        groups = set(self.results.get("group_subtasks", {})) | set(self.results.get("groups", {}))
        return [name for name in self.results.get("results", {}) if name not in groups]

    def groups(self) -> list[str]:
        """Groups with aggregated scores."""
        return list(self.results.get("groups", {}))

    def leaf_tasks(self, name: str) -> list[str]:
        """The tasks under a group, through its subgroups (a task gives itself)."""
        children = self.results.get("group_subtasks", {}).get(name)
        if children is None:
            return [name]
        return [leaf for child in children for leaf in self.leaf_tasks(child)]

    def config(self, task: str) -> dict[str, Any]:
        """The task's `configs` entry ({} when absent)."""
        return self.results.get("configs", {}).get(task) or {}

    def cluster_key(self, task: str) -> str | None:
        """The doc field the task clusters docs by (its `metadata.cluster_key`), or None."""
        provenance = self.results.get("provenance", {}).get("tasks", {}).get(task)
        if provenance is not None:
            return provenance.get("cluster_key")
        key = (self.config(task).get("metadata") or {}).get("cluster_key")
        return str(key) if key is not None else None

    # ---------------------------------------------------------------- samples
    def has_samples(self, task: str) -> bool:
        return task in self._samples or (
            task in self.samples_paths and self.samples_paths[task].is_file()
        )

    def samples(self, task: str) -> TaskSamples:
        """The task's samples records (read once)."""
        if task not in self._samples:
            path = self.samples_paths.get(task)
            if path is None or not path.is_file():
                where = path or self.results_path.parent / f"samples_{safe_name(task)}.jsonl"
                raise ResultsError(
                    f"run {self.label} ({self.path}): no samples file for task {task!r} "
                    f"(looked for {where}). Per-doc comparisons need the run's samples: "
                    "re-run it with --log-samples."
                )
            self._samples[task] = read_samples(task, path)
        return self._samples[task]

    # ---------------------------------------------------------------- provenance
    def facts(self) -> dict[str, Any]:
        """What produced the run, flattened to comparable "area.key" entries (the basis of
        compare's "what differs" block). Read from `provenance` when the run recorded it,
        otherwise from the keys lm-eval writes; docs fingerprints come from the samples files
        when the run did not record them."""
        provenance = self.results.get("provenance")
        if provenance:
            out: dict[str, Any] = {"harness": f"assay {provenance['versions'].get('assay')}"}
            for area in ("versions", "backend", "settings", "seeds"):
                for key, value in provenance.get(area, {}).items():  # type: ignore[attr-defined]
                    out[f"{area}.{key}"] = value
            for task, info in provenance.get("tasks", {}).items():
                for key, value in info.items():
                    out[f"task.{task}.{key}"] = value
            return out
        return self._recorded_facts()

    def _recorded_facts(self) -> dict[str, Any]:
        """`facts()` of a run without provenance (lm-eval's, or an older assay's), under the
        same keys with the same meanings; what the run does not record is left out."""
        results = self.results
        config = results.get("config", {})
        harness = "lm-eval" if self.layout == "lm-eval" else "assay"
        version = results.get("lm_eval_version")
        out: dict[str, Any] = {"harness": f"{harness} {version}" if version else harness}
        if "transformers_version" in results:
            out["versions.transformers"] = results["transformers_version"]
        out["backend.backend"] = config.get("model")
        model = _model_name(config.get("model_args"))
        if model is not None:
            out["backend.model"] = model
        for key, source in (
            ("revision", "model_revision"),
            ("commit_sha", "model_sha"),
            ("dtype", "model_dtype"),
            ("num_parameters", "model_num_parameters"),
        ):
            value = cast(dict[str, Any], config).get(source)
            if value not in (None, ""):
                # lm-eval writes the dtype as torch prints it ("torch.float32").
                out[f"backend.{key}"] = value.removeprefix("torch.") if key == "dtype" else value
        # lm-eval records the template it applied (null: none applied), not the model's.
        applied = results.get("chat_template_applied", results.get("chat_template") is not None)
        out["settings.apply_chat_template"] = bool(applied)
        if applied and results.get("chat_template_sha"):
            out["backend.chat_template_sha256"] = results.get("chat_template_sha")
        for key in ("limit", "gen_kwargs", "batch_size", "device"):
            if key in config:
                value = config[key]  # type: ignore[literal-required]
                # lm-eval's command line records --batch_size 16 as the string "16".
                isdigit = isinstance(value, str) and value.isdigit()
                out[f"settings.{key}"] = int(value) if isdigit else value
        out["settings.system_instruction"] = results.get("system_instruction")
        out["settings.fewshot_as_multiturn"] = results.get("fewshot_as_multiturn")
        for key in SEED_KEYS:
            out[f"seeds.{key}"] = config.get(key)
        n_shot = cast(dict[str, Any], results).get("n-shot", {})
        for task in self.tasks():
            cfg = self.config(task)
            out[f"task.{task}.dataset_path"] = cfg.get("dataset_path", cfg.get("hf_repo"))
            out[f"task.{task}.dataset_name"] = cfg.get("dataset_name", cfg.get("hf_subset"))
            out[f"task.{task}.num_fewshot"] = n_shot.get(task)
            if self.has_samples(task):
                samples = self.samples(task)
                out[f"task.{task}.docs"] = len(samples.docs())
                out[f"task.{task}.docs_fingerprint"] = samples.fingerprint()
        return out


def _model_name(model_args: Any) -> str | None:
    """The model lm-eval names a run after: the first of its model_args peft, delta,
    pretrained, model, path, engine."""
    if isinstance(model_args, str):
        pairs = (p.partition("=") for p in model_args.split(",") if "=" in p)
        model_args = {k.strip(): v.strip() for k, _, v in pairs}
    if not isinstance(model_args, dict):
        return None
    for key in ("peft", "delta", "pretrained", "model", "path", "engine"):
        if model_args.get(key):
            return str(model_args[key])
    return None


def read_samples(task: str, path: Path) -> TaskSamples:
    """A samples file's records by filter and doc id; a malformed or duplicated line is an
    error naming the file and line."""
    by_filter: dict[str, dict[int, SampleRecord]] = {}
    for number, record in _json_lines(path):
        for required in ("doc_id", "doc_hash"):
            if required not in record:
                raise ResultsError(
                    f"{path}, line {number}: a samples record needs {required!r}; this line has "
                    f"{sorted(record)}. Is it a samples file of assay or lm-eval?"
                )
        flt = str(record.get("filter", "none"))
        docs = by_filter.setdefault(flt, {})
        doc_id = int(record["doc_id"])
        if doc_id in docs:
            raise ResultsError(
                f"{path}, line {number}: doc_id {doc_id} appears twice under filter {flt!r} "
                "(lm-eval appends to a samples file: was the same run written twice into this "
                "folder?). Keep one run per folder."
            )
        docs[doc_id] = cast(SampleRecord, record)
    return TaskSamples(task, path, by_filter)


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ResultsError(
                    f"{path}, line {number}: not valid JSON ({exc.msg}, column {exc.colno})."
                ) from None
            if not isinstance(record, dict):
                raise ResultsError(f"{path}, line {number}: expected a JSON object per line.")
            yield number, restore_non_finite(record)


def read_run(path: str | Path, label: str | None = None) -> Run:
    """The run at `path`: an assay or lm-eval output folder, or a results file in one."""
    given = Path(path)
    results_path, layout = _locate(given)
    try:
        results = json.loads(results_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultsError(f"{results_path}: cannot read ({exc.strerror}).") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(
            f"{results_path}: not valid JSON ({exc.msg}, line {exc.lineno}). Was the run "
            "interrupted while writing it?"
        ) from None
    if isinstance(results, dict):
        results = restore_non_finite(results)
    if not isinstance(results, dict) or not isinstance(results.get("results"), dict):
        raise ResultsError(
            f"{results_path}: not a results file (no 'results' object). Give a folder written "
            "by `assay run --output-dir` or `lm_eval --output_path`."
        )
    folder = results_path.parent
    names = [*results.get("results", {}), *results.get("configs", {})]
    if layout == "assay":
        samples = {task: folder / f"samples_{safe_name(task)}.jsonl" for task in names}
    else:
        # lm-eval: results_<ts>.json with samples_<task>_<ts>.jsonl; `assay run --output-path
        # X.json`: X.json with samples_<task>_X.jsonl (task names made file-safe by assay).
        stem = results_path.stem
        suffix = (
            stem.removeprefix("results_") if _LM_EVAL_RESULTS.match(results_path.name) else stem
        )
        samples = {task: _samples_file(folder, task, suffix) for task in names}
    name = label if label is not None else (given.name or str(given))
    return Run(given, name, layout, results_path, cast(ResultsFile, results), samples)


def _samples_file(folder: Path, task: str, suffix: str) -> Path:
    """A task's samples file in the lm-eval layout: lm-eval keeps the task name as it is,
    assay makes it file-safe."""
    raw = folder / f"samples_{task}_{suffix}.jsonl"
    if task == safe_name(task) or raw.is_file():
        return raw
    return folder / f"samples_{safe_name(task)}_{suffix}.jsonl"


def _locate(path: Path) -> tuple[Path, Layout]:
    """The results file of a run and its layout."""
    if path.is_file():
        if path.name == "results.json":
            return path, "assay"
        if path.suffix == ".json":
            return path, "lm-eval"
        raise ResultsError(
            f"{path}: not a results file; give a run folder, its results.json (assay), its "
            "results_<timestamp>.json (lm-eval) or the .json file given to --output-path."
        )
    if not path.is_dir():
        raise ResultsError(f"{path}: no such run folder.")
    if (path / "results.json").is_file():
        return path / "results.json", "assay"
    found = [*path.glob("results_*.json"), *path.glob("*/results_*.json")]
    found = [f for f in found if _LM_EVAL_RESULTS.match(f.name)]
    if not found:
        raise ResultsError(
            f"{path}: no results.json (assay) or results_<timestamp>.json (lm-eval, possibly in "
            "a model subfolder) here. Give the folder passed to --output-path / --output-dir."
        )
    latest = max(found, key=lambda f: (_LM_EVAL_RESULTS.match(f.name).group("ts"), str(f)))  # type: ignore[union-attr]
    if len(found) > 1:
        sys.stderr.write(
            f"assay: note: {path} holds {len(found)} runs; reading the latest, {latest}. Give "
            "a results file to read another.\n"
        )
    return latest, "lm-eval"
