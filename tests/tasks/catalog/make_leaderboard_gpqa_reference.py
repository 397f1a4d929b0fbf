"""Freeze lm-eval's renders of the leaderboard GPQA tasks like make_reference.py does.

Not a test. lm-eval's GPQA shuffles the answers with Python's global random state, seeded 0
once per run, so in a run of the `leaderboard_gpqa` group the second and third subtasks
continue the stream where the previous one left it. assay shuffles each subtask as a fresh
single-task lm-eval run does (see src/assay/catalog/leaderboard_gpqa.py); this script
reseeds Python's random state with 0 before lm-eval 0.4.13 builds each leaderboard GPQA task,
which changes nothing for single-task runs, and records the runs of
tests/tasks/catalog/data/leaderboard_gpqa.json.

    /path/to/lmeval-venv/bin/python tests/tasks/catalog/make_leaderboard_gpqa_reference.py
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import make_reference

SHUFFLE_SEED = 0
"""lm-eval's default Python random seed."""


def reseed_gpqa_tasks() -> None:
    """Reseed Python's random state before lm-eval builds each leaderboard GPQA task."""
    import lm_eval.api.task as task_module

    build = task_module.ConfigurableTask.__init__

    def reseeded(
        self: Any, *args: Any, config: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if str((config or {}).get("task", "")).startswith("leaderboard_gpqa_"):
            random.seed(SHUFFLE_SEED)
        build(self, *args, config=config, **kwargs)

    task_module.ConfigurableTask.__init__ = reseeded


def main() -> None:
    reseed_gpqa_tasks()
    make_reference.main(["leaderboard_gpqa"])


if __name__ == "__main__":
    main()
