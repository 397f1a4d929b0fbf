"""Errors meant for people: each names the file, field, task, doc or request at fault and the fix.

The CLI turns any `AssayError` into a one-paragraph message and exit code 2, never a traceback.
"""

from __future__ import annotations


class AssayError(Exception):
    """Base class of every error caused by user input or environment, not by a bug in assay."""

    exit_code = 2


class ConfigError(AssayError):
    """A task, metric, filter, model or run configuration is invalid."""


class TaskConfigError(ConfigError):
    """A task definition (YAML file or Python TaskConfig) is invalid."""


class DataError(AssayError):
    """A dataset could not be loaded, or a row could not be turned into a Doc."""


class ModelError(AssayError):
    """A model backend could not be created or failed on a request."""


class UnknownNameError(ConfigError):
    """A name (task, metric, filter, model) is not registered."""

    def __init__(
        self, kind: str, name: str, known: list[str] | tuple[str, ...], note: str = ""
    ) -> None:
        import difflib

        close = difflib.get_close_matches(name, list(known), n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        listing = ", ".join(sorted(known)[:40])
        more = " ..." if len(known) > 40 else ""
        # The note (e.g. files that failed to load) before the list, which can be long.
        super().__init__(
            f"unknown {kind} {name!r}.{hint}{' ' + note if note else ''} Known {kind}s: "
            f"{listing}{more}."
        )
        self.kind, self.name = kind, name


class FailedRequests(ModelError):
    """A backend gave up on some requests for good; the task must not be scored.

    `failures` maps each failed request's index, in the list the caller passed, to the reason.
    """

    def __init__(self, message: str, failures: dict[int, str]) -> None:
        super().__init__(message)
        self.failures = failures

    def __reduce__(self):  # keeps the class (and the indices) across Ray's pickling
        return (type(self), (str(self), self.failures))


class ResultsError(AssayError):
    """A run folder or results file cannot be read, or two runs cannot be compared."""


class TrackerError(AssayError):
    """A finished run could not be logged to a --log-to tracker (its files stay on disk)."""


class SandboxError(AssayError):
    """Model-written code cannot run in the sandbox asked for (not installed, not startable,
    or a --sandbox setting that does not fit)."""
