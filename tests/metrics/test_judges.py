"""Judge metrics: verdict parsing, position swapping, templates, and judged runs end to end
(dummy and a scripted loopback OpenAI-compatible judge), cached and recorded in samples."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest

from assay.errors import ConfigError
from assay.metrics.base import get_metric
from assay.metrics.judges import JudgeInput
from assay.results.compare import compare
from assay.run.api import evaluate

ROWS = [{"q": f"What is {i}+1?", "a": str(i + 1)} for i in range(4)]

TASK_YAML = """\
task: judged
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{q}}}}"
doc_to_target: "{{{{a}}}}"
generation_kwargs:
  until: ["\\n"]
metric_list:
{metrics}
"""


def task_folder(tmp_path, metrics=("judge_score", "judge_pairwise", "judge_correct")):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    folder = tmp_path / "tasks"
    folder.mkdir()
    listed = "".join(f"  - metric: {m}\n" for m in metrics)
    (folder / "judged.yaml").write_text(TASK_YAML.format(data=data, metrics=listed))
    return folder


def grader(name, **options):
    return get_metric(name, **options).grader


@pytest.mark.parametrize(
    ("verdict", "score"),
    [
        ("Fine answer. Rating: [[8]]", 8.0),
        ("At first [[2]], on reflection [[5]]", 5.0),  # the last verdict counts
        ("[[10]]", 10.0),
        ("Rating: [[0]]", None),  # outside 1-10
        ("Rating: 8", None),
    ],
)
def test_single_answer_score_is_the_last_bracketed_number(verdict, score):
    value, error = grader("judge_score").score([verdict])
    if score is None:
        assert math.isnan(value) and error
    else:
        assert value == score and error is None


@pytest.mark.parametrize(
    ("model_first", "reference_first", "expected"),
    [
        ("[[A]]", "[[B]]", 1.0),  # the model's answer wins in both orders
        ("[[B]]", "[[A]]", 0.0),  # the reference wins in both orders
        ("[[A]]", "[[A]]", 0.5),  # always position A: the bias cancels into a tie
        ("[[B]]", "[[B]]", 0.5),
        ("[[C]]", "[[C]]", 0.5),
        ("[[A]]", "[[C]]", 0.75),  # one win, one tie
    ],
)
def test_pairwise_averages_both_orders(model_first, reference_first, expected):
    assert grader("judge_pairwise").score([model_first, reference_first]) == (expected, None)


def test_pairwise_sends_both_orders():
    first, second = grader("judge_pairwise").prompts(JudgeInput("Q?", "MODEL", "REF"))
    assert first.index("MODEL") < first.index("REF")
    assert second.index("REF") < second.index("MODEL")


def test_correct_reads_yes_or_no():
    g = grader("judge_correct")
    assert g.score(["It matches. [[YES]]"]) == (1.0, None)
    assert g.score(["[[no]]"]) == (0.0, None)
    assert math.isnan(g.score(["maybe"])[0])


def test_template_option_replaces_the_prompt(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("Q=$question A=$answer. Reply [[N]].")
    assert grader("judge_score", template=str(path)).prompts(JudgeInput("x", "y")) == [
        "Q=x A=y. Reply [[N]]."
    ]


def test_a_template_without_the_fields_is_refused(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("Q=$question only")
    with pytest.raises(ConfigError, match=r"lacks \$answer"):
        get_metric("judge_score", template=str(path))
    with pytest.raises(ConfigError, match="cannot be read"):
        get_metric("judge_score", template=str(tmp_path / "missing.txt"))


def run(tmp_path, folder, judge, judge_args, out="out", tasks="judged", **kwargs):
    return evaluate(
        "dummy",
        tasks,
        include_path=folder,
        output_dir=tmp_path / out,
        log_samples=True,
        judge_model=judge,
        judge_model_args=judge_args,
        show_progress=False,
        **kwargs,
    )


def samples(tmp_path, out="out"):
    (path,) = (tmp_path / out).glob("samples_judged*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_judged_run_with_a_dummy_judge(tmp_path):
    folder = task_folder(tmp_path)
    results = run(tmp_path, folder, "dummy", {"response": "Verdict: [[7]] [[A]] [[YES]]"})
    entry = results["results"]["judged"]
    assert entry["judge_score,none"] == 7.0
    assert entry["judge_pairwise,none"] == 0.5  # a judge that always says A: ties
    assert entry["judge_correct,none"] == 1.0
    assert entry["judge_score_unparsed,none"] == 0
    records = samples(tmp_path)
    assert len(records) == len(ROWS)
    for record, row in zip(records, ROWS, strict=True):
        judged = record["judge"]
        assert judged["judge_score"]["verdicts"] == ["Verdict: [[7]] [[A]] [[YES]]"]
        assert judged["judge_score"]["score"] == record["judge_score"] == 7.0
        (prompt,) = judged["judge_score"]["prompts"]
        assert row["q"] in prompt and "lol" in prompt  # the dummy model's answer
        assert len(judged["judge_pairwise"]["prompts"]) == 2
        assert row["a"] in judged["judge_correct"]["prompts"][0]


def test_unparseable_verdicts_are_counted_not_fatal(tmp_path):
    folder = task_folder(tmp_path, ["judge_score"])
    results = run(tmp_path, folder, "dummy", {"response": "I would rather not say."})
    entry = results["results"]["judged"]
    assert entry["judge_score_unparsed,none"] == len(ROWS)
    assert math.isnan(entry["judge_score,none"])
    for record in samples(tmp_path):
        assert record["judge"]["judge_score"]["score"] is None
        assert "no [[N]]" in record["judge"]["judge_score"]["error"]


def test_judge_metrics_need_a_judge_and_a_judge_needs_judge_metrics(tmp_path):
    folder = task_folder(tmp_path, ["judge_score"])
    with pytest.raises(ConfigError, match="--judge-model"):
        run(tmp_path, folder, None, None)
    with pytest.raises(ConfigError, match="--judge-model 'nosuch': no such backend"):
        run(tmp_path, folder, "nosuch", None)
    with pytest.raises(ConfigError, match="--predict-only computes no metrics"):
        run(tmp_path, folder, "dummy", None, predict_only=True)
    (tmp_path / "plain").mkdir()
    plain = task_folder(tmp_path / "plain", ["exact_match"])
    with pytest.raises(ConfigError, match="no task of this run has a judge metric"):
        run(tmp_path, plain, "dummy", None)


def scripted(body):
    """A judge that scores by question and always prefers the model's answer ("lol")."""
    prompt = body["messages"][-1]["content"]
    if "Two AI assistants" in prompt:
        a_start = prompt.index("assistant A's answer]")
        b_start = prompt.index("assistant B's answer]")
        return "[[A]]" if prompt.index("lol", a_start) < b_start else "[[B]]"
    if "What is 0+1?" in prompt:
        return "Weak. [[2]]"
    if "What is 3+1?" in prompt:
        return "No verdict here."
    return "Good. [[6]]"


