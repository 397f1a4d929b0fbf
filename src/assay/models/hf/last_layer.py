"""The last decoder layer's feed-forward block, run only at the positions whose logits are read.

Scoring reads logits at a few positions per row: those that predict continuation tokens (one
per row for a lettered multiple-choice question). Every layer but the last must run at every
position, since the next layer's attention reads their keys and values. The last layer's
feed-forward block, though, is position-wise and feeds only the final norm and the vocabulary
projection at its own position: where no logits are read, its output is never used. Running it
at the kept positions alone saves most of a layer per scoring pass (the feed-forward block holds
about four fifths of a typical layer's weights); the other positions get zeros, which nothing
reads.

`Scorer` turns this on only after its probe shows scores equal to plain forward passes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_FEED_FORWARD_NAMES = ("mlp", "feed_forward", "ffn")
"""Attribute names transformers' decoder layers give their feed-forward block."""


class LastFeedForward:
    """Hooks on the last layer's feed-forward block that run it on kept positions only.

    Outside `only(keep)` the block runs unchanged (generation, prefix passes, probes of the
    plain computation). Inside, an input of shape [rows, width, hidden] whose first two
    dimensions match `keep` is cut to the kept positions, and the output scattered back.
    """

    def __init__(self, module: Any) -> None:
        self.module = module
        self._keep: Any = None
        self._index: Any = None
        self._shape: Any = None
        self._handles = [
            module.register_forward_pre_hook(self._gather),
            module.register_forward_hook(self._scatter),
        ]

    @contextmanager
    def only(self, keep: Any, index: Any = None) -> Iterator[None]:
        """Within the block, run the feed-forward at the positions `keep` ([rows, width]) marks.

        `index` (optional) holds the same positions as indices into the flattened [rows * width],
        on the model's device: picking rows by index needs no count from the device, which a
        boolean mask does (on CUDA a wait for every pass queued so far).
        """
        self._keep, self._index = keep, index
        try:
            yield
        finally:
            self._keep = self._index = self._shape = None

    def remove(self) -> None:
        """Take the hooks off: the block runs at every position again."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _gather(self, module: Any, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        keep = self._keep
        self._shape = None
        if keep is None or not args or tuple(args[0].shape[:-1]) != tuple(keep.shape):
            return None
        hidden = args[0]
        self._shape = hidden.shape
        if self._index is not None:
            return (
                hidden.flatten(0, 1).index_select(0, self._index.to(hidden.device))[None],
                *args[1:],
            )
        return (hidden[keep.to(hidden.device)][None], *args[1:])

    def _scatter(self, module: Any, args: tuple[Any, ...], output: Any) -> Any:
        if self._shape is None:
            return None
        import torch

        if not isinstance(output, torch.Tensor):
            raise TypeError(f"{type(module).__name__} returned {type(output).__name__}")
        full = output.new_zeros((*self._shape[:-1], output.shape[-1]))
        if self._index is not None:
            index = self._index.to(output.device)  # a sharded model's last layer may sit elsewhere
            full.view(-1, output.shape[-1]).index_copy_(0, index, output[0])
        else:
            full[self._keep.to(output.device)] = output[0]
        return full


def last_feed_forward(model: Any) -> LastFeedForward | None:
    """Hooks on the feed-forward block of `model`'s last decoder layer, if it can be found.

    The decoder layers are the module list as long as the (text) config's num_hidden_layers,
    within the model's decoder; a last layer without a feed-forward block by a known name
    (or a model without such a list) gets none.
    """
    import torch

    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layers = getattr(text, "num_hidden_layers", None)
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
    if not layers or decoder is None:
        return None
    for module in decoder.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == layers:
            last = module[-1]
            for name in _FEED_FORWARD_NAMES:
                block = getattr(last, name, None)
                if isinstance(block, torch.nn.Module):
                    return LastFeedForward(block)
            return None
    return None
