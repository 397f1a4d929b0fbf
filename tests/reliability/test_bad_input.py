"""Malformed input, tried systematically: each case must end with exit code 2, a message naming
the culprit, no traceback, and (when an earlier task had finished) its results kept on disk."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from toy_tasks import write_data, write_task

from assay.cli.main import main

GOOD = "good_task"
"""A valid task run before the faulty one, so failures after it show whether its results survive."""

BASE: dict[str, Any] = {
    "task": "bad_task",
    "dataset_path": "json",
    "dataset_kwargs": {"data_files": {"train": "DATA/train.jsonl", "test": "DATA/test.jsonl"}},
    "training_split": "train",
    "test_split": "test",
    "output_type": "multiple_choice",
    "doc_to_text": "Question: {{question}}\nAnswer:",
    "doc_to_choice": "choices",
    "doc_to_target": "label",
    "metric_list": [{"metric": "acc"}],
}


@dataclass
class Setup:
    """What a case runs: its command line, the culprit the message must name, and whether a
    task had completed before the failure (so its outputs must be on disk) or the input must be
    rejected before the model is built (so no task ran and no results were written)."""

    argv: list[str]
    culprit: str
    after_good_task: bool = False
    before_model: bool = False


class Env:
    """A temporary folder with data, a good task and helpers to write faulty ones."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tasks = root / "tasks"
        self.data = write_data(root / "data")
        self.out = root / "out"
        write_task(self.tasks, GOOD, "mc", data=self.data)

    def yaml_task(self, name: str = "bad_task", **changes: Any) -> Path:
        """BASE with `changes` applied (a value of None removes the key), as `name`.yaml."""
        config = {**BASE, "task": name}
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        text = yaml.safe_dump(config, sort_keys=False).replace("DATA", str(self.data))
        return self.raw("bad_task.yaml" if name == "bad_task" else f"{name}.yaml", text)

    def raw(self, filename: str, text: str) -> Path:
        path = self.tasks / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def data_file(self, name: str, text: str) -> Path:
        path = self.root / "baddata" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def with_data(self, test: Path, train: Path | None = None, **changes: Any) -> Path:
        files = {"test": str(test), "train": str(train or self.data / "train.jsonl")}
        return self.yaml_task(dataset_kwargs={"data_files": files}, **changes)

    def run(self, *extra: str, tasks: str = f"{GOOD},bad_task", model_args: str = "") -> list[str]:
        argv = ["run", "--model", "dummy", "--tasks", tasks, "--include-path", str(self.tasks)]
        argv += ["--output-dir", str(self.out), "--log-samples", "--no-progress"]
        if model_args:
            argv += ["--model-args", model_args]
        return argv + list(extra)


def row(i: int, **changes: Any) -> str:
    base = {"question": f"q{i}", "choices": ["a", "b", "c", "d"], "label": i % 4, "answer": str(i)}
    return json.dumps({**base, **changes})


def rows(n: int, **at: Any) -> str:
    """`n` JSONL rows; `at` maps 'row<i>' to the raw line to put at index i instead."""
    return "".join(at.get(f"row{i}", row(i)) + "\n" for i in range(n))


Case = Callable[[Env], Setup]
CASES: dict[str, Case] = {}


def case(name: str) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        CASES[name] = fn
        return fn

    return register


# ------------------------------------------------------------------ YAML syntax and shape
@case("yaml_syntax_unclosed_bracket")
def _(e: Env) -> Setup:
    e.raw("bad_task.yaml", "task: bad_task\nmetric_list: [acc\n")
    return Setup(e.run(), "bad_task.yaml")


@case("yaml_syntax_tab_indent")
def _(e: Env) -> Setup:
    e.raw("bad_task.yaml", "task: bad_task\ndataset_kwargs:\n\tdata_files: x\n")
    return Setup(e.run(), "bad_task.yaml")


