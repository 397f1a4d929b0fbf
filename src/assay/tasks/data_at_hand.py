"""Whether a task's data can be read without the network, judged from paths alone (no
dataset library is imported, so `assay tasks list` stays quick).

- "local": the task reads data files that all exist here (json/csv/parquet... `data_files`).
- "missing": it names local data files and one of them does not exist.
- "cached": a hub dataset with a copy in the datasets or hub cache (some subset or split of
  it: the copy may not hold every split the task reads).
- "hub": a hub dataset with no cached copy: running it downloads it.
- "": the task loads its data its own way, which cannot be judged without running it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FILE_BUILDERS = frozenset({"json", "csv", "parquet", "text", "arrow", "pandas", "imagefolder"})
"""`datasets.load_dataset` paths that read `data_files` rather than a hub repository."""


def data_at_hand(path: str | None, data_files: Any = None) -> str:
    """The availability label (module docstring) of a dataset `path` with `data_files`."""
    files = list(_file_names(data_files))
    if files and all("://" not in f for f in files):
        return "local" if all(Path(f).exists() for f in files) else "missing"
    if not path:
        return ""
    if path in FILE_BUILDERS or Path(path).is_dir():
        return "local" if Path(path).exists() or path in FILE_BUILDERS else "missing"
    return "cached" if any(folder.is_dir() for folder in _cache_folders(path)) else "hub"


def _file_names(files: Any) -> Iterator[str]:
    if isinstance(files, str):
        yield files
    elif isinstance(files, dict):
        for value in files.values():
            yield from _file_names(value)
    elif isinstance(files, list | tuple):
        for value in files:
            yield from _file_names(value)


def _cache_folders(repo: str) -> list[Path]:
    """Where datasets and huggingface_hub keep a copy of hub dataset `repo` (their own
    environment variables, read as those libraries read them)."""
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    datasets_cache = Path(os.environ.get("HF_DATASETS_CACHE") or home / "datasets")
    hub_cache = Path(
        os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or home / "hub"
    )
    return [
        datasets_cache / repo.replace("/", "___"),
        hub_cache / ("datasets--" + repo.replace("/", "--")),
    ]
