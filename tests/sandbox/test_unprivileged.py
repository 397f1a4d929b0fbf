"""Run as an unprivileged user (uid 65534 through setpriv), assay keeps its promises too.

Planted API keys in assay's environment reach no program output in any mode (the program
scans every /proc/PID/environ it can read, its own environment included), and `kill -9` of
assay leaves no program running and no folder behind. The test runs as root on this project's
machines and drops to uid 65534 for assay itself; the interpreter is the first one that user
may run (the virtualenv's may live under a folder only root may enter, then the system's
python of the same version, with the virtualenv's packages on its path).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_verdict import MODES, RUNNER, SCANNER, kill_assay_mid_run

SRC = Path(__file__).resolve().parents[2] / "src"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to drop to an unprivileged user",
)


def unprivileged_python() -> list[str]:
    """setpriv and an interpreter uid 65534 can start, that imports assay.sandbox and can
    start itself again (as the sandbox does)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for python in (sys.executable, f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        probe = subprocess.run(
            [*NOBODY, python, "-c", PROBE],
            env={**os.environ, "PYTHONPATH": python_path()},
            capture_output=True,
            timeout=60,
        )
        if probe.returncode == 0:
            return [*NOBODY, python]
    pytest.fail(f"no Python {version} that uid 65534 can run imports assay.sandbox")


PROBE = (
    "import assay.sandbox, subprocess, sys; subprocess.run([sys.executable, '-c', ''], check=True)"
)


def python_path() -> str:
    return os.pathsep.join([str(SRC), sysconfig.get_paths()["purelib"]])


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder uid 65534 may write (pytest's own is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="assay-unprivileged-"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def test_planted_keys_appear_in_no_output_in_any_mode_as_an_unprivileged_user(shared_tmp):
    env = {
        **os.environ,
        "PYTHONPATH": python_path(),
        "TMPDIR": str(shared_tmp),
        "OPENAI_API_KEY": "sk-planted-openai",
        "ANTHROPIC_API_KEY": "sk-planted-anthropic",
        "HF_TOKEN": "sk-planted-hf",
    }
    done = subprocess.run(
        [*unprivileged_python(), "-c", RUNNER, *MODES],
        input=SCANNER.replace("print(", "print(os.getuid(), "),
        capture_output=True,
        text=True,
        env=env,
        cwd=shared_tmp,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.split() for line in done.stdout.splitlines()]
    ran = [line for line in lines if line[:1] in ([m] for m in MODES)]
    assert [line[:2] for line in ran] == [[mode, "passed"] for mode in MODES], done.stdout
    # Each program ran as uid 65534 (not root), read /proc (command lines at least), and
    # found no key, in its environment or in any other process's.
    assert all(line[2] == "65534" and int(line[4]) >= 1 for line in ran), done.stdout
    assert "sk-planted" not in done.stdout + done.stderr


@pytest.mark.parametrize("mode", MODES)
def test_kill_9_of_an_unprivileged_assay_leaves_no_program(shared_tmp, mode):
    kill_assay_mid_run(shared_tmp, mode, unprivileged_python(), PYTHONPATH=python_path())
