"""Running model-written Python code: a fresh interpreter with time, memory and output limits.

Tasks that execute generated code (HumanEval, MBPP) are refused unless the user passes
--confirm-run-unsafe-code; this is how they then run it. Each call starts a separate isolated
interpreter (`python -I`: no user site-packages, no PYTHON* environment variables, no current
directory on sys.path) in an empty temporary directory that is deleted afterwards, with
an environment holding no secrets (API keys are not inherited), limits on address space, CPU
time, file size and core dumps, and its own process group, which is killed when the time is up
or the code finishes (so background children die too).

What this does NOT do: block network access or file reads outside the temporary directory.
Those need an OS sandbox (a container, nsjail, a VM); run untrusted code there when it matters.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import IO

MAX_OUTPUT_BYTES = 64 * 1024
"""stdout and stderr are each cut to this many bytes (the rest is read and discarded)."""

MAX_FILE_BYTES = 64 * 1024 * 1024
"""Largest file the code may write (RLIMIT_FSIZE)."""

# The limits are set by the child interpreter itself, before the untrusted code runs: a
# `preexec_fn` would do the same but can deadlock when the caller runs sandboxes from threads.
# Soft and hard limits are equal, so the code cannot raise them again.
_BOOTSTRAP = """\
import resource, runpy, sys
memory, cpu, fsize = (int(v) for v in sys.argv[1:4])
for limit, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu),
                     (resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(limit, (value, value))
sys.argv = ["solution.py"]
del memory, cpu, fsize, limit, value, resource
runpy.run_path("solution.py", run_name="__main__")
"""


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


class _Drain(threading.Thread):
    """Reads a pipe to its end, keeping only the first `limit` bytes."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.limit, self.data = stream, limit, bytearray()

    def run(self) -> None:
        for chunk in iter(lambda: self.stream.read(65536), b""):
            room = self.limit - len(self.data)
            if room > 0:
                self.data += chunk[:room]

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def _clean_env(home: str) -> dict[str, str]:
    """A minimal environment: nothing of the caller's (no API keys, no tokens)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_untrusted(code: str, timeout_s: float = 10.0, memory_mb: int = 1024) -> SandboxResult:
    """Run `code` as a Python script in a separate, limited interpreter and report how it ended.

    `timeout_s` bounds wall-clock time (CPU time is capped a little above it too); `memory_mb`
    caps the address space, so a memory bomb ends with MemoryError or a kill, not a frozen host.
    """
    if timeout_s <= 0 or memory_mb <= 0:
        raise ValueError("run_untrusted: timeout_s and memory_mb must be positive")
    limits = (memory_mb * 1024 * 1024, math.ceil(timeout_s) + 1, MAX_FILE_BYTES)
    with tempfile.TemporaryDirectory(prefix="assay-sandbox-", ignore_cleanup_errors=True) as tmp:
        with open(os.path.join(tmp, "solution.py"), "w", encoding="utf-8") as handle:
            handle.write(code)
        process = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOTSTRAP, *map(str, limits)],
            cwd=tmp,
            env=_clean_env(tmp),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert process.stdout is not None and process.stderr is not None
        drains = [
            _Drain(process.stdout, MAX_OUTPUT_BYTES),
            _Drain(process.stderr, MAX_OUTPUT_BYTES),
        ]
        for drain in drains:
            drain.start()
        timed_out = False
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        # Killing the whole group also ends children the code left behind, which would
        # otherwise hold the pipes open.
        _kill_group(process.pid)
        returncode = process.wait()
        for drain in drains:
            drain.join(timeout=5)
        process.stdout.close()
        process.stderr.close()
    out, err = (d.text() for d in drains)
    return SandboxResult(returncode == 0 and not timed_out, returncode, out, err, timed_out)


__all__ = ["MAX_OUTPUT_BYTES", "SandboxResult", "run_untrusted"]
