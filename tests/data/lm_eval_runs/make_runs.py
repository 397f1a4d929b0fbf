"""Regenerate the lm-eval 0.4.13 run folders that tests/results compare.

Run with the lm-eval virtualenv, from this folder:

    /work/lmeval-venv/bin/python make_runs.py

It runs lm-eval's own command line (`lm_eval --model dummy --tasks fxc --log_samples`) with
seeds 1 and 2, so each run folder is exactly what lm-eval writes: `results_<ts>.json` and
`samples_<task>_<ts>.jsonl` in a model subfolder. The one change: lm-eval's command line has no
flag for `bootstrap_iters` and its default (100000) takes ten minutes for the f1 and mcc
stderrs on this machine, so `simple_evaluate` is called with 1000.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    import lm_eval
    from lm_eval.__main__ import cli_evaluate

    lm_eval.simple_evaluate = functools.partial(lm_eval.simple_evaluate, bootstrap_iters=1000)
    os.environ.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    os.chdir(HERE / "tasks")  # data_files are relative to the working directory
    for seed in (1, 2):
        out = HERE / f"dummy_seed{seed}"
        shutil.rmtree(out, ignore_errors=True)
        sys.argv = [
            "lm_eval", "--model", "dummy", "--tasks", "fxc", "--include_path", ".",
            "--output_path", str(out), "--log_samples", "--seed", str(seed),
        ]  # fmt: skip
        cli_evaluate()


if __name__ == "__main__":
    main()
