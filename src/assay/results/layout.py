"""Where a run's files go.

Three layouts, one rule each:

- `--output-path DIR` (lm-eval's): `DIR/<model_name_sanitized>/results_<ts>.json` and
  `samples_<task>_<ts>.jsonl`, any number of runs side by side. The run's own state (its
  response cache, batch journals, lock) is kept in `DIR/<model>/.assay/<run id>/`, the run id
  being a digest of what makes two runs the same run, so the same command again resumes its
  own files (the same timestamp) and a different run gets new ones.
- `--output-path X.json`: that results file; samples beside it as `samples_<task>_X.jsonl`,
  state in `.assay/X.json/` beside it. One run per file: the same run resumes, a different one
  is refused (or replaced with --overwrite).
- `--output-dir DIR` (one run per folder): `DIR/results.json`, `DIR/samples_<task>.jsonl`,
  `DIR/cache.sqlite`; the same run resumes, a different one is refused (or --overwrite).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from assay.errors import ConfigError
from assay.util.redact import clean

Kind = Literal["lm-eval", "file", "folder"]

STATE = ".assay"
"""The hidden folder of run state (response cache, batch journals, lock) in the lm-eval and
file layouts."""
RUN_RECORD = "run.json"
"""In a run's state folder: its timestamp (which names its files) and run key."""

_MODEL_NAME_KEYS = ("peft", "delta", "pretrained", "model", "path", "engine")
"""lm-eval's order of the model args that name the model folder."""
_UNSAFE = re.compile(r"[\"<>:/|\\?*\[\]]+")
"""lm-eval's sanitize_model_name pattern."""
_FILE_UNSAFE = re.compile(r"[<>:/|\\?*\[\]\s\x00-\x1f\x7f]+")


def safe_name(task: str) -> str:
    """A task name usable in a file name (no separators, wildcards or control characters)."""
    return _FILE_UNSAFE.sub("__", task)


def timestamp() -> str:
    """lm-eval's file timestamp: local time, ISO format, colons as dashes."""
    return datetime.now().isoformat().replace(":", "-")


def model_folder_name(model: str, model_args: dict[str, Any]) -> str:
    """lm-eval's `model_name_sanitized`: the first of the model args peft, delta, pretrained,
    model, path, engine, with path separators and other unsafe characters as `__`. Without
    one, the backend's name (lm-eval draws a random id, which no re-run could find again)."""
    name = next((str(model_args[k]) for k in _MODEL_NAME_KEYS if model_args.get(k)), model)
    safe = _UNSAFE.sub("__", name).strip()
    # "." and ".." would be the folder itself or its parent.
    return safe if safe.strip(".") else f"model{safe}"


@dataclass(frozen=True)
class RunFiles:
    """The files of one run."""

    kind: Kind
    results: Path
    """The results file."""
    samples_dir: Path
    samples_suffix: str | None
    """Samples files are `samples_<task>_<suffix>.jsonl`; None: `samples_<task>.jsonl`."""
    state: Path
    """The folder of the run's response cache, batch journals and lock."""

    @classmethod
    def one_run_folder(cls, folder: str | Path) -> RunFiles:
        """The files of the one run an --output-dir folder holds."""
        folder = Path(folder)
        return cls("folder", folder / "results.json", folder, None, folder)

    def samples(self, task: str) -> Path:
        """The samples file of `task`."""
        tail = f"_{self.samples_suffix}" if self.samples_suffix is not None else ""
        return self.samples_dir / f"samples_{safe_name(task)}{tail}.jsonl"

    def samples_files(self) -> list[Path]:
        """The samples files of this run present on disk."""
        tail = f"_{self.samples_suffix}" if self.samples_suffix is not None else ""
        return sorted(self.samples_dir.glob(f"samples_*{tail}.jsonl"))


@dataclass(frozen=True)
class OutputPlace:
    """Where a run writes, known from its settings and run key before anything is read."""

    kind: Kind
    given: Path
    """The path given (--output-path or --output-dir)."""
    folder: Path
    """The folder the results file goes into."""
    state: Path
    flag: str
    """The flag that named it, for messages."""

    @property
    def lock(self) -> Path:
        """The run's lock file (`assay.run.lock`)."""
        return self.state / (".assay-lock" if self.kind == "folder" else "lock")

    def files(self, stamp: str | None = None) -> RunFiles:
        """The run's files; in the lm-eval layout, those of the run timestamped `stamp`."""
        if self.kind == "folder":
            return RunFiles.one_run_folder(self.folder)
        if self.kind == "file":
            stem = self.given.stem
            return RunFiles("file", self.given, self.folder, stem, self.state)
        assert stamp is not None
        results = self.folder / f"results_{stamp}.json"
        return RunFiles("lm-eval", results, self.folder, stamp, self.state)

    def recorded_stamp(self) -> str | None:
        """The timestamp of this run's files from an earlier invocation (lm-eval layout)."""
        try:
            record = json.loads((self.state / RUN_RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        stamp = record.get("stamp") if isinstance(record, dict) else None
        return stamp if isinstance(stamp, str) and _STAMP.fullmatch(stamp) else None

    def new_stamp(self, key: dict[str, Any]) -> str:
        """A timestamp no other run in the folder has taken (two runs starting in the same
        microsecond, on two hosts, would otherwise share a results file), recorded as this
        run's (lm-eval layout)."""
        taken = self.folder / STATE / "stamps"
        taken.mkdir(parents=True, exist_ok=True)
        for _ in range(1000):
            stamp = timestamp()
            try:
                (taken / stamp).open("x").close()
            except FileExistsError:
                continue
            if not (self.folder / f"results_{stamp}.json").exists():
                break
        else:
            raise ConfigError(f"{self.flag} {self.given}: no free timestamp for this run's files.")
        self.state.mkdir(parents=True, exist_ok=True)
        record = {"stamp": stamp, "run": clean(key)}
        text = json.dumps(record, indent=2, ensure_ascii=False, default=str)
        (self.state / RUN_RECORD).write_text(text, encoding="utf-8")
        return stamp


_STAMP = re.compile(r"[0-9T.\-]+")


def run_id(key: dict[str, Any]) -> str:
    """A short digest of a run key: the name of the run's state folder."""
    text = json.dumps(key, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def output_place(
    output_path: str | Path | None,
    output_dir: str | Path | None,
    model: str,
    model_args: dict[str, Any],
    key: dict[str, Any],
) -> OutputPlace | None:
    """Where the run with `key` writes (None: nowhere)."""
    if output_path is not None and output_dir is not None:
        raise ConfigError(
            f"--output-path {output_path} and --output-dir {output_dir}: give one. --output-path "
            "writes lm-eval's layout (a folder of timestamped runs, or one .json file); "
            "--output-dir one run per folder (results.json, samples_<task>.jsonl)."
        )
    if output_dir is not None:
        folder = Path(output_dir)
        return OutputPlace("folder", folder, folder, folder, "--output-dir")
    if output_path is None:
        return None
    given = Path(output_path)
    if given.suffix.lower() == ".json" and not given.is_dir():
        return OutputPlace(
            "file", given, given.parent, given.parent / STATE / given.name, "--output-path"
        )
    folder = given / model_folder_name(model, model_args)
    return OutputPlace("lm-eval", given, folder, folder / STATE / run_id(key), "--output-path")
