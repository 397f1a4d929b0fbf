"""Batch sizing from free memory and the out-of-memory back-off (assay/models/hf/memory.py)."""

from __future__ import annotations

import pytest
import torch

from assay.errors import ModelError
from assay.models.hf.memory import BatchSizer, is_out_of_memory, run_with_backoff

CPU = torch.device("cpu")


def sizer(batch_size="auto", max_batch_size=64, free=1_000_000) -> BatchSizer:
    return BatchSizer(batch_size, max_batch_size, CPU, free_memory=lambda device: free)


def test_auto_fits_half_the_free_memory_under_the_ceiling():
    s = sizer(free=1_000_000)
    assert s.size_for(row_bytes=10_000) == 50  # 500 kB budget / 10 kB rows
    assert s.size_for(row_bytes=1) == 64  # capped by max_batch_size
    assert s.size_for(row_bytes=10**9) == 1  # at least one row
    assert s.chosen == [50, 64, 1]
    assert sizer(batch_size=8).size_for(row_bytes=10**9) == 8  # a fixed size is not sized


def test_out_of_memory_halves_the_batch_and_caps_later_ones():
    seen: list[int] = []

    def run(rows):
        seen.append(len(rows))
        if len(rows) > 2:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return [r * 10 for r in rows]

    s = sizer(batch_size=4)
    items = list(range(9))
    got = run_with_backoff(items, run, length=lambda r: r + 1, row_bytes=lambda n: n, sizer=s)
    assert got == [r * 10 for r in items]  # every row, in the caller's order
    assert seen[:3] == [4, 2, 2]  # the first batch failed and ran as two halves
    assert all(n <= 2 for n in seen[1:])  # no later batch tried more than fitted
    assert s.ceiling == 2


def test_a_single_row_that_does_not_fit_is_a_clear_error():
    def run(rows):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8GB")

    with pytest.raises(ModelError, match="out of memory on a single row of 5 tokens"):
        run_with_backoff([4], run, length=lambda r: r + 1, row_bytes=lambda n: n, sizer=sizer(1))


def test_other_errors_are_not_mistaken_for_out_of_memory():
    def run(rows):
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        run_with_backoff([1, 2], run, length=lambda r: r, row_bytes=lambda n: n, sizer=sizer(2))
    assert not is_out_of_memory(ValueError("out of memory"))
    assert is_out_of_memory(RuntimeError("CUDA out of memory"))