def test_judge_served_over_http_is_cached_and_recorded(tmp_path, tiny_model_dir):
    from fixtures.openai_server import OpenAIStubServer

    folder = task_folder(tmp_path, ["judge_score", "judge_pairwise"])
    with OpenAIStubServer(tiny_model_dir, chat_script=scripted) as server:
        args = {"model": "judge", "base_url": server.base_url}
        first = run(tmp_path, folder, "openai-chat", args)
        asked = server.requests
        assert asked == len(ROWS) * 3  # one single-answer prompt and two pairwise prompts
        again = run(
            tmp_path,
            folder,
            "openai-chat",
            args,
            out="again",
            cache=tmp_path / "out" / "cache.sqlite",
        )
        assert server.requests == asked  # every judge request came from the cache
    entry = first["results"]["judged"]
    assert entry["judge_score,none"] == pytest.approx((2 + 6 + 6) / 3)
    assert entry["judge_score_unparsed,none"] == 1
    assert entry["judge_pairwise,none"] == 1.0  # preferred in both orders
    for key in ("judge_score,none", "judge_pairwise,none", "judge_score_unparsed,none"):
        assert again["results"]["judged"][key] == entry[key]
    assert samples(tmp_path) == samples(tmp_path, "again")
    # Paired comparison against a judge that scores every answer 7: the doc without a parsed
    # verdict in the first run is left out, the other three pair (7-2, 7-6, 7-6).
    run(tmp_path, folder, "dummy", {"response": "[[7]] [[B]]"}, out="sevens")
    report = compare(tmp_path / "out", tmp_path / "sevens")
    (row,) = [c for c in report.comparisons if c.metric == "judge_score"]
    assert row.n == 3 and row.diff == pytest.approx((5 + 1 + 1) / 3)
    assert any("1 of 4 doc(s) have no value" in s for s in report.pairs[0].skipped)
    differs = {key for key, _, _ in report.pairs[0].differs}
    assert {"settings.judge_model", "settings.judge_model_args"} <= differs
    # The evaluated model's and the judge's answers are stored under two identities.
    with sqlite3.connect(tmp_path / "out" / "cache.sqlite") as db:
        models = db.execute("SELECT COUNT(DISTINCT model) FROM responses").fetchone()[0]
    assert models == 2


