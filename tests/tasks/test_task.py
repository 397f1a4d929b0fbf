"""Task: local data files of every format, filters, dedupe, splits, per-doc values, get_docs."""

from __future__ import annotations

import csv
import json
import random

import pytest

from assay.compat.lighteval.fewshot import get_docs
from assay.doc import Doc, SamplingMethod
from assay.errors import DataError, TaskConfigError
from assay.tasks.config import TaskConfig
from assay.tasks.task import Task

ROWS = [{"q": f"question {i}", "a": f"answer {i}", "label": i % 3} for i in range(12)]


def prompt(row, task_name):
    return Doc(row["q"], choices=[row["a"], "wrong"], gold_index=0)


def write(tmp_path, fmt, name, rows):
    path = tmp_path / f"{name}.{fmt}"
    if fmt == "json":
        path.write_text(json.dumps(rows), encoding="utf-8")
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif fmt == "csv":
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:
        import pandas as pd

        pd.DataFrame(rows).to_parquet(path)
    return str(path)


def local_task(tmp_path, fmt="jsonl", splits=("validation",), rows=ROWS, **kwargs):
    files = {s: write(tmp_path, fmt, s, rows) for s in splits}
    builder = {"jsonl": "json"}.get(fmt, fmt)
    cfg = TaskConfig(
        name="local",
        prompt_function=kwargs.pop("prompt_function", prompt),
        hf_repo=builder,
        hf_data_files=files,
        metrics=["acc"],
        **kwargs,
    )
    return Task(cfg)


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv", "parquet"])
def test_loads_local_files_of_every_format(tmp_path, fmt):
    task = local_task(tmp_path, fmt)
    docs = list(task.eval_docs())
    assert len(docs) == len(ROWS)
    assert docs[3].query == "question 3"
    assert docs[3].get_golds() == ["answer 3"]
    assert docs[3].id == "3" and docs[3].task_name == "local"
    assert docs[3].row["label"] == 0
    assert docs[3].sampling_methods == [SamplingMethod.LOGPROBS]


def test_hf_filter_applies_to_every_split(tmp_path):
    task = local_task(tmp_path, splits=("train", "validation"), hf_filter=lambda r: r["label"] == 1)
    assert [r["q"] for r in task.eval_rows()] == [f"question {i}" for i in (1, 4, 7, 10)]
    assert all(r["label"] == 1 for r in task.fewshot_rows())


def test_must_remove_duplicate_docs(tmp_path):
    rows = [{"q": "same", "a": "x", "label": 0}] * 3 + [{"q": "other", "a": "x", "label": 0}]
    kept = list(local_task(tmp_path, rows=rows, must_remove_duplicate_docs=True).eval_docs())
    assert [d.query for d in kept] == ["same", "other"]
    assert [d.id for d in kept] == ["0", "3"]
    assert len(list(local_task(tmp_path, rows=rows).eval_docs())) == 4


def test_several_evaluation_splits_are_evaluated_in_order(tmp_path):
    task = local_task(
        tmp_path, splits=("validation", "test"), evaluation_splits=("validation", "test")
    )
    assert len(task.eval_rows()) == 2 * len(ROWS)
    assert task.eval_rows()[len(ROWS)]["q"] == "question 0"


def test_a_missing_evaluation_split_names_the_available_ones(tmp_path):
    task = local_task(tmp_path, splits=("train",))
    with pytest.raises(DataError, match=r"available splits: \['train'\]"):
        task.load()


def test_missing_data_files_are_a_data_error(tmp_path):
    cfg = TaskConfig(
        name="gone",
        prompt_function=prompt,
        hf_repo="json",
        hf_data_files={"validation": str(tmp_path / "nope.jsonl")},
        metrics=["acc"],
    )
    with pytest.raises(DataError, match="gone"):
        Task(cfg).load()


def test_original_num_docs_checks_the_data(tmp_path):
    with pytest.raises(DataError, match="original_num_docs"):
        local_task(tmp_path, original_num_docs=5).load()


@pytest.mark.parametrize(
    ("available", "expected"),
    [
        (("train", "validation", "test"), "train"),
        (("validation", "test"), "validation"),
        (("test",), "test"),
    ],
)
def test_fewshot_split_falls_back_train_validation_test(tmp_path, available, expected):
    task = local_task(tmp_path, splits=available, evaluation_splits=(available[-1],))
    assert task.fewshot_split() == expected