@case("yaml_bad_indentation")
def _(e: Env) -> Setup:
    e.raw("bad_task.yaml", "task: bad_task\n  doc_to_text: x\n output_type: y\n")
    return Setup(e.run(), "bad_task.yaml")


@case("yaml_top_level_list")
def _(e: Env) -> Setup:
    e.raw("bad_task.yaml", "- task: bad_task\n- output_type: multiple_choice\n")
    return Setup(e.run(tasks=str(e.tasks / "bad_task.yaml")), "bad_task.yaml")


@case("yaml_top_level_scalar")
def _(e: Env) -> Setup:
    e.raw("scalar.yaml", "just a string\n")
    return Setup(e.run(tasks=str(e.tasks / "scalar.yaml")), "scalar.yaml")


@case("yaml_empty_file_as_task")
def _(e: Env) -> Setup:
    e.raw("empty.yaml", "")
    return Setup(e.run(tasks=str(e.tasks / "empty.yaml")), "empty.yaml")


@case("yaml_unknown_tag")
def _(e: Env) -> Setup:
    e.raw("bad_task.yaml", "task: bad_task\ndoc_to_text: !python/object:os.system x\n")
    return Setup(e.run(), "bad_task.yaml")


@case("yaml_not_utf8")
def _(e: Env) -> Setup:
    (e.tasks / "bad_task.yaml").write_bytes(b"task: bad_task\ndoc_to_text: \xff\xfe\n")
    return Setup(e.run(), "bad_task.yaml")


# ------------------------------------------------------------------ schema: keys and types
@case("unknown_key")
def _(e: Env) -> Setup:
    e.yaml_task(doc_to_txt="{{question}}")
    return Setup(e.run(), "doc_to_txt")


@case("missing_task_name")
def _(e: Env) -> Setup:
    path = e.yaml_task(task=None)
    return Setup(e.run(tasks=str(path)), "bad_task.yaml")


@case("task_name_not_a_string")
def _(e: Env) -> Setup:
    path = e.yaml_task(task=["a", "b"], output_type="multiple_choice")
    return Setup(e.run(tasks=str(path)), "bad_task.yaml")


@case("num_fewshot_not_a_number")
def _(e: Env) -> Setup:
    e.yaml_task(num_fewshot="three")
    return Setup(e.run(), "num_fewshot")


@case("num_fewshot_negative")
def _(e: Env) -> Setup:
    e.yaml_task(num_fewshot=-2)
    return Setup(e.run(), "num_fewshot")


@case("unknown_output_type")
def _(e: Env) -> Setup:
    e.yaml_task(output_type="multi_choice")
    return Setup(e.run(), "multi_choice")


@case("metric_list_is_a_string")
def _(e: Env) -> Setup:
    e.yaml_task(metric_list="acc")
    return Setup(e.run(), "metric_list")


@case("metric_entry_without_metric")
def _(e: Env) -> Setup:
    e.yaml_task(metric_list=[{"aggregation": "mean"}])
    return Setup(e.run(), "metric_list")


@case("generation_kwargs_is_a_list")
def _(e: Env) -> Setup:
    e.yaml_task(output_type="generate_until", generation_kwargs=["until", "\n"])
    return Setup(e.run(), "generation_kwargs")


@case("generation_until_not_strings")
def _(e: Env) -> Setup:
    e.yaml_task(
        output_type="generate_until",
        doc_to_target="answer",
        doc_to_choice=None,
        metric_list=[{"metric": "exact_match"}],
        generation_kwargs={"until": [1, 2]},
    )
    return Setup(e.run(), "until", before_model=True)


def generative_task(e: Env, **generation_kwargs: Any) -> Path:
    """bad_task as a generate_until task with these generation_kwargs."""
    return e.yaml_task(
        output_type="generate_until",
        doc_to_target="answer",
        doc_to_choice=None,
        metric_list=[{"metric": "exact_match"}],
        generation_kwargs=generation_kwargs,
    )


