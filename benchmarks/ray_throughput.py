"""Requests per second of the Ray executor with 1 and 2 replicas, next to the local executor.

    .venv/bin/python benchmarks/ray_throughput.py [--model hf|dummy] [--requests 2048]

- hf: benchmarks/.models/llama-2m (built by benchmarks/build_models.py) scoring loglikelihood
  requests (contexts of 4-70 words from the tiny-model corpus); CPU-bound. Every Ray replica
  holds one CPU and Ray sets its OMP_NUM_THREADS=1; this script sets the same for the local run
  (torch.set_num_threads(1) alone is not enough: on a busy 2-core machine the other OpenMP
  pools still oversubscribe the cores and the local run is several times slower).
- dummy: answers after `--delay` seconds per request (a stand-in for a remote or GPU model).

Throughput counts only the requests' run (replica start-up is printed apart). Every run computes
the same chunks, and the results of all runs are checked to be identical.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "benchmarks" / ".models" / "llama-2m"

# Before torch is imported: one OpenMP thread per process, as Ray gives each replica.
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(REPO / "tests"))
from fixtures.tiny_model import CORPUS  # noqa: E402


def make_requests(n: int, seed: int = 0) -> list[Any]:
    """`n` distinct loglikelihood requests of varied length, drawn from the fixture corpus."""
    from assay.requests.types import LoglikelihoodRequest

    words = CORPUS.split()
    rng = random.Random(seed)
    out = []
    for i in range(n):
        start = rng.randrange(len(words) - 80)
        length = rng.randrange(4, 70)
        context = " ".join(words[start : start + length])
        out.append(LoglikelihoodRequest(f"{i}: {context}", " " + words[start + length]))
    return out


def model_spec(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    if args.model == "hf":
        if not TINY.exists():
            sys.exit(f"{TINY} not found: run benchmarks/build_models.py first (or --model dummy)")
        return "hf", {"pretrained": str(TINY), "batch_size": args.batch_size, "device": "cpu"}
    return "dummy", {"delay": args.delay, "batch_size": args.batch_size}


def timed_local(name: str, model_args: dict[str, Any], requests: list[Any]) -> tuple[float, list]:
    from assay.execution.local import LocalExecutor
    from assay.run.backend import build_model
    from assay.run.settings import RunSettings

    executor = LocalExecutor(build_model(RunSettings(model=name, model_args=model_args)))
    started = time.perf_counter()
    results = executor.run(requests)
    return time.perf_counter() - started, results


def timed_ray(
    name: str, model_args: dict[str, Any], requests: list[Any], replicas: int
) -> tuple[float, float, list, list[int]]:
    from assay.execution.ray import RayExecutor

    started = time.perf_counter()
    executor = RayExecutor(name, model_args, replicas=replicas, gpus_per_replica=0)
    startup = time.perf_counter() - started
    try:
        started = time.perf_counter()
        results = executor.run(requests)
        elapsed = time.perf_counter() - started
        return startup, elapsed, results, list(executor.chunks_done)
    finally:
        executor.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["hf", "dummy"], default="hf")
    parser.add_argument("--requests", type=int, default=2048)
    parser.add_argument(
        "--batch-size", type=int, default=16, help="backend batch size (hf); dummy chunk size"
    )
    parser.add_argument("--delay", type=float, default=0.002, help="dummy: seconds per request")
    args = parser.parse_args()

    import ray

    name, model_args = model_spec(args)
    requests = make_requests(args.requests)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(f"model {name} {model_args}, {len(requests)} loglikelihood requests, 2-CPU Ray instance")
    print(f"{'executor':<20}{'start-up s':>12}{'run s':>10}{'requests/s':>12}  chunks per replica")
    seconds, reference = timed_local(name, model_args, requests)
    print(f"{'local':<20}{'-':>12}{seconds:>10.2f}{len(requests) / seconds:>12.1f}")
    rates = {}
    for replicas in (1, 2):
        startup, seconds, results, chunks = timed_ray(name, model_args, requests, replicas)
        if results != reference:
            sys.exit(f"ray with {replicas} replicas returned results that differ from local")
        rates[replicas] = len(requests) / seconds
        label = f"ray, {replicas} replica{'s' if replicas > 1 else ''}"
        print(f"{label:<20}{startup:>12.2f}{seconds:>10.2f}{rates[replicas]:>12.1f}  {chunks}")
    print(f"speed-up of 2 replicas over 1: {rates[2] / rates[1]:.2f}x (results identical)")
    ray.shutdown()


if __name__ == "__main__":
    main()
