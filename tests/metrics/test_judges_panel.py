"""Judges beyond the basics: a task's own judge, two judges and their agreement, judge request
counts, replay as a judge, rubric checklists, and the K-sample uncertainty arithmetic."""

from __future__ import annotations

import json
import logging
import math
import statistics

import krippendorff
import numpy as np
import pytest
from test_judges import ROWS, TASK_YAML, run, samples

from assay.errors import ConfigError, TaskConfigError
from assay.metrics.base import get_metric
from assay.results.compare import compare


def folder_with(tmp_path, tasks):
    """A task folder: {name: (metric_list YAML lines, extra top-level YAML)}."""
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    folder = tmp_path / "tasks"
    folder.mkdir(exist_ok=True)
    for name, (metrics, extra) in tasks.items():
        text = TASK_YAML.format(data=data, metrics=metrics).replace("task: judged", f"task: {name}")
        (folder / f"{name}.yaml").write_text(text + extra)
    return folder


SCORE = "  - metric: judge_score\n"
OWN_JUDGE = 'metadata:\n  judge_model: dummy\n  judge_model_args:\n    response: "[[3]]"\n'


def test_a_task_names_its_own_judge_and_it_wins(tmp_path, caplog):
    folder = folder_with(tmp_path, {"judged": (SCORE, ""), "own": (SCORE, OWN_JUDGE)})
    with caplog.at_level(logging.WARNING):
        results = run(tmp_path, folder, "dummy", {"response": "[[7]]"}, tasks="judged,own")
    assert results["results"]["judged"]["judge_score,none"] == 7.0
    assert results["results"]["own"]["judge_score,none"] == 3.0
    assert "task own is graded by its own judge dummy(response=[[3]]), not --judge-model dummy" in (
        caplog.text
    )
    judges = results["assay"]["judges"]
    assert judges["own"][0]["named_by"] == "task own"
    assert judges["judged"][0]["named_by"] == "--judge-model"
    # Without --judge-model the task's own judge grades it.
    alone = run(tmp_path, folder, None, None, out="alone", tasks="own")
    assert alone["results"]["own"]["judge_score,none"] == 3.0
    # A --judge-model that no task uses is refused, not ignored.
    with pytest.raises(ConfigError, match="every task with judge metrics names its own"):
        run(tmp_path, folder, "dummy", None, out="unused", tasks="own")