@case("generation_top_p_not_a_number")
def _(e: Env) -> Setup:
    generative_task(e, top_p="high")
    return Setup(e.run(), "top_p", before_model=True)


@case("generation_max_gen_toks_negative")
def _(e: Env) -> Setup:
    generative_task(e, max_gen_toks=-8)
    return Setup(e.run(), "max_gen_toks", before_model=True)


@case("filter_list_is_a_mapping")
def _(e: Env) -> Setup:
    e.yaml_task(filter_list={"name": "x"})
    return Setup(e.run(), "filter_list")


@case("filter_without_function")
def _(e: Env) -> Setup:
    e.yaml_task(filter_list=[{"name": "f", "filter": [{"regex_pattern": "x"}]}])
    return Setup(e.run(), "function")


@case("dataset_kwargs_is_a_string")
def _(e: Env) -> Setup:
    e.yaml_task(dataset_kwargs="data_files=x")
    return Setup(e.run(), "dataset_kwargs")


@case("multiple_choice_without_choices")
def _(e: Env) -> Setup:
    e.yaml_task(doc_to_choice=None)
    return Setup(e.run(), "doc_to_choice")


@case("unsupported_key_class")
def _(e: Env) -> Setup:
    e.yaml_task(**{"class": "!function tasks.MyTask"})
    return Setup(e.run(), "class")


# ------------------------------------------------------------------ includes
@case("include_missing_file")
def _(e: Env) -> Setup:
    e.raw("bad_task.yaml", "include: nowhere.yaml\ntask: bad_task\n")
    return Setup(e.run(), "nowhere.yaml")


@case("include_cycle")
def _(e: Env) -> Setup:
    e.raw("cycle_a.yaml", "include: cycle_b.yaml\n")
    e.raw("cycle_b.yaml", "include: cycle_a.yaml\n")
    e.raw("bad_task.yaml", "include: cycle_a.yaml\ntask: bad_task\n")
    return Setup(e.run(), "cycle")


@case("include_itself")
def _(e: Env) -> Setup:
    e.raw("bad_task.yaml", "include: bad_task.yaml\ntask: bad_task\n")
    return Setup(e.run(), "include cycle")


@case("include_not_a_string")
def _(e: Env) -> Setup:
    e.raw("bad_task.yaml", "include: [3]\ntask: bad_task\n")
    return Setup(e.run(), "include")


@case("include_with_syntax_error")
def _(e: Env) -> Setup:
    e.raw("broken_base.yaml", "dataset_path: [json\n")
    e.raw("bad_task.yaml", "include: broken_base.yaml\ntask: bad_task\n")
    return Setup(e.run(), "broken_base.yaml")


# ------------------------------------------------------------------ Jinja templates
@case("jinja_unclosed_expression")
def _(e: Env) -> Setup:
    e.yaml_task(doc_to_text="Question: {{ question")
    return Setup(e.run(), "doc_to_text")


@case("jinja_bad_block")
def _(e: Env) -> Setup:
    e.yaml_task(doc_to_target="{% if %}1{% endif %}")
    return Setup(e.run(), "doc_to_target")


@case("jinja_unknown_variable")
def _(e: Env) -> Setup:
    e.yaml_task(doc_to_text="{{ querstion }}")
    return Setup(e.run(), "querstion")


@case("jinja_unknown_filter")
def _(e: Env) -> Setup:
    e.yaml_task(doc_to_text="{{ question | shout }}")
    return Setup(e.run(), "shout")


@case("template_fails_on_one_row")
def _(e: Env) -> Setup:
    test = e.data_file("test.jsonl", rows(8, row5=row(5, choices=["a"], label=0)))
    e.with_data(test, doc_to_text="{{ question }} (last option: {{ choices[3] }})")
    return Setup(e.run(), "row 5", after_good_task=True)


