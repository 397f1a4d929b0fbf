"""Reasoning models end to end (replay files): thinking kept apart from the answer, truncation
and unclosed thinking measured in results.json, an unclosed thought never scored as an answer
by default, and lm-eval's scoring reproduced exactly with --unclosed-thinking keep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.cli.main import main

GSM_YAML = """\
task: gsm_think
dataset_path: json
dataset_kwargs:
  data_files:
    test: gsm.jsonl
test_split: test
output_type: generate_until
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_target: "{{answer}}"
generation_kwargs:
  until: ["Question:", "</s>", "<|im_end|>"]
  do_sample: false
  max_gen_toks: 64
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore: [",", "\\\\$", "(?s).*#### ", "\\\\.$"]
"""

UNTIL = ["Question:", "</s>", "<|im_end|>"]

ROWS = [{"question": f"q{i}", "answer": f"work #### {i}"} for i in range(8)]

GENERATIONS = [
    # (raw generation, finish reason): closed thinking, right and wrong answers.
    ("<think>0 it is</think>\nSo #### 0", "stop"),
    ("<think>one?\nQuestion: no</think> #### 1", "stop"),
    ("<think>two</think>#### 9", "stop"),
    # Unclosed thinking cut by max_gen_toks: the thought ends in a number that lm-eval's
    # rule would score as the answer.
    ("<think>I think it is #### 3 but let me check", "length"),
    ("<think>four, so #### 4 maybe", "length"),
    # No thinking at all.
    ("#### 5", "stop"),
    ("#### 7", "length"),
]
"""Docs 0-6 as a reasoning model's raw output; doc 7 comes from a server's own field."""

SERVER_SPLIT = {"response": "#### 7", "reasoning": "seven", "finish_reason": "stop"}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "gsm.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tasks / "gsm.yaml").write_text(GSM_YAML)
    lines = [
        {"prompt": f"Question: q{i}\nAnswer:", "response": raw, "finish_reason": reason}
        for i, (raw, reason) in enumerate(GENERATIONS)
    ]
    lines.append({"prompt": "Question: q7\nAnswer:", **SERVER_SPLIT})
    (tmp_path / "replies.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return tmp_path


def run(folder: Path, out: str, *flags: str) -> tuple[int, dict, list[dict]]:
    args = ["run", "--include-path", str(folder / "tasks"), "--tasks", "gsm_think"]
    args += ["--model", "replay", "--no-progress", "--log-samples"]
    args += ["--model-args", f"path={folder / 'replies.jsonl'},think_end_token=</think>,"
             "think_start_token=<think>"]  # fmt: skip
    code = main([*args, "--output-dir", str(folder / out), *flags])
    if code:
        return code, {}, []
    results = json.loads((folder / out / "results.json").read_text())
    lines = (folder / out / "samples_gsm_think.jsonl").read_text().splitlines()
    return code, results, sorted((json.loads(x) for x in lines), key=lambda r: r["doc_id"])


def test_rates_in_results_json_match_the_generations_counted_here(folder, capsys):
    code, results, records = run(folder, "empty")
    assert code == 0
    reasons = [reason for _, reason in GENERATIONS] + [SERVER_SPLIT["finish_reason"]]
    unclosed = [raw.startswith("<think>") and "</think>" not in raw for raw, _ in GENERATIONS]
    entry = results["assay"]["generations"]["gsm_think"]
    assert entry["generations"] == len(ROWS)
    assert entry["truncated"] == reasons.count("length") == 3
    assert entry["truncated_rate"] == pytest.approx(3 / 8)
    assert entry["unclosed_thinking"] == sum(unclosed) == 2
    assert entry["unclosed_thinking_rate"] == pytest.approx(2 / 8)
    assert entry["unclosed_thinking_policy"] == "empty"
    # No token counts in the file: none are made up.
    assert entry["reasoning_tokens_mean"] is None and entry["answer_tokens_mean"] is None
    warning = capsys.readouterr().err
    assert "task gsm_think: 37.5% of generations (3 of 8) hit the token cap" in warning
    assert "25.0% (2 of 8) ended while still thinking" in warning
    assert "max_gen_toks in force: 64" in warning
    # Unclosed thoughts are empty answers: docs 3 and 4 score 0 though their thought ends in
    # the right number; doc 6 was truncated without thinking and keeps its answer.
    assert [r["resps"][0][0] for r in records][3:5] == ["", ""]
    assert [r["exact_match"] for r in records] == [1, 1, 0, 0, 0, 1, 0, 1]
    assert results["results"]["gsm_think"]["exact_match,strict-match"] == pytest.approx(4 / 8)
    ended = [r["generations"][0][0] for r in records]
    assert [g["thinking_closed"] for g in ended] == [
        True,
        True,
        True,
        False,
        False,
        None,
        None,
        True,
    ]
    assert [g["finish_reason"] for g in ended] == reasons
    assert ended[0]["reasoning"] == "<think>0 it is"
    assert ended[7]["reasoning"] == "seven" and records[7]["resps"][0][0] == "#### 7"


def test_samples_keep_the_reasoning_length_or_nothing_when_asked(folder):
    _, _, records = run(folder, "length", "--log-samples-reasoning", "length")
    first = records[0]["generations"][0][0]
    assert first["reasoning_chars"] == len("<think>0 it is") and "reasoning" not in first
    _, _, records = run(folder, "none", "--log-samples-reasoning", "none")
    assert not {"reasoning", "reasoning_chars"} & set(records[0]["generations"][0][0])


def test_keep_scores_exactly_as_lm_eval_does_on_the_same_generations(folder):
    from lm_eval.api.metrics import exact_match_hf_evaluate
    from lm_eval.filters.extraction import RegexFilter
    from lm_eval.filters.selection import TakeFirstFilter
    from lm_eval.models.utils import postprocess_generated_text

    _, results, records = run(folder, "keep", "--unclosed-thinking", "keep")
    # lm-eval's HF/vLLM post-processing of the raw generations, its filters and its metric.
    answers = [postprocess_generated_text(raw, UNTIL, "</think>") for raw, _ in GENERATIONS]
    answers.append(SERVER_SPLIT["response"])  # lm-eval scores a server's answer field
    filtered = TakeFirstFilter().apply(RegexFilter().apply([[a] for a in answers], ROWS), ROWS)
    scores = [
        exact_match_hf_evaluate(
            [pred],
            [row["answer"]],
            regexes_to_ignore=[",", "\\$", "(?s).*#### ", "\\.$"],
            ignore_case=True,
        )["exact_match"]
        for pred, row in zip(filtered, ROWS, strict=True)
    ]
    assert [r["resps"][0][0] for r in records] == answers
    assert [r["exact_match"] for r in records] == scores
    assert scores[3:5] == [1.0, 1.0]  # the unfinished thoughts lm-eval scores as answers
    mean = results["results"]["gsm_think"]["exact_match,strict-match"]
    assert mean == pytest.approx(sum(scores) / len(scores))


def test_fail_refuses_the_task_naming_the_docs_and_the_guide(folder, capsys):
    code, _, _ = run(folder, "fail", "--unclosed-thinking", "fail")
    err = capsys.readouterr().err
    assert code == 2
    assert "docs 3, 4" in err and "docs/reasoning-models.md" in err


def test_a_bad_policy_is_refused_naming_the_flag(folder, capsys):
    assert main(["run", "--tasks", "x", "--unclosed-thinking", "drop"]) == 2
    err = capsys.readouterr().err
    assert "--unclosed-thinking 'drop': choose one of empty, keep, fail." in err
