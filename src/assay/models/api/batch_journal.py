"""The journal of submitted batches: which requests each holds, and what became of them.

One small JSON file per batch, `<batch id>.json` (characters outside `[A-Za-z0-9_-]` written
`%XX`, so the name alone gives the id back), in each of a run's journal folders. Files are
written atomically (a temporary file renamed into place), so a kill leaves the whole record
or none; every folder receives every record, and reading takes the union, so a re-run that
shares either the output folder or the response cache finds them.

- `record` writes a batch's custom ids as soon as the provider returns its id, and, once the
  batch has ended, its final state and the requests it left without an answer (with why):
  a re-run then submits those again, or reports them (`--batch-failed stop`), instead of
  following a dead batch forever.
- `find` gives, for each request already submitted, the latest batch holding it.
- `locked` is held from reading the journal to recording what was submitted, so two runs that
  share a journal folder (the same response cache) never submit the same requests both.
- `unreadable` lists the files that cannot be read (empty, garbled, truncated, hand-edited)
  with the batch id each name carries, so that the run asks the provider about that batch
  instead of paying for its requests twice; `record` repairs them once their contents are
  known again.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.util.redact import clean_text

log = logging.getLogger(__name__)

JOURNAL_FOLDER = "batches"
"""Name of the journal folder beside a run's results and beside its response cache."""


@dataclass(frozen=True, slots=True)
class Journaled:
    """Where a request was submitted before."""

    batch_id: str
    """The latest batch holding it."""
    unanswered: str | None = None
    """Why that batch ended without answering it; None while it may still answer."""


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A journal file that cannot be read, and the batch its name says it records."""

    paths: tuple[Path, ...]
    """The file in each folder that holds it."""
    batch_id: str


def file_name(batch_id: str) -> str:
    """The journal file of `batch_id`: the id itself where it is made of letters, digits, `_`
    and `-` (every provider's ids so far), other characters as `%XX` of their UTF-8 bytes."""
    out = []
    for char in batch_id:
        if char.isascii() and (char.isalnum() or char in "-_"):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode())
    return "".join(out) + ".json"


def batch_id_of(path: Path) -> str:
    """The batch id a journal file's name carries (`file_name` read backwards)."""
    from urllib.parse import unquote

    return unquote(path.name.removesuffix(".json"), errors="strict")


class BatchJournal:
    """Submitted batches and the custom ids they hold, in one or more folders."""

    def __init__(self, folders: Sequence[Path]) -> None:
        self.folders = list(dict.fromkeys(Path(f) for f in folders))

    def record(
        self,
        provider: str,
        route: str,
        batch_id: str,
        ids: Sequence[str],
        *,
        ended: str | None = None,
        unanswered: Mapping[str, str] | None = None,
        created: float | None = None,
    ) -> None:
        """Write that batch `batch_id` holds `ids` (before anything else happens to it); with
        `ended`, that it ended in that state leaving `unanswered` without an answer.

        What a readable copy records already is kept: its ids, creation time and unanswered
        requests are merged in. Without one, the record is created `created` (the provider's
        time, for a batch recovered from an unreadable file) or now."""
        entry: dict[str, Any] = {"provider": provider, "route": route, "batch_id": batch_id}
        known = self._read(batch_id)
        now = created if created is not None else time.time()
        entry["created"] = known.get("created", now) if known else now
        entry["custom_ids"] = list(dict.fromkeys([*(known or {}).get("custom_ids", []), *ids]))
        if ended is not None:
            entry["ended"] = ended
            entry["unanswered"] = {**(known or {}).get("unanswered", {}), **(unanswered or {})}
        text = json.dumps(entry)
        name = file_name(batch_id)
        for folder in self.folders:
            folder.mkdir(parents=True, exist_ok=True)
            _write(folder / name, text)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the journal (an advisory flock on `.lock` in its first folder; another process
        waits) while the block runs. Not re-entrant."""
        import fcntl

        folder = self.folders[0]
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / ".lock").open("a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            yield  # closing the file releases the lock, a kill included

    def find(self, route: str, ids: set[str]) -> dict[str, Journaled]:
        """For each of `ids` already submitted to `route`, the latest batch holding it."""
        entries = {
            entry["batch_id"]: entry
            for _, entry in self._entries()
            if entry is not None and entry["route"] == route
        }
        found: dict[str, Journaled] = {}
        for entry in sorted(entries.values(), key=lambda e: float(e.get("created") or 0)):
            unanswered = entry.get("unanswered") or {}
            for cid in entry["custom_ids"]:
                if cid in ids:
                    found[cid] = Journaled(entry["batch_id"], unanswered.get(cid))
        return found

    def unreadable(self) -> list[Unreadable]:
        """The files that cannot be read, by the batch id their name carries. A batch that
        another folder records readably is not among them: its broken copies are rewritten
        from the readable one."""
        readable: dict[str, dict[str, Any]] = {}
        broken: dict[str, list[Path]] = {}
        for path, entry in self._entries():
            if entry is not None:
                readable.setdefault(entry["batch_id"], entry)
                continue
            try:
                batch_id = batch_id_of(path)
            except UnicodeDecodeError:
                log.warning("batch journal %s is unreadable and names no batch; ignoring it", path)
                continue
            broken.setdefault(batch_id, []).append(path)
        lost = []
        for batch_id, paths in broken.items():
            if batch_id in readable:
                text = json.dumps(readable[batch_id])
                for path in paths:
                    _write(path, text)
            else:
                lost.append(Unreadable(tuple(paths), batch_id))
        return lost

    def _read(self, batch_id: str) -> dict[str, Any] | None:
        """A readable copy of the record of `batch_id`, if any folder holds one."""
        name = file_name(batch_id)
        for folder in self.folders:
            entry = _parse(folder / name)
            if entry is not None:
                return entry
        return None

    def _entries(self) -> Iterator[tuple[Path, dict[str, Any] | None]]:
        """Every journal file, with its record (None when it cannot be read)."""
        for folder in self.folders:
            for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
                yield path, _parse(path)


def _parse(path: Path) -> dict[str, Any] | None:
    """The record in `path`, or None when it is missing or not a whole record."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (
        isinstance(entry, dict)
        and isinstance(entry.get("batch_id"), str)
        and isinstance(entry.get("route"), str)
        and isinstance(entry.get("custom_ids"), list)
        and all(isinstance(cid, str) for cid in entry["custom_ids"])
        and isinstance(entry.get("unanswered", {}), dict)
        and isinstance(entry.get("created", 0), int | float)
    ):
        return None
    return entry


def _write(path: Path, text: str) -> None:
    # A provider's failure reason can echo credentials; the journal keeps none.
    text = clean_text(text)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


__all__ = [
    "JOURNAL_FOLDER",
    "BatchJournal",
    "Journaled",
    "Unreadable",
    "batch_id_of",
    "file_name",
]
