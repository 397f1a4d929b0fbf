"""SQLite response cache: resume, re-runs and crash recovery never pay for a request twice.

Keys hold the model's full identity (backend, weights, revision, dtype and every argument that
changes outputs), so a cache shared by two models never returns one model's answers for the
other. Writes are committed per completed chunk; a kill loses at most the chunk in flight.

A table from requests to their results, it sits with the request types, below the models: the
executors consult it, and so does a backend that receives answers outside their calls (the
OpenAI batch path files a provider batch's downloaded answers in it).
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import fields
from json.encoder import encode_basestring_ascii as _json_str
from pathlib import Path
from typing import Any

from assay.errors import ConfigError
from assay.requests.tools import ToolCall, Turn
from assay.requests.types import (
    Generation,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    Request,
    Result,
    RollingRequest,
    RollingResult,
    canonical_json,
)

SCHEMA_VERSION = "assay-cache-1"

CACHE_FILE = "cache.sqlite"
"""The response cache's file name in a run's output folder (when --cache names no other)."""


def model_key(identity: dict[str, Any]) -> str:
    """Stable digest of a model identity."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def request_key(request: Request) -> str:
    """Stable digest of a request (kind, text, generation params, sample index, and the content
    hash of each image: never the pixels themselves)."""
    if isinstance(request, LoglikelihoodRequest):
        context, continuation = request.context, request.continuation
        if type(context) is str and type(continuation) is str and not request.images:
            # canonical_json(["ll", context, continuation]), written without json's set-up.
            text = f'["ll", {_json_str(context)}, {_json_str(continuation)}]'
            return hashlib.sha256(text.encode()).hexdigest()
        payload: list[Any] = ["ll", context, continuation]
    elif isinstance(request, RollingRequest):
        payload = ["rolling", request.text]
    else:
        prompt = (
            request.prompt
            if isinstance(request.prompt, str)
            else [m.as_dict() if isinstance(m, Turn) else list(m) for m in request.prompt]
        )
        params = request.params.as_dict()
        payload = ["gen", prompt, params, request.sample_index if request.params.do_sample else 0]
        if request.tools or request.tool_choice is not None:
            # Only requests that offer tools carry this entry, so other keys are unchanged.
            payload.append(["tools", [t.as_dict() for t in request.tools], request.tool_choice])
    if not isinstance(request, RollingRequest) and request.images:
        # Only multimodal requests carry this entry, so text-only keys are unchanged.
        payload.append(["images", [image.sha256 for image in request.images]])
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def _encode(result: Result) -> str:
    if isinstance(result, LoglikelihoodResult):
        logprob, greedy = result.logprob, result.is_greedy
        if type(logprob) is float and math.isfinite(logprob) and type(greedy) is bool:
            # json.dumps(["ll", logprob, greedy]), written directly (one per request).
            return f'["ll", {float.__repr__(logprob)}, {"true" if greedy else "false"}]'
        return json.dumps(["ll", logprob, greedy])
    if isinstance(result, RollingResult):
        return json.dumps(["rolling", result.logprob, result.n_tokens])
    if isinstance(result, Generation):
        if result.has_metadata:
            # A tag of its own: caches written before Generation existed read as before.
            return json.dumps(["generation", _generation_fields(result)])
        result = result.text
    return json.dumps(["gen", result])


_GENERATION_FIELDS = tuple(f.name for f in fields(Generation))


def _generation_fields(result: Generation) -> dict[str, Any]:
    out = {name: getattr(result, name) for name in _GENERATION_FIELDS}
    out["tool_calls"] = [call.as_dict() for call in result.tool_calls]
    if not out["tool_calls"]:
        del out["tool_calls"]  # entries written before tool calls existed read the same
    return out


def _tool_call(entry: dict[str, Any]) -> ToolCall:
    """A tool call as `ToolCall.as_dict` wrote it (arguments None: they did not parse)."""
    arguments = entry["arguments"]
    return ToolCall(
        entry["name"],
        canonical_json(arguments) if arguments is not None else None,
        entry["raw"],
        entry["id"],
    )


def _decode(text: str) -> Result:
    kind, *rest = json.loads(text)
    if kind == "ll":
        return LoglikelihoodResult(float(rest[0]), bool(rest[1]))
    if kind == "rolling":
        return RollingResult(float(rest[0]), int(rest[1]))
    if kind == "generation":
        calls = tuple(_tool_call(entry) for entry in rest[0].pop("tool_calls", ()))
        return Generation(**rest[0], tool_calls=calls)
    return str(rest[0])


class ResponseCache:
    """Responses of one model, stored in a SQLite file (shared safely by several runs)."""

    def __init__(self, path: str | Path, identity: dict[str, Any]) -> None:
        self.path = Path(path)
        self.model = model_key(identity)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (model TEXT, key TEXT, value TEXT, "
                "PRIMARY KEY (model, key)) WITHOUT ROWID"
            )
            row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
                self._db.commit()
            elif row[0] != SCHEMA_VERSION:
                raise ConfigError(
                    f"--cache {self.path}: this cache was written by another assay version "
                    f"({row[0]!r}, expected {SCHEMA_VERSION!r}). Delete it or pass another --cache path."
                )
            # A table of that name written by something else fails here, not mid-run.
            self._db.execute("SELECT model, key, value FROM responses LIMIT 0")
        except sqlite3.DatabaseError as exc:
            raise ConfigError(
                f"--cache {self.path}: not a usable SQLite cache ({exc}). Delete it or pass another --cache path."
            ) from None
        except OSError as exc:
            raise ConfigError(
                f"--cache {self.path}: cannot create the cache: {exc.strerror}."
            ) from None

    def get_many(self, keys: Sequence[str]) -> dict[str, Result]:
        """Cached results for the keys that have one."""
        found: dict[str, Result] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, value FROM responses WHERE model=? AND key IN ({marks})",
                    (self.model, *chunk),
                )
                found.update((k, _decode(v)) for k, v in rows)
        return found

    def put_many(self, items: Iterable[tuple[str, Result]]) -> None:
        """Store results and commit (one transaction per call)."""
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?)",
                ((self.model, k, _encode(v)) for k, v in items),
            )
            self._db.commit()

    def batch_sizes(self, task: str) -> list[int]:
        """Batch sizes the backend chose automatically while computing `task`'s responses, as
        an earlier run recorded them (empty when none did)."""
        with self._lock:
            row = self._db.execute(
                "SELECT value FROM meta WHERE key=?", (self._sizes_key(task),)
            ).fetchone()
        return [int(size) for size in json.loads(row[0])] if row else []

    def record_batch_sizes(self, task: str, sizes: Sequence[int]) -> None:
        """Store the batch sizes chosen while computing `task`'s responses (see batch_sizes)."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                (self._sizes_key(task), json.dumps(list(sizes))),
            )
            self._db.commit()

    def _sizes_key(self, task: str) -> str:
        # In the meta table, so caches written before this key existed need no migration.
        return f"batch_sizes:{self.model}:{task}"

    def close(self) -> None:
        with self._lock:
            self._db.close()
