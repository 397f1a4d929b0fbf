"""Harness overhead: the dummy model over all of HellaSwag validation, assay vs lm-eval.

Both tools run the same lm-eval-format YAML (benchmarks/tasks/hellaswag.yaml, over the local dump
in ../shared/data/hellaswag) with `--model dummy`, so the model costs nothing and the figures are
the harness itself: data loading, prompt rendering, request building, scoring and writing. Each
command runs in a fresh process; wall time, CPU time (user + sys, steadier on a busy machine) and
peak RSS are taken from the child's own rusage. lm-eval runs from its side virtualenv
(../lmeval-venv, or --lmeval) when it exists. Rounds are interleaved and the median is printed.

Then a memory-flatness check: the same task over 10,000 and over 100,000 docs (the validation rows
replicated into a temporary JSONL, its Arrow cache built by an unmeasured first run) must peak
within 1.3x of each other, since assay streams docs shard by shard instead of holding a whole
task. The check is on anonymous memory (the process's own heap); total RSS is printed too, and
also counts the pages of datasets' memory-mapped Arrow files that the run has read, which the
kernel reclaims as page cache.

Then a phase breakdown of one assay run (--log-samples as given): the same command in a process
that times where the run goes: importing assay, loading the data (datasets included), building
prompts and requests, the executor (planning, the response cache, the dummy model), filters and
metrics, samples serialisation, and writing the files; the rest is aggregation and reporting.

    python benchmarks/overhead.py [--rounds 3] [--log-samples] [--skip-lm-eval] [--skip-memory]
        [--skip-phases]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "benchmarks" / "tasks"
DATA = ROOT.parent / "shared" / "data" / "hellaswag" / "hellaswag_val.jsonl"
DEFAULT_LMEVAL = ROOT.parent / "lmeval-venv" / "bin" / "lm_eval"
ASSAY = [sys.executable, "-m", "assay"]
TARGET_RATIO = 0.25
FLAT_RATIO = 1.3


@dataclass
class Run:
    wall: float
    cpu: float
    peak_mb: float
    """Peak resident set (ru_maxrss): heap plus touched pages of memory-mapped files."""
    peak_anon_mb: float
    """Peak anonymous (private heap) memory, sampled every 20 ms from /proc."""
    output: str


def _anon_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def measure(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> Run:
    """Run `command` once; wall, CPU and peak RSS of that child alone (os.wait4)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={
                **os.environ,
                # Offline for both tools: lm-eval otherwise waits out hub look-ups on a machine
                # without a network (about 50 s of its wall time here), which is not harness work.
                "HF_DATASETS_OFFLINE": "1",
                "HF_HUB_OFFLINE": "1",
                "TOKENIZERS_PARALLELISM": "false",
                **(env or {}),
            },
        )
        peak_anon = 0.0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            peak_anon = max(peak_anon, _anon_mb(proc.pid))
            time.sleep(0.02)
        log.seek(0)
        output = log.read().decode(errors="replace")
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(command)}\n{output}")
    cpu = usage.ru_utime + usage.ru_stime
    return Run(wall, cpu, usage.ru_maxrss / 1024, peak_anon, output)


def assay_command(include: Path, task: str, out: Path | None, log_samples: bool) -> list[str]:
    command = [*ASSAY, "run", "--model", "dummy", "--tasks", task]
    command += ["--include-path", str(include), "--no-progress"]
    if out is not None:
        command += ["--output-dir", str(out)] + (["--log-samples"] if log_samples else [])
    return command


def lm_eval_command(lm_eval: Path, out: Path | None, log_samples: bool) -> list[str]:
    command = [str(lm_eval), "--model", "dummy", "--tasks", "hellaswag_local"]
    command += ["--include_path", str(TASKS)]
    if out is not None:
        command += ["--output_path", str(out)] + (["--log_samples"] if log_samples else [])
    return command


