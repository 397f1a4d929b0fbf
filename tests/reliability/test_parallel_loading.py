"""Tasks load their data in parallel threads without racing inside datasets."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from toy_tasks import write_data, write_task

from assay.tasks.registry import Registry
from assay.tasks.task import Task


def _drop_progress_locks(monkeypatch) -> type:
    from datasets.utils.tqdm import tqdm as datasets_tqdm

    for cls in datasets_tqdm.__mro__:
        if "_lock" in vars(cls):
            monkeypatch.delattr(cls, "_lock")
    return datasets_tqdm


def test_the_progress_lock_is_kept_through_thread_map(monkeypatch):
    # datasets' thread_map deletes the tqdm class lock on exit when it had to create it, so the
    # first loads running in parallel threads fail with AttributeError '_lock'. Loading first
    # gives the class a lock of its own, which thread_map then restores instead of deleting.
    from tqdm.contrib.concurrent import ensure_lock

    from assay.tasks.task import _keep_progress_lock

    datasets_tqdm = _drop_progress_locks(monkeypatch)
    with ensure_lock(datasets_tqdm):
        pass
    assert not hasattr(datasets_tqdm, "_lock")  # the failure mode
    _keep_progress_lock()
    with ensure_lock(datasets_tqdm):
        pass
    assert hasattr(datasets_tqdm, "_lock")


def test_tasks_loading_in_parallel_threads_all_succeed(tmp_path, monkeypatch):
    _drop_progress_locks(monkeypatch)
    names = [f"par{i}" for i in range(4)]
    for i, name in enumerate(names):
        write_task(tmp_path / "tasks", name, data=write_data(tmp_path / name, prefix=f"{i}-"))
    registry = Registry([tmp_path / "tasks"], builtins=False)
    tasks = [Task(registry.get(name)) for name in names]
    with ThreadPoolExecutor(4) as pool:
        loaded = list(pool.map(lambda t: len(t.load().eval_rows()), tasks))
    assert loaded == [24, 24, 24, 24]
