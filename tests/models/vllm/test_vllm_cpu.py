"""`--model vllm` end to end on vLLM's CPU build, against `--model hf` on the same tiny model.

vLLM's CPU wheel pins its own transformers, so it lives in a side virtualenv that `make test`
builds (`make vllm-venv`): ASSAY_VLLM_PYTHON (which `make test` sets, so there it must exist),
else .venv-vllm/bin/python in the clone. Without one the test is skipped with that reason; everything else about the backend (arguments, request
translation, scoring on a fake engine) is tested in test_vllm.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TASKS_DIR = REPO / "tests" / "data" / "lm_eval_parity" / "tasks"
TASKS = "parity_mc_same_split,parity_gen_regex,parity_rolling"
GIVEN = os.environ.get("ASSAY_VLLM_PYTHON")
"""Set by `make test`: then a missing virtualenv is a failure, not a skip."""
VLLM_PYTHON = Path(GIVEN) if GIVEN else REPO / ".venv-vllm" / "bin" / "python"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not GIVEN and not VLLM_PYTHON.exists(),
        reason=f"no vLLM CPU virtualenv at {VLLM_PYTHON} (make vllm-venv builds it)",
    ),
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    from fixtures.tiny_model import build_tiny_model

    # vLLM's CPU attention needs a head size of at least 32.
    return build_tiny_model(tmp_path_factory.mktemp("vllm_tiny"), hidden=64, heads=2, kv_heads=2)


def run(python: Path | str, backend: str, model_args: str, out: Path) -> dict[str, list[dict]]:
    env = {
        **os.environ,
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
    }
    command = [
        str(python), "-m", "assay", "run", "--model", backend, "--model-args", model_args,
        "--tasks", TASKS, "--include-path", str(TASKS_DIR), "--limit", "8",
        "--output-dir", str(out), "--log-samples", "--no-progress", "--no-cache",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {
        p.stem.removeprefix("samples_"): [json.loads(line) for line in p.read_text().splitlines()]
        for p in sorted(out.glob("samples_*.jsonl"))
    }


def test_vllm_matches_the_hf_backend(model_dir, tmp_path):
    vllm_args = (
        f"pretrained={model_dir},dtype=float32,max_model_len=512,gpu_memory_utilization=0.1,"
        "enforce_eager=True"
    )
    vllm = run(VLLM_PYTHON, "vllm", vllm_args, tmp_path / "vllm")
    hf = run(
        sys.executable,
        "hf",
        f"pretrained={model_dir},dtype=float32,max_length=512",
        tmp_path / "hf",
    )
    assert set(vllm) == set(hf) == {"parity_mc_same_split", "parity_gen_regex", "parity_rolling"}
    for task in ("parity_mc_same_split", "parity_rolling"):
        for a, b in zip(hf[task], vllm[task], strict=True):
            assert a["arguments"] == b["arguments"]
            for (x, *_), (y, *_) in zip(a["resps"], b["resps"], strict=True):
                # [loglikelihood, is_greedy] per choice; a bare loglikelihood for rolling.
                x, y = (x[0], y[0]) if isinstance(x, list) else (x, y)
                assert abs(float(x) - float(y)) < 1e-4, (task, a["doc_id"])
    # Greedy generations: the same text, token for token.
    assert [s["resps"] for s in vllm["parity_gen_regex"]] == [
        s["resps"] for s in hf["parity_gen_regex"]
    ]
