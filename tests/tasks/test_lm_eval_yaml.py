"""lm-eval YAML tasks: includes, !function, doc_to_* kinds, Jinja, few-shot config, errors."""

from __future__ import annotations

import json
import logging
import textwrap

import pytest
import yaml

from assay.doc import OutputType
from assay.errors import DataError, TaskConfigError, UnknownNameError
from assay.models.base import LM
from assay.prompts.manager import PromptManager
from assay.tasks.registry import Registry
from assay.tasks.task import Task, fewshot_count

ROWS = [
    {"question": "2+2?", "options": ["3", "4", "5"], "answer": 1, "word": "four"},
    {"question": "1+2?", "options": ["3", "4", "5"], "answer": 0, "word": "three"},
    {"question": "2+3?", "options": ["3", "4", "5"], "answer": 2, "word": "five"},
]

UTILS = """
def process_docs(dataset):
    return dataset.map(lambda row: {"question": row["question"].upper()})

def text(row):
    return "Q: " + row["question"]

def samples():
    return [{"question": "0+0?", "options": ["0", "1", "2"], "answer": 0, "word": "zero"}]

def process_results(doc, results):
    return {"first_is_best": float(results[0][0] >= max(r[0] for r in results))}
"""


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "data.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8"
    )
    (tmp_path / "utils.py").write_text(UTILS, encoding="utf-8")
    (tmp_path / "_base.yaml").write_text(
        textwrap.dedent(
            """\
            dataset_path: json
            dataset_kwargs:
              data_files:
                test: data.jsonl
                train: data.jsonl
            test_split: test
            training_split: train
            output_type: multiple_choice
            doc_to_text: "Question: {{question}}\\nAnswer:"
            doc_to_target: answer
            doc_to_choice: options
            description: "Arithmetic.\\n\\n"
            metadata:
              version: 2.0
            """
        ),
        encoding="utf-8",
    )
    return tmp_path


def write(folder, name, text):
    (folder / name).write_text(textwrap.dedent(text), encoding="utf-8")


def load(folder, name, shots=None):
    config = Registry([folder], builtins=False).get(name)
    return Task(config, num_fewshot=fewshot_count(config, run=shots))


def render(task, doc):
    cfg = task.config
    manager = PromptManager(
        cfg.target_delimiter,
        cfg.fewshot_delimiter,
        cfg.fewshot_target_delimiter,
        cfg.fewshot_fewshot_delimiter,
        strip_instruction=cfg.instruction_in_query,
    )
    return manager.render(doc, doc.fewshot_samples)


def test_include_inherits_and_local_keys_win(folder):
    write(folder, "t.yaml", "include: _base.yaml\ntask: arith\ntarget_delimiter: '  '\n")
    task = load(folder, "arith")
    doc = task.first_doc()
    assert task.output_type is OutputType.MULTIPLE_CHOICE
    assert task.config.version == 2.0
    assert task.config.target_delimiter == "  "
    assert doc.choices == ["3", "4", "5"] and doc.gold_index == 1
    assert render(task, doc) == "Arithmetic.\n\nQuestion: 2+2?\nAnswer:"


def test_include_cycle_is_reported(folder):
    write(folder, "a.yaml", "include: b.yaml\ntask: a\n")
    write(folder, "b.yaml", "include: a.yaml\n")
    with pytest.raises(UnknownNameError, match="include cycle"):
        load(folder, "a")


def test_function_tags_resolve_next_to_the_yaml(folder):
    write(
        folder,
        "f.yaml",
        """\
        include: _base.yaml
        task: fn
        process_docs: !function utils.process_docs
        doc_to_text: !function utils.text
        """,
    )
    doc = load(folder, "fn").first_doc()
    assert doc.query == "Q: 2+2?"
    assert doc.row["question"] == "2+2?".upper()


