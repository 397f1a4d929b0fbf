"""The experiment store: every row's prompt, output and scores, in SQLite, as they complete.

One file per experiment (``<output_dir>/experiment.sqlite``). Configs are stored as JSON
descriptions with secrets redacted (never pickled); rows and per-batch metrics are committed per
batch and a shard is marked complete only after all its batches, so an interrupted experiment
resumes from its completed shards and redoes at most the shard in flight.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.errors import ConfigError

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS configs (
  config_id INTEGER PRIMARY KEY, fingerprint TEXT, parent_id INTEGER, knobs TEXT,
  status TEXT, error TEXT, created REAL, changes TEXT);
CREATE TABLE IF NOT EXISTS shards (
  config_id INTEGER, shard INTEGER, n_rows INTEGER, n_errors INTEGER, seconds REAL,
  completed REAL, PRIMARY KEY (config_id, shard));
CREATE TABLE IF NOT EXISTS batches (
  config_id INTEGER, shard INTEGER, batch INTEGER, metrics TEXT,
  PRIMARY KEY (config_id, shard, batch));
CREATE TABLE IF NOT EXISTS rows (
  config_id INTEGER, row_index INTEGER, shard INTEGER, batch INTEGER, prompt TEXT,
  output TEXT, error TEXT, scores TEXT, record TEXT, PRIMARY KEY (config_id, row_index));
CREATE TABLE IF NOT EXISTS metrics (
  config_id INTEGER, shards_done INTEGER, n INTEGER, metrics TEXT, recorded REAL,
  PRIMARY KEY (config_id, shards_done));
CREATE TABLE IF NOT EXISTS early_stops (
  config_id INTEGER PRIMARY KEY, decision TEXT, recorded REAL);
"""


def to_json(value: Any) -> str:
    """JSON text of `value`; objects JSON cannot hold are stored as their string form."""
    return json.dumps(value, default=_fallback, ensure_ascii=False)


def _fallback(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "page_content"):  # a LangChain Document
        return {"page_content": value.page_content, "metadata": dict(value.metadata)}
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def is_plain_json(value: Any) -> bool:
    """Whether `value` is made of dicts with string keys, lists, tuples and JSON scalars only,
    so that storing it as JSON and reading it back gives an equivalent value."""
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list | tuple):
        return all(is_plain_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_plain_json(v) for k, v in value.items())
    return False


@dataclass(frozen=True, slots=True)
class StoredRow:
    """One scored (or failed) row of one config."""

    config_id: int
    row_index: int
    shard: int
    prompt: Any
    output: str | None
    error: str | None
    scores: dict[str, float]
    record: dict[str, Any]