@case("jinja_runtime_error_on_one_row")
def _(e: Env) -> Setup:
    test = e.data_file("test.jsonl", rows(6, row3=row(3, question=None)))
    e.with_data(test, doc_to_text="{{ question.upper() }}")
    return Setup(e.run(), "row 3", after_good_task=True)


@case("doc_to_choice_renders_a_non_list")
def _(e: Env) -> Setup:
    e.yaml_task(doc_to_choice="{{question}}")
    return Setup(e.run(), "doc_to_choice", before_model=True)


@case("target_index_out_of_range")
def _(e: Env) -> Setup:
    test = e.data_file("test.jsonl", rows(6, row4=row(4, label=9)))
    e.with_data(test)
    return Setup(e.run(), "9", after_good_task=True)


@case("target_not_among_choices")
def _(e: Env) -> Setup:
    test = e.data_file("test.jsonl", rows(6, row2=row(2, label="zebra")))
    e.with_data(test)
    return Setup(e.run(), "zebra", after_good_task=True)


# ------------------------------------------------------------------ filters, metrics
@case("binary_f1_on_four_choices")
def _(e: Env) -> Setup:
    e.yaml_task(metric_list=[{"metric": "f1"}])
    return Setup(e.run(), "aggregating metric 'f1'", after_good_task=True)


@case("bad_regex")
def _(e: Env) -> Setup:
    e.yaml_task(
        filter_list=[{"name": "f", "filter": [{"function": "regex", "regex_pattern": "(\\d+"}]}]
    )
    return Setup(e.run(), "regex_pattern")


@case("unknown_filter")
def _(e: Env) -> Setup:
    e.yaml_task(filter_list=[{"name": "f", "filter": [{"function": "take_frist"}]}])
    return Setup(e.run(), "take_frist")


@case("filter_bad_argument")
def _(e: Env) -> Setup:
    e.yaml_task(filter_list=[{"name": "f", "filter": [{"function": "take_first", "n": 3}]}])
    return Setup(e.run(), "take_first")


@case("unknown_metric")
def _(e: Env) -> Setup:
    e.yaml_task(metric_list=[{"metric": "accuracy_plus"}])
    return Setup(e.run(), "accuracy_plus")


@case("unknown_aggregation")
def _(e: Env) -> Setup:
    e.yaml_task(metric_list=[{"metric": "acc", "aggregation": "meanish"}])
    return Setup(e.run(), "meanish")


@case("metric_for_other_output_type")
def _(e: Env) -> Setup:
    e.yaml_task(metric_list=[{"metric": "word_perplexity"}])
    return Setup(e.run(), "word_perplexity")


# ------------------------------------------------------------------ names on the command line
@case("unknown_task")
def _(e: Env) -> Setup:
    return Setup(e.run(tasks=f"{GOOD},no_such_task"), "no_such_task")


@case("task_string_bad_shots")
def _(e: Env) -> Setup:
    return Setup(e.run(tasks=f"{GOOD}|x"), "|x")


@case("task_string_empty_name")
def _(e: Env) -> Setup:
    return Setup(e.run(tasks="|3"), "|3")


@case("unknown_model")
def _(e: Env) -> Setup:
    return Setup([*e.run(tasks=GOOD), "--model", "gpt-17"], "gpt-17")


@case("unknown_model_arg")
def _(e: Env) -> Setup:
    return Setup(e.run(tasks=GOOD, model_args="sede=3"), "sede")


@case("model_args_without_equals")
def _(e: Env) -> Setup:
    return Setup(e.run(tasks=GOOD, model_args="seed"), "seed")


@case("model_args_bad_json")
def _(e: Env) -> Setup:
    return Setup(e.run(tasks=GOOD, model_args='{"seed": 1,'), "--model-args")


@case("model_args_json_not_object")
def _(e: Env) -> Setup:
    return Setup(e.run(tasks=GOOD, model_args="{[1, 2]}"), "--model-args")


@case("model_args_bad_value")
def _(e: Env) -> Setup:
    return Setup(e.run(tasks=GOOD, model_args="delay=soon"), "delay")


