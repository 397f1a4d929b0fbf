"""The transformers backend side by side with lm-eval's: speed, memory and parity of the numbers.

    .venv/bin/python benchmarks/compare_lm_eval.py [--rounds 3] [--cases hellaswag,gsm8k]
        [--lmeval-python ../lmeval-venv/bin/python] [--no-limit-figure] [--limit-docs 100]

Cases (settings of the peer figures):
- hellaswag: benchmarks/tasks/hellaswag.yaml, first 300 docs, zero-shot, llama-38m, float32,
  batch size 16. Target: assay <= 0.5x lm-eval's wall time (aim 0.35x); per-choice
  loglikelihoods within 1e-3 of lm-eval's; identical acc and acc_norm.
- gsm8k: benchmarks/tasks/gsm8k.yaml, first 40 test docs, 5-shot, greedy, llama-2m, batch size 8,
  max_gen_toks 32. Target: <= 0.7x; >= 95% identical generations; exact_match differing on at
  most one doc.
- mmlu_shaped: benchmarks/tasks/hellaswag_mmlu.yaml, an MMLU-shaped task (constant description,
  5-shot first_n, lettered choices, ~600 tokens shared by every doc), first 200 docs, llama-38m,
  batch size 16. Target: <= 0.25x; identical request arguments; loglikelihoods within 1e-3;
  identical acc. assay also runs with prefix_cache=false: the speed-up of prefix reuse.
- mmlu_builtin: the built-in mmlu subject tasks over local MMLU-shaped rows
  (benchmarks/tasks/mmlu_local.py: 4 subjects x 50 docs, 5-shot), assay with and without
  prefix reuse (lm-eval has no local copy of these rows): the speed-up on the real MMLU prompts.

Each command runs as a whole (`assay run` from the project venv, `python -m lm_eval` from the
side venv when it exists), rounds interleaved, median reported: wall time, docs/s and the peak
RSS of the process tree. Parity is read from both samples files.

The physical-limit figure loads the backend in this process, scores the HellaSwag requests, then
times plain `model(input_ids)` forward passes over exactly the token rows the backend ran: how
close assay's scoring comes to the model's raw throughput (target >= 90%).

Models are built with benchmarks/build_models.py when missing. Figures from a shared machine
vary; compare ratios measured in one run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "benchmarks" / ".models"
TASKS = ROOT / "benchmarks" / "tasks"
ASSAY = ROOT / ".venv" / "bin" / "assay"
DEFAULT_LMEVAL_PYTHON = ROOT.parent / "lmeval-venv" / "bin" / "python"

# Runs a command and reports its wall time and the peak RSS of its process tree (children that
# were waited for), so both harnesses are measured by the same code.
_MEASURE = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.call(sys.argv[2:], stdout=open(sys.argv[1], "w"), stderr=subprocess.STDOUT)
seconds = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = usage.ru_utime + usage.ru_stime
print(json.dumps({"code": code, "seconds": seconds, "cpu_seconds": cpu, "peak_rss_mb": usage.ru_maxrss / 1024}))
"""


@dataclass(frozen=True)
class Case:
    name: str
    task: str
    model: str
    docs: int
    batch_size: int
    target: float
    aim: float
    shared_prefix: bool = False
    """Also time assay with prefix_cache=false (the unshared path)."""
    with_lmeval: bool = True
    assay_flags: tuple[str, ...] = ()


_MMLU_LOCAL = ",".join(
    f"mmlu_local_{s}" for s in ("anatomy", "astronomy", "marketing", "sociology")
)

CASES = {
    "hellaswag": Case("hellaswag", "hellaswag_local", "llama-38m", 300, 16, 0.5, 0.35),
    "gsm8k": Case("gsm8k", "gsm8k_local", "llama-2m", 40, 8, 0.7, 0.7),
    "mmlu_shaped": Case(
        "mmlu_shaped", "hellaswag_mmlu_local", "llama-38m", 200, 16, 0.25, 0.25, True
    ),
    "mmlu_builtin": Case(
        "mmlu_builtin",
        _MMLU_LOCAL,
        "llama-38m",
        200,
        16,
        1.0,
        1.0,
        shared_prefix=True,
        with_lmeval=False,
        assay_flags=("--custom-tasks", str(TASKS / "mmlu_local.py"), "--num-fewshot", "5"),
    ),
}


