"""End to end through the CLI on YAML tasks written here, with the dummy and replay backends.

Expected numbers are computed in the tests from the model's raw answers (the dummy model is
asked directly) with the metric definitions written out, not taken from assay's scoring code.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from assay.cli.main import main
from assay.models.dummy import DummyLM
from assay.requests.types import LoglikelihoodRequest, RollingRequest

MC_ROWS = [
    {"q": f"What is {i} + {i}?", "choices": [str(2 * i), str(2 * i + 1), "many", "x" * (i + 1)], "label": i % 4}
    for i in range(8)
]  # fmt: skip
MC_B_ROWS = [
    {"q": f"Colour {i}?", "choices": ["red", "green blue"], "label": i % 2} for i in range(4)
]
TEXT_ROWS = [
    {"text": "The quick brown fox jumps over the lazy dog."},
    {"text": "  Leading spaces and trailing  "},
    {"text": "Ünïcödé bytes count more than characters."},
]
GEN_ROWS = [{"q": f"{i} times 3?", "answer": str(3 * i)} for i in range(5)]
# Replayed answers: docs 0, 2, 3 carry the right number after "answer is"; doc 4 only elsewhere.
REPLIES = {
    0: "Let me think. The answer is 0.\n\nQ: more",
    1: "The answer is 4.",
    2: "the answer is 6",
    3: "The answer is 9!",
    4: "12 is it, but the answer is unclear",
}

MC_YAML = """\
task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{q}}}}\\nAnswer:"
doc_to_target: label
doc_to_choice: choices
metric_list:
  - metric: acc
  - metric: acc_norm
  - metric: acc_mutual_info
metadata:
  version: 1.0
"""

ROLLING_YAML = """\
task: rolling
dataset_path: json
dataset_kwargs:
  data_files:
    test: text.jsonl
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{text}}"
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
"""

GEN_YAML = """\
task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: gen.jsonl
test_split: test
output_type: generate_until
doc_to_text: "Q: {{{{q}}}}\\nA:"
doc_to_target: answer
generation_kwargs:
  until: ["\\n\\n"]
  max_gen_toks: 32
filter_list:
  - name: strict
    filter:
      - function: regex
        regex_pattern: "answer is (\\\\d+)"
      - function: take_first
  - name: flexible
    filter:
      - function: regex
        regex_pattern: "(\\\\d+)"
        group_select: 0
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
"""

GROUP_YAML = """\
group: {name}
task: [{children}]
aggregate_metric_list:
  - metric: {metric}
    weight_by_size: true
metadata:
  version: 3
