"""The `rlimits` and `none` modes: a separate interpreter on the host, in a temporary folder.

`rlimits` is assay's original sandbox: a fresh `python -I` (no user site-packages, no PYTHON*
variables, no current folder on sys.path) under a supervisor (`_child.py`) that gives it a
private temporary folder, deleted afterwards, and ends every process it started (daemons that
left its process group included) when it ends, when its time is up or when assay dies; an
environment holding no secrets; limits on address space, CPU time, file size and core dumps.
`none` is the same without the resource limits (the wall-clock limit stays).

The program runs as the user, so it could read the environment of any process of the user
from /proc (`/proc/PID/environ`): assay's own, with its API keys, is made unreadable before
the first program starts (`hide_environment`: the process is marked not dumpable, which also
refuses ptrace and core dumps; the kernel lifts it from programs assay starts). Processes
other than assay (the shell that started it) stay readable, as do the user's files and the
network: that takes the `bwrap` or `docker` mode.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile

from assay.sandbox._run import Launch, child_args, child_source, clean_env, execute
from assay.sandbox._types import Limits, SandboxResult

_PR_SET_DUMPABLE = 4


@functools.cache
def hide_environment() -> bool:
    """Make this process's /proc files (environ, memory) readable by root alone; whether the
    kernel agreed."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def run_local(code: str, limits: Limits, *, rlimits: bool) -> SandboxResult:
    """Run `code` in a fresh interpreter under its supervisor, with or without rlimits."""
    if not hide_environment():
        from assay.errors import SandboxError

        raise SandboxError(
            "--sandbox rlimits/none: this system refused to make assay's environment "
            "unreadable to the programs it runs (prctl PR_SET_DUMPABLE); use --sandbox bwrap "
            "or docker."
        )
    # The supervisor makes the program's private folder inside one of assay's own, which assay
    # removes afterwards: a program that kills its supervisor cannot leave its files behind.
    parent = tempfile.mkdtemp(prefix="assay-sandbox-")
    try:
        return _run_supervised(code, limits, rlimits=rlimits, parent=parent)
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def _run_supervised(code: str, limits: Limits, *, rlimits: bool, parent: str) -> SandboxResult:
    supervisor = ["supervise", str(os.getpid()), parent]
    launch = Launch(
        mode="rlimits" if rlimits else "none",
        argv=[
            sys.executable,
            "-I",
            "-c",
            child_source(),
            *supervisor,
            *child_args(limits, rlimits=rlimits),
        ],
        env=clean_env(tempfile.gettempdir()),
        cwd=tempfile.gettempdir(),
        signal_exit_codes=True,
        supervised=True,
    )
    return execute(launch, code, limits)
