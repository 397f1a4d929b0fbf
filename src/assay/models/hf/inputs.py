"""Model inputs beside the tokens that a request brings (a multimodal request's pixel values).

The scorer and the generator batch token rows; a row's extra inputs travel with it and are
joined along the first dimension for the rows of a batch, in row order (what LLaVA-style models
expect: the images of every row, one after the other, matched to the image tokens in order).
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, eq=False, slots=True)
class ExtraInputs:
    """One request's inputs besides its tokens."""

    key: Hashable
    """Identity of the inputs (the images' content hashes): requests whose tokens and key are
    equal are one input, computed once."""
    tensors: Mapping[str, Any]
    """Keyword arguments of the model's forward pass (pixel_values, image_sizes, ...)."""


def joined(inputs: Sequence[ExtraInputs | None], device: Any) -> dict[str, Any]:
    """The forward-pass keyword arguments of a batch whose rows carry `inputs` (None: none)."""
    import torch

    present = [i for i in inputs if i is not None]
    if not present:
        return {}
    names = list(dict.fromkeys(name for i in present for name in i.tensors))
    return {
        name: torch.cat([i.tensors[name] for i in present if name in i.tensors]).to(device)
        for name in names
    }


def cache_keyword(model: Any) -> str:
    """The forward keyword of `model`'s key/value cache: `cache` where transformers renamed it
    (passing the old `past_key_values` prints a FutureWarning on every call), else
    `past_key_values`."""
    model_class: Any = type(model)
    return _cache_keyword(model_class)


@functools.cache
def _cache_keyword(model_class: Any) -> str:
    import inspect

    try:
        parameters = inspect.signature(model_class.forward).parameters
    except (AttributeError, TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in parameters else "past_key_values"
