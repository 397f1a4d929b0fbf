"""The run's model described before its data are read, and its weights loading meanwhile.

Describing the `hf` backend (`LM.unloaded`) imports torch and transformers and builds the
model's skeleton; the weights loaded in the background only after that, which the run did once
every task's data were read. For a backend slow to describe (`LM.slow_to_describe`), `start`
reads the description as soon as the run holds its lock (the settings and tasks checked, a bad
name refused in seconds as before), and where no response cache can answer the run's requests
(no cache, or one that does not exist yet) starts loading the weights in a background thread at
once, so the load runs beside the data loading as well as the request planning.

The description is read in the run's own thread, not beside the data loading: the libraries
involved (torch, transformers, datasets) import each other, and two threads importing them at
once can hand one a half-initialised module (datasets' hashing then finds no
`transformers.PreTrainedTokenizerBase`). The load itself imports nothing new. An error of the
description is kept and raised where the run read the description before (`described`), and
an error of the load by the first request, so a run refuses what it refused before, in the same
order and with the same message.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from assay.execution.distributed import launch_rank
from assay.execution.seeding import seed_torch
from assay.models.base import LM, Unloaded
from assay.run.backend import build_model, described_model, registered_class, replica_plan
from assay.run.deferred import overlap_enabled
from assay.run.settings import RunSettings

log = logging.getLogger(__name__)


class EarlyModel:
    """The run's backend described now, and its weights loading in a background thread (a
    daemon: Ctrl-C ends the process without waiting for it) when `load`."""

    def __init__(self, settings: RunSettings, model: str, args: Mapping[str, Any], load: bool):
        self.settings, self.args = settings, dict(args)
        """The backend's settings and arguments (the run plan's)."""
        self._described: LM | None = None
        self._built: LM | None = None
        self._failed: BaseException | None = None
        try:
            self._described = described_model(settings, self.args)
        except Exception as exc:  # raised where the run reads the description
            self._failed = exc
        self.loads = (
            load
            and isinstance(self._described, Unloaded)
            and replica_plan(model, self.args) is None
        )
        """Whether the weights are loading in the background."""
        self._thread: threading.Thread | None = None
        if self.loads:
            log.info("loading the model in the background while the run reads its data")
            self._thread = threading.Thread(target=self._load, name="assay-model-load", daemon=True)
            self._thread.start()

    def _load(self) -> None:
        # As when the run loads it: torch's generator seeded before the weights load (a weight
        # the checkpoint lacks is drawn from it).
        seed_torch(self.settings.seed)
        try:
            self._built = build_model(self.settings, self.args)
        except BaseException as exc:  # raised by the first request, as the run's own load
            self._failed = exc

    def described(self) -> LM | None:
        """The description (`described_model`'s); the error of reading it is raised here."""
        if self._described is None and self._failed is not None:
            raise self._failed.with_traceback(self._failed.__traceback__)
        return self._described

    def build(self) -> LM:
        """The backend: the background load's (waited for), else (and after it failed) built
        now."""
        if self._thread is not None:
            while self._thread.is_alive():  # a timed wait keeps Ctrl-C responsive
                self._thread.join(0.2)
            self._thread = None
            failed, self._failed = self._failed, None
            if failed is not None:
                raise failed.with_traceback(failed.__traceback__)
            assert self._built is not None
            return self._built
        return build_model(self.settings, self.args)


def start(run: RunSettings, settings: RunSettings, args: Mapping[str, Any]) -> EarlyModel | None:
    """The backend of `run` (built from the plan's `settings` and `args`) described now, its
    weights loading where no cache can answer, for a backend slow to describe; None for any
    other, and with ASSAY_OVERLAP_LOAD=0 (the sequential start-up)."""
    model = settings.model
    if not isinstance(model, str) or not overlap_enabled():
        return None
    backend = registered_class(model)
    if backend is None or not backend.slow_to_describe or backend.spends:
        return None
    return EarlyModel(settings, model, args, load=_loads_here(run) and not _cache_may_answer(run))


def _loads_here(run: RunSettings) -> bool:
    """Whether this process builds the backend itself (not Ray actors, not one rank of a
    data-parallel launch, which may move it to the rank's device)."""
    return run.executor == "local" and launch_rank() is None


def _cache_may_answer(run: RunSettings) -> bool:
    """Whether a response cache may already hold answers for the run (the run then loads the
    weights only for a request it cannot answer, as it decides once its files are known)."""
    cache = run.cache
    if cache is False:
        return False
    if isinstance(cache, str | Path):
        return Path(cache).exists()
    output = run.output_dir or run.output_path
    return output is not None and Path(output).exists()