@dataclass
class Run:
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    out: Path


@dataclass
class Side:
    runs: list[Run] = field(default_factory=list)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.runs)


def assay_command(case: Case, out: Path, prefix_cache: bool = True) -> list[str]:
    model_args = f"pretrained={MODELS / case.model},dtype=float32"
    if not prefix_cache:
        model_args += ",prefix_cache=false"
    # --limit is per task: the built-in MMLU case spreads its docs over its subjects.
    limit = case.docs // len(case.task.split(","))
    return [
        str(ASSAY), "run", "--model", "hf", "--model-args", model_args,
        "--tasks", case.task, "--include-path", str(TASKS), "--limit", str(limit),
        "--batch-size", str(case.batch_size), "--output-dir", str(out), "--log-samples",
        "--no-cache", "--no-progress", *case.assay_flags,
    ]  # fmt: skip


def lmeval_command(python: Path, case: Case, out: Path) -> list[str]:
    model_args = f"pretrained={MODELS / case.model},dtype=float32"
    return [
        str(python), "-m", "lm_eval", "--model", "hf", "--model_args", model_args,
        "--tasks", case.task, "--include_path", str(TASKS), "--limit", str(case.docs),
        "--batch_size", str(case.batch_size), "--output_path", str(out), "--log_samples",
    ]  # fmt: skip


def measure(command: list[str], out: Path) -> Run:
    out.mkdir(parents=True, exist_ok=True)
    log = out / "command.log"
    # data_files in the task YAMLs are relative to the repository root, for both harnesses.
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(log), *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        # Offline for both tools: a hub look-up timing out on a machine without a network is
        # not evaluation work.
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
    )
    report = json.loads(done.stdout)
    if report["code"] != 0:
        sys.exit(f"command failed ({report['code']}): {' '.join(command)}\nsee {log}")
    return Run(report["seconds"], report["cpu_seconds"], report["peak_rss_mb"], out)


def samples(out: Path, task: str) -> dict[tuple[int, str], dict]:
    """Samples of `task` under `out` (either layout), by (doc_id, filter)."""
    [path] = sorted(out.rglob(f"samples_{task}*.jsonl"))
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(row["doc_id"], row.get("filter", "none")): row for row in rows}


def metrics(out: Path, task: str) -> dict[str, float]:
    [path] = sorted(p for p in out.rglob("results*.json") if "samples" not in p.name)
    return json.loads(path.read_text())["results"][task]


def loglikelihood_parity(a: dict, b: dict, tolerance: float = 1e-3) -> list[str]:
    worst, greedy_differ, acc_differ, args_differ, choices = 0.0, 0, 0, 0, 0
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            return [f"parity: doc {key} is in only one samples file: FAIL"]
        args_differ += a[key]["arguments"] != b[key]["arguments"]
        for ra, rb in zip(a[key]["resps"], b[key]["resps"], strict=True):
            (lp_a, greedy_a), (lp_b, greedy_b) = ra[0], rb[0]
            worst = max(worst, abs(float(lp_a) - float(lp_b)))
            greedy_differ += str(greedy_a) != str(greedy_b)
            choices += 1
        acc_differ += any(a[key].get(m) != b[key].get(m) for m in ("acc", "acc_norm"))
    verdict = "ok" if worst <= tolerance else "FAIL"
    return [
        f"parity: docs whose request arguments differ: {args_differ} "
        f"({'ok' if args_differ == 0 else 'FAIL'})",
        f"parity: per-choice loglikelihood max |diff| {worst:.2e} over {choices} choices "
        f"(<= {tolerance:g}): {verdict}",
        f"parity: docs whose acc/acc_norm differ: {acc_differ} "
        f"({'ok' if acc_differ == 0 else 'FAIL'}); is_greedy differs on {greedy_differ} choices",
    ]


def generation_parity(a: dict, b: dict) -> list[str]:
    keys = sorted(set(a) & set(b))
    if set(a) != set(b):
        return ["parity: the samples files hold different docs: FAIL"]
    # Every filter of a doc sees the same generation: count each doc once.
    docs = {k[0]: k for k in keys}
    same = sum(a[k]["resps"] == b[k]["resps"] for k in docs.values())
    share = same / len(docs)
    lines = [
        f"parity: identical generations {same}/{len(docs)} docs = {share:.1%} (>= 95%): "
        f"{'ok' if share >= 0.95 else 'FAIL'}"
    ]
    for name in sorted({k[1] for k in keys}):
        differ = sum(a[k]["exact_match"] != b[k]["exact_match"] for k in keys if k[1] == name)
        verdict = "ok" if differ <= 1 else "FAIL"
        lines.append(f"parity: exact_match,{name} differs on {differ} docs (<= 1): {verdict}")
    return lines


