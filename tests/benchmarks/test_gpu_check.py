"""benchmarks/gpu_check.py: its dry run on the CPU (both harnesses), and its deadline."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    pytest.importorskip(
        "lm_eval", reason="the dry run runs lm-eval beside assay (extra lm-eval-tasks)"
    )
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_dry_run_compares_both_harnesses_on_every_task_and_times_each_trick(gpu_check, tmp_path):
    out = tmp_path / "dry.json"
    argv = ["--dry-run", "--out", str(out), "--work", str(tmp_path / "work")]
    # No deadline: on a busy machine a deadline would skip steps this test checks.
    report = gpu_check.main(argv, clock=gpu_check.Clock(math.inf))
    assert report["deadline_s"] is None
    assert json.loads(out.read_text()) == json.loads(json.dumps(report, default=str))
    not_done = {s["name"]: s["reason"] for s in report["steps"] if s["status"] != "done"}
    # FlashAttention-2 runs only where its package is installed (never on the CPU).
    assert set(not_done.values()) <= {"the flash_attn package is not installed"}
    assert all(name.endswith("flash_attention_2_on") for name in not_done)
    plan = gpu_check.DRY
    cases = {case.name: case for case in plan.cases}
    seen = {(c["model"], c["task"], c["batch_size"]) for c in report["comparisons"]}
    assert seen == {
        (model, case, batch)
        for model in plan.models
        for case in cases
        for batch in ("auto", plan.fixed_batch)
    }
    for c in report["comparisons"]:
        parity = c["parity"]
        assert parity["docs"] == cases[c["task"]].docs
        if cases[c["task"]].generation:
            assert parity["generations_identical_share"] == 1.0
        else:
            # float32 on the CPU: the same numbers up to summation order.
            assert parity["loglikelihood_max_abs_diff"] < 1e-4
            assert parity["acc_equal_share"] == parity["arguments_equal_share"] == 1.0
        for side in ("assay", "lm_eval"):
            assert c[side]["tokens"] > 0 and c[side]["wall_s"] > 0
            assert c[side]["peak_gpu_mb"] is None  # not measured on the CPU
        ratio = c["assay"]["wall_s"] / c["lm_eval"]["wall_s"]
        assert c["wall_ratio"] == pytest.approx(ratio, abs=1e-3)
    tricks = {(t["task"], t["trick"]) for t in report["tricks"]}
    cpu_tricks = [trick for trick in gpu_check.TRICKS if trick != "flash_attention_2_on"]
    assert tricks == {
        (case, trick) for case in ("hellaswag", "mmlu_shaped") for trick in cpu_tricks
    } | {("gsm8k", "prefix_cache_off")}
    for trick in report["tricks"]:
        entry = next(
            c
            for c in report["comparisons"]
            if (c["model"], c["task"], c["batch_size"]) == (trick["model"], trick["task"], 32)
        )
        assert trick["wall_with_all_tricks_s"] == entry["assay"]["wall_s"]
    shaped = next(c for c in report["comparisons"] if c["task"] == "mmlu_shaped")
    assert shaped["assay"]["prefix_cache"]["inputs_reusing"] > 0  # the 5-shot prefix is reused


def test_steps_past_the_deadline_are_skipped_and_a_running_one_is_stopped(gpu_check):
    now = [0.0]  # the clock's time, which only this test moves (the alarm runs on real time)
    runner = gpu_check.Runner(gpu_check.Clock(5.0, now=lambda: now[0]))
    assert runner.run("quick", lambda: {"wall_s": 0.0}, estimate=4.0).status == "done"

    def spins() -> dict:
        end = time.monotonic() + 60  # bounded: the deadline stops it long before
        while time.monotonic() < end:
            time.sleep(0.01)
        return {}

    stopped = runner.run("long", spins)
    assert stopped.status == "stopped"  # by the deadline: the step itself spins for 60 s
    now[0] = 6.0
    skipped = runner.run("late", lambda: {}, estimate=0.0)
    assert skipped.status == "skipped" and "deadline" in skipped.reason
    assert runner.seconds_of("quick") is not None and runner.seconds_of("long") is None


def test_a_failing_step_is_recorded_with_its_traceback_and_the_run_goes_on(gpu_check):
    runner = gpu_check.Runner(gpu_check.Clock(60.0))

    def breaks() -> dict:
        raise ValueError("no such task")

    failed = runner.run("bad", breaks)
    assert failed.status == "failed" and failed.reason == "ValueError: no such task"
    assert "in breaks" in failed.figures["traceback"]
    assert runner.run("next", lambda: {"wall_s": 1.0}).status == "done"


def test_task_files_point_at_the_repository_data(gpu_check, tmp_path):
    folder = gpu_check.write_tasks(tmp_path, gpu_check.FULL)
    gsm8k = (folder / "gsm8k.yaml").read_text()
    assert "max_gen_toks: 256" in gsm8k and "gsm8k_test_100.jsonl.gz" in gsm8k
    for name in gpu_check.DATA_FILES.values():
        assert (gpu_check.DATA / name).is_file()
    hellaswag = (folder / "hellaswag.yaml").read_text()
    assert str(gpu_check.DATA / "hellaswag_val_1000.jsonl.gz") in hellaswag
