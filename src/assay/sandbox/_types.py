"""The sandbox's shared types: modes, limits and how one program's run ended."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

SandboxMode = Literal["auto", "bwrap", "rlimits", "none", "docker"]
"""How model-written code is isolated (`--sandbox`); see `assay.sandbox.policy.ISOLATION`."""

MODES: tuple[str, ...] = get_args(SandboxMode)

Outcome = Literal["passed", "failed", "timed_out", "killed_by_limit", "blocked"]
"""How a program's run ended: it passed (its code returned, in time); failed (its own error:
an assertion, an exception, an exit before its code returned); timed_out (killed at the
wall-clock limit, or its code returned after `Limits.run_s`);
killed_by_limit (memory, cpu, file_size, tmp_size, processes or output: `detail` says which);
blocked (the sandbox denied an operation it needed: network, a read-only file system, a
syscall)."""

MAX_OUTPUT_BYTES = 64 * 1024
"""stdout and stderr are each cut to this many bytes (more is read and discarded)."""

MAX_FILE_BYTES = 64 * 1024 * 1024
"""Largest file the code may write (RLIMIT_FSIZE)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one program's run."""

    timeout_s: float = 10.0
    """Wall-clock seconds before the program is killed (CPU time is capped one second above)."""
    run_s: float | None = None
    """Seconds the program's own code may take, counted from just before it is compiled
    (interpreter start-up excluded), as evaluate's code_eval counts its `timeout`: code that
    returns later is timed out too. None: `timeout_s` alone decides."""
    memory_mb: int = 1024
    """Address-space limit in MiB (RLIMIT_AS)."""
    file_bytes: int = MAX_FILE_BYTES
    """Largest file the program may write."""
    processes: int = 64
    """Processes and threads the program may have at once: RLIMIT_NPROC in the bwrap mode
    (where the program has a uid, or a user namespace, of its own, so only its processes
    count) and Docker's --pids-limit; the rlimits mode cannot set it (it would count every
    process of the user)."""
    output_bytes: int = MAX_OUTPUT_BYTES
    """stdout and stderr are each kept up to this many bytes."""
    output_kill_bytes: int = 16 * 1024 * 1024
    """A program that writes more than this to stdout or stderr is killed (infinite output)."""
    tmp_bytes: int = 128 * 1024 * 1024
    """Size of the private writable /tmp (bubblewrap and docker; a tmpfs, so held in memory)."""
    as_main: bool = True
    """Run the program as the `__main__` module, as `python solution.py` does. False runs it
    as evaluate's code_eval does, in a namespace without a `__name__` of its own (`__name__`
    is then 'builtins'), so an `if __name__ == "__main__":` block does not run."""

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.memory_mb <= 0:
            raise ValueError("sandbox limits: timeout_s and memory_mb must be positive")
        if self.run_s is not None and not 0 < self.run_s <= self.timeout_s:
            raise ValueError("sandbox limits: run_s must be positive and at most timeout_s")


@dataclass(frozen=True)
class SandboxResult:
    """How one run of untrusted code ended."""

    passed: bool
    """Exit status 0 within the time limit (for test code: every assertion held)."""
    returncode: int | None
    """The interpreter's exit status; negative for a signal (-9 when killed at the timeout)."""
    stdout: str
    """Standard output, at most MAX_OUTPUT_BYTES (decoded, invalid UTF-8 replaced)."""
    stderr: str
    """Standard error (tracebacks), at most MAX_OUTPUT_BYTES."""
    timed_out: bool
    """The code was still running after `timeout_s` seconds and was killed."""
    outcome: Outcome = "passed"
    """How the run ended, in one word (see `Outcome`)."""
    detail: str = ""
    """For killed_by_limit: the limit (memory, cpu, file_size, tmp_size, processes, output);
    for blocked: what was denied, e.g. "network: socket.connect: [Errno 101] Network is
    unreachable"."""
    mode: str = "rlimits"
    """The sandbox mode the program ran in."""

    def record(self) -> dict[str, Any]:
        """What the samples file keeps of this run: outcome, detail, exit status, mode and the
        last 500 characters of stderr (the end of a traceback)."""
        return {
            "outcome": self.outcome,
            "detail": self.detail,
            "returncode": self.returncode,
            "mode": self.mode,
            "stderr_tail": self.stderr[-500:],
        }
