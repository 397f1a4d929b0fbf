"""assay.sandbox, the rlimits mode: model-written code runs in a separate interpreter under limits."""

from __future__ import annotations

import functools
import os
import time

import pytest

from assay.sandbox import MAX_OUTPUT_BYTES, run_untrusted

run = functools.partial(run_untrusted, mode="rlimits")


def test_passing_code_passes_and_keeps_its_output():
    result = run("def add(a, b):\n    return a + b\n\nassert add(2, 3) == 5\nprint('ok')\n")
    assert result.passed
    assert result.returncode == 0
    assert result.stdout == "ok\n"
    assert not result.timed_out


def test_failing_assertion_fails_with_the_traceback():
    result = run("def add(a, b):\n    return a - b\n\nassert add(2, 3) == 5, 'wrong sum'\n")
    assert not result.passed
    assert result.returncode == 1
    assert "AssertionError: wrong sum" in result.stderr
    assert not result.timed_out


def test_syntax_error_fails():
    result = run("def broken(:\n")
    assert not result.passed
    assert "SyntaxError" in result.stderr


def test_infinite_loop_is_killed_at_the_timeout():
    result = run("while True:\n    pass\n", timeout_s=1.0)
    # The loop never ends by itself: only the timeout can have stopped it.
    assert result.timed_out
    assert not result.passed
    assert result.returncode is not None and result.returncode < 0


def test_sleeping_code_is_killed_at_the_timeout():
    # Wall-clock limit, not only CPU time: sleeping uses no CPU.
    result = run("import time\ntime.sleep(60)\n", timeout_s=0.5)
    assert result.timed_out and not result.passed


def test_memory_bomb_is_stopped():
    result = run("blob = bytearray(2 * 1024 ** 3)\n", memory_mb=256)
    assert not result.passed
    assert not result.timed_out
    assert "MemoryError" in result.stderr or (result.returncode or 0) < 0


def test_memory_under_the_limit_is_allowed():
    result = run("blob = bytearray(32 * 1024 ** 2)\nprint(len(blob))\n", memory_mb=512)
    assert result.passed, result.stderr


def test_limits_cannot_be_raised_by_the_code():
    code = (
        "import resource\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_AS)\n"
        "resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
    )
    result = run(code, memory_mb=256)
    assert not result.passed
    assert "ValueError" in result.stderr


def test_output_is_truncated():
    result = run("import sys\nsys.stdout.write('x' * 10_000_000)\n")
    assert result.passed
    assert len(result.stdout) == MAX_OUTPUT_BYTES


def test_environment_secrets_are_not_inherited(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-PLANTED-sandbox-secret")
    result = run("import os\nprint(sorted(os.environ.items()))\n")
    assert result.passed
    assert "PLANTED" not in result.stdout
    assert "OPENAI_API_KEY" not in result.stdout


def test_runs_in_an_empty_temporary_directory_that_is_removed():
    result = run("import os\nprint(os.getcwd())\nprint(sorted(os.listdir('.')))\n")
    cwd, listing = result.stdout.splitlines()
    assert "assay-sandbox-" in cwd
    assert listing == "['solution.py']"
    assert not os.path.exists(cwd)


def test_isolated_mode_ignores_the_callers_sys_path(tmp_path, monkeypatch):
    (tmp_path / "planted_module.py").write_text("VALUE = 1\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    result = run("import planted_module\n")
    assert not result.passed
    assert "ModuleNotFoundError" in result.stderr


def test_background_children_are_killed():
    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid)\n"
    )
    result = run(code, timeout_s=5)
    assert result.passed, result.stderr
    pid = int(result.stdout.strip())
    # A bound under the child's 60 s sleep: only a kill ends it sooner, however busy the machine.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"child process {pid} outlived the sandbox")


@pytest.mark.parametrize("bad", [{"timeout_s": 0}, {"memory_mb": -1}])
def test_non_positive_limits_are_rejected(bad):
    with pytest.raises(ValueError):
        run("pass", **bad)
