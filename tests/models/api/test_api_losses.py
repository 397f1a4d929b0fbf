"""What an API run keeps when it is stopped, and what it refuses to wait for: answers enter
the response cache as they arrive (Ctrl-C keeps them, and says how many), a provider's hold
beyond max_wait fails at once."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from fixtures.json_tasks import generate_yaml, write_task
from fixtures.limited_server import LimitedServer

from assay.cli.main import main
from assay.models.api.pacing import Pacer, ProviderSignals
from assay.models.api.runner import RetryPolicy, TransientFailure, run_calls

DOCS = 40


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def tasks(tmp_path):
    rows = [{"q": f"what is item {i}", "a": f"echo: is item {i}"} for i in range(DOCS)]
    return write_task(tmp_path / "tasks", generate_yaml("paid_gen"), rows)


def _argv(server, tasks, out, model_args=""):
    return [
        "run", "--model", "openai-chat",
        "--model-args", f"model=m,base_url={server.base_url},num_concurrent=1{model_args}",
        "--tasks", "paid_gen", "--include-path", str(tasks),
        "--output-dir", str(out), "--no-progress",
    ]  # fmt: skip


def _assay(argv):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "assay", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(condition, proc, seconds=120):
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        if proc.poll() is not None:
            pytest.fail(f"assay exited ({proc.returncode}) early: {proc.stderr.read()[-2000:]}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the run did not get there in time")


@pytest.mark.slow
def test_ctrl_c_keeps_every_answer_that_arrived_and_says_how_many(tasks, tmp_path):
    out = tmp_path / "out"
    # 16 answers, then the 17th request is held unanswered until Ctrl-C.
    prices = ",price_in=1,price_out=1"
    with LimitedServer(hold_after=16, max_seconds=120) as server:
        proc = _assay(_argv(server, tasks, out, prices))
        try:
            _wait_for(server.held, proc)
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
            answered = len(server.answered)
            server.hold_after = None
            server.release()
        assert proc.returncode == 130, err[-2000:]
        assert answered == 16
        assert "16 result(s) computed by this run are kept in the response cache" in err
        assert "Traceback" not in err
        # The bill of the interrupted run: the 16 answers paid for, and what stopped it.
        bill = json.loads((out / "results.json").read_text())["assay"]["api_usage"]
        assert bill["stopped_by"] == "interrupt" and bill["requests"] == 16
        assert "API usage: 16 requests" in err and "stopped by an interrupt" in err
        before = answered + server.waiting  # the held request is answered to no one
        rerun = _assay(_argv(server, tasks, out, prices))
        _, err = rerun.communicate(timeout=120)
        assert rerun.returncode == 0, err[-2000:]
        assert server.requests - before == DOCS - 16  # only what was not answered before
    bill = json.loads((out / "results.json").read_text())["assay"]["api_usage"]
    shares = [(i["requests"], i["stopped_by"]) for i in bill["invocations"]]
    assert shares == [(16, "interrupt"), (DOCS - 16, None)] and bill["requests"] == DOCS
    assert bill["cost_usd"] == pytest.approx(sum(i["cost_usd"] for i in bill["invocations"]))


# -- a provider's hold beyond max_wait ------------------------------------------------------------


def test_a_retry_after_beyond_max_wait_fails_at_once_and_nothing_more_is_sent():
    clock = FakeClock()
    sent: list[int] = []
    hold = ProviderSignals(retry_after=30.0)

    async def attempt(i: int) -> str:
        sent.append(i)
        raise TransientFailure("HTTP 429: slow down", 30.0, kind="rate_limited", signals=hold)

    pacer = Pacer(2, clock=clock)
    policy = RetryPolicy(max_retries=0, max_wait=10.0)
    # The clock never moves: a run that waited for the hold would never end (hence the guard).
    run = run_calls(6, attempt, pacer=pacer, retry=policy, clock=clock)
    outcome = asyncio.run(asyncio.wait_for(run, 10))
    assert sent == [0]  # nothing after the hold was asked
    assert "the provider asks for 30 s more" in outcome.failures[0]
    assert "max_wait=10 s allows no more" in outcome.failures[0]
    assert outcome.abandoned == [1, 2, 3, 4, 5]
    assert pacer.status().endswith("waiting 30 s more (429 retry-after)")


def test_assay_run_exits_2_on_a_hold_beyond_max_wait_having_sent_one_request(
    tasks, tmp_path, capsys
):
    with LimitedServer(storm=10**6, storm_headers={"retry-after": "30"}, max_seconds=60) as server:
        code = main(_argv(server, tasks, tmp_path / "out", ",max_wait=10"))
        assert code == 2 and server.requests == 1
    err = capsys.readouterr().err
    assert "the provider asks for 30 s more" in err and "Traceback" not in err