def test_predict_only_leaves_a_tasks_own_judge_idle(tmp_path):
    folder = folder_with(tmp_path, {"own": (SCORE, OWN_JUDGE)})
    results = run(tmp_path, folder, None, None, tasks="own", predict_only=True)
    assert "judges" not in results["assay"]
    (path,) = (tmp_path / "out").glob("samples_own*.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(records) == len(ROWS) and all("judge" not in r for r in records)


def test_a_judge_is_printed_without_its_secrets():
    from assay.run.judging import JudgeSpec

    spec = JudgeSpec("openai-chat", {"model": "m", "api_key": "sk-123456"})
    assert spec.label() == "openai-chat(model=m, api_key=***)"


def test_a_task_judge_needs_judge_metrics_and_a_known_backend(tmp_path):
    folder = folder_with(
        tmp_path,
        {
            "plain": ("  - metric: exact_match\n", OWN_JUDGE),
            "typo": (SCORE, "metadata:\n  judge_model: dumy\n"),
            "second_only": (SCORE, "metadata:\n  second_judge_model: dummy\n"),
        },
    )
    with pytest.raises(TaskConfigError, match=r"names a judge model .* has no judge metric"):
        run(tmp_path, folder, None, None, tasks="plain")
    with pytest.raises(ConfigError, match="task typo: judge_model 'dumy': no such backend"):
        run(tmp_path, folder, None, None, tasks="typo")
    with pytest.raises(TaskConfigError, match="'second_judge_model' needs 'judge_model'"):
        run(tmp_path, folder, None, None, tasks="second_only")
    with pytest.raises(ConfigError, match="a second judge needs a first; pass --judge-model"):
        run(tmp_path, folder, None, None, tasks="typo", second_judge_model="dummy")


def test_judge_request_counts_show_a_rerun_asks_the_judge_nothing(tmp_path):
    folder = folder_with(tmp_path, {"judged": ("  - metric: judge_pairwise\n", "")})
    first = run(tmp_path, folder, "dummy", {"response": "[[A]]"})
    (judge,) = first["assay"]["judges"]["judged"]
    # Two orders per doc, each a distinct prompt.
    assert judge["requests"]["requests"] == 2 * len(ROWS)
    assert judge["requests"]["computed"] == 2 * len(ROWS)
    assert judge["requests"]["from_cache"] == 0
    assert judge["identity"]["backend"] == "dummy"
    again = run(
        tmp_path,
        folder,
        "dummy",
        {"response": "[[A]]"},
        out="again",
        cache=tmp_path / "out" / "cache.sqlite",
    )
    (judge,) = again["assay"]["judges"]["judged"]
    assert judge["requests"]["computed"] == 0
    assert judge["requests"]["from_cache"] == 2 * len(ROWS)


def test_replay_is_a_judge_with_one_verdict_per_sample(tmp_path):
    """judge_samples: 3 with a replay judge whose verdicts differ by sample: the item value is
    the mean of its samples, and the stderr is the closed form over the item means."""
    folder = folder_with(
        tmp_path, {"judged": ("  - metric: judge_score\n    judge_samples: 3\n", "")}
    )
    # The default template, filled below per doc exactly as the judge sees it.
    prompt = get_metric("judge_score").grader.template
    # Dummy answers "lol" to every question; per doc i the three samples score (i+1, i+3, i+6).
    per_doc = [[i + 1, i + 3, i + 6] for i in range(len(ROWS))]
    lines = [
        {
            "prompt": prompt.substitute(question=row["q"], answer="lol"),
            "responses": [f"Sample {k}: [[{v}]]" for k, v in enumerate(scores)],
        }
        for row, scores in zip(ROWS, per_doc, strict=True)
    ]
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    results = run(tmp_path, folder, "replay", {"path": str(verdicts)})
    entry = results["results"]["judged"]
    means = [sum(s) / 3 for s in per_doc]
    n = len(means)
    assert entry["judge_score,none"] == pytest.approx(sum(means) / n)
    # Variance of a mean of per-item means: s^2(item means) / n.
    assert entry["judge_score_stderr,none"] == pytest.approx(statistics.stdev(means) / math.sqrt(n))
    # The judge's share: sqrt(sum_i s_i^2 / K) / n, s_i^2 = var(i+1, i+3, i+6) for every i.
    within = statistics.variance([1, 3, 6])
    assert entry["judge_score_judge_se,none"] == pytest.approx(math.sqrt(n * within / 3) / n)
    # Self-agreement: the three samples as three raters of the four items.
    by_sample = np.array(per_doc, dtype=float).T
    expected = krippendorff.alpha(reliability_data=by_sample, level_of_measurement="interval")
    assert entry["judge_score_self_alpha,none"] == pytest.approx(expected)
    for record, scores in zip(samples(tmp_path), per_doc, strict=True):
        assert record["judge"]["judge_score"]["sample_scores"] == [float(v) for v in scores]


def test_the_closed_form_of_item_and_judge_variance():
    """(sigma_items^2 + sigma_judge^2 / K) / n is the variance of the mean of per-item means:
    checked by simulation against the closed form with known variances."""
    rng = np.random.default_rng(0)
    n, k, sigma_items, sigma_judge = 50, 4, 1.5, 2.0
    means = []
    for _ in range(4000):
        truth = rng.normal(0, sigma_items, n)
        judged = truth[:, None] + rng.normal(0, sigma_judge, (n, k))
        means.append(judged.mean(axis=1).mean())
    closed = (sigma_items**2 + sigma_judge**2 / k) / n
    assert np.var(means) == pytest.approx(closed, rel=0.06)


def test_two_judges_report_agreement(tmp_path, tiny_model_dir):
    from fixtures.openai_server import OpenAIStubServer

    folder = folder_with(tmp_path, {"judged": ("  - metric: judge_score\n", "")})

    def by_question(body):  # docs 0..3 score 2, 6, 6 and (no verdict)
        prompt = body["messages"][-1]["content"]
        return {"0": "[[2]]", "1": "[[6]]", "2": "[[6]]"}.get(prompt.split("What is ")[1][0], "?")

    with OpenAIStubServer(tiny_model_dir, chat_script=by_question) as server:
        results = run(
            tmp_path,
            folder,
            "openai-chat",
            {"model": "judge", "base_url": server.base_url},
            second_judge_model="dummy",
            second_judge_model_args={"response": "[[6]]"},
        )
    entry = results["results"]["judged"]
    assert entry["judge_score,none"] == pytest.approx((2 + 6 + 6) / 3)  # the first judge's
    assert entry["judge_score_second_judge,none"] == 6.0
    assert entry["judge_score_unparsed,none"] == 1
    assert entry["judge_score_second_judge_unparsed,none"] == 0
    # Kappa over the three docs both judges scored: (2,6), (6,6), (6,6). p_o = 2/3; the first
    # judge says 6 two times in three, the second always: p_e = 2/3; kappa = 0.
    assert entry["judge_score_kappa,none"] == pytest.approx(0.0)
    expected = krippendorff.alpha(
        reliability_data=[[2, 6, 6, np.nan], [6, 6, 6, 6]], level_of_measurement="interval"
    )
    assert entry["judge_score_alpha,none"] == pytest.approx(expected)
    assert [j["named_by"] for j in results["assay"]["judges"]["judged"]] == [
        "--judge-model",
        "--second-judge-model",
    ]
    record = samples(tmp_path)[1]["judge"]["judge_score"]
    assert record["score"] == 6.0 and record["second_judge"]["verdicts"] == ["[[6]]"]
    assert results["config"]["second_judge_model"] == "dummy"


RUBRIC = [
    {"criterion": "Gives the number", "points": 5},
    {"criterion": "Explains the sum", "points": 3},
    {"criterion": "Is rude", "points": -4},
]


@pytest.mark.parametrize(
    ("met", "expected"),
    [
        ([True, True, False], 1.0),  # 8 of 8 positive points
        ([True, False, False], 5 / 8),
        ([False, False, True], -4 / 8),  # below zero per answer; the task mean is clipped
        ([True, True, True], 4 / 8),
    ],
)
def test_rubric_score_is_healthbench_points_over_positive_points(met, expected):
    from assay.metrics.judges.grading import rubric_items

    grader = get_metric("judge_rubric").grader
    verdicts = [f'{{"explanation": "...", "criteria_met": {str(m).lower()}}}' for m in met]
    assert grader.score(verdicts, rubric_items(RUBRIC, "rubrics")) == (expected, None)


def test_rubric_run_end_to_end_clips_the_mean_and_counts_unparsed(tmp_path):
    rows = [dict(r, rubrics=RUBRIC) for r in ROWS]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    folder = tmp_path / "tasks"
    folder.mkdir()
    text = TASK_YAML.format(data=data, metrics="  - metric: judge_rubric\n")
    (folder / "judged.yaml").write_text(text)
    # A judge that says every item is met: 5 + 3 - 4 = 4 of 8 points, per doc.
    results = run(tmp_path, folder, "dummy", {"response": '{"criteria_met": true}'})
    entry = results["results"]["judged"]
    assert entry["judge_rubric,none"] == 0.5
    record = samples(tmp_path)[0]["judge"]["judge_rubric"]
    assert len(record["prompts"]) == 3 and "[-4] Is rude" in record["prompts"][2]
    # With +1 and -4 items both met, each answer scores -3: the task's mean clips to 0.
    harsh = [
        dict(r, rubrics=[{"criterion": "Gives the number", "points": 1}, RUBRIC[2]]) for r in ROWS
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in harsh))
    clipped = run(tmp_path, folder, "dummy", {"response": '"criteria_met": true'}, out="clipped")
    assert clipped["results"]["judged"]["judge_rubric,none"] == 0.0
    assert samples(tmp_path, "clipped")[0]["judge"]["judge_rubric"]["score"] == -3.0
    unparsed = run(tmp_path, folder, "dummy", {"response": "met"}, out="unparsed")
    assert unparsed["results"]["judged"]["judge_rubric_unparsed,none"] == len(ROWS)


