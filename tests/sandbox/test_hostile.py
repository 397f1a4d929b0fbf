"""Hostile programs through the bubblewrap sandbox: each is contained, reported, and leaves
nothing running.

Every attack runs once in the `bwrap` mode, where it must fail; where it makes the point, the
same program runs in the `rlimits` mode too and succeeds there, which shows the attack is real
(the test would catch a sandbox that let it through).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import psutil
import pytest
from fixtures.waiting import wait_for

from assay.sandbox import Limits, SandboxPolicy, SandboxResult, run_many

BWRAP = SandboxPolicy("bwrap")
RLIMITS = SandboxPolicy("rlimits")
CHECKOUT = Path(__file__).resolve().parents[2]
FAST = Limits(timeout_s=5.0, memory_mb=256)


BOUND_S = 30
"""Seconds a test waits for processes to exit before it fails: far under the 60 s the
escaping programs sleep, far over what a busy machine takes to reap them."""


def run(code: str, policy: SandboxPolicy = BWRAP, limits: Limits = FAST) -> SandboxResult:
    [result] = run_many([code], limits, policy)
    return result


def no_processes_left() -> None:
    """Nothing this test process started is still alive (waited for as they exit: the bound
    only keeps a broken sandbox from hanging the suite)."""
    psutil.wait_procs(psutil.Process().children(recursive=True), timeout=BOUND_S)
    assert psutil.Process().children(recursive=True) == []


@pytest.fixture
def loopback_server():
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn)
            conn.sendall(b"hello from the host\n")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join(timeout=2)
    server.close()


def test_a_socket_to_a_loopback_server_of_the_host_fails(loopback_server):
    port, accepted = loopback_server
    code = (
        "import socket\n"
        f"s = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        "print(s.recv(100))\n"
    )
    result = run(code)
    assert not result.passed
    assert result.outcome == "blocked" and result.detail.startswith("network"), result
    assert "hello from the host" not in result.stdout
    assert accepted == []
    # The same program reaches the server from the rlimits mode: the attack is real.
    control = run(code, RLIMITS)
    assert control.passed and "hello from the host" in control.stdout
    assert len(accepted) == 1
    no_processes_left()


@pytest.fixture
def planted_secrets(tmp_path, monkeypatch):
    """A secret in a fake home folder (HOME points there) and one in the checkout."""
    token = f"PLANTED-{uuid.uuid4().hex}"
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(token)
    monkeypatch.setenv("HOME", str(home))
    in_checkout = CHECKOUT / f".sandbox-test-secret-{uuid.uuid4().hex}"
    in_checkout.write_text(token)
    yield token, [home / ".ssh" / "id_ed25519", in_checkout, CHECKOUT / "pyproject.toml"]
    in_checkout.unlink()


def test_secret_files_in_the_home_folder_and_the_checkout_cannot_be_read(planted_secrets):
    token, paths = planted_secrets
    code = (
        "import os\n"
        "seen = []\n"
        f"for path in {[str(p) for p in paths]!r} + [os.path.expanduser('~/.ssh/id_ed25519')]:\n"
        "    try:\n"
        "        seen.append(open(path).read())\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__, path)\n"
        "print(len(seen), 'read', seen)\n"
        "assert not seen\n"
    )
    result = run(code)
    assert result.passed, result.stderr
    assert token not in result.stdout + result.stderr
    assert "0 read" in result.stdout
    control = run(code, RLIMITS)
    assert token in control.stdout and not control.passed


def test_writes_outside_the_private_tmp_do_not_reach_the_host(tmp_path):
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    targets = [host_dir / "escaped.txt", CHECKOUT / f".sandbox-escape-{uuid.uuid4().hex}"]
    code = (
        "import os\n"
        f"for path in {[str(t) for t in targets]!r} + ['/usr/escaped', '/escaped']:\n"
        "    try:\n"
        "        os.makedirs(os.path.dirname(path), exist_ok=True)\n"
        "        open(path, 'w').write('escaped')\n"
        "        print('wrote', path)\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__, path)\n"
        "open('/tmp/inside.txt', 'w').write('fine')\n"
        "print(open('/tmp/inside.txt').read())\n"
    )
    try:
        result = run(code)
        assert result.passed, result.stderr
        assert "fine" in result.stdout
        assert "OSError /usr/escaped" in result.stdout  # read-only
        for target in targets:
            assert not target.exists()
        assert sorted(os.listdir(host_dir)) == []
    finally:
        for target in targets:
            target.unlink(missing_ok=True)


def test_a_read_only_file_system_is_reported_as_blocked():
    result = run("open('/usr/lib/planted', 'w')\n")
    assert result.outcome == "blocked" and "read-only" in result.detail


def test_a_fork_bomb_is_held_by_the_process_limit():
    result = run("import os\nwhile True:\n    os.fork()\n", limits=Limits(timeout_s=10.0))
    # Ended by the process limit, not by the timeout (which would say timed_out).
    assert result.outcome == "killed_by_limit" and result.detail == "processes", result
    no_processes_left()


def test_memory_exhaustion_is_killed_by_the_memory_limit():
    for code in ("blob = bytearray(4 * 1024 ** 3)\n", "chunks = []\nwhile True:\n    chunks.append(bytearray(2 ** 24))\n"):  # fmt: skip
        result = run(code)
        assert result.outcome == "killed_by_limit" and result.detail == "memory", result


def test_cpu_exhaustion_is_stopped_at_the_time_limit():
    result = run("while True:\n    pass\n", limits=Limits(timeout_s=1.0))
    # The loop never ends by itself: only the time limit can have stopped it.
    assert result.outcome == "timed_out" and not result.passed
    no_processes_left()


def test_cpu_time_is_capped_just_above_the_wall_clock_limit():
    code = "import resource\nprint(resource.getrlimit(resource.RLIMIT_CPU))\n"
    assert run(code, limits=Limits(timeout_s=3.0)).stdout == "(4, 5)\n"


def test_infinite_output_is_killed_and_cut():
    result = run("while True:\n    print('x' * 1000)\n", limits=Limits(timeout_s=30.0))
    # Stopped by the output limit, not by the 30 s timeout (which would say timed_out).
    assert result.outcome == "killed_by_limit" and result.detail == "output"
    assert len(result.stdout) == FAST.output_bytes


def test_a_background_process_does_not_outlive_the_run():
    marker = f"assay-hostile-{uuid.uuid4().hex}"
    code = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', "
        f"'{marker}'], start_new_session=True, stdout=subprocess.DEVNULL,\n"
        "                 stderr=subprocess.DEVNULL)\n"
        "print('started')\n"
    )

    def survivors() -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            if marker in (proc.info["cmdline"] or []):
                found.append(proc)
        return found

    for policy in (BWRAP, RLIMITS, SandboxPolicy("none")):
        result = run(code, policy)
        assert result.passed and result.stdout == "started\n", result.stderr
        # Waited for as it exits, not after a fixed pause; it would sleep 60 s if it escaped.
        _, alive = psutil.wait_procs(survivors(), timeout=BOUND_S)
        left = still_running(alive)
        for proc in alive:
            proc.kill()
        # The namespace ends it in bwrap; the supervisor (its subreaper) in rlimits and none.
        assert left == [], policy
        no_processes_left()


def test_the_parents_environment_is_not_visible(monkeypatch):
    monkeypatch.setenv("ASSAY_PLANTED_TOKEN", "sk-planted-environment-secret")
    code = (
        "import os\n"
        "found = [k for k, v in os.environ.items() if 'planted' in v]\n"
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit():\n"
        "        try:\n"
        "            if b'planted' in open(f'/proc/{pid}/environ', 'rb').read():\n"
        "                found.append(pid)\n"
        "        except OSError:\n"
        "            pass\n"
        "print(sorted(p for p in os.listdir('/proc') if p.isdigit()), found)\n"
        "assert not found\n"
    )
    result = run(code)
    assert result.passed, result.stderr
    assert "sk-planted" not in result.stdout
    # Only the sandbox's own processes: bubblewrap's init (1) and the program (2).
    assert result.stdout.startswith("['1', '2']")


def test_many_hostile_programs_at_once_are_each_reported_in_order():
    programs = [
        "print('fine')\n",
        "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)\n",
        "blob = bytearray(4 * 1024 ** 3)\n",
        "import time\ntime.sleep(30)\n",
        "assert 1 == 2\n",
        "open('/usr/x', 'w')\n",
    ] * 3
    results = run_many(
        programs, Limits(timeout_s=2.0, memory_mb=256), SandboxPolicy("bwrap", workers=4)
    )
    outcomes = [(r.outcome, r.detail.split(":")[0]) for r in results]
    assert (
        outcomes
        == [
            ("passed", ""),
            ("blocked", "network"),
            ("killed_by_limit", "memory"),
            ("timed_out", ""),
            ("failed", ""),
            ("blocked", "read-only file system"),
        ]
        * 3
    )
    assert {r.mode for r in results} == {"bwrap"}
    no_processes_left()


def test_filling_the_private_tmp_stops_at_its_size():
    code = (
        "for i in range(100):\n"
        "    with open(f'/tmp/fill{i}', 'wb') as handle:\n"
        "        handle.write(bytes(32 * 1024 * 1024))\n"
    )
    result = run(code, limits=Limits(timeout_s=10.0, memory_mb=512, tmp_bytes=64 * 1024 * 1024))
    assert result.outcome == "killed_by_limit" and result.detail == "tmp_size", result


def test_nothing_survives_when_assay_itself_is_killed():
    harness = subprocess.Popen(
        [sys.executable, "-c",
         "from assay.sandbox import run_untrusted\n"
         "from assay.sandbox.policy import bwrap_status\n"
         "bwrap_status()\n"  # the start-up probe, before the program
         "print('probed', flush=True)\n"
         "run_untrusted('import time\\ntime.sleep(60)\\n', timeout_s=60, mode='bwrap')\n"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert harness.stdout is not None and harness.stdout.readline() == b"probed\n"
    parent = psutil.Process(harness.pid)
    # bwrap, its init in the new PID namespace, and the program
    wait_for(lambda: len(parent.children(recursive=True)) >= 3)
    sandboxed = parent.children(recursive=True)
    assert len(sandboxed) >= 3
    harness.kill()
    harness.wait()
    harness.stdout.close()
    _, alive = psutil.wait_procs(sandboxed, timeout=10)
    # Orphans end up as children of this machine's init, which may reap them late: a zombie
    # has ended (it holds no memory and runs nothing).
    assert still_running(alive) == []


def still_running(procs: list[psutil.Process]) -> list[tuple[int, str, str]]:
    """(pid, name, status) of the processes that exist and are not zombies."""
    out = []
    for proc in procs:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                out.append((proc.pid, proc.name(), proc.status()))
        except psutil.NoSuchProcess:
            continue
    return out
