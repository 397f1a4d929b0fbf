"""The transformers backend side by side with lm-eval's: speed, memory and parity of the numbers.

    .venv/bin/python benchmarks/compare_lm_eval.py [--rounds 3] [--cases hellaswag,gsm8k]
        [--lmeval-python ../lmeval-venv/bin/python] [--no-floor] [--shared ../shared]
        [--baseline-src ../main/src] [--no-unshared]

Cases (settings of the peer figures):
- hellaswag: benchmarks/tasks/hellaswag.yaml, first 300 docs, zero-shot, llama-38m, float32,
  batch size 16. Target: assay <= 0.4x lm-eval's wall time (aim 0.35x); per-choice
  loglikelihoods within 1e-3 of lm-eval's; identical acc and acc_norm.
- gsm8k: benchmarks/tasks/gsm8k.yaml, first 40 test docs, 5-shot, greedy, llama-2m, batch size 8,
  max_gen_toks 32. Target: <= 0.7x; >= 95% identical generations; exact_match differing on at
  most one doc.
- mmlu_shaped: benchmarks/tasks/hellaswag_mmlu.yaml, an MMLU-shaped task (constant description,
  5-shot first_n, lettered choices, ~600 tokens shared by every doc), first 200 docs, llama-38m,
  batch size 16. Target: <= 0.2x; identical request arguments; loglikelihoods within 1e-3;
  identical acc. assay also runs with prefix_cache=false: the speed-up of prefix reuse.
- mmlu_builtin: the built-in mmlu subject tasks over local MMLU-shaped rows
  (benchmarks/tasks/mmlu_local.py: 4 subjects x 50 docs, 5-shot), assay with and without
  prefix reuse (lm-eval has no local copy of these rows): the speed-up on the real MMLU prompts.

--baseline-src also runs assay from another checkout's sources (its `src` folder, e.g. before a
change) in the same rounds, and reports its times beside this tree's with the parity of the two
samples files: "no case slower", measured. --no-unshared skips the prefix_cache=false runs.

Each command runs as a whole (`assay run` from the project venv, `python -m lm_eval` from the
side venv when it exists) through benchmarks/timed_run.py, rounds interleaved, median reported:
wall and CPU time, docs/s, the peak RSS of the process tree and the machine's load average (other
jobs on the cores move wall time most: compare ratios, and prefer CPU time).

The floor, per case: the token positions each tool's forward passes computed (padded rows; assay
also before padding), where each tool's time goes (start-up to the first request, the model load,
tokenization, forward passes, scoring around them, work between and after requests, writing),
and, from one extra assay run per case (not timed with the rounds), the raw-forward floor: bare
`model(input_ids)` passes in the same process over exactly the input ids assay's requests ran,
with the thread count each ran with. Parity is read from both samples files.

The task YAMLs read ../shared/data relative to the directory the commands run in: the repository
root when ../shared exists beside it, else a temporary directory beside a link to --shared.

Models are built with benchmarks/build_models.py when missing. Figures from a shared machine
vary; compare ratios measured in one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "benchmarks" / ".models"
TASKS = ROOT / "benchmarks" / "tasks"
TIMED_RUN = ROOT / "benchmarks" / "timed_run.py"
DEFAULT_LMEVAL_PYTHON = ROOT.parent / "lmeval-venv" / "bin" / "python"

# Runs a command and reports its wall time, CPU time and the peak RSS of its process tree
# (children that were waited for), so both harnesses are measured by the same code.
_MEASURE = """
import json, os, resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.call(sys.argv[2:], stdout=open(sys.argv[1], "w"), stderr=subprocess.STDOUT)
seconds = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = usage.ru_utime + usage.ru_stime
print(json.dumps({"code": code, "seconds": seconds, "cpu_seconds": cpu,
                  "peak_rss_mb": usage.ru_maxrss / 1024, "load": os.getloadavg()[0]}))
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
    "hellaswag": Case("hellaswag", "hellaswag_local", "llama-38m", 300, 16, 0.4, 0.35),
    "gsm8k": Case("gsm8k", "gsm8k_local", "llama-2m", 40, 8, 0.7, 0.7),
    "mmlu_shaped": Case(
        "mmlu_shaped", "hellaswag_mmlu_local", "llama-38m", 200, 16, 0.2, 0.2, True
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
    load: float
    """The machine's 1-minute load average when the command ended."""

    def timings(self) -> dict:
        """What benchmarks/timed_run.py recorded for this run."""
        return json.loads((self.out / "timings.json").read_text())


@dataclass
class Side:
    runs: list[Run] = field(default_factory=list)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.runs)