def test_python_task_config_takes_judge_metrics_and_results_name_the_judge():
    from assay.doc import Doc
    from assay.run.evaluation import Evaluation
    from assay.run.settings import RunSettings
    from assay.tasks.config import TaskConfig
    from assay.tasks.registry import Resolved, TaskRequest

    config = TaskConfig(
        name="py_judged",
        prompt_function=lambda row, task_name: Doc(row["q"], choices=[row["a"]], gold_index=0),
        dataset_loader=lambda **_: {"validation": ROWS},
        metrics=["judge_correct"],
        generation_size=8,
        stop_sequence=["\n"],
    )
    settings = RunSettings(
        model="dummy",
        model_args={"response": "2"},
        judge_model="dummy",
        judge_model_args={"response": "[[NO]]"},
        show_progress=False,
    )
    results = Evaluation(Resolved([TaskRequest(config)]), settings).run()
    assert results["results"]["py_judged"]["judge_correct,none"] == 0.0
    assert results["config"]["judge_model"] == "dummy"
    assert results["config"]["judge_model_identity"]["response"] == "[[NO]]"


def test_repeated_judgements_average_and_report_the_judges_noise(tmp_path, tiny_model_dir):
    from fixtures.openai_server import OpenAIStubServer

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    folder = tmp_path / "tasks"
    folder.mkdir()
    listed = "  - metric: judge_score\n    judge_samples: 3\n"
    (folder / "judged.yaml").write_text(TASK_YAML.format(data=data, metrics=listed))

    def by_seed(body):  # repeat i of a doc is sampled with seed run_seed + i
        assert body["temperature"] > 0
        return f"[[{4 + 2 * (body['seed'] % 3)}]]"

    with OpenAIStubServer(tiny_model_dir, chat_script=by_seed) as server:
        args = {"model": "judge", "base_url": server.base_url}
        results = run(tmp_path, folder, "openai-chat", args, seed=0)
        assert server.requests == len(ROWS) * 3
    entry = results["results"]["judged"]
    assert entry["judge_score,none"] == 6.0  # every doc: mean of 4, 6 and 8
    # sqrt(sum_i s_i^2 / k) / n with s_i^2 = var(4, 6, 8) = 4, k = 3, n = 4 docs
    assert entry["judge_score_judge_se,none"] == pytest.approx(math.sqrt(4 * 4 / 3) / 4)
    for record in samples(tmp_path):
        assert record["judge"]["judge_score"]["sample_scores"] == [4.0, 6.0, 8.0]
        assert record["judge"]["judge_score"]["verdicts"] == ["[[4]]", "[[6]]", "[[8]]"]


def test_judge_samples_must_be_a_positive_whole_number():
    with pytest.raises(ConfigError, match="judge_samples must be a whole number >= 1"):
        get_metric("judge_score", judge_samples=0)