@case("model_args_bad_seed_type")
def _(e: Env) -> Setup:
    return Setup(e.run(tasks=GOOD, model_args="seed=abc"), "seed")


@case("gen_kwargs_without_equals")
def _(e: Env) -> Setup:
    return Setup(e.run("--gen-kwargs", "temperature"), "temperature")


@case("gen_kwargs_bad_number")
def _(e: Env) -> Setup:
    generative_task(e)
    return Setup(e.run("--gen-kwargs", "max_gen_toks=lots"), "max_gen_toks", before_model=True)


def _bad_gen_kwarg(text: str) -> Case:
    """A run given `--gen-kwargs text`; the message must name the key."""

    def setup(e: Env) -> Setup:
        generative_task(e)
        return Setup(e.run("--gen-kwargs", text), text.partition("=")[0], before_model=True)

    return setup


for _text in ("top_k=abc", "top_p=x", "seed=x", "max_gen_toks=-1", "temperature=-0.5"):
    case(f"gen_kwargs_{_text}")(_bad_gen_kwarg(_text))


@case("num_fewshot_flag_negative")
def _(e: Env) -> Setup:
    return Setup(e.run("--num-fewshot", "-1", tasks=GOOD), "--num-fewshot", before_model=True)


@case("limit_zero")
def _(e: Env) -> Setup:
    return Setup(e.run("--limit", "0", tasks=GOOD), "--limit")


@case("batch_size_word")
def _(e: Env) -> Setup:
    return Setup(e.run("--batch-size", "many", tasks=GOOD), "many")


@case("log_samples_without_output_dir")
def _(e: Env) -> Setup:
    argv = ["run", "--model", "dummy", "--tasks", GOOD, "--include-path", str(e.tasks)]
    return Setup([*argv, "--log-samples"], "--output-dir")


@case("multiturn_without_chat_template")
def _(e: Env) -> Setup:
    return Setup(e.run("--fewshot-as-multiturn", tasks=GOOD), "--apply-chat-template")


@case("chat_template_on_backend_without_one")
def _(e: Env) -> Setup:
    return Setup(e.run("--apply-chat-template", tasks=GOOD), "chat template")


@case("include_path_missing")
def _(e: Env) -> Setup:
    return Setup(e.run("--include-path", str(e.root / "nope")), "nope")


# ------------------------------------------------------------------ custom task files, !function
@case("custom_tasks_missing_file")
def _(e: Env) -> Setup:
    return Setup(e.run("--custom-tasks", str(e.root / "mytasks.py")), "mytasks.py")


@case("custom_tasks_import_error")
def _(e: Env) -> Setup:
    path = e.root / "mytasks.py"
    path.write_text("import not_a_module_anywhere\nTASKS_TABLE = []\n")
    return Setup(e.run("--custom-tasks", str(path)), "mytasks.py")


@case("custom_tasks_without_table")
def _(e: Env) -> Setup:
    path = e.root / "mytasks.py"
    path.write_text("X = 1\n")
    return Setup(e.run("--custom-tasks", str(path)), "TASKS_TABLE")


@case("custom_tasks_table_of_wrong_type")
def _(e: Env) -> Setup:
    path = e.root / "mytasks.py"
    path.write_text("TASKS_TABLE = ['not a config']\n")
    return Setup(e.run("--custom-tasks", str(path)), "TASKS_TABLE")


@case("function_module_missing")
def _(e: Env) -> Setup:
    e.raw("bad_task.yaml", yaml.safe_dump({**BASE}).replace("DATA", str(e.data)))
    text = (e.tasks / "bad_task.yaml").read_text() + "process_docs: !function nohelpers.fix\n"
    e.raw("bad_task.yaml", text)
    return Setup(e.run(), "nohelpers")


