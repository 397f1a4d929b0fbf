"""`assay validate --no-data`, `assay tasks dump` past broken files, and what lm-eval tolerates."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from assay.cli import main
from assay.errors import TaskConfigError
from assay.tasks.registry import Registry

BODY = """\
dataset_path: json
dataset_kwargs:
  data_files:
    test: data.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "{{q}}"
doc_to_choice: ["a", "b"]
doc_to_target: 0
"""

FILES = {
    "good.yaml": "task: good\ntag: both\n" + BODY,
    "bad_metric.yaml": "task: bad_metric\ntag: both\n"
    + BODY
    + "metric_list:\n  - metric: no_such_metric\n",
    "bad_template.yaml": "task: bad_template\n" + BODY.replace('"{{q}}"', '"{{q"'),
    "unreadable.yaml": "task: unreadable\n  x: [\n",
    "hub.yaml": "task: hub\n" + BODY.replace("dataset_path: json", "dataset_path: org/some_set"),
    "grp.yaml": "group: grp\ntask: [good, bad_metric]\n",
    "good_grp.yaml": "group: good_grp\ntask: [good, hub]\n",
}


@pytest.fixture
def tree(tmp_path):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_no_data_reports_every_failure_and_writes_the_entries(tree, tmp_path, capsys):
    out = tmp_path / "report.json"
    code = main(["validate", "--no-data", "--include-path", str(tree), "--json", str(out)])
    assert code == 1
    printed = capsys.readouterr().out
    entries = {(e["kind"], e["name"]): e for e in json.loads(out.read_text())["entries"]}
    assert set(entries) == {
        ("file", None),
        ("task", "good"),
        ("task", "bad_metric"),
        ("task", "bad_template"),
        ("task", "hub"),
        ("group", "grp"),
        ("group", "good_grp"),
        ("tag", "both"),
    }
    ok = {key for key, e in entries.items() if e["ok"]}
    assert ok == {("task", "good"), ("task", "hub"), ("group", "good_grp")}
    assert "no_such_metric" in entries[("task", "bad_metric")]["error"]
    assert "Jinja" in entries[("task", "bad_template")]["error"]
    assert "YAML syntax error" in entries[("file", None)]["error"]
    assert entries[("file", None)]["file"].endswith("unreadable.yaml")
    assert entries[("group", "grp")]["members"] == ["bad_metric", "good"]
    assert "bad_metric" in entries[("group", "grp")]["error"]
    assert entries[("tag", "both")]["members"] == ["bad_metric", "good"]
    assert entries[("tag", "both")]["file"] is None
    assert entries[("task", "good")]["file"] == str((tree / "good.yaml").resolve())
    # The hub dataset is not fetched: noted, not failed.
    assert any("org/some_set" in n for n in entries[("task", "hub")]["notes"])
    assert "5 of 8 valid" not in printed and "3 of 8 valid" in printed

    assert entries[("group", "grp")]["member_errors"].keys() == {"bad_metric"}


def test_members_are_listed_from_the_files_when_one_fails_to_import(tmp_path):
    """A member whose code does not import stops the tag's resolve; the tag still lists its
    members, with the failing one's error beside it."""
    (tmp_path / "broken_utils.py").write_text("raise ImportError('no such helper')\n")
    files = {
        "fine.yaml": "task: fine\ntag: mixed\n" + BODY,
        "broken.yaml": "task: broken\ntag: mixed\nprocess_docs: !function broken_utils.f\n" + BODY,
        "mixed_group.yaml": "group: mixed_group\ntask: [fine, broken]\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    out = tmp_path / "report.json"
    assert main(["validate", "--no-data", "--include-path", str(tmp_path), "--json", str(out)]) == 1
    entries = {e["name"]: e for e in json.loads(out.read_text())["entries"]}
    for name in ("mixed", "mixed_group"):
        entry = entries[name]
        assert not entry["ok"] and entry["members"] == ["broken", "fine"]
        assert list(entry["member_errors"]) == ["broken"]
        assert "no such helper" in entry["member_errors"]["broken"]
    assert entries["fine"]["ok"] and entries["fine"]["member_errors"] == {}


def test_no_data_on_named_tasks_only(tree, capsys):
    assert main(["validate", "--no-data", "--include-path", str(tree), "-t", "good"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["ok", "task", "good"]


def test_tasks_dump_goes_on_past_a_broken_file(tree, capsys):
    code = main(["tasks", "dump", "--include-path", str(tree)])
    captured = capsys.readouterr()
    assert code == 1
    dumped = {t["name"]: t for m in json.loads(captured.out) for t in m["tasks"]}
    assert "config" in dumped["good"] and "config" in dumped["hub"]
    assert "Jinja" in dumped["bad_template"]["error"]
    assert "config" in dumped["bad_metric"]  # dump builds no metrics: only validate sees it
    assert "2 task file(s) did not load" in captured.err


def _task(tree, extra: str):
    (tree / "t.yaml").write_text("task: t\n" + BODY + extra, encoding="utf-8")
    return Registry([tree], builtins=False).get("t")


def test_metric_options_lm_eval_ignores_are_a_warning(tree, caplog):
    extra = (
        "metric_list:\n"
        "  - metric: acc\n    weight_by_size: true\n"
        "  - metric: f1\n    average: weighted\n    hf_evaluate: true\n"
    )
    with caplog.at_level(logging.WARNING):
        config = _task(tree, extra)
    assert [(m.name, m.kwargs) for m in config.metrics] == [("acc", {}), ("f1", {})]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "weight_by_size are ignored for multiple_choice" in lines[0]
    assert "average, hf_evaluate are ignored" in lines[1]


def test_a_malformed_true_flag_reads_as_true_with_a_warning(tree, caplog):
    extra = (
        "output_type: generate_until\nmetric_list:\n  - metric: exact_match\n"
        "    ignore_punctuation: 'true - \".\"'\n"
    )
    with caplog.at_level(logging.WARNING):
        config = _task(tree, extra)
    assert config.metrics[0].kwargs == {"ignore_punctuation": True}
    assert "read as true" in caplog.records[0].getMessage()


def test_task_code_importing_lm_eval_without_it_names_the_extra(tree, monkeypatch):
    (tree / "utils.py").write_text("import lm_eval\ndef docs(ds):\n    return ds\n")
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # as if lm-eval were not installed
    with pytest.raises(TaskConfigError, match=r"'lm_eval'.*assay\[lm-eval-tasks\]"):
        _task(tree, "process_docs: !function utils.docs\n")


def test_run_of_such_a_task_fails_before_the_model_loads(tree, monkeypatch, capsys):
    (tree / "utils.py").write_text("import lm_eval.utils\ndef docs(ds):\n    return ds\n")
    (tree / "t.yaml").write_text(
        "task: t\n" + BODY + "process_docs: !function utils.docs\n", encoding="utf-8"
    )
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    code = main(["run", "--model", "hf", "--model-args", "pretrained=/nonexistent", "--include-path", str(tree), "--tasks", "t"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert "assay[lm-eval-tasks]" in err and "/nonexistent" not in err


def test_pass_through_metrics_on_generated_text_give_the_aggregation_gold_and_prediction(tree):
    from assay.doc import OutputType
    from assay.metrics.base import SampleInput
    from assay.run.scoring import build_metrics

    (tree / "utils.py").write_text(
        "def agreement(items):\n    return sum(g == p for g, p in items) / len(items)\n"
    )
    gen = BODY.replace("output_type: multiple_choice", "output_type: generate_until")
    gen = gen.replace('doc_to_choice: ["a", "b"]\ndoc_to_target: 0\n', 'doc_to_target: "{{a}}"\n')
    (tree / "t.yaml").write_text(
        "task: t\n" + gen + "metric_list:\n  - metric: acc\n"
        "    aggregation: !function utils.agreement\n    ignore_case: true\n",
        encoding="utf-8",
    )
    config = Registry([tree], builtins=False).get("t")
    (scored,) = build_metrics(config)
    doc = config.prompt_function({"q": "2+2", "a": "4"}, "t")
    values = [
        scored.metric.sample_fn(SampleInput(doc, OutputType.GENERATE_UNTIL, answer))
        for answer in ("4", "5")
    ]
    assert values == [["4", "4"], ["4", "5"]]
    assert scored.aggregation.fn(values) == 0.5
    (tree / "t.yaml").write_text(
        "task: t\n" + gen + "metric_list:\n  - metric: f1\n", encoding="utf-8"
    )
    with pytest.raises(TaskConfigError, match="aggregation: !function"):
        Registry([tree], builtins=False).get("t")


def test_a_group_aggregation_function_is_called_on_its_leaf_tasks(tree, tmp_path):
    from assay.run.evaluation import Evaluation
    from assay.run.settings import RunSettings

    rows = "".join(json.dumps({"q": f"q{i}", "a": "x"}) + "\n" for i in range(7))
    (tree / "data.jsonl").write_text(rows, encoding="utf-8")
    (tree / "other.yaml").write_text(
        "task: other\n" + BODY.replace("doc_to_target: 0", "doc_to_target: 1"), encoding="utf-8"
    )
    (tree / "script.py").write_text(
        "def delta(scores, sizes, weight_by_size):\n    return scores[0] - scores[1]\n"
    )
    (tree / "delta.yaml").write_text(
        "group: delta\ntask: [good, other]\naggregate_metric_list:\n  - metric: acc\n"
        "    aggregation: !function script.delta\n    weight_by_size: false\n",
        encoding="utf-8",
    )
    resolved = Registry([tree], builtins=False).resolve(["delta"])
    settings = RunSettings(model="dummy", show_progress=False)
    results = Evaluation(resolved, settings).run()
    good, other = results["results"]["good"]["acc,none"], results["results"]["other"]["acc,none"]
    assert good + other == pytest.approx(1.0)  # two choices, gold 0 vs gold 1
    assert results["groups"]["delta"]["acc,none"] == pytest.approx(good - other)
    assert results["groups"]["delta"]["acc_stderr,none"] == "N/A"


GEN = BODY.replace("output_type: multiple_choice", "output_type: generate_until").replace(
    'doc_to_choice: ["a", "b"]\ndoc_to_target: 0\n', 'doc_to_target: "{{a}}"\n'
)
HF_EVALUATE = "metric_list:\n  - metric: sacre\n    hf_evaluate: true\n    lowercase: true\n"
# f1 is one of lm-eval's pass-through names: with hf_evaluate it is evaluate's f1 all the same.
HF_EVALUATE_F1 = "  - metric: f1\n    hf_evaluate: true\n    average: micro\n"


class FakeEvaluate:
    """Stands in for the evaluate package: records what is loaded and computed."""

    def __init__(self, offline: bool) -> None:
        self.offline, self.calls = offline, []

    def load(self, name):
        if self.offline:
            raise FileNotFoundError(f"Couldn't find a module script at ./{name}/{name}.py")
        outer = self

        class Module:
            def compute(self, references, predictions, **kwargs):
                outer.calls.append((references, predictions, kwargs))
                return {name: float(references[0] == predictions[0]), "other": 7}

        return Module()


def test_hf_evaluate_metrics_go_through_the_evaluate_package(tree, monkeypatch):
    from assay.doc import OutputType
    from assay.metrics.base import SampleInput
    from assay.run.scoring import build_metrics

    fake = FakeEvaluate(offline=False)
    monkeypatch.setitem(sys.modules, "evaluate", fake)
    (tree / "t.yaml").write_text("task: t\n" + GEN + HF_EVALUATE + HF_EVALUATE_F1, encoding="utf-8")
    config = Registry([tree], builtins=False).get("t")
    sacre, f1 = build_metrics(config)
    doc = config.prompt_function({"q": "2+2", "a": "4"}, "t")
    assert sacre.metric.sample_fn(SampleInput(doc, OutputType.GENERATE_UNTIL, "4")) == 1.0
    assert f1.metric.sample_fn(SampleInput(doc, OutputType.GENERATE_UNTIL, "5")) == 0.0
    assert fake.calls == [(["4"], ["4"], {"lowercase": True}), (["4"], ["5"], {"average": "micro"})]


def test_hf_evaluate_offline_fails_before_the_model_naming_the_metric(tree, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "evaluate", FakeEvaluate(offline=True))
    (tree / "t.yaml").write_text("task: t\n" + GEN + HF_EVALUATE, encoding="utf-8")
    (tree / "data.jsonl").write_text(json.dumps({"q": "2+2", "a": "4"}) + "\n")
    code = main(["run", "--model", "hf", "--model-args", "pretrained=/nonexistent", "--include-path", str(tree), "--tasks", "t"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert "'sacre'" in err and "evaluate.load('sacre')" in err and "/nonexistent" not in err
    # validate --no-data names it without fetching it
    assert main(["validate", "--no-data", "--include-path", str(tree), "-t", "t"]) == 0
    assert capsys.readouterr().out.startswith("ok")


def test_code_eval_is_not_noted_as_a_hub_download(tmp_path, capsys):
    """assay serves evaluate's code_eval itself (sandboxed): nothing to fetch."""
    text = "task: uses_code_eval\n" + BODY.replace("multiple_choice", "generate_until")
    text = text.replace('doc_to_choice: ["a", "b"]\n', "").replace(
        "doc_to_target: 0", 'doc_to_target: "t"'
    )
    text += "unsafe_code: true\nmetric_list:\n  - metric: code_eval\n    hf_evaluate: true\n"
    (tmp_path / "uses_code_eval.yaml").write_text(text)
    out = tmp_path / "report.json"
    assert main(["validate", "--no-data", "--include-path", str(tmp_path), "--json", str(out)]) == 0
    [entry] = json.loads(out.read_text())["entries"]
    assert not any("code_eval" in note for note in entry["notes"]), entry["notes"]
