"""Running model-written Python code in a sandbox: an OS sandbox where one starts.

Tasks that execute generated code (HumanEval, MBPP) are refused unless the user passes
--confirm-run-unsafe-code; this is how they then run it. Every program runs in a fresh
interpreter with time, memory, file-size, process and output limits and an environment
holding no secrets, inside one of these modes (`--sandbox`):

- `bwrap` (what `auto` picks when it starts): Linux namespaces by bubblewrap; no network, a
  read-only view of the interpreter and standard library, a private /tmp as the only writable
  path, no home folder or checkout, no other processes, seccomp (`_bwrap.py`);
- `docker`: a fresh container of an image the user names (`_docker.py`);
- `rlimits`: the limits alone, on the host, in a temporary folder, under a supervisor that ends
  every process the program starts; `none`: not even the limits (`_local.py`). Neither blocks
  the network nor reads of the user's files; assay's own environment is made unreadable.

In every mode a program passes only when its code returned (the bootstrap writes back a nonce
after it, `_child.py`), never on its exit status alone.

`policy.ISOLATION` says what each mode isolates. `run_many` runs many programs on a bounded
pool of workers, results in input order; each result says how the run ended (`Outcome`).
`programs` runs candidate programs against their tests and estimates pass@k; `code_eval` is
the sandboxed stand-in for `evaluate`'s code_eval metric that lm-eval's code tasks load.
"""

from __future__ import annotations

from collections.abc import Sequence

from assay.sandbox._types import (
    MAX_FILE_BYTES,
    MAX_OUTPUT_BYTES,
    MODES,
    Limits,
    Outcome,
    SandboxMode,
    SandboxResult,
)
from assay.sandbox.policy import ISOLATION, SandboxPolicy, resolve


def run_resolved(code: str, limits: Limits, policy: SandboxPolicy) -> SandboxResult:
    """Run `code` under `limits` in the concrete mode of a resolved `policy`."""
    if policy.mode == "bwrap":
        from assay.sandbox._bwrap import run_bwrap
        from assay.sandbox.policy import bwrap_status

        executable, _ = bwrap_status()
        assert executable is not None, "resolve() checks that bubblewrap starts"
        return run_bwrap(code, limits, executable)
    if policy.mode == "docker":
        from assay.sandbox._docker import docker_status, run_docker

        client, _ = docker_status()
        assert client is not None and policy.image, "resolve() checks the engine and the image"
        return run_docker(code, limits, client, policy.image)
    from assay.sandbox._local import run_local

    assert policy.mode in ("rlimits", "none"), policy.mode
    return run_local(code, limits, rlimits=policy.mode == "rlimits")


def run_untrusted(
    code: str,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    *,
    mode: SandboxMode = "auto",
    image: str | None = None,
) -> SandboxResult:
    """Run `code` as a Python script in the sandbox `mode` and report how it ended.

    `timeout_s` bounds wall-clock time (CPU time is capped a little above it too); `memory_mb`
    caps the address space, so a memory bomb ends with MemoryError or a kill, not a frozen host.
    `auto` is bubblewrap, or SandboxError when no namespace sandbox starts here.
    """
    limits = Limits(timeout_s=timeout_s, memory_mb=memory_mb)
    return run_resolved(code, limits, resolve(SandboxPolicy(mode, image)))


def run_many(
    codes: Sequence[str], limits: Limits, policy: SandboxPolicy | None = None
) -> list[SandboxResult]:
    """Run every program of `codes` on at most `policy.workers` workers (default one per CPU);
    the results come back in the order of `codes`, whatever order they finished in."""
    import os

    from assay.sandbox._run import run_all
    from assay.sandbox.policy import current_policy

    resolved = resolve(policy if policy is not None else current_policy())
    workers = resolved.workers or os.cpu_count() or 1
    return run_all(lambda code: run_resolved(code, limits, resolved), codes, workers)


__all__ = [
    "ISOLATION",
    "MAX_FILE_BYTES",
    "MAX_OUTPUT_BYTES",
    "MODES",
    "Limits",
    "Outcome",
    "SandboxMode",
    "SandboxPolicy",
    "SandboxResult",
    "run_many",
    "run_untrusted",
]
