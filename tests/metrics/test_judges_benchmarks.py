"""MT-Bench and AlpacaEval judging, multi-turn docs, the bundled examples run offline, and a
tiny local model as the judge."""

from __future__ import annotations

import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from assay.doc import Doc
from assay.metrics.base import get_metric
from assay.metrics.judges import JudgeInput
from assay.run.api import evaluate
from assay.run.evaluation import Evaluation
from assay.run.settings import RunSettings
from assay.tasks.config import MetricSpec, TaskConfig
from assay.tasks.registry import Resolved, TaskRequest

EXAMPLES = Path(__file__).parents[2] / "examples" / "judges"
FASTCHAT = Path(__file__).parents[2] / "src" / "assay" / "data" / "mt_bench" / "judge_prompts.jsonl"


def fastchat_prompt(name):
    (found,) = [json.loads(line) for line in FASTCHAT.read_text().splitlines() if name in line]
    return found


def mt_bench():
    return get_metric("judge_mt_bench").grader


def test_mt_bench_first_turn_uses_single_v1_as_system_and_user_messages():
    ((system, user),) = mt_bench().prompts(JudgeInput("Q1?", "A1"))
    expected = fastchat_prompt('"single-v1"')
    assert system == ("system", expected["system_prompt"])
    assert user == ("user", expected["prompt_template"].format(question="Q1?", answer="A1"))


def test_mt_bench_second_turn_with_references_uses_the_math_multi_turn_prompt():
    given = JudgeInput("Q2?", "A2", history=[("Q1?", "A1")], references=["R1", "R2"])
    ((system, user),) = mt_bench().prompts(given)
    expected = fastchat_prompt("single-math-v1-multi-turn")
    assert system[1] == expected["system_prompt"]
    assert user[1] == expected["prompt_template"].format(
        question_1="Q1?", answer_1="A1", question_2="Q2?", answer_2="A2",
        ref_answer_1="R1", ref_answer_2="R2",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("verdict", "score"),
    [
        ("Rating: [[7]] ... later [[2]]", 7.0),  # FastChat takes the first match
        ("Rating: [6.5]", 6.5),  # its backup pattern
        ("No rating.", None),
    ],
)
def test_mt_bench_reads_the_rating_as_fastchat_does(verdict, score):
    value, error = mt_bench().score([verdict])
    assert (value, error) == (score, None) if score is not None else math.isnan(value) and error


@pytest.mark.parametrize(
    ("model_first", "reference_first", "expected"),
    [
        ("m", "M", 1.0),  # the model's output wins in both orders
        ("M", "m", 0.0),
        ("m", "m", 0.5),  # always the first: a split decision, a tie
        ("M\n", "M", 0.5),
    ],
)
def test_alpaca_eval_asks_both_orders_and_counts_split_decisions_as_ties(
    model_first, reference_first, expected
):
    grader = get_metric("judge_alpaca_eval").grader
    first, second = grader.prompts(JudgeInput("Do X.", "MODEL OUT", "REF OUT"))
    assert first[1][1].index("MODEL OUT") < first[1][1].index("REF OUT")
    assert second[1][1].index("REF OUT") < second[1][1].index("MODEL OUT")
    assert "Do X." in first[1][1] and first[0][0] == "system"
    assert grader.score([model_first, reference_first]) == (expected, None)
    assert math.isnan(grader.score(["I think m", "M"])[0])


def two_turn_config():
    rows = [{"turns": ["First?", "Second?"]}, {"turns": ["Alone?"]}]
    return TaskConfig(
        name="chat",
        prompt_function=lambda row, task_name: Doc(
            row["turns"][0], choices=[""], follow_ups=row["turns"][1:] or None
        ),
        dataset_loader=lambda **_: {"validation": rows},
        metrics=["judge_score"],
        generation_size=8,
        stop_sequence=[],
    )


def test_follow_up_turns_are_asked_in_the_conversation_and_the_last_answer_is_judged(
    tmp_path,
):
    replies = {"First?": "one", "First?one\n\nSecond?": "two", "Alone?": "solo"}
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(json.dumps({"prompt": p, "response": r}) + "\n" for p, r in replies.items())
    )
    settings = RunSettings(
        model="replay",
        model_args={"path": str(answers)},
        judge_model="dummy",
        judge_model_args={"response": "[[5]]"},
        output_dir=tmp_path / "out",
        log_samples=True,
        show_progress=False,
    )
    results = Evaluation(Resolved([TaskRequest(two_turn_config())]), settings).run()
    assert results["results"]["chat"]["judge_score,none"] == 5.0
    # Plain text: the first prompt, the answer, the task's few-shot delimiter, the next turn.
    records = [
        json.loads(x) for x in (tmp_path / "out" / "samples_chat.jsonl").read_text().splitlines()
    ]
    first, alone = records
    assert first["resps"] == [["two"]] and first["history"] == [
        {"user": "First?", "assistant": "one"}
    ]
    assert "history" not in alone and alone["resps"] == [["solo"]]
    # The judge saw the last turn's question and answer.
    (prompt,) = first["judge"]["judge_score"]["prompts"]
    assert "Second?" in prompt and "two" in prompt


