"""BFCL throughput: assay against bfcl-eval's own generation runner, side by side, on the same
loopback OpenAI-compatible scripted model (benchmarks/bfcl_loopback.py).

For each multi-turn category, the first `--sample` entries are generated twice from a cold
start, each in a process of its own: by assay (`assay run --model openai-chat` with
`num_concurrent=--threads`, no response cache) and by bfcl-eval (`bfcl generate` as
openbmb/MiniCPM-SALA-FC, whose handler is bfcl-eval's OpenAI chat-completions one, with `--num-threads --threads --run-ids`, its OpenAI handler pointed at
the loopback by OPENAI_BASE_URL). The model answers every request at once, so the figures are
each harness's own cost: requests per second and wall time (process start to exit, imports
included), with the requests the model received (the same conversations: equal counts).

Run it in the environment that has bfcl-eval (`make bfcl-venv`):
    .venv-bfcl/bin/python benchmarks/bfcl_throughput.py --sample 20 --threads 8
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bfcl_loopback import Loopback, ScriptedBfcl

from assay.metrics.bfcl_multi_turn import MULTI_TURN, entries

ROOT = Path(__file__).resolve().parents[1]
BFCL_MODEL = "openbmb/MiniCPM-SALA-FC"
"""The one function-calling model bfcl-eval 2026.3.23 asks through OpenAI's chat completions
endpoint (its OpenAICompletionsHandler, which OPENAI_BASE_URL points anywhere); its GPT models
use the Responses API."""


def timed(command: list[str], env: dict[str, str], log: Path) -> float:
    """Seconds `command` ran; a failure stops the benchmark with its log's tail."""
    started = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} failed:\n{log.read_text()[-3000:]}")
    return took


def run_assay(category: str, n: int, threads: int, url: str, root: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OPENAI_API_KEY": "loopback"}
    command = [
        sys.executable, "-m", "assay", "run", "--model", "openai-chat",
        "--model-args", f"model=openbmb/MiniCPM-SALA-FC,base_url={url},num_concurrent={threads}",
        "--tasks", f"bfcl_fc_{category}", "--limit", str(n), "--no-cache",
        "--output-dir", str(root / "assay"), "--no-progress",
    ]  # fmt: skip
    return timed(command, env, root / "assay.log")


def run_bfcl(category: str, ids: list[str], threads: int, url: str, root: Path) -> float:
    project = root / "bfcl"
    project.mkdir()
    (project / "test_case_ids_to_generate.json").write_text(json.dumps({category: ids}))
    env = {
        **os.environ,
        "BFCL_PROJECT_ROOT": str(project),
        "OPENAI_BASE_URL": url,
        "OPENAI_API_KEY": "loopback",
    }
    bfcl = str(Path(sys.executable).with_name("bfcl"))
    command = [
        bfcl, "generate", "--model", BFCL_MODEL, "--run-ids",
        "--num-threads", str(threads), "--allow-overwrite",
    ]  # fmt: skip
    return timed(command, env, root / "bfcl.log")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=20, help="entries per category")
    parser.add_argument("--threads", type=int, default=8, help="requests in flight")
    parser.add_argument("--categories", default="multi_turn_base")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{'category':24s} {'harness':8s} {'entries':>7s} {'requests':>8s} {'wall s':>8s} {'req/s':>8s}"
    )
    differ = 0
    for category in args.categories.split(","):
        assert category in MULTI_TURN, f"{category}: the scripted model plays multi-turn only"
        ids = list(entries(category))[: args.sample]
        asked = []
        for harness in ("assay", "bfcl-eval"):
            script = ScriptedBfcl(category, ids, variants=("right", "one_by_one"))
            with tempfile.TemporaryDirectory() as tmp, Loopback(script) as server:
                root = Path(tmp)
                if harness == "assay":
                    took = run_assay(category, len(ids), args.threads, server.url, root)
                else:
                    took = run_bfcl(category, ids, args.threads, server.url, root)
            print(
                f"{category:24s} {harness:8s} {len(ids):7d} {script.requests:8d} "
                f"{took:8.2f} {script.requests / took:8.2f}"
            )
            asked.append(script.requests)
        if len(set(asked)) != 1 or not asked[0]:
            print(f"    the harnesses asked different numbers of requests: {asked}")
            differ += 1
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