class ExperimentStore:
    """Read and write one experiment's SQLite file (thread-safe)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(SCHEMA)
            self._add_changes_column()
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{self.path}: not a usable experiment store ({exc})") from None

    def _add_changes_column(self) -> None:
        """Stores written before clones were resumable lack configs.changes."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(configs)")}
        if "changes" not in columns:
            self._db.execute("ALTER TABLE configs ADD COLUMN changes TEXT")
            self._db.commit()

    # -- experiment ------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        with self._lock:
            rows = self._db.execute("SELECT key, value FROM meta").fetchall()
        return {k: json.loads(v) for k, v in rows}

    def set_meta(self, values: dict[str, Any]) -> None:
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [(k, to_json(v)) for k, v in values.items()],
            )
            self._db.commit()

    def clear(self) -> None:
        """Forget everything (a fresh experiment under the same name)."""
        with self._lock:
            tables = ("meta", "configs", "shards", "batches", "rows", "metrics", "early_stops")
            for table in tables:
                self._db.execute(f"DELETE FROM {table}")
            self._db.commit()

    # -- configs ---------------------------------------------------------------------------
    def configs(self) -> list[dict[str, Any]]:
        """Stored configs by id; a clone has its parent's id and its changes (None if not kept)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT config_id, fingerprint, parent_id, knobs, status, error, changes "
                "FROM configs ORDER BY config_id"
            ).fetchall()
        return [
            {
                "config_id": cid,
                "fingerprint": fp,
                "parent_id": parent,
                "knobs": json.loads(knobs),
                "status": status,
                "error": error,
                "changes": json.loads(changes) if changes is not None else None,
            }
            for cid, fp, parent, knobs, status, error, changes in rows
        ]

    def add_config(
        self,
        config_id: int,
        fingerprint: str,
        knobs: dict[str, Any],
        parent_id: int | None,
        changes: dict[str, Any] | None = None,
    ) -> None:
        """A new config; a clone's `changes` must be plain JSON without secrets (see
        `is_plain_json`), or None when they cannot be kept."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO configs VALUES (?, ?, ?, ?, 'new', NULL, ?, ?)",
                (
                    config_id,
                    fingerprint,
                    parent_id,
                    to_json(knobs),
                    time.time(),
                    None if changes is None else to_json(changes),
                ),
            )
            self._db.commit()

    def set_status(self, config_id: int, status: str, error: str | None = None) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE configs SET status=?, error=? WHERE config_id=?", (status, error, config_id)
            )
            self._db.commit()

    # -- progress --------------------------------------------------------------------------
    def completed_shards(self, config_id: int) -> list[int]:
        with self._lock:
            rows = self._db.execute(
                "SELECT shard FROM shards WHERE config_id=? ORDER BY shard", (config_id,)
            ).fetchall()
        return [r[0] for r in rows]

    def discard_partial(self, config_id: int, completed: Iterable[int]) -> None:
        """Drop rows and batches of shards that never completed (they are redone)."""
        done = list(completed)
        marks = ",".join("?" * len(done)) or "NULL"
        with self._lock:
            for table in ("rows", "batches"):
                self._db.execute(
                    f"DELETE FROM {table} WHERE config_id=? AND shard NOT IN ({marks})",
                    (config_id, *done),
                )
            self._db.commit()

    def write_batch(
        self,
        config_id: int,
        shard: int,
        batch: int,
        rows: Sequence[StoredRow],
        batch_metrics: dict[str, Any] | None,
    ) -> None:
        """Rows and metrics of one batch, in one transaction."""
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO rows VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        config_id,
                        r.row_index,
                        shard,
                        batch,
                        to_json(r.prompt),
                        r.output,
                        r.error,
                        to_json(r.scores),
                        to_json(r.record),
                    )
                    for r in rows
                ],
            )
            if batch_metrics is not None:
                self._db.execute(
                    "INSERT OR REPLACE INTO batches VALUES (?, ?, ?, ?)",
                    (config_id, shard, batch, to_json(batch_metrics)),
                )
            self._db.commit()

    def complete_shard(
        self, config_id: int, shard: int, n_rows: int, n_errors: int, seconds: float
    ) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO shards VALUES (?, ?, ?, ?, ?, ?)",
                (config_id, shard, n_rows, n_errors, seconds, time.time()),
            )
            self._db.commit()

    def shard_seconds(self, config_id: int) -> float:
        with self._lock:
            row = self._db.execute(
                "SELECT COALESCE(SUM(seconds), 0) FROM shards WHERE config_id=?", (config_id,)
            ).fetchone()
        return float(row[0])

    def record_metrics(
        self, config_id: int, shards_done: int, n: int, metrics: dict[str, Any]
    ) -> None:
        """The config's metrics after `shards_done` shards (the history of its estimates)."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO metrics VALUES (?, ?, ?, ?, ?)",
                (config_id, shards_done, n, to_json(metrics), time.time()),
            )
            self._db.commit()

    def metrics_history(self, config_id: int) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT shards_done, n, metrics FROM metrics WHERE config_id=? ORDER BY shards_done",
                (config_id,),
            ).fetchall()
        return [{"shards_done": s, "n": n, "metrics": json.loads(m)} for s, n, m in rows]

    def add_early_stop(self, config_id: int, decision: dict[str, Any]) -> None:
        """Why early stopping stopped a config (a StopDecision as a dict)."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO early_stops VALUES (?, ?, ?)",
                (config_id, to_json(decision), time.time()),
            )
            self._db.commit()

    def early_stops(self) -> list[dict[str, Any]]:
        """The stored early-stopping decisions, by config id."""
        with self._lock:
            rows = self._db.execute(
                "SELECT decision FROM early_stops ORDER BY config_id"
            ).fetchall()
        return [json.loads(r[0]) for r in rows]

    # -- reading back ----------------------------------------------------------------------
    def batch_metrics(self, config_id: int) -> list[tuple[int, dict[str, Any]]]:
        """(shard, metrics) of every batch that had metrics, in processing order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT shard, metrics FROM batches WHERE config_id=? ORDER BY shard, batch",
                (config_id,),
            ).fetchall()
        return [(shard, json.loads(m)) for shard, m in rows]

    def rows(self, config_id: int | None = None) -> list[StoredRow]:
        """Stored rows (of one config, or all), in processing order."""
        query = (
            "SELECT config_id, row_index, shard, prompt, output, error, scores, record FROM rows"
        )
        args: tuple[Any, ...] = ()
        if config_id is not None:
            query += " WHERE config_id=?"
            args = (config_id,)
        with self._lock:
            found = self._db.execute(query + " ORDER BY config_id, shard, batch, rowid", args)
            rows = found.fetchall()
        return [
            StoredRow(c, i, s, json.loads(p), o, e, json.loads(sc), json.loads(rec))
            for c, i, s, p, o, e, sc, rec in rows
        ]

    def close(self) -> None:
        with self._lock:
            self._db.close()