def test_explicit_fewshot_split_wins(tmp_path):
    task = local_task(tmp_path, splits=("train", "validation"), few_shots_split="validation")
    assert task.fewshot_split() == "validation"


def test_per_doc_values_win_over_task_defaults(tmp_path):
    def own(row, task_name):
        doc = Doc(row["q"], choices=["x"], gold_index=0)
        if row["label"] == 0:
            doc.generation_size, doc.stop_sequences, doc.num_samples = 5, ["STOP"], 3
        return doc

    task = local_task(
        tmp_path,
        prompt_function=own,
        generation_size=64,
        stop_sequence=["\n"],
        num_samples=2,
    )
    docs = list(task.eval_docs())
    mine, default = docs[0], docs[1]
    assert (mine.generation_size, mine.stop_sequences, mine.num_samples) == (5, ["STOP"], 3)
    assert (default.generation_size, default.stop_sequences, default.num_samples) == (
        64,
        ["\n"],
        2,
    )


def doc_with(**fields):
    """A prompt function whose docs set `fields` on row 2 only."""

    def prompt_fn(row, task_name):
        doc = prompt(row, task_name)
        if row["q"] == "question 2":
            for name, value in fields.items():
                setattr(doc, name, value)
        return doc

    return prompt_fn


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"use_logits": True}, "use_logits=True"),
        ({"sampling_methods": [SamplingMethod.GENERATIVE]}, "sampling_methods \\['GENERATIVE'\\]"),
        (
            {"sampling_methods": [SamplingMethod.LOGPROBS, SamplingMethod.PERPLEXITY]},
            "'PERPLEXITY'",
        ),
    ],
)
def test_doc_fields_assay_cannot_honour_are_rejected_naming_task_and_row(tmp_path, fields, message):
    task = local_task(tmp_path, prompt_function=doc_with(**fields))
    with pytest.raises(TaskConfigError, match=message) as err:
        list(task.eval_docs())
    assert "task 'local'" in str(err.value) and "row 2" in str(err.value)


def test_sampling_methods_matching_the_output_type_are_accepted(tmp_path):
    task = local_task(tmp_path, prompt_function=doc_with(sampling_methods=["LOGPROBS"]))
    assert len(list(task.eval_docs())) == len(ROWS)


def test_docs_images_become_doc_images_and_bad_ones_name_the_row(tmp_path):
    from PIL import Image

    from assay.errors import DataError
    from assay.images import DocImage

    picture = Image.new("RGB", (3, 2), "red")
    task = local_task(tmp_path, prompt_function=doc_with(images=[picture, None]))
    docs = {doc.id: doc for doc in task.eval_docs()}
    assert docs["2"].images == [DocImage(picture)]
    assert isinstance(docs["2"].images[0], DocImage) and docs["1"].images is None
    bad = local_task(tmp_path, prompt_function=doc_with(images=[picture, 7]))
    with pytest.raises(DataError, match="row 2: images: image 1 is a int"):
        list(bad.eval_docs())


def test_prompt_function_may_skip_rows_and_must_return_docs(tmp_path):
    skip_odd = lambda row, name: prompt(row, name) if row["label"] != 1 else None  # noqa: E731
    assert len(list(local_task(tmp_path, prompt_function=skip_odd).eval_docs())) == 8
    with pytest.raises(TaskConfigError, match="not a Doc"):
        list(local_task(tmp_path, prompt_function=lambda r, n: "text").eval_docs())
    with pytest.raises(DataError, match="row 0"):
        list(local_task(tmp_path, prompt_function=lambda r, n: r["nope"]).eval_docs())


