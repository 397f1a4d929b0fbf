"""`assay run --batch-api`: refusals before any request, and a run killed with SIGKILL after
submitting its batch that completes on re-run without submitting again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from fixtures.json_tasks import generate_yaml, write_task
from fixtures.provider_fakes import FakeProviders

from assay.cli.main import main


@pytest.fixture
def folder(tmp_path):
    rows = [{"q": f"question {i}", "a": f"answer: question {i}"} for i in range(6)]
    return write_task(tmp_path / "tasks", generate_yaml("batch_gen"), rows)


def _run_args(fake, folder, out):
    return [
        "run", "--model", "openai-chat",
        "--model-args", f"model=gpt-test,base_url={fake.openai_url},batch_poll_interval=0.05",
        "--batch-api", "--tasks", "batch_gen", "--include-path", str(folder),
        "--output-dir", str(out), "--no-progress",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "dummy", "--batch-api", "--output-dir", "o"], "--model dummy has no provider"),
        (["--model", "openai-chat", "--model-args", "model=m", "--batch-api"], "--output-dir or --cache"),
    ],
)  # fmt: skip
def test_batch_api_is_refused_where_it_cannot_work(folder, capsys, args, message):
    code = main(["run", "--tasks", "batch_gen", "--include-path", str(folder), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


def _wait_for(condition, proc, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        if proc.poll() is not None:
            pytest.fail(f"assay exited ({proc.returncode}) early: {proc.stderr.read()[-2000:]}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the batch was not submitted in time")


@pytest.mark.slow
def test_a_killed_run_follows_its_batch_on_rerun_instead_of_paying_twice(folder, tmp_path, capsys):
    out = tmp_path / "out"
    log = tmp_path / "fake.log"
    # The batch stays in validating until the kill: the first run cannot finish.
    with FakeProviders(polls_per_state=10**9, log_path=log) as fake:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "assay", *_run_args(fake, folder, out)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait_for(lambda: log.exists() and "created" in log.read_text(), proc, 120)
            # The journal entry is written once the provider has answered the create.
            _wait_for(lambda: any((out / "batches").glob("*.json")), proc, 30)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        assert fake.creates == 1

        fake.polls_per_state = 1  # the provider now finishes the batch
        assert main(_run_args(fake, folder, out)) == 0
        assert fake.creates == 1  # followed, not submitted again
        assert len(fake.batch_lines) == 6
    assert "following 1 batch(es) submitted earlier" in capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert results["results"]["batch_gen"]["exact_match,none"] == 1.0


def test_a_failed_batch_fails_its_run_once_and_the_rerun_resubmits(folder, tmp_path, capsys):
    out = tmp_path / "out"
    with FakeProviders(fail_batch=lambda n: n == 1) as fake:
        assert main([*_run_args(fake, folder, out), "--batch-failed", "stop"]) != 0
        first = capsys.readouterr().err
        assert "batch batch_1 failed: Enqueued token limit reached" in first
        assert "Traceback" not in first
        # --batch-failed stop: reported again, nothing sent.
        assert main([*_run_args(fake, folder, out), "--batch-failed", "stop"]) != 0
        assert fake.creates == 1
        assert "not submitted again (--batch-failed stop)" in capsys.readouterr().err
        # By default the re-run submits the batch's requests once more.
        assert main(_run_args(fake, folder, out)) == 0
        assert fake.creates == 2
    assert "left 6 request(s) unanswered" in capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert results["results"]["batch_gen"]["exact_match,none"] == 1.0


@pytest.mark.parametrize("batch", [False, True])
def test_nothing_is_sent_for_later_tasks_once_a_task_failed(folder, tmp_path, capsys, batch):
    (folder / "batch_gen2.yaml").write_text(generate_yaml("batch_gen2"))
    out = tmp_path / "out"
    with FakeProviders(fail_batch=lambda n: True) as fake:
        fake.fail_next = [400]
        args = _run_args(fake, folder, out)
        args[args.index("--tasks") + 1] = "batch_gen,batch_gen2"
        if not batch:
            args.remove("--batch-api")
            args[4] += ",num_concurrent=1"
        assert main(args) == 2
        # One request online (the failed one), or one batch: none for the second task.
        assert (fake.creates, len(fake.bodies)) == ((1, 0) if batch else (0, 1))
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_killed_run_whose_journal_was_damaged_pays_once(provider, folder, tmp_path, capsys):
    out = tmp_path / "out"
    log = tmp_path / "fake.log"
    with FakeProviders(polls_per_state=10**9, log_path=log) as fake:
        args = _run_args(fake, folder, out)
        if provider == "anthropic":
            args[2:5] = ["anthropic-chat", "--model-args",
                         f"model=claude-test,base_url={fake.anthropic_url},batch_poll_interval=0.05"]  # fmt: skip
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "assay", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait_for(lambda: any((out / "batches").glob("*.json")), proc, 120)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        (journal,) = (out / "batches").glob("*.json")
        journal.write_text(journal.read_text()[:40], encoding="utf-8")  # truncated
        fake.polls_per_state = 1
        assert main(args) == 0
        assert fake.creates == 1 and len(fake.batch_lines) == 6
    assert f"{journal} cannot be read" in capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert results["results"]["batch_gen"]["exact_match,none"] == 1.0
