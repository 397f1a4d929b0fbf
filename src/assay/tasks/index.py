"""The name index of an lm-eval task folder: every task, group and tag its YAML files define.

Built as lm-eval 0.4.13's `TaskIndex` builds it, so a name means the same thing in both:
- every `*.yaml` (and `*.yml`) under the folder, in sorted path order, is parsed as YAML with
  its `include`s merged and `!function` left unresolved;
- a mapping with `class` is a (Python) task, one with `group` is a group (whatever its `task`
  holds), one with `task` is a task; anything else (an include template) names nothing;
- within a folder the first file to claim a name keeps it; a task's `tag`s collect it into
  tags (a name already taken by a task or group stays that task or group);
- files that fail to parse are left out of the index and kept in `broken` with the reason.

Parsing ~14k files takes seconds, so each folder's index is cached (one JSON file per folder,
under `$ASSAY_TASK_INDEX_CACHE` or `~/.cache/assay/task-index`), each file's record keyed by the
modification time and size of the file and of every file it includes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

from assay.errors import TaskConfigError
from assay.tasks._yaml_io import Memo, load_with_includes_memo
from assay.tasks.data_at_hand import data_at_hand

log = logging.getLogger(__name__)

Kind = Literal["task", "group", "tag"]
_IGNORE_DIRS = {"__pycache__", ".ipynb_checkpoints"}
_CACHE_VERSION = 2


@dataclass
class IndexEntry:
    """One name of a task folder."""

    name: str
    kind: Kind
    file: str | None
    """The YAML that defines it (None for a tag: tags are collected from their tasks)."""
    members: list[Any] = field(default_factory=list)
    """A tag's task names (sorted); a group's `task` list, as names and nested inline groups."""
    output_type: str | None = None
    """A task's output_type as written (lm-eval's default, generate_until, when None)."""
    num_fewshot: int | None = None
    """A task's num_fewshot as written (None: not written, lm-eval's 0)."""
    data: str = ""
    """Whether the task's data is at hand offline (`data_at_hand`'s label)."""


class _FileRecord(NamedTuple):
    """What one YAML file contributes to the index (the unit of caching, stored as a row)."""

    mtime_ns: int
    size: int
    deps: list[list[Any]]
    """Included files as [path, mtime_ns, size] when this record was made."""
    kind: str | None = None
    name: str | None = None
    tags: list[str] = []  # noqa: RUF012 (a NamedTuple default, never mutated)
    members: list[Any] = []  # noqa: RUF012
    output_type: str | None = None
    error: str | None = None
    num_fewshot: int | None = None
    dataset: list[Any] = []  # noqa: RUF012 ([dataset_path, data_files] as written, resolved)


@dataclass
class FolderIndex:
    """The names one include folder defines."""

    root: Path
    entries: dict[str, IndexEntry] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)
    """YAML files that could not be read or parsed, with the reason (lm-eval skips them too)."""
    shadowed: dict[str, str] = field(default_factory=dict)
    """Files whose task or group name an earlier file of the folder already took."""


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def yaml_files(root: Path) -> list[str]:
    """The task files under `root` (or `root` itself), in lm-eval's order.

    Plain strings, not Paths: on a 14k-file tree pathlib alone costs a second.
    """
    if root.is_file():
        return [str(root)]
    found = []
    for folder, dirs, files in os.walk(root, followlinks=True):
        dirs[:] = [d for d in dirs if d not in _IGNORE_DIRS]
        found += [f"{folder}/{f}" for f in files if f.endswith((".yaml", ".yml"))]
    found.sort()
    return found


def _member_names(value: Any) -> list[Any]:
    """A group's `task` list reduced to what names need: names and inline groups' lists."""
    out: list[Any] = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and isinstance(item.get("group"), str):
            out.append({"group": item["group"], "task": _member_names(item.get("task"))})
        elif isinstance(item, dict) and isinstance(item.get("task"), str):
            out.append(item["task"])
    return out


def _record(path: str, stat: tuple[int, int], memo: Memo) -> _FileRecord:
    try:
        raw, files = load_with_includes_memo(path, memo)
    except TaskConfigError as exc:
        return _FileRecord(*stat, [], error=str(exc))
    deps = [[dep, *(_stat(dep) or (0, 0))] for dep in files[1:]]
    kind = name = output_type = num_fewshot = None
    dataset: list[Any] = []
    tags: list[str] = []
    members: list[Any] = []
    if "class" in raw or ("task" in raw and "group" not in raw):
        kind, name = "task", raw.get("task")
        value = raw.get("tag")
        tags = [value] if isinstance(value, str) else [t for t in value or [] if isinstance(t, str)]
        output_type = raw.get("output_type") if isinstance(raw.get("output_type"), str) else None
        shots = raw.get("num_fewshot")
        num_fewshot = shots if isinstance(shots, int) and not isinstance(shots, bool) else None
        dataset = [raw.get("dataset_path"), _data_files(raw, Path(path).parent)]
    elif "group" in raw:
        kind, name = "group", raw.get("group")
        members = _member_names(raw.get("task"))
    if kind is not None and not isinstance(name, str):
        key = "group" if kind == "group" else "task"
        error = f"{path}: '{key}' must be a name (a string), got {name!r}."
        return _FileRecord(*stat, deps, error=error)
    return _FileRecord(
        *stat, deps, kind, name, tags, members, output_type, None, num_fewshot, dataset
    )


def _data_files(raw: dict[str, Any], folder: Path) -> Any:
    """The data_files a task YAML names, resolved as the task resolves them."""
    from assay.tasks.lm_eval_yaml import resolve_data_files

    kwargs = raw.get("dataset_kwargs")
    files = kwargs.get("data_files") if isinstance(kwargs, dict) else None
    return resolve_data_files(files, folder) if files is not None else None


def _cache_file(root: str) -> Path:
    base = os.environ.get("ASSAY_TASK_INDEX_CACHE")
    folder = (
        Path(base)
        if base
        else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "assay"
        / "task-index"
    )
    return folder / f"{hashlib.sha256(root.encode()).hexdigest()[:20]}.json"


_FIELDS = ("kind", "name", "tags", "members", "output_type", "error", "num_fewshot", "dataset")


def _read_cache(root: str) -> dict[str, _FileRecord]:
    try:
        data = json.loads(_cache_file(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if data.get("version") != _CACHE_VERSION or data.get("root") != root:
        return {}
    # Rows, not objects, keep the file small and quick: reading it is most of a warm listing.
    make = _FileRecord._make
    return {f"{root}/{row[0]}": make(row[1:]) for row in data["files"]}


def _write_cache(root: str, records: dict[str, _FileRecord]) -> None:
    target = _cache_file(root)
    rows = [[os.path.relpath(path, root), *rec] for path, rec in records.items()]
    payload = {"version": _CACHE_VERSION, "root": root, "files": rows}
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(payload, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:  # a cold index next time, nothing worse
        log.debug("task index cache not written to %s: %s", target, exc)


def _fresh(record: _FileRecord, stat: tuple[int, int], stats: dict[str, Any]) -> bool:
    if (record.mtime_ns, record.size) != stat:
        return False
    for dep, mtime, size in record.deps:
        if dep not in stats:
            stats[dep] = _stat(dep)
        if stats[dep] != (mtime, size):
            return False
    return True


def build_folder_index(root: Path, *, use_cache: bool = True) -> FolderIndex:
    """Index the YAML files under `root` (from the cache where files are unchanged)."""
    real_root = str(root.resolve())
    files = yaml_files(Path(real_root))
    use_cache = use_cache and root.is_dir()
    cached = _read_cache(real_root) if use_cache else {}
    stats: dict[str, Any] = {}
    records: dict[str, _FileRecord] = {}
    memo = Memo()
    changed = len(files) != len(cached)
    for path in files:
        stat = _stat(path)
        if stat is None:
            continue
        stats[path] = stat
        old = cached.get(path)
        if old is not None and _fresh(old, stat, stats):
            records[path] = old
        else:
            records[path] = _record(path, stat, memo)
            changed = True
    if use_cache and changed:
        _write_cache(real_root, records)
    return _assemble(root, records)


def _assemble(root: Path, records: dict[str, _FileRecord]) -> FolderIndex:
    index = FolderIndex(root)
    entries = index.entries
    for path, rec in records.items():
        if rec.error is not None:
            index.broken[path] = rec.error
            continue
        if rec.kind is None or rec.name is None:
            continue
        existing = entries.get(rec.name)
        if existing is not None:
            index.shadowed[path] = (
                f"{path}: {rec.kind} name {rec.name!r} is already defined by "
                f"{existing.file or 'the tag of that name'}; this file is ignored (as lm-eval does)."
            )
            continue
        if rec.kind == "group":
            entries[rec.name] = IndexEntry(rec.name, "group", path, list(rec.members))
            continue
        entries[rec.name] = IndexEntry(
            rec.name,
            "task",
            path,
            output_type=rec.output_type,
            num_fewshot=rec.num_fewshot,
            data=data_at_hand(*rec.dataset) if rec.dataset else "",
        )
        for tag in rec.tags:
            entry = entries.setdefault(tag, IndexEntry(tag, "tag", None))
            if entry.kind == "tag" and rec.name not in entry.members:
                entry.members.append(rec.name)
    for entry in entries.values():
        if entry.kind == "tag":
            entry.members.sort()
    return index
