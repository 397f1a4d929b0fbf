"""A full disk, told as one message instead of a traceback, wherever the write failed.

Writes fail with `OSError` (errno ENOSPC, or EDQUOT past a quota), with sqlite's "database or
disk is full", or with another error raised while handling one of those (a cleanup that could
not write either). `disk_full_cause` finds such a cause in an exception's chain; the CLI turns
it into `DiskFull`'s message.
"""

from __future__ import annotations

import errno

from assay.errors import AssayError

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
SQLITE_FULL = 13
"""sqlite's result code for "database or disk is full"."""


class DiskFull(AssayError):
    """A file could not be written because its disk (or quota) is full."""

    def __init__(self, where: str, cause: BaseException) -> None:
        super().__init__(
            f"no space left on the disk while writing {where} ({cause}). Free some space (or "
            "give --output-dir / --cache on another disk) and run the same command again: "
            "answers already stored in the response cache are not computed again."
        )
        self.where = where


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` itself says the disk (or a quota) is full."""
    if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
        return True
    # sqlite3.OperationalError, recognised without importing sqlite3 where it is not in use.
    code = getattr(exc, "sqlite_errorcode", None)
    return code == SQLITE_FULL or (code is None and "database or disk is full" in str(exc))


def disk_full_cause(exc: BaseException) -> BaseException | None:
    """The first error in `exc`'s chain (itself, its cause, its context ...) that says the disk
    is full; None when none does."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if is_disk_full(current):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


__all__ = ["DiskFull", "disk_full_cause", "is_disk_full"]
