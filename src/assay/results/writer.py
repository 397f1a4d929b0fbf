"""A run's results file and samples files (`layout.RunFiles` names them), written atomically as
each task finishes."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from assay.errors import ConfigError
from assay.results.layout import RunFiles, safe_name
from assay.results.strict_json import strict_results
from assay.util.redact import clean

__all__ = ["OutputDir", "safe_name"]


def _umask() -> int:
    # The umask can only be read by setting it; set it straight back.
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _atomic_write(path: Path, chunks: Iterable[str]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates 0600 files; a results file is as readable as any file the user writes.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for chunk in chunks:
                handle.write(chunk)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _blocks(parts: list[Path]) -> Iterable[str]:
    """The parts' text, a megabyte at a time."""
    for part in parts:
        with part.open(encoding="utf-8") as handle:
            while block := handle.read(1 << 20):
                yield block


class OutputDir:
    """The run's output files; `path` is the folder its results file goes into."""

    def __init__(self, files: RunFiles, flag: str = "--output-dir") -> None:
        self.files = files
        self.path = files.results.parent
        try:
            for folder in (self.path, files.samples_dir, files.state):
                folder.mkdir(parents=True, exist_ok=True)
            probe = self.path / ".assay-write-test"
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            raise ConfigError(
                f"{flag} {self.path}: not writable ({exc.strerror}). Choose another directory."
            ) from None

    def write_results(self, results: Mapping[str, Any]) -> Path:
        """Replace the results file atomically; strict JSON (non-finite numbers as null, noted),
        secrets hidden (`util.redact.clean`: model args, URLs, keys)."""
        target = self.files.results
        text = json.dumps(
            strict_results(clean(dict(results))),
            indent=2,
            ensure_ascii=False,
            default=str,
            allow_nan=False,
        )
        _atomic_write(target, [text])
        return target

    def samples_path(self, task: str) -> Path:
        """The samples file of `task`."""
        return self.files.samples(task)

    def part_path(self, task: str, part: int) -> Path:
        """A part file of `task`'s samples while the task runs: in the run's state folder, so
        runs side by side in one folder never share one."""
        return self.files.state / f".samples_{safe_name(task)}.{part}.part"

    def write_samples(self, task: str, parts: list[Path], task_hash: str) -> str:
        """Join per-filter part files (lm-eval order: all docs of filter 1, then 2...) into the
        task's samples file, and return `task_hash` (lm-eval's, which their writer took:
        `SamplesLog`)."""
        target = self.samples_path(task)
        if len(parts) == 1:
            os.replace(parts[0], target)  # one complete part is the file: no copy
        else:
            _atomic_write(target, _blocks(parts))
            for part in parts:
                part.unlink()
        return task_hash
