"""Running one sandboxed program: the command a mode built, the code on its standard input.

Every mode starts the same child bootstrap (`_child.py`) and differs only in the command
around it (`Launch`). This module feeds a fresh nonce and the program in, drains stdout and
stderr (keeping the first MAX_OUTPUT_BYTES, killing a program that floods them), enforces the
wall-clock limit, ends every process the program started when it ends, and says how the run
ended. A run passes only when the bootstrap wrote the nonce after the program's code returned
(`_child.py`): the exit status alone proves nothing, `sys.exit(0)` gives one.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import math
import os
import secrets
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from assay.sandbox._child import (
    DONE_CALL,
    DONE_MARKER,
    LATE_MARKER,
    REPORT_MARKER,
    REPORT_SEPARATOR,
)
from assay.sandbox._types import Limits, Outcome, SandboxResult

_TAIL_BYTES = 16 * 1024
"""The end of stderr is kept apart from its head: the child's report sits there."""

_DRAIN_GRACE_S = 1.0
"""Once the program's process has ended, how long output still coming (from a process it left
behind that holds the pipe) is read before the run stops listening."""

_SUPERVISOR_GRACE_S = 5.0
"""How long the supervisor (`_child.py`) is given to end the program's processes when asked,
before its whole process group is killed."""

_PROCESS_EVENTS = ("os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.system",
                   "subprocess.Popen", "_thread.start_new_thread")  # fmt: skip


@functools.cache
def child_source() -> str:
    """The bootstrap's source, passed to the sandboxed interpreter with -c."""
    return Path(__file__).with_name("_child.py").read_text(encoding="utf-8")


@functools.cache
def done_line() -> int:
    """The number of the bootstrap's line holding its done call: the guard accepts the done
    event from that line of `_main` alone (`_child._guard`)."""
    lines = child_source().splitlines()
    found = [n for n, line in enumerate(lines, start=1) if line.strip() == DONE_CALL]
    if len(found) != 1:
        raise RuntimeError(f"the sandbox bootstrap must hold {DONE_CALL!r} on exactly one line")
    return found[0]


def child_args(
    limits: Limits, *, uid: int = -1, rlimits: bool = True, nproc: bool = False
) -> list[str]:
    """The bootstrap's eight arguments (see `_child.py`); -1 leaves a limit alone."""
    values = [uid, -1, -1, -1, -1, -1, int(limits.as_main), done_line()]
    if rlimits:
        cpu = math.ceil(limits.timeout_s) + 1
        values[1:4] = [limits.memory_mb * 1024 * 1024, cpu, limits.file_bytes]
    if nproc:
        values[4] = limits.processes
    if limits.run_s is not None:
        values[5] = math.ceil(limits.run_s * 1000)
    return [str(v) for v in values]


