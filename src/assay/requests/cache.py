"""SQLite response cache: resume, re-runs and crash recovery never pay for a request twice.

Every stored value carries a checksum of itself, its model and its key: an entry changed or
damaged on disk is computed again (and said), never used. Keys hold the model's full identity (backend, weights, revision, dtype and every argument that
changes outputs), so a cache shared by two models never returns one model's answers for the
other. Writes are committed per completed chunk; a kill loses at most the chunk in flight.

A table from requests to their results, it sits with the request types, below the models: the
executors consult it, and so does a backend that receives answers outside their calls (the
OpenAI batch path files a provider batch's downloaded answers in it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import fields
from json.encoder import encode_basestring_ascii as _json_str
from pathlib import Path
from typing import Any

from assay.errors import ConfigError
from assay.requests.tools import ToolCall, Turn, conversation_record, is_conversation
from assay.requests.types import (
    GenerateRequest,
    Generation,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    Request,
    Result,
    RollingRequest,
    RollingResult,
    canonical_json,
)
from assay.util.disk import DiskFull, is_disk_full

SCHEMA_VERSION = "assay-cache-2"
"""Version 2: every stored value carries its checksum (`_sealed`)."""
CHECKSUM_CHARS = 16
"""Hex digits of the SHA-256 that seals a stored value (64 bits: no edit passes by chance)."""

log = logging.getLogger(__name__)

CACHE_FILE = "cache.sqlite"
"""The response cache's file name in a run's output folder (when --cache names no other)."""


_RECEIVING: ContextVar[ResponseCache | None] = ContextVar("receiving_cache", default=None)
"""The cache of the chunk being computed: a backend whose answers arrive one by one (an API)
files each there as it arrives, so an interrupt loses only the requests in flight."""

_kept = [0, False]
"""Results this process added to a response cache, and whether it opened any cache."""


@contextmanager
def receiving(cache: ResponseCache | None) -> Iterator[None]:
    """Make `cache` the one `receiver()` returns while the block runs (an executor's chunk)."""
    token = _RECEIVING.set(cache)
    try:
        yield
    finally:
        _RECEIVING.reset(token)


def receiver() -> ResponseCache | None:
    """The cache answers may enter as they arrive (see `receiving`), or None."""
    return _RECEIVING.get()


def kept_results() -> int | None:
    """Results this process has added to response caches so far (None: it opened none), for
    what an interrupted run says it kept."""
    return _kept[0] if _kept[1] else None


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
        prompt = request.prompt
        written: Any
        if isinstance(prompt, str):
            written = prompt
        elif is_conversation(prompt):
            written = conversation_record(prompt)
        else:
            written = [list(m) for m in prompt if not isinstance(m, Turn)]
        params = request.params.as_dict()
        payload = ["gen", written, params, request.sample_index if request.params.do_sample else 0]
    if not isinstance(request, RollingRequest) and request.images:
        # Only multimodal requests carry this entry, so text-only keys are unchanged.
        payload.append(["images", [image.sha256 for image in request.images]])
    if isinstance(request, GenerateRequest) and (request.tools or request.tool_choice is not None):
        # Only requests that offer tools carry this entry, so other keys are unchanged.
        tools = [spec.as_dict() for spec in request.tools]
        payload.append(["tools", tools, request.tool_choice])
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
    if result.tool_calls:
        # Every field of each call, so that a cached answer reads back equal to the one sent.
        out["tool_calls"] = [_call_fields(call) for call in result.tool_calls]
    else:
        del out["tool_calls"]  # generations without calls keep their cached text unchanged
    return out


_CALL_FIELDS = tuple(f.name for f in fields(ToolCall))


def _call_fields(call: ToolCall) -> dict[str, Any]:
    return {name: getattr(call, name) for name in _CALL_FIELDS}


def _decode(text: str) -> Result:
    kind, *rest = json.loads(text)
    if kind == "ll":
        return LoglikelihoodResult(float(rest[0]), bool(rest[1]))
    if kind == "rolling":
        return RollingResult(float(rest[0]), int(rest[1]))
    if kind == "generation":
        values = dict(rest[0])
        calls = values.pop("tool_calls", ())
        return Generation(**values, tool_calls=tuple(ToolCall(**call) for call in calls))
    return str(rest[0])


def _checksum(model: str, key: str, value: str) -> str:
    # The model and the key are sealed with the value: a row moved to another request fails too.
    return hashlib.sha256(f"{model}\n{key}\n{value}".encode()).hexdigest()[:CHECKSUM_CHARS]


def _sealed(model: str, key: str, value: str) -> str:
    """A stored value: its checksum, a space, the encoded result."""
    return f"{_checksum(model, key, value)} {value}"


def _unsealed(model: str, key: str, stored: bytes) -> Result | None:
    """The result a stored value holds; None when it is corrupted (checksum, encoding or
    contents wrong)."""
    try:
        checksum, _, value = stored.decode("utf-8").partition(" ")
        if checksum != _checksum(model, key, value):
            return None
        return _decode(value)
    except (UnicodeDecodeError, ValueError, TypeError, IndexError):
        return None


class _Timing:
    """The keys being timed (`ResponseCache.timing`) and the times read at their arrival."""

    def __init__(self, keys: frozenset[str], seconds: Callable[[str], float]) -> None:
        self.keys, self.seconds = keys, seconds
        self.at_arrival: dict[str, float] = {}

    def arrived(self, key: str) -> None:
        if key in self.keys and key not in self.at_arrival:
            self.at_arrival[key] = round(self.seconds(key), 6)

    def times(self, keys: Iterable[str]) -> list[tuple[str, float]]:
        """The time of each timed key among `keys` (at arrival when read then)."""
        out = []
        for key in keys:
            if key in self.keys:
                took = self.at_arrival.pop(key, None)
                out.append((key, round(self.seconds(key), 6) if took is None else took))
        return out


class ResponseCache:
    """Responses of one model, stored in a SQLite file (shared safely by several runs)."""

    def __init__(self, path: str | Path, identity: dict[str, Any]) -> None:
        self.path = Path(path)
        self.model = model_key(identity)
        self._lock = threading.Lock()
        self._timing: _Timing | None = None
        _kept[1] = True
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
            if is_disk_full(exc):
                raise DiskFull(f"the response cache {self.path}", exc) from None
            raise ConfigError(
                f"--cache {self.path}: not a usable SQLite cache ({exc}). Delete it or pass another --cache path."
            ) from None
        except OSError as exc:
            if is_disk_full(exc):
                raise DiskFull(f"the response cache {self.path}", exc) from None
            raise ConfigError(
                f"--cache {self.path}: cannot create the cache: {exc.strerror}."
            ) from None

    def get_many(self, keys: Sequence[str]) -> dict[str, Result]:
        """Cached results for the keys that have one. A corrupted entry (its checksum does not
        match) is left out, so it is computed again, and said on stderr."""
        found: dict[str, Result] = {}
        corrupted = 0
        with self._lock, self._damage_refused():
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                # As bytes: a flipped byte that breaks UTF-8 is a corrupted entry, not an error.
                rows = self._db.execute(
                    "SELECT key, CAST(value AS BLOB) FROM responses "
                    f"WHERE model=? AND key IN ({marks})",
                    (self.model, *chunk),
                )
                for key, stored in rows:
                    result = _unsealed(self.model, key, stored)
                    if result is None:
                        corrupted += 1
                    else:
                        found[key] = result
        if corrupted:
            log.warning(
                "--cache %s: %d stored response(s) failed their checksum (the file was changed "
                "or damaged); they are computed again and stored anew.",
                self.path,
                corrupted,
            )
        return found

    def put_many(self, items: Iterable[tuple[str, Result]]) -> None:
        """Store results and commit (one transaction per call)."""
        rows = [(self.model, k, _sealed(self.model, k, _encode(v))) for k, v in items]
        with self._lock, self._damage_refused():
            # Counted before writing: a result filed as it arrived and again with its chunk
            # is one result kept.
            known = 0
            for start in range(0, len(rows), 500):
                keys = [key for _, key, _ in rows[start : start + 500]]
                marks = ",".join("?" * len(keys))
                (found,) = self._db.execute(
                    f"SELECT COUNT(*) FROM responses WHERE model=? AND key IN ({marks})",
                    (self.model, *keys),
                ).fetchone()
                known += found
            self._db.executemany("INSERT OR REPLACE INTO responses VALUES (?, ?, ?)", rows)
            if self._timing is not None:
                # In the same transaction: no answer of a timed request is kept without its time.
                times = self._timing.times(key for _, key, _ in rows)
                self._db.executemany(
                    "INSERT OR IGNORE INTO meta VALUES (?, ?)",
                    ((self._note_key(k), json.dumps(v)) for k, v in times),
                )
            self._db.commit()
            _kept[0] += len({key for _, key, _ in rows}) - known

    @contextmanager
    def timing(self, keys: Collection[str], seconds: Callable[[str], float]) -> Iterator[None]:
        """While the block runs, an answer stored under one of `keys` is noted (`notes`) with
        `seconds(key)` in the transaction that stores it, as read when it arrived (`arrived`)
        or else when it is stored; a key noted already keeps its first time."""
        with self._lock:
            self._timing = _Timing(frozenset(keys), seconds)
        try:
            yield
        finally:
            with self._lock:
                self._timing = None

    def arrived(self, key: str) -> None:
        """An answer for `key` has just arrived (it is stored a little later): read its time
        now, when the key is being timed (`timing`)."""
        with self._lock:
            if self._timing is not None:
                self._timing.arrived(key)

    def notes(self, keys: Sequence[str]) -> dict[str, Any]:
        """Values noted beside the responses (`note`) for the keys that have one."""
        found: dict[str, Any] = {}
        with self._lock:
            for key in keys:
                row = self._db.execute(
                    "SELECT value FROM meta WHERE key=?", (self._note_key(key),)
                ).fetchone()
                if row is not None:
                    found[key] = json.loads(row[0])
        return found

    def note(self, items: Iterable[tuple[str, Any]]) -> None:
        """Note JSON values beside the responses (an agent turn's first measured time); a
        key noted already keeps its first value, so a resumed run reads what was measured."""
        with self._lock:
            self._db.executemany(
                "INSERT OR IGNORE INTO meta VALUES (?, ?)",
                ((self._note_key(k), json.dumps(v)) for k, v in items),
            )
            self._db.commit()

    def _note_key(self, key: str) -> str:
        # In the meta table, so caches written before notes existed need no migration.
        return f"note:{self.model}:{key}"

    def batch_sizes(self, task: str) -> list[int]:
        """Batch sizes the backend chose automatically while computing `task`'s responses, as
        an earlier run recorded them (empty when none did)."""
        with self._lock, self._damage_refused():
            row = self._db.execute(
                "SELECT value FROM meta WHERE key=?", (self._sizes_key(task),)
            ).fetchone()
        try:
            return [int(size) for size in json.loads(row[0])] if row else []
        except (ValueError, TypeError):
            return []  # a damaged hint: the sizes are chosen anew

    def record_batch_sizes(self, task: str, sizes: Sequence[int]) -> None:
        """Store the batch sizes chosen while computing `task`'s responses (see batch_sizes)."""
        with self._lock, self._damage_refused():
            self._db.execute(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                (self._sizes_key(task), json.dumps(list(sizes))),
            )
            self._db.commit()

    def _sizes_key(self, task: str) -> str:
        # In the meta table, so caches written before this key existed need no migration.
        return f"batch_sizes:{self.model}:{task}"

    @contextmanager
    def _damage_refused(self) -> Iterator[None]:
        """sqlite's errors while the cache is read or written, as messages naming the file,
        what went wrong and the fix."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if is_disk_full(exc):
                raise DiskFull(f"the response cache {self.path}", exc) from None
            raise ConfigError(
                f"--cache {self.path}: the cache file cannot be read or written ({exc}): it is "
                "damaged, or its disk failed. Delete it (its answers are computed again) or "
                "pass another --cache path."
            ) from None

    def close(self) -> None:
        with self._lock:
            self._db.close()