def metric_line(case: Case, sides: dict[str, Side]) -> list[str]:
    lines = []
    for task in case.task.split(","):
        values = {label: metrics(side.runs[-1].out, task) for label, side in sides.items()}
        first = values["assay"]
        for name in sorted(k for k in first if "," in k and "stderr" not in k):
            shown = ", ".join(f"{label} {v.get(name, math.nan):.4f}" for label, v in values.items())
            equal = all(
                math.isclose(first[name], v.get(name, math.nan), abs_tol=1e-12)
                for v in values.values()
            )
            lines.append(f"{task} {name}: {shown} ({'equal' if equal else 'DIFFER'})")
    return lines


def report(case: Case, sides: dict[str, Side]) -> None:
    print(f"\n== {case.name}: {case.docs} docs, {case.model}, batch size {case.batch_size}")
    for label, side in sides.items():
        seconds = side.median("seconds")
        walls = ", ".join(f"{r.seconds:.1f}" for r in side.runs)
        print(
            f"{label:14s} wall {seconds:6.2f} s (rounds: {walls}), {case.docs / seconds:6.1f} "
            f"docs/s, CPU {side.median('cpu_seconds'):6.2f} s, "
            f"peak RSS {side.median('peak_rss_mb'):.0f} MB"
        )
    for line in metric_line(case, sides):
        print(line)
    assay, unshared, lmeval = sides["assay"], sides.get("assay unshared"), sides.get("lm-eval")
    if unshared is not None:
        wall = unshared.median("seconds") / assay.median("seconds")
        cpu = unshared.median("cpu_seconds") / assay.median("cpu_seconds")
        print(f"prefix reuse speed-up over prefix_cache=false: {wall:.2f}x wall, {cpu:.2f}x CPU")
        for task in case.task.split(","):
            on, off = samples(assay.runs[-1].out, task), samples(unshared.runs[-1].out, task)
            for line in loglikelihood_parity(on, off, tolerance=1e-4):
                print(f"{task} shared vs unshared {line}")
    if lmeval is None:
        if case.with_lmeval:
            print("lm-eval: not run (no side venv); no ratio or parity")
        return
    ratio = assay.median("seconds") / lmeval.median("seconds")
    verdict = "ok" if ratio <= case.target else "MISSED"
    print(
        f"ratio assay/lm-eval {ratio:.2f}x (target <= {case.target}x, aim {case.aim}x): {verdict}"
    )
    cpu_ratio = assay.median("cpu_seconds") / lmeval.median("cpu_seconds")
    print(f"CPU-time ratio assay/lm-eval {cpu_ratio:.2f}x (steadier on a busy machine)")
    a = samples(assay.runs[-1].out, case.task)
    b = samples(lmeval.runs[-1].out, case.task)
    parity = generation_parity if case.name == "gsm8k" else loglikelihood_parity
    for line in parity(a, b):
        print(line)