@case("function_attribute_missing")
def _(e: Env) -> Setup:
    e.raw("helpers.py", "def other(docs):\n    return docs\n")
    text = yaml.safe_dump({**BASE}).replace("DATA", str(e.data))
    e.raw("bad_task.yaml", text + "process_docs: !function helpers.fix\n")
    return Setup(e.run(), "fix")


@case("function_without_module")
def _(e: Env) -> Setup:
    text = yaml.safe_dump({**BASE}).replace("DATA", str(e.data))
    e.raw("bad_task.yaml", text + "process_docs: !function fix\n")
    return Setup(e.run(), "fix")


@case("function_empty_module_name")
def _(e: Env) -> Setup:
    text = yaml.safe_dump({**BASE}).replace("DATA", str(e.data))
    e.raw("bad_task.yaml", text + "process_docs: !function .fix\n")
    return Setup(e.run(), "module.function")


@case("function_module_raises_on_import")
def _(e: Env) -> Setup:
    e.raw("helpers.py", "raise RuntimeError('helpers are broken')\n")
    text = yaml.safe_dump({**BASE}).replace("DATA", str(e.data))
    e.raw("bad_task.yaml", text + "process_docs: !function helpers.fix\n")
    return Setup(e.run(), "helpers.py")


@case("process_docs_raises")
def _(e: Env) -> Setup:
    e.raw("helpers.py", "def fix(docs):\n    raise KeyError('wrong column')\n")
    text = yaml.safe_dump({**BASE}).replace("DATA", str(e.data))
    e.raw("bad_task.yaml", text + "process_docs: !function helpers.fix\n")
    return Setup(e.run(), "process_docs")


# ------------------------------------------------------------------ data files
@case("data_file_missing")
def _(e: Env) -> Setup:
    e.with_data(e.root / "baddata" / "absent.jsonl")
    return Setup(e.run(), "absent.jsonl")


@case("data_file_not_json")
def _(e: Env) -> Setup:
    e.with_data(e.data_file("test.jsonl", "this is not json at all\n<html>\n"))
    return Setup(e.run(), "test.jsonl")


@case("data_file_corrupt_row")
def _(e: Env) -> Setup:
    e.with_data(e.data_file("test.jsonl", rows(6, row3='{"question": "q3", "choices": [')))
    return Setup(e.run(), "test.jsonl")


@case("data_file_binary_garbage")
def _(e: Env) -> Setup:
    path = e.root / "baddata" / "test.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(range(256)) * 4)
    e.with_data(path)
    return Setup(e.run(), "bad_task")


@case("data_empty_split")
def _(e: Env) -> Setup:
    e.with_data(e.data_file("test.jsonl", ""))
    return Setup(e.run(), "bad_task")


@case("data_rows_missing_a_column_everywhere")
def _(e: Env) -> Setup:
    lines = "".join(json.dumps({"q": f"x{i}", "label": 0}) + "\n" for i in range(4))
    e.with_data(e.data_file("test.jsonl", lines), e.data_file("train.jsonl", lines))
    return Setup(e.run(), "doc_to_choice")


@case("wrong_test_split_name")
def _(e: Env) -> Setup:
    e.yaml_task(test_split="testing")
    return Setup(e.run(), "testing")


@case("wrong_fewshot_split_name")
def _(e: Env) -> Setup:
    e.yaml_task(fewshot_split="dev", num_fewshot=2)
    return Setup(e.run(), "dev", before_model=True)


@case("fewshot_pool_smaller_than_num_fewshot")
def _(e: Env) -> Setup:
    e.yaml_task(num_fewshot=50)
    return Setup(e.run(), "50 few-shot examples", before_model=True)


@case("dataset_path_unknown_local_builder")
def _(e: Env) -> Setup:
    e.yaml_task(dataset_path=str(e.root / "no_such_dataset_dir"), dataset_kwargs=None)
    return Setup(e.run(), "no_such_dataset_dir")


