"""results.json's `provenance`: what produced a run, so that `assay compare` can tell whether two
runs' numbers are comparable and say what differs between them (schema: results/schema.py)."""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Iterable, Sequence
from importlib import metadata
from typing import Any

from assay.models.base import LM
from assay.results.schema import (
    BackendIdentity,
    LibraryVersions,
    TaskProvenance,
    docs_fingerprint,
)
from assay.tasks.task import Task


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def library_versions() -> LibraryVersions:
    """Installed versions, read from package metadata (nothing is imported)."""
    from assay import __version__

    return {
        "assay": __version__,
        "python": platform.python_version(),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "datasets": _version("datasets"),
        "vllm": _version("vllm"),
        "numpy": _version("numpy"),
    }


def backend_identity(model: LM) -> BackendIdentity:
    """The backend's provenance in the schema's names, with its full cache identity."""
    known = model.provenance()
    identity: BackendIdentity = {
        "backend": known.get("backend", type(model).__name__),
        "model": known.get("model"),
        "revision": known.get("revision"),
        "commit_sha": known.get("sha"),
        "dtype": known.get("dtype"),
        "num_parameters": known.get("num_parameters"),
        "tokenizer": known.get("tokenizer"),
        "chat_template_sha256": known.get("chat_template_sha256"),
        "max_length": known.get("max_length"),
        "add_bos_token": known.get("add_bos_token"),
    }
    identity["identity"] = plain(model.identity())
    return identity


def task_hash(config_entry: dict[str, Any]) -> str:
    """sha256 of a task's `configs` entry, without where its file lies (the same task copied to
    another folder hashes the same)."""
    entry = dict(config_entry)
    entry["metadata"] = {
        k: v for k, v in (entry.get("metadata") or {}).items() if k != "config_source"
    }
    text = json.dumps(entry, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def task_provenance(
    task: Task,
    config_entry: dict[str, Any],
    doc_hashes: Iterable[tuple[int, str]],
    sandbox: str | None = None,
    replaced_self: Sequence[int] = (),
) -> TaskProvenance:
    """Where a task's docs came from and the fingerprint of those evaluated (and, for a task
    that runs model-written code, the sandbox it ran in)."""
    cfg = task.config
    hashes = list(doc_hashes)
    out: TaskProvenance = {
        "dataset_path": cfg.hf_repo,
        "dataset_name": cfg.hf_subset,
        "dataset_revision": cfg.hf_revision,
        "split": ",".join(cfg.evaluation_splits) or None,
        "docs": len(hashes),
        "docs_fingerprint": docs_fingerprint(hashes),
        "task_hash": task_hash(config_entry),
        "num_fewshot": task.shots,
        "cluster_key": cfg.cluster_key,
    }
    if sandbox is not None:
        out["sandbox"] = sandbox
    if replaced_self:
        out["fewshot_replaced_self"] = list(replaced_self)
    return out


def plain(value: Any) -> Any:
    """JSON-ready (what json.dumps would write, read back)."""
    return json.loads(json.dumps(value, default=str))