def lighteval_order(n, seed=42):
    """The order lighteval's get_docs puts n docs in: random.Random(seed).shuffle."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def test_get_docs_shuffles_as_lighteval_and_takes_max_samples(tmp_path):
    task = local_task(tmp_path)
    expected = [str(i) for i in lighteval_order(len(ROWS))]
    assert [d.id for d in get_docs(task, 5)] == expected[:5]
    assert [d.id for d in get_docs(task)] == expected
    assert [d.id for d in get_docs(task, 5)] == expected[:5]  # the same subset every call
    assert [d.id for d in get_docs(task, 5, seed=7)] == [str(i) for i in lighteval_order(12, 7)][:5]
    assert len(get_docs(task, 0.5)) == 6
    # seed=None: the first docs, as lm-eval's --limit.
    assert [d.id for d in get_docs(task, 3, seed=None)] == ["0", "1", "2"]


def test_get_docs_shuffles_the_docs_the_prompt_function_kept(tmp_path):
    skip_odd = lambda row, name: prompt(row, name) if row["label"] != 1 else None  # noqa: E731
    kept = [str(i) for i in range(len(ROWS)) if ROWS[i]["label"] != 1]
    task = local_task(tmp_path, prompt_function=skip_odd)
    assert [d.id for d in get_docs(task, 3)] == [kept[i] for i in lighteval_order(len(kept))][:3]


def test_effective_num_docs_is_the_default_limit(tmp_path):
    task = local_task(tmp_path, effective_num_docs=4)
    assert len(task.doc_indices()) == 4
    assert len(task.doc_indices(10)) == 10


def test_custom_dataset_loader_receives_metadata(tmp_path):
    seen = {}

    def loader(**kwargs):
        seen.update(kwargs)
        return {"validation": ROWS[:2]}

    cfg = TaskConfig(
        name="custom",
        prompt_function=prompt,
        dataset_loader=loader,
        metadata={"lang": "fr"},
        metrics=["acc"],
    )
    cfg.validate()
    assert len(Task(cfg).eval_rows()) == 2
    assert seen == {"lang": "fr"}


_OFFLINE = """
from assay.errors import DataError
from assay.tasks.registry import Registry
from assay.tasks.task import Task
try:
    Task(Registry().get("boolq")).load()
except DataError as exc:
    print(exc)
"""


def test_offline_error_of_a_built_in_gives_the_load_call_and_a_local_files_recipe_that_works(
    tmp_path, monkeypatch
):
    import os
    import subprocess
    import sys

    from assay.tasks.registry import Registry

    env = {**os.environ, "HF_HOME": str(tmp_path / "empty_cache"), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", _OFFLINE], env=env, capture_output=True, text=True, timeout=120
    )
    message = done.stdout
    assert "datasets.load_dataset('aps/super_glue', 'boolq')" in message
    # the recipe speaks to command-line and Python callers alike
    assert "--custom-tasks local_tasks.py" in message and 'custom_tasks="local_tasks.py"' in message
    recipe = message.split("# local_tasks.py\n", 1)[1].split("\nCause:")[0]
    (tmp_path / "local_tasks.py").write_text(
        "\n".join(line.removeprefix("  ") for line in recipe.splitlines()), encoding="utf-8"
    )
    (tmp_path / "boolq").mkdir()
    for split in ("validation", "train"):
        rows = [{"passage": f"{split} p{i}", "question": f"q{i}", "label": i % 2} for i in range(3)]
        (tmp_path / "boolq" / f"{split}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
        )
    monkeypatch.chdir(tmp_path)
    task = Task(Registry([], [tmp_path / "local_tasks.py"]).get("boolq"))
    assert [r["passage"] for r in task.eval_rows()] == [
        "validation p0",
        "validation p1",
        "validation p2",
    ]


def test_fewshot_count_rule_in_order():
    from assay.tasks.task import fewshot_count

    config = TaskConfig(name="t", prompt_function=lambda row, _: Doc("q"), num_fewshots=3)
    assert fewshot_count(config) == 3  # the task's own default
    assert fewshot_count(config, run=1) == 1  # --num-fewshot beats the default
    assert fewshot_count(config, task_string=5, run=1) == 5  # `t|5` beats --num-fewshot
    assert fewshot_count(config, task_string=0, run=2) == 0  # an explicit 0 is a count
    fixed = TaskConfig(
        name="z", prompt_function=lambda row, _: Doc("q"), num_fewshots=0, num_fewshots_fixed=True
    )
    assert fewshot_count(fixed, task_string=5, run=2) == 0  # lm-eval YAML's num_fewshot: 0
    assert Task(config, num_fewshot=fewshot_count(config, 5, 1)).shots == 5
