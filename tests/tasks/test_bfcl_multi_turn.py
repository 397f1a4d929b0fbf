"""BFCL's multi-turn categories end to end, in bfcl-eval's own environment (as
test_bfcl_parity.py): through `openai-chat` against a loopback scripted model, assay's verdicts
equal bfcl-eval's evaluation runner on the same transcripts; kill -9 mid-conversation then a
rerun writes the same samples and asks nothing twice; a tiny `hf` chat model whose template
takes tools runs the loop end to end; prompt mode (calls in the text) likewise."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GIVEN = os.environ.get("ASSAY_BFCL_PYTHON")
"""Set by `make test`: then a missing virtualenv is a failure, not a skip."""
BFCL_PYTHON = Path(GIVEN) if GIVEN else REPO / ".venv-bfcl" / "bin" / "python"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not GIVEN and not BFCL_PYTHON.exists(),
        reason=f"no bfcl-eval virtualenv at {BFCL_PYTHON} (make bfcl-venv builds it)",
    ),
]


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TMPDIR": str(tmp_path),
        "OPENAI_API_KEY": "unused-loopback-key",
    }
    return subprocess.run(
        [str(BFCL_PYTHON), *args], capture_output=True, text=True, env=env, timeout=900, cwd=REPO
    )


def _driver(check: str, tmp_path: Path) -> dict:
    done = _run(["tests/tasks/bfcl_multi_turn_driver.py", check, str(tmp_path / check)], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["fc", "prompt"])
def test_verdicts_equal_bfcl_evals_runner_on_scripted_conversations(tmp_path, mode):
    done = _run(
        [
            "benchmarks/bfcl_multi_turn.py",
            "--sample", "7",
            "--categories", "multi_turn_base,multi_turn_miss_func",
            "--mode", mode,
        ],
        tmp_path,
    )  # fmt: skip
    report = done.stdout[-4000:] + done.stderr[-3000:]
    assert done.returncode == 0, report
    rows = [line for line in done.stdout.splitlines() if line.startswith("multi_turn_")]
    assert len(rows) == 2, report
    for row in rows:
        assert " 100.00% " in row, report
        # The scripted variants exercise both verdicts: ground truth passes, the rest fail.
        assert "right=1/1" in row and "one_by_one=1/1" in row, report
        assert "endless=0/1" in row and "skip_turn=0/1" in row, report
    assert "differs:" not in done.stdout, report
    assert done.stdout.rstrip().endswith("multi-turn parity: ok"), report


def test_kill_9_mid_conversation_then_rerun_gives_the_same_samples(tmp_path):
    seen = _driver("kill", tmp_path)
    assert seen["reached_hold"] and seen["samples_before_rerun"] == 0, seen
    assert seen["asked_twice"] == 0, seen
    assert seen["answered_before_kill"] + seen["asked_on_rerun"] == seen["total_requests"], seen
    assert seen["untimed_answers_after_kill"] == 0, seen
    assert seen["byte_identical_to_reference"] and seen["same_scores"], seen
    assert seen["second_rerun_byte_identical"] and seen["asked_on_second_rerun"] == 0, seen
    assert seen["turn_roles"] == ["assistant", "prompt", "tool", "user"], seen


def test_a_tiny_hf_chat_model_runs_the_conversations_end_to_end(tmp_path):
    seen = _driver("hf", tmp_path)
    assert seen["exit"] == 0 and seen["samples"] == 2, seen
    assert 0.0 <= seen["accuracy"] <= 1.0, seen
    # Every user turn was asked: the loop moved on at each answer without a call.
    assert all(n >= 1 for n in seen["user_turns"]), seen
    assert seen["model_turns"] >= 2 * 2, seen
    # The template renders BFCL's functions as tools, a call, and its result.
    assert seen["renders_tools"] and seen["renders_call"] and seen["renders_result"], seen


def test_calls_that_would_run_code_are_answered_with_an_error_and_never_run(tmp_path):
    seen = _driver("hostile", tmp_path)
    assert not seen["touched"] and seen["victim"] == "keep me", seen
    assert seen["errors"] == [True, True, True, True, False], seen
    assert "is not a plain name" in seen["texts"][0] and "is not a plain name" in seen["texts"][1]
    assert "'open' is not a function of this conversation's APIs" in seen["texts"][2], seen
    # A name nothing answers to gets bfcl-eval's own error; a real call runs.
    assert seen["texts"][3] == "Error during execution: name 'no_such_function' is not defined"
    assert seen["texts"][4] == '{"current_working_directory": "document"}', seen
    assert seen["verdict_error"].startswith("multi_turn:"), seen
    # A model that never stops calling tools: bfcl-eval's 20-step limit, then the loop ends.
    assert seen["endless_steps"] == 21 and seen["endless_stop"] == "max_steps", seen


def test_prompt_mode_calls_that_would_run_code_are_answered_with_an_error_and_never_run(
    tmp_path,
):
    seen = _driver("hostile_prompt", tmp_path)
    assert not seen["touched"], seen
    assert seen["errors"] == [True, True, True, False], seen
    assert seen["texts"][0].endswith("assay does not run this call: an argument holds a call.")
    assert "'os.system' is not a plain name" in seen["texts"][1], seen
    assert "'len' is not a function of this conversation's APIs" in seen["texts"][2], seen
    assert seen["texts"][3] == '{"current_working_directory": "document"}', seen
    # The results go back as bfcl-eval's one user message, listing every call and result.
    assert seen["sent_role"] == "user" and seen["sent"].startswith("[{'role': 'tool'"), seen
    assert seen["sent"].count("'role': 'tool'") == 4, seen
    assert seen["unparseable_closes_turn"], seen


def test_replaying_a_multi_turn_run_from_its_transcripts_scores_the_same(tmp_path):
    seen = _driver("replay", tmp_path)
    for mode in ("fc", "prompt"):
        run = seen[mode]
        assert run["exit"] == 0 and run["lines"] == run["requests"], seen
        assert run["replayed_verdicts"] == run["verdicts"], seen
        assert run["accuracy"][0] == run["accuracy"][1], seen
        # Replayed answers drive the same conversations: every turn as recorded.
        assert run["same_turns"], seen
    # The scripted variants give both verdicts, so equal scores are not all-pass or all-fail.
    assert sorted(set(seen["fc"]["verdicts"])) == [0.0, 1.0], seen