@pytest.mark.parametrize(
    ("choice", "target", "choices"),
    [
        ("options", "answer", ["3", "4", "5"]),  # feature name, index target
        ("{{options}}", "{{answer}}", ["3", "4", "5"]),  # Jinja list literal, digit target
        ("{{['n' + options[0], 'four']}}", "{{word}}", ["n3", "four"]),  # text target
        ({"a": "3", "b": "4", "c": "5"}, "{{answer}}", ["3", "4", "5"]),  # dict: its values
        (["x", "y"], 1, ["x", "y"]),  # YAML list, int target
    ],
)
def test_doc_to_choice_and_target_kinds(folder, choice, target, choices):
    spec = {"include": "_base.yaml", "task": "kinds", "doc_to_choice": choice}
    spec["doc_to_target"] = target
    (folder / "k.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    doc = load(folder, "kinds").first_doc()
    assert doc.choices == choices
    assert doc.gold_index == 1


def test_jinja_filters_and_strict_undefined(folder):
    write(
        folder,
        "j.yaml",
        """\
        include: _base.yaml
        task: jinja
        doc_to_text: "{{question | replace('?', '') | upper}} {{ word | regex_replace('e+', 'E') }}"
        """,
    )
    doc = load(folder, "jinja").first_doc()
    assert doc.query == "2+2 four"
    write(folder, "u.yaml", "include: _base.yaml\ntask: undefined\ndoc_to_text: '{{missing}}'\n")
    with pytest.raises(DataError, match="missing"):
        load(folder, "undefined").first_doc()


def test_bad_jinja_syntax_is_a_task_config_error(folder):
    write(folder, "b.yaml", "include: _base.yaml\ntask: badjinja\ndoc_to_text: '{{ question '\n")
    with pytest.raises(TaskConfigError, match="doc_to_text"):
        load(folder, "badjinja")


def test_fewshot_config_samples_and_first_n(folder):
    write(
        folder,
        "s.yaml",
        """\
        include: _base.yaml
        task: samples
        num_fewshot: 1
        fewshot_config:
          sampler: first_n
          samples: !function utils.samples
        """,
    )
    task = load(folder, "samples")
    doc = task.first_doc()
    assert [s.query for s in doc.fewshot_samples] == ["Question: 0+0?\nAnswer:"]
    assert render(task, doc) == (
        "Arithmetic.\n\nQuestion: 0+0?\nAnswer: 0\n\nQuestion: 2+2?\nAnswer:"
    )


def test_num_fewshot_zero_in_yaml_is_fixed_and_name_k_sets_shots(folder):
    write(folder, "z.yaml", "include: _base.yaml\ntask: zero\nnum_fewshot: 0\n")
    assert load(folder, "zero", shots=5).shots == 0
    write(folder, "d.yaml", "include: _base.yaml\ntask: dflt\n")
    assert load(folder, "dflt", shots=2).shots == 2
    resolved = Registry([folder], builtins=False).resolve(["dflt|2"])
    assert resolved.tasks[0].num_fewshot == 2


def test_process_results_replaces_metrics(folder):
    write(
        folder,
        "p.yaml",
        """\
        include: _base.yaml
        task: pr
        process_results: !function utils.process_results
        metric_list:
          - metric: first_is_best
            aggregation: mean
            higher_is_better: true
        """,
    )
    cfg = load(folder, "pr").config
    assert callable(cfg.process_results)
    assert cfg.process_results({}, [(-1.0, False), (-2.0, False)]) == {"first_is_best": 1.0}


def test_generation_defaults_and_repeats(folder):
    write(
        folder,
        "g.yaml",
        """\
        include: _base.yaml
        task: gen
        output_type: generate_until
        doc_to_choice: null
        doc_to_target: word
        repeats: 3
        generation_kwargs:
          until: ["\\n"]
          max_gen_toks: 8
        """,
    )
    task = load(folder, "gen")
    doc = task.first_doc()
    assert doc.get_golds() == ["four"]
    assert doc.num_samples == 3
    assert task.config.generation_kwargs == {"until": ["\n"], "max_gen_toks": 8}
    assert [m.name for m in task.config.metrics] == ["exact_match"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("use_prompt: 'promptsource:x'", "use_prompt"),
        ("bogus_key: 1", "unknown key 'bogus_key'"),
        ("output_type: guess", "output_type"),
        ("repeats: 0", "repeats"),
        ("fewshot_config:\n  sampler: clever", "sampler"),
        ("metric_list: [{aggregation: mean}]", "metric_list"),
        ("process_docs: !function nowhere.fn", "nowhere"),
    ],
)
def test_unsupported_or_bad_keys_fail_clearly(folder, extra, message):
    write(folder, "bad.yaml", f"include: _base.yaml\ntask: bad\n{extra}\n")
    with pytest.raises(TaskConfigError, match=message) as err:
        load(folder, "bad")
    assert str(folder) in str(err.value)