def assay_command(
    case: Case, out: Path, prefix_cache: bool = True, floor: bool = False
) -> list[str]:
    model_args = f"pretrained={MODELS / case.model},dtype=float32"
    if not prefix_cache:
        model_args += ",prefix_cache=false"
    # --limit is per task: the built-in MMLU case spreads its docs over its subjects.
    limit = case.docs // len(case.task.split(","))
    timed = [sys.executable, str(TIMED_RUN), str(out / "timings.json"), "assay"]
    return [
        *timed, *(["--floor"] if floor else []), "--",
        "run", "--model", "hf", "--model-args", model_args,
        "--tasks", case.task, "--include-path", str(TASKS), "--limit", str(limit),
        "--batch-size", str(case.batch_size), "--output-dir", str(out), "--log-samples",
        "--no-cache", "--no-progress", *case.assay_flags,
    ]  # fmt: skip


def lmeval_command(python: Path, case: Case, out: Path) -> list[str]:
    model_args = f"pretrained={MODELS / case.model},dtype=float32"
    return [
        str(python), str(TIMED_RUN), str(out / "timings.json"), "lm-eval", "--",
        "--model", "hf", "--model_args", model_args,
        "--tasks", case.task, "--include_path", str(TASKS), "--limit", str(case.docs),
        "--batch_size", str(case.batch_size), "--output_path", str(out), "--log_samples",
    ]  # fmt: skip


def measure(command: list[str], out: Path, cwd: Path, src: Path | None = None) -> Run:
    out.mkdir(parents=True, exist_ok=True)
    log = out / "command.log"
    # data_files in the task YAMLs are relative to the working directory, for both harnesses.
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(log), *command],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        # Offline for both tools: a hub look-up timing out on a machine without a network is
        # not evaluation work.
        env={
            **os.environ,
            **(
                {"PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
                if src
                else {}
            ),
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
        },
    )
    report = json.loads(done.stdout)
    if report["code"] != 0:
        sys.exit(f"command failed ({report['code']}): {' '.join(command)}\nsee {log}")
    return Run(report["seconds"], report["cpu_seconds"], report["peak_rss_mb"], out, report["load"])


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
    baseline = sides.get("assay baseline")
    if baseline is not None:
        wall = assay.median("seconds") / baseline.median("seconds")
        cpu = assay.median("cpu_seconds") / baseline.median("cpu_seconds")
        print(f"this tree / --baseline-src: {wall:.2f}x wall, {cpu:.2f}x CPU")
        for task in case.task.split(","):
            a, b = samples(assay.runs[-1].out, task), samples(baseline.runs[-1].out, task)
            same = generation_parity if case.name == "gsm8k" else loglikelihood_parity
            for line in same(a, b):
                print(f"{task} this tree vs baseline {line}")
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


def phases(timings: dict, wall: float) -> dict[str, float | None]:
    """Where a run's wall time went, from benchmarks/timed_run.py's events (None: not known)."""
    first, last, end = timings.get("first_request"), timings.get("last_request_end"), timings["end"]
    requests, forward = timings["requests"], timings["forward"]
    load = timings.get("load")
    if first is None or last is None:
        return {"whole run": wall}
    encode = timings["encode"] or None  # lm-eval's tokenization is not counted
    return {
        "to the first request": first,
        "  model load (assay: in the background)": load[1] - load[0] if load else None,
        "  waiting for the model": timings["waited"] or None,
        "inside requests": requests,
        "  tokenization": encode,
        "  forward passes": forward,
        "  scoring around them": requests - forward - (encode or 0.0),
        "between requests (streamed metrics, samples)": last - first - requests,
        "after the last request": end - last - timings["write"],
        "  writing results and samples": timings["write"],
        "interpreter start, exit and teardown": wall - end,
        "whole run": wall,
    }