def test_compare_pairs_per_item_mean_judge_scores(tmp_path):
    """Two judged runs with judge_samples: 2: compare's paired difference is the mean over
    docs of the difference of the per-item means."""
    folder = folder_with(
        tmp_path, {"judged": ("  - metric: judge_score\n    judge_samples: 2\n", "")}
    )
    prompt = get_metric("judge_score").grader.template
    runs = {"a": [[2, 4], [5, 5], [7, 9], [1, 3]], "b": [[6, 6], [6, 8], [8, 8], [2, 2]]}
    for name, per_doc in runs.items():
        lines = [
            {
                "prompt": prompt.substitute(question=row["q"], answer="lol"),
                "responses": [f"[[{v}]]" for v in scores],
            }
            for row, scores in zip(ROWS, per_doc, strict=True)
        ]
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        run(tmp_path, folder, "replay", {"path": str(path)}, out=name)
    report = compare(tmp_path / "a", tmp_path / "b")
    (row,) = [c for c in report.comparisons if c.metric == "judge_score"]
    diffs = [sum(b) / 2 - sum(a) / 2 for a, b in zip(runs["a"], runs["b"], strict=True)]
    assert row.n == len(ROWS)
    assert row.diff == pytest.approx(sum(diffs) / len(diffs))
    assert row.stderr == pytest.approx(statistics.stdev(diffs) / math.sqrt(len(diffs)))
