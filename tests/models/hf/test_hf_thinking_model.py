"""`--model hf` on a chat model that thinks (`fixtures/tiny_thinking_model.py`): its template
opens `<think>` for the docs that ask it to think, the generation closes its thinking when
`max_gen_toks` leaves room and is cut while still thinking when it does not; results.json's
rates and token counts equal the counts this test makes from the docs and the cap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.tiny_thinking_model import ANSWER, THINKING, build_tiny_thinking_model, write_task

from assay.cli.main import main

QUESTIONS = ["think about 1", "say 2", "think about 3", "say 4", "think about 5", "say 6"]
THINKS = [q.startswith("think") for q in QUESTIONS]
"""The docs whose prompt the template opens a thinking block for."""


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("tiny_think")
    model = build_tiny_thinking_model(root / "model")
    return model, write_task(root / "tasks", QUESTIONS)


def run(setup: tuple[Path, Path], out: Path, *flags: str) -> tuple[dict, list[dict]]:
    model, tasks = setup
    args = f"pretrained={model},think_end_token=</think>,think_start_token=<think>"
    code = main(
        ["run", "--model", "hf", "--model-args", args, "--tasks", "tiny_think",
         "--include-path", str(tasks), "--apply-chat-template", "--output-dir", str(out),
         "--log-samples", "--no-progress", *flags]
    )  # fmt: skip
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    lines = (out / "samples_tiny_think.jsonl").read_text().splitlines()
    return results, sorted((json.loads(x) for x in lines), key=lambda r: r["doc_id"])


@pytest.mark.slow
def test_thinking_that_closes_is_kept_apart_and_the_answer_scored(setup, tmp_path):
    results, samples = run(setup, tmp_path / "roomy")
    entry = results["assay"]["generations"]["tiny_think"]
    assert (entry["generations"], entry["truncated"], entry["unclosed_thinking"]) == (6, 0, 0)
    # Thinking tokens: the thought only (the end marker counted in neither part).
    assert entry["reasoning_tokens_mean"] == len(THINKING)
    assert entry["answer_tokens_mean"] == len(ANSWER)
    ended = [s["generations"][0][0] for s in samples]
    assert [g["thinking_closed"] for g in ended] == [True if t else None for t in THINKS]
    assert [g["reasoning"] for g in ended] == [" ".join(THINKING) if t else None for t in THINKS]
    assert {g["finish_reason"] for g in ended} == {"stop"}
    assert [s["resps"][0][0] for s in samples] == ["#### 7"] * len(QUESTIONS)
    assert results["results"]["tiny_think"]["exact_match,none"] == 1.0


@pytest.mark.slow
def test_thinking_cut_by_max_gen_toks_is_counted_and_scored_empty(setup, tmp_path, capsys):
    cap = len(THINKING)  # room to think, none to close
    results, samples = run(setup, tmp_path / "capped", "--gen-kwargs", f"max_gen_toks={cap}")
    entry = results["assay"]["generations"]["tiny_think"]
    thinking = sum(THINKS)
    # The docs that think reach the cap; the others answer in len(ANSWER) + EOS < cap tokens.
    assert len(ANSWER) + 1 < cap
    assert (entry["truncated"], entry["unclosed_thinking"]) == (thinking, thinking) == (3, 3)
    assert entry["truncated_rate"] == entry["unclosed_thinking_rate"] == thinking / len(THINKS)
    assert entry["reasoning_tokens_mean"] == cap
    # Unclosed thinking has no answer tokens; the others answered in full.
    assert entry["answer_tokens_mean"] == len(ANSWER) * (len(THINKS) - thinking) / len(THINKS)
    ended = [s["generations"][0][0] for s in samples]
    assert [g["finish_reason"] for g in ended] == ["length" if t else "stop" for t in THINKS]
    assert [s["resps"][0][0] for s in samples] == ["" if t else "#### 7" for t in THINKS]
    assert [s["exact_match"] for s in samples] == [0.0 if t else 1.0 for t in THINKS]
    assert "task tiny_think: 50.0% of generations (3 of 6) hit the token cap" in (
        capsys.readouterr().err
    )
