"""process_docs mapped lazily: only the blocks read, and the rows datasets' full map gives."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from assay.doc import Doc
from assay.errors import DataError
from assay.tasks import _lazy_docs
from assay.tasks._lazy_docs import LazyMapped, rowwise_maps
from assay.tasks.config import TaskConfig
from assay.tasks.task import Task

N_ROWS = 2500  # three blocks


def _rows():
    # "score" is an int in the first block and a float after it: the full map types the
    # later rows by the first writer batch's schema, and so must the lazy one.
    return [
        {"q": f"question {i}", "label": i % 4, "score": i if i < 1000 else i + 0.5}
        for i in range(N_ROWS)
    ]


@pytest.fixture
def split(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    return datasets.load_dataset("json", data_files=str(path), split="train")


calls = {"n": 0}


def _upper(row):
    calls["n"] += 1
    return {"query": row["q"].upper(), "gold": row["label"], "half": row["score"] / 2}


def process_map(dataset):
    return dataset.map(_upper)


def process_two_maps(dataset):
    return dataset.map(_upper).map(lambda r: {"query": r["query"] + "?"}, remove_columns=["q"])


def process_filter(dataset):
    return dataset.map(_upper).filter(lambda r: r["gold"] != 0)


def process_batched(dataset):
    return dataset.map(lambda b: {"q": [q + "!" for q in b["q"]]}, batched=True)


def process_len(dataset):
    print(len(dataset))
    return dataset.map(_upper)


@pytest.mark.parametrize(
    "function,steps",
    [(process_map, 1), (process_two_maps, 2), (process_filter, None), (process_batched, None),
     (process_len, None), (lambda d: list(d), None)],
)  # fmt: skip
def test_only_chains_of_row_wise_maps_are_lazy(function, steps):
    found = rowwise_maps(function)
    assert (len(found) if found is not None else None) == steps


@pytest.mark.parametrize("function", [process_map, process_two_maps])
def test_lazy_rows_equal_the_full_map_in_any_order(split, function):
    full = function(split).to_list()  # datasets' own map over the whole split
    lazy = LazyMapped(split, rowwise_maps(function), "t", keep=True)
    assert len(lazy) == len(full)
    for i in [2499, 3, 1500, 999, 1000, 0, 2000]:
        assert lazy[i] == full[i]
    assert lazy[1001]["half"] == 500.75 and isinstance(full[5]["half"], float)
    assert [lazy[i] for i in range(N_ROWS)] == full


def _shout(row):
    return {"query": row["q"].upper()}


def process_shout(dataset):
    return dataset.map(_shout)


def test_mapped_blocks_are_cached_on_disk_and_read_by_the_next_run(split):
    full = split.map(_shout, keep_in_memory=True).to_list()
    folder = Path(split.cache_files[0]["filename"]).parent
    before = set(folder.glob("cache-*.arrow"))
    first = LazyMapped(split, rowwise_maps(process_shout), "t")
    assert [first[i] for i in range(N_ROWS)] == full
    written = set(folder.glob("cache-*.arrow")) - before
    assert len(written) == 3  # one file per block
    stamps = {path: path.stat().st_mtime_ns for path in written}
    again = LazyMapped(split, rowwise_maps(process_shout), "t")  # a later run of the task
    assert [again[i] for i in range(N_ROWS)] == full
    assert set(folder.glob("cache-*.arrow")) - before == written
    assert {path: path.stat().st_mtime_ns for path in written} == stamps


def test_blocks_are_mapped_in_memory_where_the_cache_cannot_be_written(split, monkeypatch):
    full = split.map(_shout, keep_in_memory=True).to_list()
    real_map = datasets.Dataset.map
    refused = []

    def no_disk(self, function=None, *args, keep_in_memory=False, **kwargs):
        if not keep_in_memory:
            refused.append(True)
            raise PermissionError(13, "Permission denied", "cache.arrow")
        return real_map(self, function, *args, keep_in_memory=True, **kwargs)

    monkeypatch.setattr(datasets.Dataset, "map", no_disk)
    lazy = LazyMapped(split, rowwise_maps(process_shout), "t")
    assert [lazy[i] for i in range(N_ROWS)] == full
    assert len(refused) == 3


def _task(tmp_path, process_docs, **kwargs):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    cfg = TaskConfig(
        name="lazy",
        prompt_function=lambda row, name: Doc(row["query"], choices=["a", "b"], gold_index=0),
        hf_repo="json",
        hf_data_files={"validation": str(path)},
        evaluation_splits=["validation"],
        process_docs=process_docs,
        metrics=["acc"],
        **kwargs,
    )
    return Task(cfg)


def test_limit_one_maps_one_block_and_counts_every_row(tmp_path):
    task = _task(tmp_path, process_map)
    calls["n"] = 0
    ids = task.doc_indices(1)
    [(i, doc)] = list(task.docs(ids))
    assert (i, doc.query) == (0, "QUESTION 0")
    assert calls["n"] == _lazy_docs.BLOCK
    assert len(task.eval_rows()) == N_ROWS and task.doc_indices(None) == list(range(N_ROWS))


def test_few_shot_pool_from_the_evaluated_split_is_mapped_lazily_too(tmp_path):
    task = _task(tmp_path, process_map, few_shots_split="validation", few_shots_select="first_n")
    task.shots = 2
    calls["n"] = 0
    [(_, doc)] = list(task.docs([0]))
    assert [d.query for d in doc.fewshot_samples] == ["QUESTION 1", "QUESTION 2"]
    # The pool's first block is the eval rows' first block: mapped once, then read back from
    # datasets' cache.
    assert calls["n"] == _lazy_docs.BLOCK


def test_other_process_docs_run_over_the_whole_split(tmp_path):
    task = _task(tmp_path, process_filter)
    assert not isinstance(task.eval_rows(), LazyMapped)
    assert len(task.eval_rows()) == N_ROWS * 3 // 4
    assert next(task.eval_docs()).query == "QUESTION 1"


def test_a_failing_lazy_map_names_the_task_and_split(tmp_path):
    def broken(row):
        raise KeyError("missing")

    task = _task(tmp_path, lambda d: d.map(broken))
    with pytest.raises(DataError, match=r"lazy.*split 'validation'.*process_docs failed.*missing"):
        list(task.eval_docs())
