"""BFCL in bfcl-eval's own environment: assay's verdicts equal bfcl-eval's runner on a sample
of every offline category in both modes, leaderboard scores included, and a hostile
prompt-mode answer is never run.

bfcl-eval pins numpy 1.26.4 and others below assay's environment, so it lives in a side
virtualenv that `make test` builds (`make bfcl-venv`): ASSAY_BFCL_PYTHON (which `make test`
sets, so there it must exist), else .venv-bfcl/bin/python in the clone. Every entry of every
category: `make bfcl-parity` (benchmarks/bfcl_parity.py).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GIVEN = os.environ.get("ASSAY_BFCL_PYTHON")
"""Set by `make test`: then a missing virtualenv is a failure, not a skip."""
BFCL_PYTHON = Path(GIVEN) if GIVEN else REPO / ".venv-bfcl" / "bin" / "python"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not GIVEN and not BFCL_PYTHON.exists(),
        reason=f"no bfcl-eval virtualenv at {BFCL_PYTHON} (make bfcl-venv builds it)",
    ),
]


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TMPDIR": str(tmp_path),
    }
    return subprocess.run(
        [str(BFCL_PYTHON), *args], capture_output=True, text=True, env=env, timeout=1200, cwd=REPO
    )


def test_assay_agrees_with_bfcl_eval_on_every_offline_category(tmp_path):
    done = _run(["benchmarks/bfcl_parity.py", "--sample", "18"], tmp_path)
    report = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, report
    rows = [line for line in done.stdout.splitlines() if "%" in line and "assay" not in line]
    assert len(rows) == 2 * 13, report  # every offline category, both modes
    assert all(" 100.00% " in row for row in rows), report
    assert "DIFFERENT" not in done.stdout and "differs:" not in done.stdout, report
    assert done.stdout.count(" same") >= 2, report
    assert done.stdout.rstrip().endswith("parity: ok"), report


def test_a_hostile_prompt_mode_answer_is_judged_without_running(tmp_path):
    marker = tmp_path / "ran"
    script = (
        "from assay.metrics.bfcl import verdict\n"
        "functions = [{'name': 'f', 'parameters': {'type': 'dict', 'properties': {'a': "
        "{'type': 'integer'}}, 'required': ['a']}}]\n"
        f"text = \"[f(a=(__import__('pathlib').Path({str(marker)!r}).touch() or 1)+1)]\"\n"
        "print(verdict('simple_python', 'prompt', text, functions, [{'f': {'a': [2]}}]))\n"
        "print(verdict('simple_python', 'prompt', '[f(a=1+1)]', functions, [{'f': {'a': [2]}}]))\n"
    )
    done = _run(["-c", script], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    hostile, arithmetic = done.stdout.splitlines()
    assert not marker.exists()
    assert "valid=False" in hostile and "decoder_failed" in hostile and "not evaluated" in hostile
    assert arithmetic.startswith("Verdict(valid=True")


GROUPS_CHECK = """
import json, sys
from pathlib import Path
sys.path.insert(0, "benchmarks")
import bfcl_parity as b
from assay import evaluate
from assay.catalog import bfcl
tmp = Path(sys.argv[1])
lines = []
counts = {c: 2 + len(c) % 4 for c in bfcl.OFFLINE}  # unequal sizes: weighting shows
for c in bfcl.OFFLINE:
    for i, entry in enumerate(bfcl._entries(c)[: counts[c]]):
        doc = bfcl._prompt("fc", c)(entry, "x")
        variant = b.VARIANTS[(2 * i + len(c)) % 9] if entry["function"] else "no_call"
        truth = b.calls_of(entry["ground_truth"], entry["checker_function"])
        line = b.fc_answer(b.bent(truth, variant, entry["checker_function"]))[1]
        messages = [{"role": t.role, "content": t.content} for t in doc.conversation]
        lines.append({"prompt": messages, "tools": [t.name for t in doc.tools], **line})
replay = tmp / "replay.jsonl"
replay.write_text("".join(json.dumps(line) + "\\n" for line in lines))
groups = ["bfcl_fc_non_live_simple", "bfcl_fc_live", "bfcl_fc_irrelevance_total"]
rest = ["multiple", "parallel", "parallel_multiple", "live_relevance"]
samples = {f"bfcl_fc_{c}": list(range(n)) for c, n in counts.items()}
evaluate("replay", groups + ["bfcl_fc_non_live"] + [f"bfcl_fc_{c}" for c in rest],
         model_args={"path": str(replay)},
         samples=samples, output_dir=tmp / "out", cache=False, show_progress=False)
(path,) = (tmp / "out").rglob("results.json")
r = json.loads(path.read_text())["results"]
accuracy = {c: (r[f"bfcl_fc_{c}"]["bfcl_accuracy,none"], counts[c]) for c in bfcl.OFFLINE}
print("counts", *sorted(set(counts[c] for c in bfcl.LIVE_AST)))
scores = bfcl.leaderboard_scores(accuracy)
for group, part in zip(groups, ["non_live_simple", "live", "irrelevance"]):
    print(group, r[group]["bfcl_accuracy,none"], scores[part])
errors = {c: (r[f"bfcl_fc_{c}"]["bfcl_accuracy_stderr,none"], counts[c]) for c in bfcl.NON_LIVE_AST}
expected = bfcl.leaderboard_stderrs(errors)["non_live"]
print("stderr", r["bfcl_fc_non_live"]["bfcl_accuracy_stderr,none"], expected)
"""


def test_groups_aggregate_as_bfcls_leaderboard(tmp_path):
    done = _run(["-c", GROUPS_CHECK, str(tmp_path)], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("bfcl_fc_")]
    assert len(done.stdout.split("counts", 1)[1].splitlines()[0].split()) > 1, done.stdout
    assert len(rows) == 3, done.stdout
    for name, group, expected in rows:
        assert abs(float(group) - float(expected)) < 1e-12, (name, group, expected)
    # The parts differ from one another here, so a plain mean would not pass for all three.
    assert len({row[1] for row in rows}) > 1, rows
    # Non-live AST carries the stderr of its category means, as leaderboard_stderrs gives it.
    (stderr,) = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("stderr")]
    assert float(stderr[0]) > 0 and abs(float(stderr[0]) - float(stderr[1])) < 1e-12, stderr