# Runs `assay run ARGS...` with timers around each phase's entry point; prints them as JSON.
_PHASES = """
import json, sys, time
start = time.perf_counter()
from assay.run import evaluation as evaluator
from assay.cli import main as cli_main
from assay.execution.local import LocalExecutor
from assay.results.writer import OutputDir
spent = {"import assay": time.perf_counter() - start}

def timed(owner, name, phase):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        began = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[phase] = spent.get(phase, 0.0) + time.perf_counter() - began
    setattr(owner, name, wrapper)

timed(evaluator.Evaluation, "load_data", "load data (datasets)")
timed(LocalExecutor, "run", "executor (plan, cache, model)")
timed(evaluator, "apply_filters", "filters")
timed(evaluator, "score", "metrics")
from assay.results import samples
timed(samples, "sample_record", "samples: records")
timed(samples, "dumps", "samples: JSON")
timed(OutputDir, "write_samples", "samples: files")
timed(OutputDir, "write_results", "results.json")
timed(evaluator.Evaluation, "_run_task", "tasks")
code = 0
try:
    code = cli_main(sys.argv[1:]) or 0
except SystemExit as exc:
    code = exc.code or 0
spent["total"] = time.perf_counter() - start
print("PHASES=" + json.dumps(spent))
sys.exit(code)
"""


def phase_breakdown(out: Path | None, log_samples: bool) -> dict[str, float]:
    """Seconds per phase of one assay run (phases may nest: see the printed notes)."""
    command = assay_command(TASKS, "hellaswag_local", out, log_samples)
    run = measure([sys.executable, "-c", _PHASES, *command[3:]], ROOT)
    line = next(x for x in run.output.splitlines() if x.startswith("PHASES="))
    return json.loads(line[len("PHASES=") :])


def print_phases(spent: dict[str, float]) -> None:
    total = spent.pop("total")
    # What a task's loop spends outside the timed phases it contains: docs, prompts, requests.
    tasks = spent.pop("tasks", 0.0)
    inner = ("executor (plan, cache, model)", "filters", "metrics", "samples: records")
    inner += ("samples: JSON", "samples: files")
    spent["docs, prompts and requests"] = tasks - sum(spent.get(k, 0.0) for k in inner)
    print(f"phases of one assay run ({total:.2f} s wall, in-process timers):")
    for phase, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"  {phase:<34} {seconds:6.2f} s  {seconds / total:5.1%}")
    rest = total - sum(spent.values())
    print(f"  {'other (aggregation, table, exit)':<34} {rest:6.2f} s  {rest / total:5.1%}")


def metric_line(output: str) -> str:
    """The acc row of a printed results table (both tools print lm-eval's layout)."""
    return next((line.strip() for line in output.splitlines() if "|acc " in line), "?")


