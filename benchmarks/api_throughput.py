"""API models at a provider's limit: assay without rpm, assay with rpm, and lm-eval side by side.

    .venv/bin/python benchmarks/api_throughput.py [--docs 300] [--lm-eval-python PATH]

The loopback server (tests/fixtures/limited_server.py) enforces 600 requests a minute with a
token bucket of 10, answers after 0.4 s, fails 3 % of the requests it accepts with a 500 and
drops the connection of 1 % (both seeded), and sends OpenAI's `retry-after(-ms)` and
`x-ratelimit-*` headers. Each tool runs a `--docs`-doc generate_until task (one chat request
per doc) in its own process, with 32 requests allowed in flight and its default retries.

Printed per run: its exit code; the served span (first to last answer, seen by the server)
against the limit's minimum for the answers ((answers - 10) / 10 per second) and for every
request the bucket let through (answers, 500s and dropped connections all spend a unit, as
providers count unsuccessful requests); 429s drawn and their share of all requests; answers
lost (docs without a correct answer: exact_match on the echoed prompt). lm-eval runs only with
`--lm-eval-python` (a Python with lm_eval installed); this script never installs it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from fixtures.limited_server import LimitedServer  # noqa: E402

RPM, BURST, LATENCY, ERRORS, DROPS = 600.0, 10.0, 0.4, 0.03, 0.01
CONCURRENCY = 32
TIMEOUT_S = 600

YAML = """\
task: api_bench
dataset_path: json
dataset_kwargs:
  data_files:
    test: {rows}
test_split: test
output_type: generate_until
doc_to_text: "{{{{q}}}}"
doc_to_target: "{{{{a}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 16
  do_sample: false
metric_list:
  - metric: exact_match
"""


@dataclass
class Outcome:
    tool: str
    code: int
    wall: float
    span: float
    answered: int
    accepted: int
    rate_limited: int
    requests: int
    exact_match: float | None

    def line(self, docs: int) -> str:
        rpm_min = max(0.0, self.answered - BURST) / (RPM / 60)
        all_min = max(0.0, self.accepted - BURST) / (RPM / 60)
        lost = docs if self.exact_match is None else round(docs * (1 - self.exact_match))
        share = self.rate_limited / max(self.requests, 1)
        span = f"span {self.span:6.1f} s"
        if lost == 0 and rpm_min and all_min:
            span += (
                f"  x{self.span / rpm_min:.3f} of the answers' minimum ({rpm_min:.1f} s), "
                f"x{self.span / all_min:.3f} of all accepted requests' ({all_min:.1f} s)"
            )
        else:  # a span of the answers that did arrive says nothing of a finished run
            span = f"{self.answered} answers served before the run ended"
        return (
            f"{self.tool:<18} exit {self.code}  {span}  429s {self.rate_limited} "
            f"({share:.1%} of {self.requests})  answers lost {lost}  wall {self.wall:.1f} s"
        )


def write_task(folder: Path, docs: int) -> None:
    rows = folder / "rows.jsonl"
    with rows.open("w", encoding="utf-8") as f:
        for i in range(docs):
            q = f"question {i}: what is the name of place {i}"
            f.write(json.dumps({"q": q, "a": "echo: of place " + str(i)}) + "\n")
    (folder / "api_bench.yaml").write_text(YAML.format(rows=rows), encoding="utf-8")


def exact_match(results_root: Path) -> float | None:
    found = sorted(results_root.rglob("results*.json"))
    if not found:
        return None
    results = json.loads(found[-1].read_text())["results"]["api_bench"]
    return results.get("exact_match,none", results.get("exact_match"))


def run(tool: str, command: list[str], out: Path) -> Outcome:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OPENAI_API_KEY": "x"}
    with LimitedServer(
        rpm=RPM,
        burst=BURST,
        latency=LATENCY,
        error_rate=ERRORS,
        drop_rate=DROPS,
        seed=0,  # every tool meets the same sequence of faults
        max_seconds=TIMEOUT_S,
    ) as server:
        argv = [part.replace("{URL}", server.base_url) for part in command]
        started = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        wall = time.perf_counter() - started
    if proc.returncode != 0:
        print(f"--- {tool} stderr (last lines) ---\n{proc.stderr[-1500:]}", file=sys.stderr)
    return Outcome(
        tool,
        proc.returncode,
        wall,
        server.served_span,
        len(server.answered),
        len(server.answered) + server.errors + server.drops,
        server.rate_limited,
        server.requests,
        exact_match(out),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--lm-eval-python", help="a Python with lm_eval installed (side venv)")
    args = parser.parse_args()
    print(
        f"server: {RPM:g} requests/min, bucket {BURST:g}, latency {LATENCY} s, {ERRORS:.0%} 500s, "
        f"{DROPS:.0%} dropped connections; {args.docs} docs, {CONCURRENCY} in flight at most"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_task(folder, args.docs)
        assay = [
            sys.executable, "-m", "assay", "run", "--model", "openai-chat",
            "--tasks", "api_bench", "--include-path", str(folder), "--no-progress",
        ]  # fmt: skip
        base_args = f"model=bench,base_url={{URL}},num_concurrent={CONCURRENCY}"
        for n, (tool, model_args) in enumerate(
            [("assay (no rpm)", base_args), ("assay (rpm=600)", f"{base_args},rpm={RPM:g}")]
        ):
            out = folder / f"out{n}"
            command = [*assay, "--model-args", model_args, "--output-dir", str(out)]
            print(run(tool, command, out).line(args.docs), flush=True)
        if args.lm_eval_python:
            out = folder / "lm_eval"
            command = [
                args.lm_eval_python, "-m", "lm_eval", "--model", "local-chat-completions",
                "--model_args",
                f"model=bench,base_url={{URL}}/chat/completions,num_concurrent={CONCURRENCY}",
                "--tasks", "api_bench", "--include_path", str(folder),
                "--apply_chat_template", "--output_path", str(out),
            ]  # fmt: skip
            print(run("lm-eval", command, out).line(args.docs))
        else:
            print(f"{'lm-eval':<18} not run (give --lm-eval-python)")


if __name__ == "__main__":
    main()
