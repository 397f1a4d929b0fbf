"""Host-to-device copies of the small tensors each batch builds (token ids, masks, indices).

On CUDA a copy from ordinary (pageable) host memory blocks the host until it is done; from
pinned memory it is queued on the stream like a kernel, so the host goes on building the next
inputs while the device works. Elsewhere (CPU, MPS) the plain copy is all there is.
"""

from __future__ import annotations

from typing import Any


def pins(device: Any) -> bool:
    """Whether copies to `device` go through pinned host memory (CUDA devices)."""
    return getattr(device, "type", None) == "cuda"


def to_device(tensor: Any, device: Any) -> Any:
    """`tensor` (on the host) on `device`; on CUDA pinned first and copied without blocking.

    PyTorch's pinned-memory allocator keeps the pinned block alive until the queued copy has
    run, so the caller may drop its reference at once.
    """
    if tensor.device == device:
        return tensor
    if pins(device) and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)
