"""Choosing a sandbox: --sandbox and its checks, the refusal where no namespace sandbox starts,
the docker command line, and how a run's end is classified."""

from __future__ import annotations

import errno
import json
import os
import signal

import pytest

from assay.cli.main import main
from assay.errors import SandboxError
from assay.sandbox import Limits, SandboxPolicy, run_many, run_untrusted
from assay.sandbox import policy as policy_module
from assay.sandbox._docker import docker_argv
from assay.sandbox._run import classify, done_line
from assay.sandbox._seccomp import seccomp_program
from assay.sandbox.policy import resolve

FORBIDDEN = "setting up uid map: Permission denied"


@pytest.fixture
def no_namespaces(monkeypatch):
    """A machine where bubblewrap cannot start (as in a container that forbids namespaces)."""
    monkeypatch.setattr(policy_module, "bwrap_status", lambda: (None, FORBIDDEN))


def test_auto_is_bubblewrap_where_it_starts():
    assert resolve(SandboxPolicy("auto")).mode == "bwrap"
    assert run_untrusted("print(1)").mode == "bwrap"


@pytest.mark.parametrize("mode", ["auto", "bwrap"])
def test_without_namespaces_auto_and_bwrap_refuse_and_say_what_rlimits_leaves_open(
    no_namespaces, mode
):
    with pytest.raises(SandboxError) as caught:
        resolve(SandboxPolicy(mode))
    message = str(caught.value)
    assert FORBIDDEN in message and "--sandbox rlimits" in message
    assert "NOT isolated: NETWORK ACCESS, READING YOUR FILES" in message


def test_without_namespaces_rlimits_and_none_still_run(no_namespaces):
    assert run_untrusted("print(1)", mode="rlimits").passed
    assert run_untrusted("print(1)", mode="none").passed


def test_none_sets_no_resource_limits_and_rlimits_does():
    code = "import resource\nprint(resource.getrlimit(resource.RLIMIT_AS))\n"
    limited = run_untrusted(code, memory_mb=300, mode="rlimits")
    unlimited = run_untrusted(code, memory_mb=300, mode="none")
    assert limited.stdout == f"({300 * 1024 * 1024}, {300 * 1024 * 1024})\n"
    assert unlimited.stdout == f"({resource_infinity()}, {resource_infinity()})\n"


def resource_infinity() -> int:
    import resource

    return resource.RLIM_INFINITY


@pytest.mark.parametrize(
    "policy,words",
    [
        (SandboxPolicy("docker"), "--sandbox-image"),
        (SandboxPolicy("bwrap", image="python:3.11"), "only with --sandbox docker"),
        (SandboxPolicy("bwrap", workers=0), "--sandbox-workers 0"),
        (SandboxPolicy("jail"), "auto, bwrap, rlimits, none, docker"),  # type: ignore[arg-type]
    ],
)
def test_settings_that_do_not_fit_are_refused(policy, words):
    with pytest.raises(SandboxError, match=words):
        resolve(policy)


def test_docker_without_an_engine_is_refused_clearly(monkeypatch):
    from assay.sandbox import _docker

    monkeypatch.setattr(
        _docker, "docker_status", lambda: (None, "the Docker engine is not reachable: no socket")
    )
    with pytest.raises(SandboxError, match="engine is not reachable: no socket"):
        resolve(SandboxPolicy("docker", image="python:3.11-slim"))


def test_the_docker_command_isolates_network_files_user_and_limits():
    limits = Limits(timeout_s=3.0, memory_mb=512, processes=32)
    argv = docker_argv("/usr/bin/docker", "python:3.11-slim", "assay-sandbox-x", limits)
    text = " ".join(argv[: argv.index("python:3.11-slim")])
    for expected in [
        "run --rm --interactive --name assay-sandbox-x",
        "--network none",
        "--read-only",
        f"--tmpfs /tmp:rw,exec,nosuid,nodev,size={limits.tmp_bytes},mode=1777",
        "--user 65534:65534",
        "--cap-drop ALL",
        "--security-opt no-new-privileges",
        "--pids-limit 32",
        "--memory 512m --memory-swap 512m",
        "--env HOME=/tmp",
    ]:
        assert expected in text
    assert " -v " not in text and "--volume" not in text and "--mount" not in text
    tail = argv[argv.index("python:3.11-slim") :]
    assert tail[1:4] == ["python3", "-I", "-c"]
    assert tail[5:] == [
        "-1", str(512 * 1024 * 1024), "4", str(limits.file_bytes), "-1", "-1", "1", str(done_line())
    ]  # fmt: skip


@pytest.mark.parametrize(
    "returncode,timed_out,flooded,report,isolating,expected",
    [
        (0, False, False, None, True, ("passed", "")),
        (-9, True, False, None, True, ("timed_out", "")),
        (-9, False, True, None, False, ("killed_by_limit", "output")),
        (-signal.SIGXCPU, False, False, None, False, ("killed_by_limit", "cpu")),
        (1, False, False, {"type": "MemoryError", "event": "open"}, False,
         ("killed_by_limit", "memory")),
        (1, False, False, {"type": "OSError", "errno": errno.EFBIG, "event": "open"}, False,
         ("killed_by_limit", "file_size")),
        (1, False, False, {"type": "BlockingIOError", "errno": errno.EAGAIN, "event": "os.fork"},
         False, ("killed_by_limit", "processes")),
        (1, False, False, {"type": "RuntimeError", "message": "can't start new thread"}, False,
         ("killed_by_limit", "processes")),
        (1, False, False, {"type": "OSError", "errno": 101, "event": "socket.connect",
                           "message": "unreachable"}, True,
         ("blocked", "network: socket.connect: unreachable")),
        # The same error outside an isolating sandbox is the program's own failure.
        (1, False, False, {"type": "OSError", "errno": 101, "event": "socket.connect"}, False,
         ("failed", "")),
        (1, False, False, {"type": "FileNotFoundError", "errno": 2, "event": "open"}, True,
         ("failed", "")),
        (1, False, False, {"type": "AssertionError", "event": "open"}, True, ("failed", "")),
    ],
)  # fmt: skip
def test_how_a_run_ended(returncode, timed_out, flooded, report, isolating, expected):
    assert classify(returncode, timed_out, flooded, report, isolating, returncode == 0) == expected