# ------------------------------------------------------------------ output and cache
@case("output_dir_is_a_file")
def _(e: Env) -> Setup:
    blocker = e.root / "blocker"
    blocker.write_text("x")
    return Setup(e.run("--output-dir", str(blocker / "out"), tasks=GOOD), "blocker")


@case("cache_from_another_version")
def _(e: Env) -> Setup:
    path = e.root / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('schema', 'assay-cache-0')")
    return Setup(e.run("--cache", str(path), tasks=GOOD), "old.sqlite")


@case("cache_file_not_sqlite")
def _(e: Env) -> Setup:
    path = e.root / "junk.sqlite"
    path.write_bytes(b"definitely not a database" * 100)
    return Setup(e.run("--cache", str(path), tasks=GOOD), "junk.sqlite")


@case("cache_path_is_a_directory")
def _(e: Env) -> Setup:
    path = e.root / "cachedir"
    path.mkdir()
    return Setup(e.run("--cache", str(path), tasks=GOOD), "cachedir")


@case("cache_sqlite_without_tables_of_ours")
def _(e: Env) -> Setup:
    path = e.root / "foreign.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE responses (a INTEGER)")
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('schema', 'assay-cache-2')")
    return Setup(e.run("--cache", str(path), tasks=GOOD), "foreign.sqlite")


# ------------------------------------------------------------------ groups
@case("group_with_unknown_subtask")
def _(e: Env) -> Setup:
    e.raw("grp.yaml", f"group: grp\ntask:\n  - {GOOD}\n  - ghost_task\n")
    return Setup(e.run(tasks="grp"), "ghost_task")


@case("group_subtask_entry_of_wrong_type")
def _(e: Env) -> Setup:
    e.raw("grp.yaml", f"group: grp\ntask:\n  - {GOOD}\n  - 42\n")
    return Setup(e.run(tasks="grp"), "42")


# ------------------------------------------------------------------ the table
@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    # main() configures logging once per process; each case needs a handler on its own stderr.
    monkeypatch.setattr(logging.root, "handlers", [])
    # datasets keeps a handler on the stderr of the test that first imported it.
    monkeypatch.setattr(logging.getLogger("datasets"), "handlers", [])
    return Env(tmp_path)


def run_main(argv: list[str]) -> int:
    """main()'s exit code, also when argparse rejects a flag (it exits with 2)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 50


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_ends_with_a_clear_message(name, env, capsys):
    setup = CASES[name](env)
    code = run_main(setup.argv)
    out, err = capsys.readouterr()
    assert code == 2, f"exit {code}\nstdout: {out}\nstderr: {err}"
    assert "Traceback" not in err and "Traceback" not in out
    assert err.strip(), "no message"
    assert setup.culprit in err, f"message does not name {setup.culprit!r}: {err}"
    if setup.after_good_task:
        results = json.loads((env.out / "results.json").read_text())
        assert GOOD in results["results"]
        assert (env.out / f"samples_{GOOD}.jsonl").stat().st_size > 0
    if setup.before_model:
        assert not (env.out / "results.json").exists(), "rejected only after a task ran"


def test_validate_checks_generation_kwargs(env, capsys):
    generative_task(env, top_p="high")
    code = run_main(["validate", "--tasks", "bad_task", "--include-path", str(env.tasks)])
    err = capsys.readouterr().err
    assert code == 2
    assert "bad_task" in err and "'top_p'" in err and "'high'" in err


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "yaml_syntax_unclosed_bracket",
        "unknown_metric",
        "template_fails_on_one_row",
        "data_file_not_json",
        "cache_file_not_sqlite",
    ],
)
def test_bad_input_in_a_subprocess_prints_no_traceback(name, env):
    setup = CASES[name](env)
    done = subprocess.run(
        [sys.executable, "-m", "assay", *setup.argv], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert setup.culprit in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) <= 3, done.stderr
    # No message is printed twice (as a library's own line and again through the root logger).
    assert not [(a, b) for a in lines for b in lines if a is not b and a in b], done.stderr
