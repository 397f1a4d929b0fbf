"""The transformers backend's CUDA-only decisions, checked on the CPU by construction.

No GPU is touched: device objects are only compared, and the CUDA memory probe, the allocator's
cache release and the out-of-memory error are replaced by fakes that record what they were asked.
"""

from __future__ import annotations

import pytest
import torch

from assay.models.hf import memory
from assay.models.hf.args import parse_hf_args
from assay.models.hf.memory import MEMORY_FRACTION, BatchSizer, run_with_backoff
from assay.models.hf.model import hf
from assay.models.hf.score import PASS_OVERHEAD_TOKENS, pass_overhead_tokens
from assay.models.hf.transfer import pins, to_device

CUDA = torch.device("cuda:0")
CPU = torch.device("cpu")


class HostTensor:
    """A host tensor that records how it was moved (pinning needs a GPU, so it is faked)."""

    device = CPU

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def pin_memory(self) -> HostTensor:
        self.calls.append(("pin_memory",))
        return self

    def to(self, device, non_blocking: bool = False) -> str:
        self.calls.append(("to", device, non_blocking))
        return "moved"


def test_copies_to_cuda_are_pinned_and_do_not_block():
    tensor = HostTensor()
    assert to_device(tensor, CUDA) == "moved"
    assert tensor.calls == [("pin_memory",), ("to", CUDA, True)]
    assert pins(CUDA) and pins(torch.device("cuda")) and not pins(CPU)
    # On the CPU nothing is copied or pinned.
    plain = torch.arange(3)
    assert to_device(plain, CPU) is plain


def test_other_devices_get_a_plain_copy():
    tensor = HostTensor()
    mps = torch.device("mps")
    to_device(tensor, mps)
    assert tensor.calls == [("to", mps, False)]


def test_free_cuda_memory_counts_what_the_allocator_caches(monkeypatch):
    gib = 2**30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (10 * gib, 80 * gib))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: 30 * gib)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 18 * gib)
    # 10 GiB the driver has free, plus 12 GiB reserved by PyTorch and held by no tensor.
    assert memory.free_memory_bytes(CUDA) == 22 * gib
    sizer = BatchSizer("auto", 64, CUDA)
    row = gib // 4
    assert sizer.size_for(row) == int(22 * gib * MEMORY_FRACTION) // row == 44


def test_cuda_out_of_memory_halves_the_batch_and_releases_the_cache(monkeypatch):
    released: list[torch.device] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: released.append(CUDA))
    free = [8 * 2**30]
    sizer = BatchSizer("auto", 64, CUDA, free_memory=lambda device: free[0])
    seen: list[int] = []

    def run(rows):
        seen.append(len(rows))
        if len(rows) > 8:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB")
        return [r + 1 for r in rows]

    items = list(range(100))
    got = run_with_backoff(items, run, length=lambda r: 10, row_bytes=lambda n: 2**26, sizer=sizer)
    assert got == [r + 1 for r in items]  # the task goes on: every row, in order
    # 4 GiB of budget fits 64 rows of 64 MiB; 64, 32 and 16 run out of memory, 8 fits.
    assert seen[:4] == [64, 32, 16, 8]
    first_batch = 64
    done, later = 0, []
    for n in seen:
        if done >= first_batch:
            later.append(n)
        elif n <= 8:
            done += n
    assert later == [8, 8, 8, 8, 4]  # later batches start at the lowered ceiling
    assert sizer.ceiling == 8 and sizer.chosen[0] == 64 and sizer.chosen[-1] == 8
    assert released and set(released) == {CUDA}  # the allocator's cache was emptied each time


def test_batches_split_by_padding_cost_on_the_cpu_only():
    # The pass cost was measured on the CPU; on a GPU batches stay whole.
    assert pass_overhead_tokens(CPU) == PASS_OVERHEAD_TOKENS
    assert pass_overhead_tokens(CUDA) is None
    assert pass_overhead_tokens(torch.device("mps")) is None


@pytest.mark.parametrize(
    ("given", "expected"),
    [("half", "float16"), ("float", "float32"), ("torch.bfloat16", "bfloat16"), ("auto", "auto")],
)
def test_dtype_names_lm_eval_accepts(given, expected):
    assert parse_hf_args({"pretrained": "m", "dtype": given}).dtype == expected


def test_dtype_auto_takes_the_checkpoint_dtype_as_transformers_does(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    saved = tmp_path / "bf16"
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16)
    model.save_pretrained(saved)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(saved)
    assert hf(pretrained=str(saved), device="cpu").identity()["dtype"] == "bfloat16"
    assert hf(pretrained=str(saved), device="cpu", dtype="float").identity()["dtype"] == "float32"
    assert hf(pretrained=str(tiny_model_dir), device="cpu").identity()["dtype"] == "float32"


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA"
)
def test_asking_for_cuda_without_a_gpu_is_refused_by_name(tiny_model_dir):
    from assay.errors import ModelError

    with pytest.raises(ModelError, match="device='cuda:1' is not available on this machine"):
        hf(pretrained=str(tiny_model_dir), device="CUDA:1")


def test_the_scorer_takes_the_pass_cost_of_its_device(tiny_model_dir):
    lm = hf(pretrained=str(tiny_model_dir), device="cpu", dtype="float32")
    assert lm.scorer.pass_overhead == PASS_OVERHEAD_TOKENS