def floor_report(case: Case, sides: dict[str, Side], floor: Run | None) -> None:
    """Tokens computed by each tool, the time split and assay's raw-forward floor."""
    print(f"-- {case.name}: where the time goes (medians over rounds; seconds)")
    split = {
        label: [phases(run.timings(), run.seconds) for run in side.runs]
        for label, side in sides.items()
    }
    labels = list(split)
    print(f"{'':46s}" + "".join(f"{label:>16s}" for label in labels))
    for name in split[labels[0]][0]:
        cells = []
        for label in labels:
            values = [row.get(name) for row in split[label]]
            known = [v for v in values if v is not None]
            cells.append(f"{statistics.median(known):16.2f}" if known else f"{'-':>16s}")
        print(f"{name:46s}" + "".join(cells))
    for label, side in sides.items():
        t = side.runs[-1].timings()
        real = f" ({t['tokens_real']:,} before padding)" if t["tokens_real"] else ""
        print(
            f"{label}: {t['tokens_padded']:,} token positions computed{real} "
            f"in {t['forward_calls']} forward passes"
        )
    loads = [run.load for side in sides.values() for run in side.runs]
    print(f"load average at the end of each command: {min(loads):.1f} to {max(loads):.1f}")
    if floor is None:
        return
    t = floor.timings()
    if "floor" not in t:
        print("floor: no forward passes recorded (a generation-only task is not replayed)")
        return
    print(
        f"raw-forward floor (assay's {t['floor_calls']} passes, {t['tokens_padded']:,} positions, "
        f"bare model(input_ids), same process and threads): {t['floor']:.2f} s; that run's "
        f"forward passes {t['forward']:.2f} s ({t['forward'] / t['floor']:.2f}x the floor), "
        f"inside requests {t['requests']:.2f} s ({t['requests'] / t['floor']:.2f}x)"
    )


def workdir(shared: Path) -> Path:
    """Where the commands run: the task YAMLs read ../shared/data relative to it."""
    if (ROOT.parent / "shared").exists():
        return ROOT
    place = Path(tempfile.mkdtemp(prefix="assay-bench-wd-"))
    (place / "shared").symlink_to(shared.resolve())
    (place / "run").mkdir()
    return place / "run"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cases", default="hellaswag,gsm8k")
    parser.add_argument("--lmeval-python", type=Path, default=DEFAULT_LMEVAL_PYTHON)
    parser.add_argument("--no-floor", action="store_true", help="skip the raw-forward floor run")
    parser.add_argument(
        "--shared",
        type=Path,
        default=Path("/work/shared"),
        help="data folder when ../shared is absent",
    )
    parser.add_argument("--docs", type=int, help="docs per case instead of its own (a quick look)")
    parser.add_argument("--baseline-src", type=Path, help="also time assay from this src folder")
    parser.add_argument("--no-unshared", action="store_true", help="skip prefix_cache=false")
    parser.add_argument("--keep", type=Path, help="keep outputs here (default: a temp dir)")
    args = parser.parse_args()
    cases = [CASES[name] for name in args.cases.split(",")]
    if args.docs is not None:
        cases = [dataclasses.replace(case, docs=args.docs) for case in cases]
    if not all((MODELS / case.model).exists() for case in cases):
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "build_models.py")], check=True)
    use_lmeval = args.lmeval_python.exists()
    if not use_lmeval:
        print(f"{args.lmeval_python} not found: timing assay alone")
    work = args.keep or Path(tempfile.mkdtemp(prefix="assay-vs-lmeval-"))
    cwd = workdir(args.shared)
    sides: dict[str, dict[str, Side]] = {}
    for case in cases:
        sides[case.name] = {"assay": Side()}
        if args.baseline_src is not None:
            sides[case.name]["assay baseline"] = Side()
        if case.shared_prefix and not args.no_unshared:
            sides[case.name]["assay unshared"] = Side()
        if use_lmeval and case.with_lmeval:
            sides[case.name]["lm-eval"] = Side()
    for round_ in range(args.rounds):
        for case in cases:
            base = work / f"{case.name}-{round_}"
            for label, side in sides[case.name].items():
                out = base / label.replace(" ", "-")
                src = args.baseline_src.resolve() if label == "assay baseline" else None
                if label == "lm-eval":
                    command = lmeval_command(args.lmeval_python, case, out)
                else:
                    command = assay_command(case, out, prefix_cache=label != "assay unshared")
                side.runs.append(measure(command, out, cwd, src))
            print(f"round {round_ + 1}/{args.rounds} {case.name} done", file=sys.stderr)
    floors: dict[str, Run] = {}
    if not args.no_floor:
        for case in cases:
            out = work / f"{case.name}-floor"
            floors[case.name] = measure(assay_command(case, out, floor=True), out, cwd)
    for case in cases:
        report(case, sides[case.name])
        floor_report(case, sides[case.name], floors.get(case.name))
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
