"""The lock a run holds on its output files, so two processes never write one run's files.

The lock is an advisory `flock` on a file in the run's state folder, held for the life of the
run. The operating system releases it when the process ends in any way (kill -9 included), so
a crashed run never blocks the next one; the file also records who holds it (pid, host,
command, start), which a refused run prints, and which a run finding it without a holder names
as the stale lock it takes over.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import IO, Any

from assay.errors import ConfigError
from assay.util.redact import redact_command

log = logging.getLogger(__name__)


class RunLock:
    """An exclusive, non-blocking lock on `path` (created as needed)."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what
        """What the lock guards, for messages ("--output-path out")."""
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock, or refuse the run (ConfigError) naming the process holding it."""
        import fcntl

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle = self.path.open("a+", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"{self.what}: cannot write there ({exc.strerror}: {exc.filename}). Give a "
                "folder, or a path ending in .json, that can be created."
            ) from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read(handle)
            handle.close()
            raise ConfigError(
                f"{self.what}: another assay run is writing these files ({_describe(holder)}; "
                f"lock {self.path}). Wait for it to finish, stop it, or write elsewhere."
            ) from None
        earlier = _read(handle)
        if earlier:
            sys.stderr.write(
                f"assay: note: {self.what}: taking over the lock of a run that ended without "
                f"releasing it ({_describe(earlier)}).\n"
            )
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(_holder()))
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        """Give the lock up (idempotent). The file stays, emptied: removing it would let a
        process that opened it before the removal lock a file nobody else sees."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        try:
            handle.seek(0)
            handle.truncate()
        finally:
            handle.close()  # closing releases the flock

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder() -> dict[str, Any]:
    """Who takes the lock: this process, its host, its command line (secrets removed)."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": redact_command(sys.argv),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def _read(handle: IO[str]) -> dict[str, Any]:
    """The holder recorded in the lock file ({} when empty or unreadable)."""
    try:
        handle.seek(0)
        data = json.loads(handle.read() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _describe(holder: dict[str, Any]) -> str:
    if not holder:
        return "a process that has not recorded itself yet"
    where = f"pid {holder.get('pid')} on {holder.get('host')}"
    return f"{where}, since {holder.get('started')}: {holder.get('command')}"