def test_the_seccomp_filter_refuses_new_namespaces_in_bwrap_only():
    assert seccomp_program() is not None  # pyseccomp and libseccomp are installed
    probe = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000), ctypes.get_errno())\n"  # CLONE_NEWUSER
        "print(open('/proc/self/status').read().split('Seccomp:')[1].split()[0])\n"
    )
    # In a fresh interpreter the program starts: the program itself may not use ctypes (the
    # bootstrap's guard), and the filter holds for every process below it.
    code = (
        "import subprocess, sys\n"
        f"ran = subprocess.run([sys.executable, '-c', {probe!r}], capture_output=True, text=True)\n"
        "sys.stdout.write(ran.stdout)\n"
    )
    inside = run_untrusted(code, mode="bwrap")
    assert inside.stdout.splitlines() == [f"-1 {errno.EPERM}", "2"], inside.stderr
    # No filter outside bwrap (run as root, rlimits drops capabilities, so unshare may fail
    # there for that reason: not with the filter's EPERM).
    outside = run_untrusted(code, mode="rlimits")
    made, no_filter = outside.stdout.splitlines()
    assert no_filter == "0" and made != f"-1 {errno.EPERM}", outside.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid switch is what bwrap does as root")
def test_as_root_the_program_runs_under_its_own_uid_without_capabilities():
    code = (
        "import os\n"
        "status = open('/proc/self/status').read()\n"
        "print(os.getuid(), [l.split()[1] for l in status.splitlines() if l.startswith('CapEff')])\n"
    )
    uid, caps = run_untrusted(code, mode="bwrap").stdout.split(" ", 1)
    assert int(uid) >= 1000
    assert caps.strip() == "['0000000000000000']"


def test_the_pool_keeps_input_order_whatever_finishes_first():
    codes = [f"import time\ntime.sleep({0.05 * (6 - i)})\nprint({i})\n" for i in range(6)]
    results = run_many(codes, Limits(timeout_s=5.0), SandboxPolicy("bwrap", workers=3))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(6)]


# ------------------------------------------------------------------ the command line
TASK = """\
from dataclasses import replace

from assay.catalog.humaneval import TASKS_TABLE

TASKS_TABLE = [replace(TASKS_TABLE[0], name="example_humaneval", hf_repo=None,
                       dataset_loader=lambda **_: {"test": list(TASKS_TABLE[0].example_rows)})]
"""


def run_cli(tmp_path, *flags: str) -> int:
    path = tmp_path / "tasks.py"
    path.write_text(TASK)
    return main(
        ["run", "--model", "dummy", "--model-args", json.dumps({"response": "    return a + b\n"}),
         "--custom-tasks", str(path), "--tasks", "example_humaneval", "--no-cache",
         "--no-progress", "--confirm-run-unsafe-code", *flags]
    )  # fmt: skip


def test_cli_refuses_code_tasks_where_no_namespace_sandbox_starts(tmp_path, capsys, no_namespaces):
    assert run_cli(tmp_path) == 2
    err = capsys.readouterr().err
    assert FORBIDDEN in err and "--sandbox rlimits" in err and "Traceback" not in err


def test_cli_runs_with_rlimits_when_asked_and_says_what_is_exposed(tmp_path, capsys, no_namespaces):
    assert run_cli(tmp_path, "--sandbox", "rlimits") == 0
    captured = capsys.readouterr()
    assert "model-written code runs in the rlimits sandbox" in captured.err
    assert "Not isolated: NETWORK ACCESS" in captured.err
    assert "pass@1" in captured.out


def test_cli_default_runs_code_in_bubblewrap(tmp_path, capsys):
    assert run_cli(tmp_path, "--sandbox-workers", "2") == 0
    assert "runs in the bwrap sandbox" in capsys.readouterr().err


def test_cli_refuses_docker_without_an_image(tmp_path, capsys):
    assert run_cli(tmp_path, "--sandbox", "docker") == 2
    assert "--sandbox docker needs --sandbox-image" in capsys.readouterr().err


def test_docker_runs_contained_where_an_engine_answers_and_is_refused_where_none_does(
    tmp_path, capsys
):
    from assay.sandbox._docker import docker_status

    image = os.environ.get("ASSAY_TEST_DOCKER_IMAGE", "python:3.11-slim")
    client, why = docker_status()
    if client is None:
        # This machine (a Docker client, no engine): the real probe's reason, exit 2.
        assert run_cli(tmp_path, "--sandbox", "docker", "--sandbox-image", image) == 2
        err = capsys.readouterr().err
        assert "--sandbox docker:" in err and why in err and "Traceback" not in err
        return
    code = "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)\n"
    result = run_untrusted(code, mode="docker", image=image)
    assert result.outcome == "blocked" and result.detail.startswith("network"), result
    assert run_cli(tmp_path, "--sandbox", "docker", "--sandbox-image", image) == 0


def test_the_done_line_is_the_bootstraps_one_done_call():
    from assay.sandbox._child import DONE_CALL
    from assay.sandbox._run import child_source

    lines = child_source().splitlines()
    assert lines[done_line() - 1].strip() == DONE_CALL
    assert [line.strip() for line in lines].count(DONE_CALL) == 1
