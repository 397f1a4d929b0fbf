"""Batch sizes that fit in memory: estimated from the model's shape, halved on out-of-memory."""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from assay.errors import ModelError
from assay.requests.batching import batches, split_padding

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

MEMORY_FRACTION = 0.5
"""Share of the free memory a batch may use; the rest absorbs allocator slack and estimate error."""


@dataclass(frozen=True, slots=True)
class ModelShape:
    """The sizes that decide how much memory a batch needs."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    dtype_bytes: int

    @classmethod
    def of(cls, model: Any) -> ModelShape:
        """Read the shape from a transformers model's (text) config."""
        config = getattr(model.config, "text_config", None) or model.config
        hidden = int(getattr(config, "hidden_size", 0) or getattr(config, "n_embd", 1024))
        heads = int(getattr(config, "num_attention_heads", 0) or getattr(config, "n_head", 16))
        return cls(
            layers=int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layer", 24)),
            hidden=hidden,
            intermediate=int(getattr(config, "intermediate_size", None) or 4 * hidden),
            heads=heads,
            kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
            head_dim=int(getattr(config, "head_dim", None) or hidden // heads),
            vocab=int(getattr(config, "vocab_size", None) or 32000),
            dtype_bytes=next(model.parameters()).element_size(),
        )

    def activation_bytes(self, tokens: int, attention_len: int) -> int:
        """Peak working memory of one forward pass over `tokens` query tokens of one row."""
        per_token = (6 * self.hidden + 3 * self.intermediate) * self.dtype_bytes
        attention = 2 * self.heads * tokens * attention_len * 4
        return tokens * per_token + attention

    def kv_bytes(self, tokens: int) -> int:
        """Key/value cache of one row holding `tokens` tokens."""
        return 2 * self.layers * self.kv_heads * self.head_dim * tokens * self.dtype_bytes

    def scoring_row_bytes(self, length: int, past: int = 0) -> int:
        """One packed loglikelihood row: activations, mask and float32 log-probs of its positions.

        `past` cached prefix positions add their keys and values (copied per row as the row's
        own are appended) and the attention to them.
        """
        return (
            self.activation_bytes(length, past + length)
            + length * (past + length)
            + 3 * length * self.vocab * 4
            + self.kv_bytes(past + length) * (past > 0)
        )

    def generation_row_bytes(self, context: int, new_tokens: int) -> int:
        """One generation row: prefill activations plus the KV cache at its full length."""
        prefill = self.activation_bytes(context, context) + 2 * self.vocab * 4
        return prefill + self.kv_bytes(context + new_tokens)


def free_memory_bytes(device: Any) -> int:
    """Memory that batches may still use on `device` (free VRAM, or available RAM).

    On CUDA that is what the driver reports free plus what PyTorch's caching allocator holds
    but no tensor uses: after the first large batch the allocator keeps its blocks, which the
    driver counts as taken, and batches would otherwise shrink for no reason.
    """
    import torch

    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(free + max(0, cached))
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    return 4 << 30


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` is an allocation failure (CUDA, MPS or CPU allocator)."""
    import torch

    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and (
        "out of memory" in text or "can't allocate memory" in text or "failed to allocate" in text
    )


class BatchSizer:
    """Rows per batch: a fixed number, or the most that fit in free memory ("auto").

    `row_bytes(length)` is the memory one row of that length needs. After an out-of-memory error
    the ceiling halves for the rest of the run. Sizes picked by "auto" are recorded in `chosen`.
    """

    def __init__(
        self,
        batch_size: int | str,
        max_batch_size: int,
        device: Any,
        free_memory: Callable[[Any], int] = free_memory_bytes,
    ) -> None:
        self.auto = batch_size == "auto"
        self.ceiling = max_batch_size if self.auto else int(batch_size)
        self.device = device
        self.free_memory = free_memory
        self.chosen: list[int] = []

    def size_for(self, row_bytes: int) -> int:
        """Rows per batch for rows needing `row_bytes` each."""
        if not self.auto:
            return self.ceiling
        budget = int(self.free_memory(self.device) * MEMORY_FRACTION)
        size = max(1, min(self.ceiling, budget // max(1, row_bytes)))
        if not self.chosen or self.chosen[-1] != size:
            self.chosen.append(size)
        return size

    def lower(self, size: int) -> None:
        """Never again use more than `size` rows (after an out-of-memory error)."""
        self.ceiling = max(1, min(self.ceiling, size))
        if self.auto:
            self.chosen.append(self.ceiling)


def run_with_backoff(
    items: Sequence[T],
    run: Callable[[Sequence[T]], Sequence[R]],
    length: Callable[[T], int],
    row_bytes: Callable[[int], int],
    sizer: BatchSizer,
    group: Callable[[T], Hashable] | None = None,
    pass_overhead: int | None = None,
) -> list[R]:
    """Length-sorted batches through `run`, results in the original order.

    With `pass_overhead` (a forward pass's fixed cost in tokens), a batch whose rows differ much
    in length runs as sub-batches that pad less (`split_padding`).
    A batch that runs out of memory is split in halves (and later batches are capped) instead of
    failing the run; only a single row that does not fit is an error.
    """
    out: list[Any] = [None] * len(items)

    def size(longest: int) -> int:
        return sizer.size_for(row_bytes(longest))

    def attempt(indices: Sequence[int], members: Sequence[T]) -> None:
        try:
            results = run(members)
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            _release_memory(sizer.device)
            if len(members) == 1:
                raise ModelError(
                    "--model hf: out of memory on a single row of "
                    f"{length(members[0])} tokens; lower max_length or use a larger device."
                ) from exc
            half = len(members) // 2
            log.warning(
                "out of memory with %d rows per batch; retrying with %d", len(members), half
            )
            sizer.lower(half)
            attempt(indices[:half], members[:half])
            attempt(indices[half:], members[half:])
            return
        for index, result in zip(indices, results, strict=True):
            out[index] = result

    for batch in batches(items, length, size, group):
        if pass_overhead is None:
            attempt(batch.indices, batch.items)
            continue
        start = 0
        for part in split_padding([length(item) for item in batch.items], pass_overhead):
            attempt(batch.indices[start : start + part], batch.items[start : start + part])
            start += part
    return out


@contextmanager
def one_cpu_thread(device: Any, when: bool = True) -> Iterator[None]:
    """Run the block on one intra-op thread when `when` and the device is the CPU.

    For small passes, threads cost more to synchronise than they save, and many times more when
    other processes share the cores (each barrier waits for a descheduled thread).
    """
    import torch

    threads = torch.get_num_threads()
    if not when or device.type != "cpu" or threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _release_memory(device: Any) -> None:
    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
