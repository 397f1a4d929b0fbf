"""Freeze lm-eval's renders of assay's `leaderboard` suite like make_reference.py does.

Not a test. assay's `leaderboard` group holds only the leaderboard tasks assay ships, so this
script gives lm-eval 0.4.13 a group of the same name, children and aggregate metrics as
lm-eval's own `leaderboard.yaml` (which it overrides through an include path) before
recording the runs of tests/tasks/catalog/data/leaderboard.json.

    /path/to/lmeval-venv/bin/python tests/tasks/catalog/make_leaderboard_reference.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import make_reference

GROUP = """\
group: leaderboard
task:
  - leaderboard_math_hard
  - leaderboard_ifeval
aggregate_metric_list:
"""
METRICS = [
    "acc", "acc_norm", "exact_match", "inst_level_loose_acc", "inst_level_strict_acc",
    "prompt_level_loose_acc", "prompt_level_strict_acc",
]  # fmt: skip


def main() -> None:
    from lm_eval.tasks import TaskManager

    with tempfile.TemporaryDirectory() as tmp:
        text = GROUP + "".join(
            f"  - metric: {m}\n    aggregation: mean\n    weight_by_size: true\n" for m in METRICS
        )
        (Path(tmp) / "leaderboard.yaml").write_text(text + "metadata:\n  version: 1.0\n")
        make_reference._TASK_MANAGER.append(TaskManager(include_path=tmp))
        make_reference.main(["leaderboard"])


if __name__ == "__main__":
    main()