def test_decontamination_keys_only_warn(folder, caplog):
    write(folder, "w.yaml", "include: _base.yaml\ntask: warn\nshould_decontaminate: true\n")
    with caplog.at_level(logging.WARNING):
        load(folder, "warn")
    assert "should_decontaminate" in caplog.text


def test_yaml_syntax_error_names_the_line(folder):
    (folder / "broken.yaml").write_text("task: broken\ndoc_to_text: [unclosed\n", encoding="utf-8")
    with pytest.raises(UnknownNameError, match=r"broken.yaml: line \d"):
        load(folder, "broken")


class ConstantLM(LM):
    """Loglikelihoods that decrease along the choices (or increase, when `reverse`)."""

    def __init__(self, reverse=False):
        self.reverse = reverse

    def loglikelihood(self, requests):
        from assay.requests.types import LoglikelihoodResult

        sign = 1.0 if self.reverse else -1.0
        return [LoglikelihoodResult(sign * float(r.continuation.strip()), False) for r in requests]

    def loglikelihood_rolling(self, requests):
        raise NotImplementedError

    def generate_until(self, requests):
        raise NotImplementedError

    def identity(self):
        return {"backend": "constant", "reverse": self.reverse}


def test_process_results_values_are_aggregated_by_the_metric_list(folder):
    from assay.run.api import evaluate

    write(
        folder,
        "p.yaml",
        """\
        include: _base.yaml
        task: pr
        process_results: !function utils.process_results
        metric_list:
          - metric: first_is_best
            aggregation: mean
            higher_is_better: true
        """,
    )
    for reverse, expected in ((False, 1.0), (True, 0.0)):
        results = evaluate(
            ConstantLM(reverse), ["pr"], include_path=[folder], cache=False, show_progress=False
        )
        assert results["results"]["pr"]["first_is_best,none"] == expected
        assert results["higher_is_better"]["pr"] == {"first_is_best": True}


def test_function_modules_have_the_same_name_in_every_process(folder):
    # datasets caches process_docs results under a fingerprint of the function, module
    # name included: a name that changed per process made every run recompute and re-store.
    import subprocess
    import sys

    code = (
        "from pathlib import Path; from assay.tasks._yaml_io import FunctionRef; "
        f"print(FunctionRef('utils.process_docs', Path({str(folder / 'task.yaml')!r}))"
        ".resolve().__module__)"
    )
    names = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(names) == 1 and next(iter(names)).startswith("assay_user_")


def test_a_misspelt_key_gets_a_did_you_mean(folder):
    write(folder, "typo.yaml", "include: _base.yaml\ntask: typo\ndoc_to_choise: options\n")
    with pytest.raises(
        TaskConfigError, match=r"unknown key 'doc_to_choise'\. Did you mean 'doc_to_choice'"
    ):
        load(folder, "typo")


def test_a_doc_to_target_naming_no_column_lists_the_columns_and_the_row_once(folder):
    write(folder, "nocol.yaml", "include: _base.yaml\ntask: nocol\ndoc_to_target: label\n")
    with pytest.raises(DataError) as err:
        load(folder, "nocol").first_doc()
    message = str(err.value)
    assert "doc_to_target 'label' names no column" in message
    assert "['answer', 'options', 'question', 'word']" in message
    assert message.count("Row:") == 1 and "not an index into" not in message


def test_a_doc_to_choice_naming_no_column_says_so(folder):
    write(folder, "nochoice.yaml", "include: _base.yaml\ntask: nochoice\ndoc_to_choice: choices\n")
    with pytest.raises(DataError, match="doc_to_choice 'choices' names no column"):
        load(folder, "nochoice").first_doc()
