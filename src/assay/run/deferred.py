"""The run's backend, built only when a request needs it.

A backend with weights describes itself without them (`LM.unloaded`): identity, capabilities,
provenance. The run works with that description, and the response cache answers what it
holds; the first request it cannot answer builds the backend. A rerun served entirely from the
cache so never loads the weights.

`prefetch` starts the build in a background thread while the run reads its data, renders prompts
and plans requests (loading weights is mostly file reads and tensor copies, which release the
GIL); the first request then waits for it. An error of the background build is raised by that
request, unchanged, as the build in the foreground would raise it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from assay.errors import ModelError
from assay.models.base import LM, ModelProvenance, TokenCounter, Unloaded
from assay.prompts.chat import ChatTemplate
from assay.requests.types import (
    GenerateRequest,
    Generation,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingRequest,
    RollingResult,
)

log = logging.getLogger(__name__)

OVERLAP_ENV = "ASSAY_OVERLAP_LOAD"
"""Set to 0 to build the backend only at the first request, after the run's planning (the
sequential start-up, for timing the overlap against: benchmarks/startup.py)."""


def overlap_enabled() -> bool:
    """Whether the backend may be built in the background (ASSAY_OVERLAP_LOAD is not 0)."""
    return os.environ.get(OVERLAP_ENV, "1").strip() != "0"


class DeferredBackend(LM):
    """`described` until a request needs the backend that `build` builds (once).

    What shapes prompts and results files (identity, capabilities, provenance) is always the
    description's, so it is the same whether or not the backend was built; running counters
    (batch sizes, prefix reuse, API usage, pacing) are the built backend's once there is one.
    """

    def __init__(
        self,
        described: Unloaded,
        build: Callable[[], LM],
        on_built: Callable[[], None] | None = None,
    ) -> None:
        self.described, self._build = described, build
        self.on_built = on_built
        """Run once in the caller's thread when the backend is built, before its first request
        (the run's torch seed: the build may be what imports torch, possibly in the
        background, and the load may draw from torch's generator)."""
        self.built: LM | None = None
        """The backend, once a request needed it."""
        self._loader: threading.Thread | None = None
        self._loaded: LM | None = None
        self._failed: BaseException | None = None
        self.accepts_messages = described.accepts_messages
        self.accepts_images = described.accepts_images
        self.accepts_tools = described.accepts_tools
        self.max_length = described.max_length
        self.has_batch_api = described.has_batch_api
        self.batch_size = described.batch_size

    def prefetch(self) -> None:
        """Start building the backend in a background thread (once); `backend` waits for it.

        The thread is a daemon: Ctrl-C in the run ends the process without waiting for the load.
        """
        if self._loader is not None or self.built is not None:
            return
        log.info("loading the model in the background while the run plans its requests")
        self._loader = threading.Thread(target=self._load, name="assay-model-load", daemon=True)
        self._loader.start()

    def _load(self) -> None:
        try:
            self._loaded = self._build()
        except BaseException as exc:  # re-raised by the request that needs the backend
            self._failed = exc

    def _take(self) -> LM:
        """The backend: the background build's (waited for) when one was started, else built."""
        if self._loader is None:
            log.info("requests the response cache cannot answer: loading the model")
            return self._build()
        # A timed wait keeps the main thread responsive to Ctrl-C on every platform.
        while self._loader.is_alive():
            self._loader.join(0.2)
        if self._failed is not None:
            failed, self._failed, self._loader = self._failed, None, None
            raise failed.with_traceback(failed.__traceback__)
        assert self._loaded is not None
        return self._loaded

    def backend(self) -> LM:
        """The built backend (built now on first use, or waited for when `prefetch` started it),
        refused if its identity is not the description's: the cache and the output folder were
        checked under that one."""
        if self.built is not None:
            return self.built
        built = self._take()
        expected, actual = self.described.identity(), built.identity()
        if actual != expected:
            fields = sorted(
                k for k in expected.keys() | actual.keys() if expected.get(k) != actual.get(k)
            )
            shown = "; ".join(
                f"{k}: {expected.get(k)!r} read, {actual.get(k)!r} loaded" for k in fields
            )
            raise ModelError(
                f"the model loaded is not the one its files described ({shown}), so answers "
                "read from the response cache under the described identity may be another "
                "model's. This is a bug in assay: please report it with the model args."
            )
        self.built = built
        if self.on_built is not None:
            self.on_built()
        return built

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        return self.backend().loglikelihood(requests)

    def loglikelihood_rolling(self, requests: Sequence[RollingRequest]) -> list[RollingResult]:
        return self.backend().loglikelihood_rolling(requests)

    def generate_until(self, requests: Sequence[GenerateRequest]) -> Sequence[str | Generation]:
        return self.backend().generate_until(requests)

    def identity(self) -> dict[str, Any]:
        return self.described.identity()

    def provenance(self) -> ModelProvenance:
        return self.described.provenance()

    def chat_template(self) -> ChatTemplate | None:
        return self.described.chat_template()

    def token_counter(self) -> TokenCounter | None:
        return self.described.token_counter()

    @property
    def batch_sizes(self) -> list[int]:
        return self.built.batch_sizes if self.built is not None else []

    def scoring_choice(self) -> dict[str, Any] | None:
        return self.built.scoring_choice() if self.built is not None else None

    def prefix_cache_stats(self) -> dict[str, int] | None:
        return self.built.prefix_cache_stats() if self.built is not None else None

    def live_status(self) -> str | None:
        return self.built.live_status() if self.built is not None else None

    def close(self) -> None:
        if self.built is not None:
            self.built.close()

    def usage_stats(self) -> dict[str, int | float | str | None] | None:
        return self.built.usage_stats() if self.built is not None else None
