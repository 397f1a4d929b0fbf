"""--output-path as lm-eval writes it (a folder of timestamped runs, or one .json file), and the
lock that keeps two processes out of one run's files."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from assay.cli.main import main
from assay.results.layout import model_folder_name
from assay.results.readers import read_run

COMPUTED = re.compile(r"(\d+) computed")


def run_cli(*args: str) -> int:
    return main(["run", "--model", "dummy", "--no-progress", *args])


def runs_in(folder: Path) -> list[Path]:
    return sorted(folder.glob("results_*.json"))


def test_two_runs_into_one_folder_land_side_by_side_and_each_resumes(task_dir, tmp_path, capsys):
    out = tmp_path / "out"
    first = ["--tasks", "toy_mc,toy_gen", "--include-path", str(task_dir), "--log-samples"]
    second = ["--tasks", "toy_mc", "--include-path", str(task_dir), "--limit", "3"]
    assert run_cli(*first, "--output_path", str(out)) == 0
    assert run_cli(*second, "--output_path", str(out), "--log-samples") == 0
    runs = runs_in(out / "dummy")
    assert len(runs) == 2
    stamps = [p.stem.removeprefix("results_") for p in runs]
    tasks = [sorted(json.loads(p.read_text())["results"]) for p in runs]
    assert tasks == [["toy_gen", "toy_mc"], ["toy_mc"]]
    for stamp, names in zip(stamps, tasks, strict=True):
        for task in names:
            assert (out / "dummy" / f"samples_{task}_{stamp}.jsonl").is_file()
    before = {p.name: p.read_bytes() for p in (out / "dummy").glob("samples_*")}
    capsys.readouterr()
    # The first command again: it resumes its own files (same timestamp), every answer cached.
    assert run_cli(*first, "--output_path", str(out), "-v") == 0
    err = capsys.readouterr().err
    assert f"resuming this run's files ({runs[0]})" in err
    assert runs_in(out / "dummy") == runs
    assert {p.name: p.read_bytes() for p in (out / "dummy").glob("samples_*")} == before


def test_a_killed_run_resumes_into_its_own_files(task_dir, tmp_path):
    """kill -9 after the first task: the re-run keeps the timestamp and answers the finished
    task from the run's cache. The model stops answering after toy_mc's 96 requests (24 docs x
    4 choices), so the kill lands inside toy_gen however busy the machine is."""
    out = tmp_path / "out"
    args = [
        sys.executable, "-m", "assay", "run", "--model", "dummy", "--model-args", "hold_after=96",
        "--tasks", "toy_mc,toy_gen", "--include-path", str(task_dir), "--no-progress",
        "--output-path", str(out), "--log-samples",
    ]  # fmt: skip
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(6000):  # only a bound (600 s): the run holds until it is killed
            found = runs_in(out / "dummy")
            if found and "toy_mc" in json.loads(found[0].read_text() or "{}").get("results", {}):
                break
            assert process.poll() is None, "the run ended before it was killed"
            time.sleep(0.1)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=60)
    [killed] = runs_in(out / "dummy")
    assert run_cli("--tasks", "toy_mc,toy_gen", "--include-path", str(task_dir),
                   "--output-path", str(out), "--log-samples") == 0  # fmt: skip
    assert runs_in(out / "dummy") == [killed]
    assert sorted(json.loads(killed.read_text())["results"]) == ["toy_gen", "toy_mc"]
    assert not list((out / "dummy").rglob("*.part"))


def test_output_path_ending_in_json_writes_that_file(task_dir, tmp_path, capsys):
    target = tmp_path / "out" / "myres.json"
    args = ["--tasks", "toy_mc", "--include-path", str(task_dir), "-o", str(target)]
    assert run_cli(*args, "--log-samples") == 0
    assert target.is_file() and json.loads(target.read_text())["results"]["toy_mc"]
    assert (tmp_path / "out" / "samples_toy_mc_myres.jsonl").is_file()
    assert read_run(target).has_samples("toy_mc")
    # The same run resumes; a different one is refused, naming the file and the fix.
    assert run_cli(*args, "--log-samples") == 0
    capsys.readouterr()
    assert run_cli(*args, "--limit", "2") == 2
    err = capsys.readouterr().err
    assert f"--output-path {target} holds the results of a different run" in err
    assert "--overwrite" in err
    assert run_cli(*args, "--limit", "2", "--overwrite") == 0
    assert json.loads(target.read_text())["config"]["limit"] == 2
    assert not (tmp_path / "out" / "samples_toy_mc_myres.jsonl").exists()


def test_output_path_and_output_dir_together_are_refused(task_dir, tmp_path, capsys):
    args = ["--tasks", "toy_mc", "--include-path", str(task_dir)]
    assert run_cli(*args, "-o", str(tmp_path / "a"), "--output-dir", str(tmp_path / "b")) == 2
    assert "give one" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("model_args", "expected"),
    [
        ({"pretrained": "org/my-model"}, "org__my-model"),
        ({"pretrained": "x", "peft": "a/b"}, "a__b"),
        ({}, "dummy"),
        ({"pretrained": ".."}, "model.."),
        ({"pretrained": "/abs/path"}, "__abs__path"),
    ],
)
def test_model_folder_is_lm_evals_sanitized_name_and_never_leaves_the_folder(model_args, expected):
    assert model_folder_name("dummy", model_args) == expected


HOLDER = """
import sys, time
from pathlib import Path
from assay.run.lock import RunLock
lock = RunLock(Path(sys.argv[1]), "test")
lock.acquire()
print("locked", flush=True)
sys.stdin.readline()
lock.release()
"""


def hold_lock(path: Path, *argv: str) -> subprocess.Popen[str]:
    """A process holding the lock at `path` until its stdin closes (or it is killed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "locked"
    return process


@pytest.mark.parametrize("layout", ["--output-dir", "--output-path"])
def test_a_second_run_into_locked_files_is_refused_naming_the_holder(
    task_dir, tmp_path, capsys, layout
):
    out = tmp_path / "out"
    args = ["--tasks", "toy_mc", "--include-path", str(task_dir), layout, str(out)]
    assert run_cli(*args) == 0  # creates the run's state folder, so its lock path is known
    lock = out / ".assay-lock" if layout == "--output-dir" else next(out.rglob("lock"))
    holder = hold_lock(lock, "--model-args", "api_key=sk-secret-123")
    try:
        capsys.readouterr()
        assert run_cli(*args) == 2
        err = capsys.readouterr().err
        assert "another assay run is writing these files" in err
        assert f"pid {holder.pid} on " in err and "api_key=***" in err
        assert "sk-secret-123" not in err
    finally:
        holder.communicate("")
    assert run_cli(*args) == 0  # released: the run goes ahead
    assert "taking over" not in capsys.readouterr().err


def test_the_lock_of_a_killed_run_is_taken_over_saying_so(task_dir, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["--tasks", "toy_mc", "--include-path", str(task_dir), "--output-dir", str(out)]
    holder = hold_lock(out / ".assay-lock")
    holder.kill()
    holder.wait(timeout=30)
    assert run_cli(*args) == 0
    assert f"taking over the lock of a run that ended without releasing it (pid {holder.pid}" in (
        capsys.readouterr().err
    )


def test_a_different_run_into_one_folder_at_once_never_loses_results(task_dir, tmp_path):
    """Two different runs into one --output-path folder while both hold their locks: each lands
    in its own files (lm-eval's layout has room for both)."""
    out = tmp_path / "out"
    base = [sys.executable, "-m", "assay", "run", "--model", "dummy", "--no-progress",
            "--include-path", str(task_dir), "--output-path", str(out)]  # fmt: skip
    processes = [
        subprocess.Popen([*base, "--tasks", task], stderr=subprocess.PIPE, text=True)
        for task in ("toy_mc", "toy_gen")
    ]
    for process in processes:
        _, err = process.communicate(timeout=240)
        assert process.returncode == 0, err[-2000:]
    landed = sorted(
        task for path in runs_in(out / "dummy") for task in json.loads(path.read_text())["results"]
    )
    assert landed == ["toy_gen", "toy_mc"]


@pytest.mark.parametrize("inside", ["", "sub.json"])
def test_an_output_path_under_a_file_is_refused_without_a_traceback(
    task_dir, tmp_path, capsys, inside
):
    blocker = tmp_path / "plain.txt"
    blocker.write_text("not a folder")
    target = blocker / inside if inside else blocker
    assert run_cli("--tasks", "toy_mc", "--include-path", str(task_dir), "-o", str(target)) == 2
    err = capsys.readouterr().err
    assert f"--output-path {target}: cannot write there (Not a directory" in err
    assert "Traceback" not in err
