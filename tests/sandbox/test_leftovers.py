"""A program that kills its own supervisor (`rlimits`, `none`) leaves no folder behind: its
private folder lives inside one assay makes and removes itself."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

import pytest

from assay.sandbox import Limits, SandboxPolicy, run_many

KILLS_ITS_SUPERVISOR = """\
import os, signal
open('{name}', 'w').write('left behind')
os.kill(os.getppid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("mode", ["rlimits", "none"])
def test_a_program_that_kills_its_supervisor_leaves_no_folder(mode):
    name = f"planted-{uuid.uuid4().hex}.txt"
    [result] = run_many(
        [KILLS_ITS_SUPERVISOR.format(name=name)], Limits(timeout_s=10.0), SandboxPolicy(mode)
    )
    assert result.returncode == -9, result  # the supervisor was killed
    assert not list(Path(tempfile.gettempdir()).glob(f"assay-sandbox-*/**/{name}"))