def replicated_task(tmp: Path, n_docs: int) -> Path:
    """An include dir whose task `hellaswag_local` reads `n_docs` rows (validation, repeated)."""
    folder = tmp / f"docs_{n_docs}"
    folder.mkdir()
    rows = DATA.read_text(encoding="utf-8").splitlines()
    with (folder / "data.jsonl").open("w", encoding="utf-8") as handle:
        for line in itertools.islice(itertools.cycle(rows), n_docs):
            handle.write(line + "\n")
    shutil.copy(TASKS / "utils.py", folder / "utils.py")
    text = (TASKS / "hellaswag.yaml").read_text(encoding="utf-8")
    text = text.replace("../shared/data/hellaswag/hellaswag_val.jsonl", str(folder / "data.jsonl"))
    (folder / "hellaswag.yaml").write_text(text, encoding="utf-8")
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lmeval", type=Path, default=DEFAULT_LMEVAL, help="lm_eval executable")
    parser.add_argument(
        "--log-samples", action="store_true", help="both tools write results and samples files"
    )
    parser.add_argument("--skip-lm-eval", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-phases", action="store_true")
    args = parser.parse_args()
    if not DATA.exists():
        raise SystemExit(f"{DATA} not found: this benchmark needs the local HellaSwag dump.")
    n_docs = sum(1 for _ in DATA.open(encoding="utf-8"))
    use_lm_eval = args.lmeval.exists() and not args.skip_lm_eval
    failures = []

    with tempfile.TemporaryDirectory(prefix="assay-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        runs: dict[str, list[Run]] = {"assay": [], "lm-eval": []}
        for r in range(args.rounds):
            out = tmp / f"assay_{r}" if args.log_samples else None
            runs["assay"].append(
                measure(assay_command(TASKS, "hellaswag_local", out, args.log_samples), ROOT)
            )
            if use_lm_eval:
                out = tmp / f"lmeval_{r}" if args.log_samples else None
                runs["lm-eval"].append(
                    measure(lm_eval_command(args.lmeval, out, args.log_samples), ROOT)
                )
        print(
            f"HellaSwag validation, {n_docs} docs, --model dummy, zero-shot"
            f"{', results + samples written' if args.log_samples else ''}; "
            f"median of {args.rounds} interleaved rounds"
        )
        print(
            f"{'tool':<8} {'wall s':>7} {'cpu s':>7} {'docs/s':>8} {'peak RSS MB':>12} "
            f"{'peak anon MB':>13}  acc row"
        )
        medians = {}
        for tool, tool_runs in runs.items():
            if not tool_runs:
                continue
            wall = statistics.median(r.wall for r in tool_runs)
            cpu = statistics.median(r.cpu for r in tool_runs)
            peak = max(r.peak_mb for r in tool_runs)
            anon = max(r.peak_anon_mb for r in tool_runs)
            medians[tool] = (wall, cpu)
            print(
                f"{tool:<8} {wall:7.2f} {cpu:7.2f} {n_docs / wall:8.0f} {peak:12.0f} {anon:13.0f}  "
                f"{metric_line(tool_runs[0].output)}"
            )
        if "lm-eval" in medians:
            wall_ratio = medians["assay"][0] / medians["lm-eval"][0]
            cpu_ratio = medians["assay"][1] / medians["lm-eval"][1]
            verdict = "ok" if wall_ratio <= TARGET_RATIO else "MISSED"
            print(
                f"assay / lm-eval: wall {wall_ratio:.3f}x, cpu {cpu_ratio:.3f}x "
                f"(target wall <= {TARGET_RATIO}x): {verdict}"
            )
            if wall_ratio > TARGET_RATIO:
                failures.append("overhead")
        else:
            print("lm-eval side venv not found (or skipped): assay figures only")

        if not args.skip_phases:
            out = tmp / "assay_phases" if args.log_samples else None
            print_phases(phase_breakdown(out, args.log_samples))

        if not args.skip_memory:
            # A private datasets cache: the replicated files are new each time.
            cache_env = {"HF_DATASETS_CACHE": str(tmp / "hf_datasets")}
            runs_by_size = {}
            for size in (10_000, 100_000):
                folder = replicated_task(tmp, size)
                command = assay_command(folder, "hellaswag_local", None, False)
                # The first run converts the JSONL into datasets' Arrow cache (a one-off cost of
                # `datasets`, paid by lm-eval too); the measured run is the second.
                measure(command, ROOT, cache_env)
                run = runs_by_size[size] = measure(command, ROOT, cache_env)
                print(
                    f"memory: {size:>7} docs: wall {run.wall:6.2f} s, {size / run.wall:6.0f} docs/s, "
                    f"peak RSS {run.peak_mb:6.0f} MB, peak anon {run.peak_anon_mb:6.0f} MB"
                )
            small, large = runs_by_size[10_000], runs_by_size[100_000]
            rss_ratio = large.peak_mb / small.peak_mb
            anon_ratio = large.peak_anon_mb / small.peak_anon_mb
            # Touched pages of the memory-mapped Arrow cache count in RSS but are page cache the
            # kernel reclaims; the process's own (anonymous) memory is what streaming keeps flat.
            verdict = "ok" if anon_ratio <= FLAT_RATIO else "MISSED"
            print(
                f"memory: 100k / 10k peak anon = {anon_ratio:.2f} (target <= {FLAT_RATIO}): "
                f"{verdict}; peak RSS incl. mapped Arrow files = {rss_ratio:.2f}"
            )
            if anon_ratio > FLAT_RATIO:
                failures.append("memory")
    print(json.dumps({"failures": failures}))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
