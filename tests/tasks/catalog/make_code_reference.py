"""Freeze lm-eval's renders of the code tasks (humaneval, mbpp) like make_reference.py does.

Not a test. lm-eval scores these tasks with the hub's `code_eval` metric, which cannot be
downloaded offline, so this script first installs a stand-in with code_eval's contract: each
candidate program is the candidate, a newline and the test code, run in a fresh interpreter
for at most 3 seconds; pass@k is the unbiased estimator of Chen et al. (2021). Prompts,
targets, generation settings and filtered programs are lm-eval's own.

    /path/to/lmeval-venv/bin/python tests/tasks/catalog/make_code_reference.py humaneval mbpp
"""

from __future__ import annotations

import subprocess
import sys
from math import comb
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import make_reference


class _StandInCodeEval:
    def compute(self, references, predictions, k):
        scores = {}
        for test, candidates in zip(references, predictions):
            n = len(candidates)
            passed = sum(_passes(candidate + "\n" + test) for candidate in candidates)
            for kk in k:
                if n >= kk:
                    value = 1.0 - comb(n - passed, kk) / comb(n, kk)
                    scores.setdefault(f"pass@{kk}", []).append(value)
        return {name: sum(v) / len(v) for name, v in scores.items()}, {}


def _passes(program: str) -> bool:
    try:
        done = subprocess.run(
            [sys.executable, "-c", program], capture_output=True, timeout=3.0, check=False
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def main(names: list[str]) -> None:
    import evaluate

    evaluate.load = lambda name, *args, **kwargs: _StandInCodeEval()
    make_reference.main(names)


if __name__ == "__main__":
    main(sys.argv[1:])