def physical_limit(
    samples_dir: Path, task: str, n_docs: int, threads: int = 1, repeats: int = 3
) -> None:
    """assay's scoring throughput as a share of plain forward passes over the same rows.

    The rows are those assay ran (contexts shared by their choices), padded per batch as assay
    pads them. `model(input_ids)` is the spec's baseline; the model body alone (no vocabulary
    projection at all) is a stricter floor. CPU time is reported next to wall time.
    """
    import torch

    from assay.models.hf.model import hf
    from assay.requests.types import LoglikelihoodRequest

    rows = [row for (doc, _), row in sorted(samples(samples_dir, task).items()) if doc < n_docs]
    requests = [
        LoglikelihoodRequest(arg["arg_0"], arg["arg_1"])
        for row in rows
        for arg in row["arguments"].values()
    ]
    lm = hf(pretrained=str(MODELS / "llama-38m"), dtype="float32", batch_size=16)
    batches: list[list[list[int]]] = []
    run_rows = lm.scorer._run_rows

    def spy(batch):
        batches.append([list(row.tokens) for row in batch])
        return run_rows(batch)

    lm.scorer._run_rows = spy
    lm.loglikelihood(requests)  # records the rows; also warms up
    recorded = list(batches)
    tokens = sum(len(row) for batch in recorded for row in batch)
    pad = lm.scorer.pad_id
    inputs = [
        torch.tensor([row + [pad] * (max(map(len, batch)) - len(row)) for row in batch])
        for batch in recorded
    ]

    def timed(fn) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        return time.perf_counter() - wall, time.process_time() - cpu

    def raw(module) -> None:
        with torch.inference_mode():
            for ids in inputs:
                module(input_ids=ids)

    runs = {
        "assay loglikelihood": lambda: lm.loglikelihood(requests),
        "raw model(input_ids)": lambda: raw(lm.model),
        "raw model body (no lm_head)": lambda: raw(lm.model.model),
    }
    # One intra-op thread and the best of interleaved repeats: on a shared machine, threads
    # waiting for a busy core make both wall and CPU time of multi-threaded passes erratic.
    torch.set_num_threads(threads)
    figures: dict[str, tuple[float, float]] = {}
    for _ in range(repeats):
        for name, fn in runs.items():
            wall, cpu = timed(fn)
            best = figures.get(name, (math.inf, math.inf))
            figures[name] = (min(wall, best[0]), min(cpu, best[1]))
    print(
        f"\n== physical limit: {len(requests)} HellaSwag requests ({n_docs} docs), "
        f"{len(recorded)} batches, {sum(map(len, recorded))} packed rows, {tokens} real tokens; "
        f"{threads} thread(s), best of {repeats}"
    )
    for name, (wall, cpu) in figures.items():
        print(f"{name:28s} {wall:6.2f} s ({tokens / wall:7,.0f} tokens/s), CPU {cpu:6.2f} s")
    assay_wall, assay_cpu = figures["assay loglikelihood"]
    for name in ("raw model(input_ids)", "raw model body (no lm_head)"):
        wall, cpu = figures[name]
        print(
            f"assay throughput / {name}: {wall / assay_wall:.0%} by wall, "
            f"{cpu / assay_cpu:.0%} by CPU (target >= 90%)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cases", default="hellaswag,gsm8k")
    parser.add_argument("--lmeval-python", type=Path, default=DEFAULT_LMEVAL_PYTHON)
    parser.add_argument("--no-limit-figure", action="store_true")
    parser.add_argument(
        "--limit-docs", type=int, default=100, help="HellaSwag docs for the physical-limit figure"
    )
    parser.add_argument(
        "--limit-threads", type=int, default=1, help="torch threads for the physical-limit figure"
    )
    parser.add_argument("--keep", type=Path, help="keep outputs here (default: a temp dir)")
    args = parser.parse_args()
    cases = [CASES[name] for name in args.cases.split(",")]
    if not all((MODELS / case.model).exists() for case in cases):
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "build_models.py")], check=True)
    use_lmeval = args.lmeval_python.exists()
    if not use_lmeval:
        print(f"{args.lmeval_python} not found: timing assay alone")
    work = args.keep or Path(tempfile.mkdtemp(prefix="assay-vs-lmeval-"))
    sides: dict[str, dict[str, Side]] = {}
    for case in cases:
        sides[case.name] = {"assay": Side()}
        if case.shared_prefix:
            sides[case.name]["assay unshared"] = Side()
        if use_lmeval and case.with_lmeval:
            sides[case.name]["lm-eval"] = Side()
    for round_ in range(args.rounds):
        for case in cases:
            base = work / f"{case.name}-{round_}"
            for label, side in sides[case.name].items():
                out = base / label.replace(" ", "-")
                if label == "lm-eval":
                    command = lmeval_command(args.lmeval_python, case, out)
                else:
                    command = assay_command(case, out, prefix_cache=label == "assay")
                side.runs.append(measure(command, out))
            print(f"round {round_ + 1}/{args.rounds} {case.name} done", file=sys.stderr)
    for case in cases:
        report(case, sides[case.name])
    hellaswag = sides.get("hellaswag")
    if hellaswag and not args.no_limit_figure:
        physical_limit(
            hellaswag["assay"].runs[-1].out,
            CASES["hellaswag"].task,
            args.limit_docs,
            args.limit_threads,
        )
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
