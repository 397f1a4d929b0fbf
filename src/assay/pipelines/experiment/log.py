"""An experiment's log file, its console logger and its resource limits (RapidFire's
``get_log_file_path``, ``num_cpus`` / ``num_gpus``)."""

from __future__ import annotations

import importlib.util
import logging
import os
import time
from pathlib import Path

from assay.errors import ConfigError

log = logging.getLogger("assay.pipelines.experiment")
"""The console logger of every experiment module: one name, which logging settings can name."""
RAPIDFIRE_TRACKERS = ("RF_MLFLOW_ENABLED", "RF_TENSORBOARD_ENABLED", "RF_TRACKIO_ENABLED")
"""RapidFire's metric-logger switches, which assay answers with a warning."""


def warn_rapidfire_trackers(name: str, output_dir: Path) -> None:
    """Say so when the environment asks RapidFire's metric loggers for what assay does not do."""
    trackers = [v for v in RAPIDFIRE_TRACKERS if os.environ.get(v, "").lower() in ("1", "true")]
    if trackers:
        log.warning(
            "experiment %r: %s asks RapidFire to log to MLflow/TensorBoard/Trackio; assay "
            "does not: results are in %s (experiment.sqlite, export())",
            name,
            ", ".join(trackers),
            output_dir,
        )


class ExperimentLog:
    """Appends timestamped lines (run starts, shards done, status changes) to one file."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name
        self._logger = logging.getLogger(f"assay.pipelines.experiment.{id(self)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handler: logging.Handler | None = None

    def info(self, message: str) -> None:
        """One line in the file (created on first use)."""
        if self._handler is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handler = logging.FileHandler(self.path, encoding="utf-8")
            formatter = logging.Formatter(f"%(asctime)s {self.name}: %(message)s")
            formatter.converter = time.gmtime
            self._handler.setFormatter(formatter)
            self._logger.addHandler(self._handler)
        self._logger.info(message)

    def close(self) -> None:
        if self._handler is not None:
            self._logger.removeHandler(self._handler)
            self._handler.close()
            self._handler = None


def available_gpus() -> int:
    """CUDA devices torch sees (0 without torch)."""
    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def check_resources(num_cpus: int | None, num_gpus: int | None) -> tuple[int | None, int | None]:
    """The experiment's CPU and GPU caps, refused when the machine has fewer."""
    if num_cpus is not None:
        cores = os.cpu_count() or 1
        if isinstance(num_cpus, bool) or not isinstance(num_cpus, int) or num_cpus < 1:
            raise ConfigError(f"Experiment num_cpus={num_cpus!r}: give a positive integer")
        if num_cpus > cores:
            raise ConfigError(f"Experiment num_cpus={num_cpus}: this machine has {cores} CPU(s)")
    if num_gpus is not None:
        if isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus < 0:
            raise ConfigError(f"Experiment num_gpus={num_gpus!r}: give a non-negative integer")
        if num_gpus > 0 and num_gpus > (found := available_gpus()):
            raise ConfigError(f"Experiment num_gpus={num_gpus}: this machine has {found} GPU(s)")
    return num_cpus, num_gpus
