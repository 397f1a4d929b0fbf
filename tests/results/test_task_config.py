"""results.json `configs`: lm-eval's TaskConfig.to_dict() schema for YAML and Python tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from assay.doc import Doc
from assay.results.task_config import LM_EVAL_FIELDS, config_dump
from assay.tasks.config import TaskConfig
from assay.tasks.registry import Registry
from assay.tasks.task import Task

RUNS = Path(__file__).parents[1] / "data" / "lm_eval_runs"

GENERATIVE = {
    "plain": """\
task: gen_plain
dataset_path: json
dataset_kwargs: {data_files: {test: rows.jsonl}}
test_split: test
output_type: generate_until
doc_to_text: "Q: {{q}}\\nA:"
doc_to_target: "{{a}}"
metric_list: [{metric: exact_match}]
""",
    "with_kwargs": """\
task: gen_kwargs
dataset_path: json
dataset_kwargs: {data_files: {test: rows.jsonl}}
test_split: test
output_type: generate_until
doc_to_text: "Q: {{q}}\\nA:"
doc_to_target: "{{a}}"
description: "Answer briefly.\\n"
fewshot_config: {sampler: first_n}
generation_kwargs: {until: ["\\n"], max_gen_toks: 32, temperature: 0}
filter_list:
  - name: strict
    filter: [{function: regex, regex_pattern: "(\\\\d+)"}, {function: take_first}]
metric_list: [{metric: exact_match, ignore_case: true}]
metadata: {version: 2.0}
""",
}


def _lm_eval_dump(text: str, num_fewshot: int, gen_kwargs: dict) -> dict:
    """What lm-eval 0.4.13 writes for this YAML: TaskConfig(...).to_dict() after
    simple_evaluate's set_config calls (num_fewshot, --gen_kwargs merged)."""
    from lm_eval.config.task import TaskConfig as LmEvalTaskConfig

    config = LmEvalTaskConfig(**yaml.safe_load(text))
    config.num_fewshot = num_fewshot
    if gen_kwargs:
        config.generation_kwargs.update(gen_kwargs)
    return config.to_dict()


def test_yaml_task_configs_equal_lm_evals_results_file():
    written = json.loads(next(RUNS.glob("dummy_seed1/*/results_*.json")).read_text())["configs"]
    registry = Registry([RUNS / "tasks"], builtins=False)
    for name, theirs in written.items():
        ours = config_dump(Task(registry.get(name)))
        for entry in (ours, theirs):
            entry["metadata"].pop("config_source")
        assert list(ours) == list(theirs) and ours == theirs


@pytest.mark.parametrize("gen_kwargs", [{}, {"max_gen_toks": 7, "temperature": 0.5}])
@pytest.mark.parametrize("shape", sorted(GENERATIVE))
def test_generative_yaml_configs_equal_lm_evals_with_gen_kwargs_merged(tmp_path, shape, gen_kwargs):
    (tmp_path / "task.yaml").write_text(GENERATIVE[shape], encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text('{"q": "1+1", "a": "2"}\n', encoding="utf-8")
    registry = Registry([tmp_path], builtins=False)
    (name,) = registry.yaml_names()
    config = registry.get(name)
    ours = config_dump(Task(config), gen_kwargs)
    ours["metadata"].pop("config_source")
    theirs = _lm_eval_dump(GENERATIVE[shape], 0, gen_kwargs)
    theirs["metadata"] = {**(theirs.get("metadata") or {}), "version": config.version}
    assert list(ours) == list(theirs) and ours == theirs


def test_python_task_configs_use_lm_evals_keys_and_merge_gen_kwargs():
    def prompt(row, name):
        return Doc(row["q"], [row["a"]], 0)

    config = TaskConfig(
        name="py",
        prompt_function=prompt,
        hf_repo="org/data",
        hf_subset="main",
        hf_revision="abc",
        evaluation_splits=["test"],
        few_shots_split="train",
        metrics=["exact_match"],
        generation_size=64,
        stop_sequence=["\n"],
        num_fewshots=2,
    )
    dumped = config_dump(Task(config), {"max_new_tokens": 9})
    assert list(dumped) == [k for k in LM_EVAL_FIELDS if k in dumped]
    assert dumped["dataset_path"] == "org/data" and dumped["dataset_name"] == "main"
    assert dumped["dataset_kwargs"] == {"revision": "abc"}
    assert dumped["test_split"] == "test" and dumped["num_fewshot"] == 2
    assert dumped["doc_to_text"].endswith("prompt")
    assert dumped["fewshot_config"]["split"] == "train"
    assert dumped["generation_kwargs"]["max_gen_toks"] == 9
    assert "max_new_tokens" not in dumped["generation_kwargs"]
    assert dumped["generation_kwargs"]["until"] == ["\n"]
    assert dumped["output_type"] == "generate_until"


def test_a_function_among_a_filters_arguments_is_recorded_by_name_not_address():
    """HumanEval's custom filter passes its function as an argument: its repr holds an address
    that differs from process to process, and the task's hash is made from this dump."""
    task = Task(Registry().get("humaneval"))
    dumped = json.dumps(config_dump(task), default=str)
    assert " at 0x" not in dumped
    steps = config_dump(task)["filter_list"][0]["filter"]
    assert steps[0]["filter_fn"] == "assay.catalog.humaneval.with_header"