"""


def jsonl(path: Path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture
def tasks_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "tasks"
    folder.mkdir()
    jsonl(folder / "mc.jsonl", MC_ROWS)
    jsonl(folder / "mc_b.jsonl", MC_B_ROWS)
    jsonl(folder / "text.jsonl", TEXT_ROWS)
    jsonl(folder / "gen.jsonl", GEN_ROWS)
    (folder / "mc_a.yaml").write_text(MC_YAML.format(name="mc_a", data="mc.jsonl"))
    (folder / "mc_b.yaml").write_text(MC_YAML.format(name="mc_b", data="mc_b.jsonl"))
    (folder / "rolling.yaml").write_text(ROLLING_YAML)
    (folder / "gen.yaml").write_text(GEN_YAML.format(name="gen"))
    (folder / "gen_copy.yaml").write_text(GEN_YAML.format(name="gen_copy"))
    (folder / "mc_group.yaml").write_text(
        GROUP_YAML.format(name="mc_group", children="mc_a, mc_b", metric="acc")
    )
    (folder / "gen_group.yaml").write_text(
        GROUP_YAML.format(name="gen_group", children="gen, gen_copy", metric="exact_match")
    )
    return folder


def run(tasks_dir: Path, out: Path, *args: str) -> dict:
    code = main(
        ["run", "--include-path", str(tasks_dir), "--output-dir", str(out), "--no-progress", *args]
    )
    assert code == 0
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def samples(out: Path, task: str) -> list[dict]:
    lines = (out / f"samples_{task}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def argmax(values):
    return max(range(len(values)), key=lambda i: values[i])


def expected_mc(rows, seed=1234):
    lm = DummyLM(seed=seed)
    acc, norm, pmi = [], [], []
    for row in rows:
        context = f"Question: {row['q']}\nAnswer:"
        conts = [" " + c for c in row["choices"]]
        cond = [
            r.logprob for r in lm.loglikelihood([LoglikelihoodRequest(context, c) for c in conts])
        ]
        uncond = [r.logprob for r in lm.loglikelihood([LoglikelihoodRequest("", c) for c in conts])]
        acc.append(float(argmax(cond) == row["label"]))
        # lm-eval normalises by the characters of the choice itself (no delimiter).
        lengths = [len(c) for c in row["choices"]]
        norm.append(float(argmax([ll / n for ll, n in zip(cond, lengths)]) == row["label"]))
        pmi.append(float(argmax([c - u for c, u in zip(cond, uncond)]) == row["label"]))
    return acc, norm, pmi


def mean_and_stderr(values):
    n = len(values)
    mean = sum(values) / n
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) / math.sqrt(n)


def test_multiple_choice_acc_acc_norm_and_mutual_info(tasks_dir, tmp_path):
    results = run(
        tasks_dir, tmp_path / "out", "--model", "dummy", "--tasks", "mc_a", "--log-samples"
    )
    entry = results["results"]["mc_a"]
    acc, norm, pmi = expected_mc(MC_ROWS)
    for metric, values in (("acc", acc), ("acc_norm", norm), ("acc_mutual_info", pmi)):
        mean, stderr = mean_and_stderr(values)
        assert entry[f"{metric},none"] == pytest.approx(mean)
        assert entry[f"{metric}_stderr,none"] == pytest.approx(stderr)
    lines = samples(tmp_path / "out", "mc_a")
    assert [s["doc_id"] for s in lines] == list(range(len(MC_ROWS)))
    # Four conditioned and four unconditioned requests per doc.
    assert len(lines[1]["arguments"]) == 8
    assert lines[1]["arguments"]["gen_args_0"] == {
        "arg_0": "Question: What is 1 + 1?\nAnswer:",
        "arg_1": " 2",
    }
    assert [s["acc"] for s in lines] == acc
    assert [s["acc_mutual_info"] for s in lines] == pmi


def test_results_json_has_lm_evals_layout(tasks_dir, tmp_path):
    results = run(
        tasks_dir, tmp_path / "out", "--model", "dummy", "--tasks", "mc_a", "--limit", "3"
    )
    for key in (
        "results", "groups", "group_subtasks", "configs", "versions", "n-shot",
        "higher_is_better", "n-samples", "config", "git_hash", "date", "task_hashes",
        "total_evaluation_time_seconds",
    ):  # fmt: skip
        assert key in results, key
    assert results["n-samples"]["mc_a"] == {"original": 8, "effective": 3}
    assert results["versions"]["mc_a"] == 1.0
    assert results["n-shot"]["mc_a"] == 0
    assert results["higher_is_better"]["mc_a"] == {
        "acc": True,
        "acc_norm": True,
        "acc_mutual_info": True,
    }
    assert results["configs"]["mc_a"]["task"] == "mc_a"
    assert results["configs"]["mc_a"]["doc_to_choice"] == "choices"
    assert results["config"]["model"] == "dummy" and results["config"]["limit"] == 3
    assert results["results"]["mc_a"]["sample_len"] == 3
    assert float(results["total_evaluation_time_seconds"]) > 0
    assert results["assay"]["requests"]["mc_a"]["requests"] == 3 * 8


def test_samples_file_fields(tasks_dir, tmp_path):
    run(tasks_dir, tmp_path / "out", "--model", "dummy", "--tasks", "mc_a", "--log-samples")
    (first, *_) = samples(tmp_path / "out", "mc_a")
    assert set(first) >= {
        "doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter",
        "metrics", "doc_hash", "prompt_hash", "target_hash", "acc", "acc_norm",
    }  # fmt: skip
    assert first["doc"] == MC_ROWS[0]
    assert first["target"] == "0"
    assert first["filter"] == "none"
    assert first["metrics"] == ["acc", "acc_norm", "acc_mutual_info"]
    logprob, greedy = first["resps"][0][0]
    assert isinstance(logprob, str) and greedy in ("True", "False")
    import hashlib

    prompt = "Question: What is 0 + 0?\nAnswer:"
    assert first["prompt_hash"] == hashlib.sha256(prompt.encode()).hexdigest()
    assert first["target_hash"] == hashlib.sha256(b"0").hexdigest()


def test_loglikelihood_rolling_perplexities(tasks_dir, tmp_path):
    results = run(tasks_dir, tmp_path / "out", "--model", "dummy", "--tasks", "rolling")
    entry = results["results"]["rolling"]
    lm = DummyLM(seed=1234)
    lls = [
        r.logprob for r in lm.loglikelihood_rolling([RollingRequest(r["text"]) for r in TEXT_ROWS])
    ]
    words = sum(len(re.split(r"\s+", r["text"])) for r in TEXT_ROWS)
    nbytes = sum(len(r["text"].encode("utf-8")) for r in TEXT_ROWS)
    assert entry["word_perplexity,none"] == pytest.approx(math.exp(-sum(lls) / words))
    assert entry["byte_perplexity,none"] == pytest.approx(math.exp(-sum(lls) / nbytes))
    assert entry["bits_per_byte,none"] == pytest.approx(-sum(lls) / nbytes / math.log(2))
    assert results["higher_is_better"]["rolling"]["bits_per_byte"] is False


def replies_file(tmp_path: Path) -> Path:
    path = tmp_path / "replies.jsonl"
    jsonl(
        path,
        [{"prompt": f"Q: {GEN_ROWS[i]['q']}\nA:", "response": text} for i, text in REPLIES.items()],
    )
    return path


def test_generate_until_with_regex_filters_and_replay(tasks_dir, tmp_path):
    out = tmp_path / "out"
    args = ["--model", "replay", "--model-args", f"path={replies_file(tmp_path)}", "--tasks", "gen"]
    entry = run(tasks_dir, out, *args, "--log-samples")["results"]["gen"]
    # strict: the number after "answer is" (doc 4 has none: "[invalid]").
    assert entry["exact_match,strict"] == pytest.approx(3 / 5)
    # flexible: the first number anywhere; doc 4 says 12 first.
    assert entry["exact_match,flexible"] == pytest.approx(4 / 5)
    lines = samples(out, "gen")
    assert [s["filter"] for s in lines] == ["strict"] * 5 + ["flexible"] * 5
    assert lines[0]["resps"] == [["Let me think. The answer is 0."]]  # cut at "\n\n"
    assert lines[4]["filtered_resps"] == ["[invalid]"]
    assert lines[0]["arguments"]["gen_args_0"]["arg_1"] == {"until": ["\n\n"], "max_gen_toks": 32}


def test_a_replay_prompt_without_answer_is_a_clear_error(tasks_dir, tmp_path, capsys):
    path = tmp_path / "partial.jsonl"
    jsonl(path, [{"prompt": "Q: 0 times 3?\nA:", "response": "0"}])
    code = main(["run", "--include-path", str(tasks_dir), "--model", "replay", "--model-args",
                 f"path={path}", "--tasks", "gen", "--no-progress"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "4 prompt(s) have no recorded response" in err and "Traceback" not in err


def test_group_of_multiple_choice_tasks_with_dummy(tasks_dir, tmp_path):
    results = run(tasks_dir, tmp_path / "out", "--model", "dummy", "--tasks", "mc_group")
    a, b = results["results"]["mc_a"], results["results"]["mc_b"]
    group = results["groups"]["mc_group"]
    expected = (a["acc,none"] * 8 + b["acc,none"] * 4) / 12
    assert group["acc,none"] == pytest.approx(expected)
    assert mean_and_stderr(expected_mc(MC_B_ROWS)[0])[0] == pytest.approx(b["acc,none"])
    assert results["group_subtasks"]["mc_group"] == ["mc_a", "mc_b"]
    assert next(iter(results["results"])) == "mc_group"  # groups first, as lm-eval
    assert results["versions"]["mc_group"] == "3"


def test_group_of_generation_tasks_with_replay(tasks_dir, tmp_path):
    args = ["--model", "replay", "--model-args", f"path={replies_file(tmp_path)}"]
    results = run(tasks_dir, tmp_path / "out", *args, "--tasks", "gen_group")
    group = results["groups"]["gen_group"]
    assert group["exact_match,strict"] == pytest.approx(3 / 5)
    assert group["exact_match,flexible"] == pytest.approx(4 / 5)
    assert group["sample_len"] == 10


def test_python_api_equals_the_cli(tasks_dir, tmp_path):
    from assay import evaluate

    cli = run(tasks_dir, tmp_path / "out", "--model", "dummy", "--tasks", "mc_group,rolling",
              "--limit", "3", "--no-cache")  # fmt: skip
    api = evaluate(
        "dummy",
        ["mc_group", "rolling"],
        include_path=[tasks_dir],
        limit=3,
        cache=False,
        show_progress=False,
    )
    for key in ("results", "groups", "group_subtasks", "versions", "n-shot", "n-samples",
                "higher_is_better", "configs"):  # fmt: skip
        assert api[key] == cli[key], key


def test_rerun_is_served_by_the_cache_with_identical_results(tasks_dir, tmp_path):
    first = run(tasks_dir, tmp_path / "out", "--model", "dummy", "--tasks", "mc_a")
    second = run(tasks_dir, tmp_path / "out", "--model", "dummy", "--tasks", "mc_a")
    assert first["results"] == second["results"]
    assert Path(tmp_path / "out" / "cache.sqlite").exists()
    # Another model into the same folder would mix two runs: refused, unless --overwrite.
    assert main(["run", "--include-path", str(tasks_dir), "--output-dir", str(tmp_path / "out"),
                 "--no-progress", "--model", "dummy", "--model-args", "seed=5",
                 "--tasks", "mc_a"]) == 2  # fmt: skip
    other_seed = run(tasks_dir, tmp_path / "out", "--model", "dummy", "--model-args", "seed=5",
                     "--tasks", "mc_a", "--overwrite")  # fmt: skip
    acc, _, _ = expected_mc(MC_ROWS, seed=5)
    assert other_seed["results"]["mc_a"]["acc,none"] == pytest.approx(sum(acc) / len(acc))