def clean_env(home: str) -> dict[str, str]:
    """A minimal environment: nothing of the caller's (no API keys, no tokens)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }


@dataclass
class Launch:
    """A command that runs the child bootstrap, as one sandbox mode builds it."""

    mode: str
    """The sandbox mode (recorded in each result)."""
    argv: list[str]
    """The command; its last arguments are the interpreter, -I -c, the bootstrap and its args."""
    env: dict[str, str]
    """The command's whole environment (nothing of the caller's is inherited)."""
    cwd: str | None = None
    """Working folder on the host (None: the command sets its own)."""
    pass_fds: tuple[int, ...] = ()
    """File descriptors the command inherits (the seccomp filter), closed once it started."""
    isolating: bool = False
    """Network and files are walled off, so an OSError on them means the sandbox said no."""
    signal_exit_codes: bool = False
    """The command reports a program killed by signal N as exit status 128 + N (bwrap, docker)."""
    stop: Callable[[], None] | None = field(default=None)
    """Extra clean-up after the process group is killed (a container to remove)."""
    supervised: bool = False
    """The command is the bootstrap's supervisor (`_child.py`): asked to stop with SIGTERM,
    it kills every process the program started, even those that left its process group."""


class _Drain(threading.Thread):
    """Reads a pipe to its end, keeping the first `keep` bytes and the last _TAIL_BYTES; calls
    `flood` once when more than `kill_after` bytes came through; notes whether `needle` came
    through. Once `finish` is set it stops at the first pause in the output or after
    _DRAIN_GRACE_S, so a process holding the pipe open cannot hold the run."""

    def __init__(
        self,
        stream: IO[bytes],
        keep: int,
        kill_after: int,
        flood: Callable[[], None],
        needle: bytes = b"",
    ) -> None:
        super().__init__(daemon=True)
        self.stream, self.keep, self.kill_after, self.flood = stream, keep, kill_after, flood
        self.head, self.tail, self.total, self.flooded = bytearray(), b"", 0, False
        self.needle, self.found = needle, False
        self.finish = threading.Event()

    def run(self) -> None:
        fd = self.stream.fileno()
        stop_at: float | None = None
        carry = b""
        while True:
            if self.finish.is_set() and stop_at is None:
                stop_at = time.monotonic() + _DRAIN_GRACE_S
            if stop_at is not None and time.monotonic() > stop_at:
                return
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                if stop_at is not None:
                    return
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            if self.needle and not self.found:
                window = carry + chunk
                self.found = self.needle in window
                carry = window[-len(self.needle) :]
            room = self.keep - len(self.head)
            if room > 0:
                self.head += chunk[:room]
            self.tail = (self.tail + chunk)[-_TAIL_BYTES:]
            self.total += len(chunk)
            if self.total > self.kill_after and not self.flooded:
                self.flooded = True
                self.flood()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _ask_supervisor(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)


def _feed(stream: IO[bytes], data: bytes) -> None:
    with contextlib.suppress(OSError):
        stream.write(data)
    with contextlib.suppress(OSError):
        stream.close()


def execute(launch: Launch, code: str, limits: Limits) -> SandboxResult:
    """Run `code` through `launch` under `limits` and say how it ended."""
    nonce = secrets.token_hex(16)
    try:
        process = subprocess.Popen(
            launch.argv,
            cwd=launch.cwd,
            env=launch.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=launch.pass_fds,
        )
    finally:
        for fd in launch.pass_fds:
            os.close(fd)
    assert process.stdin and process.stdout and process.stderr
    if launch.supervised:
        kill = functools.partial(_ask_supervisor, process.pid)
    else:
        kill = functools.partial(_kill_group, process.pid)
    done = (DONE_MARKER + nonce + "\n").encode()
    out = _Drain(process.stdout, limits.output_bytes, limits.output_kill_bytes, kill)
    err = _Drain(process.stderr, limits.output_bytes, limits.output_kill_bytes, kill, done)
    feed = threading.Thread(
        target=_feed, args=(process.stdin, (nonce + "\n" + code).encode()), daemon=True
    )
    for thread in (feed, out, err):
        thread.start()
    timed_out = False
    try:
        process.wait(timeout=limits.timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    if launch.supervised and process.returncode is None:  # still running: time is up
        kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=_SUPERVISOR_GRACE_S)
    # Killing the whole group also ends children the code left behind, which would
    # otherwise hold the pipes open (the namespace modes end theirs with the namespace).
    _kill_group(process.pid)
    returncode: int = process.wait()
    for drain in (out, err):
        drain.finish.set()
    for thread in (feed, out, err):
        thread.join(timeout=_DRAIN_GRACE_S + 1)
    flooded = out.flooded or err.flooded
    if launch.stop is not None and (timed_out or flooded):
        launch.stop()
    process.stdout.close()
    process.stderr.close()
    if launch.signal_exit_codes and returncode > 128:
        returncode = -(returncode - 128)
    report = _report(bytes(err.head) + err.tail)
    stderr = _without_reports(bytes(err.head).decode("utf-8", errors="replace"))
    stdout = bytes(out.head).decode("utf-8", errors="replace")
    late = not err.found and LATE_MARKER.encode() in err.tail
    outcome, detail = classify(
        returncode, timed_out or late, flooded, report, launch.isolating, err.found
    )
    passed = outcome == "passed"
    return SandboxResult(
        passed, returncode, stdout, stderr, timed_out or late, outcome, detail, launch.mode
    )


def _report(stderr: bytes) -> dict[str, Any] | None:
    """The child's last report line, if the program died of an uncaught exception."""
    marker = REPORT_MARKER.encode()
    at = stderr.rfind(marker)
    if at < 0:
        return None
    line = stderr[at + len(marker) :].split(b"\n", 1)[0].decode("utf-8", errors="replace")
    fields = line.split(REPORT_SEPARATOR)
    if len(fields) != 4:
        return None
    kind, number, event, message = fields
    return {
        "type": kind,
        "errno": int(number) if number.lstrip("-").isdigit() else None,
        "event": event,
        "message": message,
    }


def _without_reports(text: str) -> str:
    return "".join(
        line
        for line in text.splitlines(keepends=True)
        if not line.startswith((REPORT_MARKER, DONE_MARKER, LATE_MARKER))
    )


def classify(
    returncode: int,
    timed_out: bool,
    flooded: bool,
    report: dict[str, Any] | None,
    isolating: bool,
    completed: bool,
) -> tuple[Outcome, str]:
    """The outcome and its detail, from whether the program's code returned (`completed`: the
    bootstrap's nonce came back), the exit status, the kill reasons and the report."""
    if flooded:
        return "killed_by_limit", "output"
    if completed:
        return "passed", ""
    if timed_out:
        return "timed_out", ""
    if returncode == 0:
        return "failed", "the program ended before its code returned (exit status 0)"
    if returncode == -signal.SIGXCPU:
        return "killed_by_limit", "cpu"
    if returncode == -signal.SIGXFSZ:
        return "killed_by_limit", "file_size"
    if report is None:
        return "failed", ""
    kind, number, event = report.get("type"), report.get("errno"), str(report.get("event", ""))
    message = str(report.get("message", ""))
    if kind == "MemoryError":
        return "killed_by_limit", "memory"
    if number == errno.EFBIG:
        return "killed_by_limit", "file_size"
    if number == errno.ENOSPC:
        return "killed_by_limit", "tmp_size"
    if (number == errno.EAGAIN and event.startswith(_PROCESS_EVENTS)) or (
        kind == "RuntimeError" and "can't start new thread" in message
    ):
        return "killed_by_limit", "processes"
    if isolating and number is not None:
        if event.startswith("socket."):
            return "blocked", f"network: {event}: {message}"
        if number == errno.EROFS:
            return "blocked", f"read-only file system: {event}: {message}"
        if number in (errno.EPERM, errno.EACCES):
            return "blocked", f"operation not permitted: {event}: {message}"
    return "failed", ""


def run_all(
    run_one: Callable[[str], SandboxResult], codes: Sequence[str], workers: int
) -> list[SandboxResult]:
    """`run_one` over `codes` on at most `workers` threads, results in the order of `codes`."""
    from concurrent.futures import ThreadPoolExecutor

    if not codes:
        return []
    with ThreadPoolExecutor(max(1, min(workers, len(codes)))) as pool:
        return list(pool.map(run_one, codes))
