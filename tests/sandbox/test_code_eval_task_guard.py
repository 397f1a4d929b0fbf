"""A code task whose Python sends programs to code_eval is told "each runs in the sandbox":
its Python is watched by the runtime guard while it scores, so running a program some other way
in assay's process (`timeit.timeit(answer)`) is refused, exit 2 naming file, line and
operation, even with --confirm-run-unsafe-code. lm-eval's own humaneval and mbpp task files
(copies of lm-eval 0.4.13's, in tests/data/lm_eval_code) still run and score as before."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from assay import evaluate
from assay.cli import main
from assay.models.dummy import DummyLM
from assay.requests.types import GenerateRequest

pytest.importorskip("evaluate")
COPIES = Path(__file__).parents[1] / "data" / "lm_eval_code"

HUMANEVAL_ROWS = [
    {"task_id": f"HumanEval/{i}", "prompt": f"def f{i}(a, b):\n    \"\"\"Return a + b.\"\"\"\n",
     "canonical_solution": "    return a + b\n", "entry_point": f"f{i}",
     "test": "\n\ndef check(candidate):\n    assert candidate(2, 3) == 5\n"}
    for i in range(4)
]  # fmt: skip
ANSWERS = {  # by function: right, wrong, raising, too slow for code_eval's 3 s
    "f0": "    return a + b\n",
    "f1": "    return a - b\n",
    "f2": "    raise ValueError(a)\n",
    "f3": "    while True:\n        pass\n",
}


class Canned(DummyLM):
    """Each prompt's answer, found by the function name it asks for."""

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
        found = []
        for request in requests:
            prompt = str(request.prompt)
            found.append(next(a for name, a in ANSWERS.items() if f"def {name}(" in prompt))
        return found


def _copy(tmp_path: Path, name: str, rows: list[dict], extra: str = "") -> Path:
    folder = tmp_path / name
    shutil.copytree(COPIES / name, folder)
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if extra:
        with (folder / "utils.py").open("a") as fh:
            fh.write(extra)
    return folder


def _humaneval(tmp_path: Path, folder: Path) -> list[float]:
    out = tmp_path / "out"
    evaluate(
        Canned(), "lm_humaneval_local", include_path=folder, confirm_run_unsafe_code=True,
        sandbox="rlimits", output_dir=out, log_samples=True, cache=False, show_progress=False,
    )  # fmt: skip
    lines = (out / "samples_lm_humaneval_local.jsonl").read_text().splitlines()
    return [float(json.loads(line)["pass@1"]) for line in lines]


def test_lm_evals_honest_humaneval_scores_as_code_eval_does(tmp_path):
    folder = _copy(tmp_path, "humaneval", HUMANEVAL_ROWS)
    assert _humaneval(tmp_path, folder) == [1.0, 0.0, 0.0, 0.0]


def test_lm_evals_honest_mbpp_scores_as_code_eval_does(tmp_path):
    tests = ["assert f0(1, 2) == 3", "assert f0(0, 0) == 0", "assert f0(-1, 1) == 0"]
    rows = [
        {"task_id": 11 + i, "text": f"Add two numbers (def {name}( wanted).", "code": "",
         "test_list": [t.replace("f0", name) for t in tests]}
        for i, name in enumerate(ANSWERS)
    ]  # fmt: skip
    answers = {name: f"def {name}(a, b):\n{body}" for name, body in ANSWERS.items()}
    folder = _copy(tmp_path, "mbpp", rows)
    out = tmp_path / "out"

    class Whole(DummyLM):
        def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
            return [
                next(a for n, a in answers.items() if f"(def {n}( wanted)" in str(r.prompt))
                for r in requests
            ]

    evaluate(
        Whole(), "lm_mbpp_local", include_path=folder, confirm_run_unsafe_code=True,
        sandbox="rlimits", output_dir=out, log_samples=True, cache=False, show_progress=False,
    )  # fmt: skip
    lines = (out / "samples_lm_mbpp_local.jsonl").read_text().splitlines()
    assert [float(json.loads(line)["pass_at_1"]) for line in lines] == [1.0, 0.0, 0.0, 0.0]


IN_PROCESS = {
    "timeit in the metric": """
import timeit as _t
_orig = pass_at_k
def pass_at_k(references, predictions, k=None):
    for ref, preds in zip(references, predictions):
        for p in preds:
            try:
                _t.timeit(p + "\\n" + ref + "\\nopen({marker!r}, 'w').write('ran')", number=1)
            except Exception:
                pass
    return _orig(references, predictions, k)
""",
    "timeit in a thread started at import": """
import threading, time, timeit as _t
_queue = []
def _worker():
    for _ in range(400):  # bounded: 20 s at most
        while _queue:
            try:
                _t.timeit(_queue.pop() + "\\nopen({marker!r}, 'w').write('ran')", number=1)
            except Exception:
                pass
        time.sleep(0.05)
threading.Thread(target=_worker, daemon=True).start()
_build = build_predictions
def build_predictions(resps, docs):
    built = _build(resps, docs)
    _queue.extend(p for ps in built for p in ps)
    time.sleep(1)
    return built
""",
}


@pytest.mark.parametrize("case", list(IN_PROCESS))
def test_a_code_eval_task_running_programs_in_process_is_refused(tmp_path, capfd, case):
    marker = tmp_path / "ran_in_assay"
    folder = _copy(
        tmp_path, "humaneval", HUMANEVAL_ROWS[:1], IN_PROCESS[case].format(marker=str(marker))
    )
    (folder / "replay.jsonl").write_text(
        json.dumps({"prompt": HUMANEVAL_ROWS[0]["prompt"], "response": ANSWERS["f0"]}) + "\n"
    )
    argv = ["run", "--model", "replay", "--model-args", f"path={folder / 'replay.jsonl'}",
            "--tasks", "lm_humaneval_local", "--include-path", str(folder), "--no-cache",
            "--no-progress", "--confirm-run-unsafe-code", "--sandbox", "rlimits",
            "--output-dir", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 2
    err = capfd.readouterr().err
    assert not marker.exists()
    assert f"{folder / 'utils.py'}:" in err and "compile Python source" in err
    assert "refused it, even with --confirm-run-unsafe-code" in err and "Traceback" not in err