def test_follow_up_turns_as_chat_messages():
    from assay.prompts.manager import PromptManager

    manager = PromptManager(api_messages=True)
    doc = Doc("First?", follow_ups=["Second?"])
    assert manager.render_follow_up(doc, [], [("one", "Second?")]) == (
        ("user", "First?"),
        ("assistant", "one"),
        ("user", "Second?"),
    )


def ratings(path):
    """The ratings in the example verdicts, by whether they grade a second turn."""
    first, second = [], []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        rating = float(re.search(r"\[\[(\d+)\]\]", record["response"]).group(1))
        (second if "### User:" in record["prompt"] else first).append(rating)
    return first, second


def test_the_bundled_mt_bench_example_runs_offline_from_the_command_line(tmp_path):
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "assay", "run", "--tasks", "mt_bench_example",
        "--model", "replay", "--model-args", f"path={EXAMPLES / 'mt_bench_responses.jsonl'}",
        "--judge-model", "replay", "--judge-model-args", f"path={EXAMPLES / 'mt_bench_verdicts.jsonl'}",
        "--output-dir", str(out), "--log-samples",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    results = json.loads((out / "results.json").read_text())
    first, second = ratings(EXAMPLES / "mt_bench_verdicts.jsonl")
    assert len(first) == len(second) == 3
    turn1 = results["results"]["mt_bench_example_turn1"]
    turn2 = results["results"]["mt_bench_example_turn2"]
    assert turn1["judge_mt_bench,none"] == pytest.approx(statistics.mean(first))
    assert turn2["judge_mt_bench,none"] == pytest.approx(statistics.mean(second))
    assert turn1["judge_mt_bench_stderr,none"] == pytest.approx(
        statistics.stdev(first) / math.sqrt(3)
    )
    assert results["results"]["mt_bench_example"]["judge_mt_bench,none"] == pytest.approx(
        statistics.mean(first + second)
    )
    for task in ("mt_bench_example_turn1", "mt_bench_example_turn2"):
        (judge,) = results["assay"]["judges"][task]
        assert judge["model"] == "replay" and judge["requests"]["computed"] == 3


def test_the_bundled_alpaca_eval_example_runs_offline(tmp_path):
    results = evaluate(
        "replay",
        "alpaca_eval_example",
        model_args={"path": str(EXAMPLES / "alpaca_eval_responses.jsonl")},
        judge_model="replay",
        judge_model_args={"path": str(EXAMPLES / "alpaca_eval_verdicts.jsonl")},
        show_progress=False,
    )
    # Win rate from the verdicts file itself: per instruction, the model's points in both orders.
    points: dict[str, list[float]] = {}
    for line in (EXAMPLES / "alpaca_eval_verdicts.jsonl").read_text().splitlines():
        record = json.loads(line)
        prompt, said = record["prompt"], record["response"].strip()
        model = next(
            json.loads(x)["response"]
            for x in (EXAMPLES / "alpaca_eval_responses.jsonl").read_text().splitlines()
            if json.loads(x)["response"] in prompt
        )
        model_first = prompt.index(model) < prompt.index('"model_identifier": "M"')
        won = (said == "m") == model_first
        points.setdefault(model, []).append(1.0 if won else 0.0)
    expected = statistics.mean(statistics.mean(p) for p in points.values())
    assert results["results"]["alpaca_eval_example"]["judge_alpaca_eval,none"] == pytest.approx(
        expected
    )


def test_a_tiny_local_model_judges_through_the_same_executor(tiny_model_dir):
    config = TaskConfig(
        name="tiny_judged",
        prompt_function=lambda row, task_name: Doc(row["q"], choices=["x"], gold_index=0),
        dataset_loader=lambda **_: {"validation": [{"q": "Hi?"}, {"q": "Yo?"}]},
        metrics=[MetricSpec("judge_score", {"judge_max_gen_toks": 16})],
        generation_size=8,
        stop_sequence=["\n"],
    )
    settings = RunSettings(
        model="dummy",
        judge_model="hf",
        judge_model_args={"pretrained": str(tiny_model_dir)},
        show_progress=False,
    )
    results = Evaluation(Resolved([TaskRequest(config)]), settings).run()
    (judge,) = results["assay"]["judges"]["tiny_judged"]
    assert judge["identity"]["backend"] == "hf"
    assert judge["requests"]["computed"] == 2
