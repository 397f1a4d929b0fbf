"""Time `assay --help`, `assay tasks list` and `import assay` in fresh processes.

Each command runs --rounds times (interleaved); the median wall time is printed. Then one
`assay --help` runs in a process that reports which heavy libraries it imported: torch,
transformers and datasets must stay unimported (they load lazily, only when a run needs them).

Then time to first request: `run --limit 1` on HellaSwag with the ~38M benchmark model, assay
beside lm-eval (from ../lmeval-venv when it exists). Each runs in a fresh process whose model
class reports when its first loglikelihood call arrives; everything before it (imports, task
and data loading, model loading, prompt building) is what a restarted run pays again. The
whole run's wall and CPU time (the process's user + system seconds) are printed too. assay
runs twice per round: with the model loading in the background while data are read and
requests planned (the default), and with ASSAY_OVERLAP_LOAD=0 (the load at the first request,
after planning), side by side; with --baseline-src, also from another checkout's sources (its
`src` folder, e.g. before a change), in the same rounds. The machine's load average is printed
beside the figures.

    python benchmarks/startup.py [--rounds 7] [--first-request-rounds 2] [--lmeval-python PATH]
        [--baseline-src ../main/src]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "benchmarks" / "tasks"
MODEL = ROOT / "benchmarks" / ".models" / "llama-38m"
DEFAULT_LMEVAL_PYTHON = ROOT.parent / "lmeval-venv" / "bin" / "python"

HEAVY = ("torch", "transformers", "datasets")

CASES = {
    "import assay": [sys.executable, "-c", "import assay"],
    "assay --help": [sys.executable, "-m", "assay", "--help"],
    "assay tasks list": [sys.executable, "-m", "assay", "tasks", "list"],
}

_HELP_IMPORTS = f"""
import sys
from assay.cli.main import main
try:
    main(["--help"])
except SystemExit:
    pass
heavy = [m for m in {HEAVY!r} if m in sys.modules]
print("HEAVY=" + ",".join(heavy))
"""


# Patches the harness's model class to print the seconds since interpreter start-up at its first
# loglikelihood call, then runs the harness's CLI with the remaining arguments.
_FIRST_REQUEST = """
import sys, time
start = time.perf_counter()
which = sys.argv.pop(1)
if which == "assay":
    from assay.models.hf.model import HuggingFaceLM as Model
    from assay.cli import main as run
else:
    from lm_eval.models.huggingface import HFLM as Model
    from lm_eval.__main__ import cli_evaluate as run
inner = Model.loglikelihood
def first(self, *args, **kwargs):
    if not getattr(Model, "_seen", False):
        Model._seen = True
        print(f"FIRST_REQUEST={time.perf_counter() - start:.3f}", flush=True)
    return inner(self, *args, **kwargs)
Model.loglikelihood = first
if which == "assay":
    sys.exit(run(sys.argv[1:]))
run()
"""


def first_request(
    python: str,
    which: str,
    out: Path,
    overlap: bool = True,
    src: Path | None = None,
    cwd: Path = ROOT,
) -> tuple[float, float, float]:
    """(seconds to the first loglikelihood call, wall and CPU seconds of the whole run) of
    `--limit 1`; `overlap` False runs assay with ASSAY_OVERLAP_LOAD=0, `src` runs the assay
    sources there."""
    model_args = f"pretrained={MODEL},dtype=float32"
    if which == "assay":
        args = ["run", "--model", "hf", "--model-args", model_args, "--tasks", "hellaswag_local"]
        args += ["--include-path", str(TASKS), "--limit", "1", "--no-cache", "--no-progress"]
        args += ["--output-dir", str(out)]
    else:
        args = ["--model", "hf", "--model_args", model_args, "--tasks", "hellaswag_local"]
        args += ["--include_path", str(TASKS), "--limit", "1", "--output_path", str(out)]
    paths = {"PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    cpu_before = _children_cpu()
    began = time.perf_counter()
    done = subprocess.run(
        [python, "-c", _FIRST_REQUEST, which, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        # Offline for both tools: a hub look-up timing out on a machine without a network is
        # not start-up work.
        env={
            **os.environ,
            **(paths if src is not None else {}),
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "ASSAY_OVERLAP_LOAD": "1" if overlap else "0",
        },
    )
    wall = time.perf_counter() - began
    cpu = _children_cpu() - cpu_before
    line = next((x for x in done.stdout.splitlines() if x.startswith("FIRST_REQUEST=")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"{which} --limit 1 failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return float(line.split("=", 1)[1]), wall, cpu


def _children_cpu() -> float:
    """User + system seconds of this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def time_commands(rounds: int) -> bool:
    """Time the light commands; True when `assay --help` imported a heavy library."""
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(rounds):
        for name, command in CASES.items():
            times[name].append(_time(command))
    print(f"{'command':<20} {'median s':>9} {'min s':>7}  (fresh process, {rounds} rounds)")
    for name, values in times.items():
        print(f"{name:<20} {statistics.median(values):9.3f} {min(values):7.3f}")

    out = subprocess.run(
        [sys.executable, "-c", _HELP_IMPORTS], capture_output=True, text=True, check=True
    ).stdout
    heavy = next(line for line in out.splitlines() if line.startswith("HEAVY="))[6:]
    loaded = [m for m in heavy.split(",") if m]
    print(f"assay --help imports of {', '.join(HEAVY)}: {', '.join(loaded) or 'none'}")
    if loaded:
        print("FAIL: `assay --help` must not import heavy libraries")
        return True
    print("ok: `assay --help` imports no heavy library")
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--first-request-rounds", type=int, default=2)
    parser.add_argument("--lmeval-python", type=Path, default=DEFAULT_LMEVAL_PYTHON)
    parser.add_argument("--baseline-src", type=Path, help="also time assay from this src folder")
    parser.add_argument(
        "--shared", type=Path, default=Path("/work/shared"), help="where ../shared/data is"
    )
    parser.add_argument("--skip-commands", action="store_true", help="first request only")
    args = parser.parse_args()

    if not args.skip_commands and time_commands(args.rounds):
        return 1
    if args.first_request_rounds < 1:
        return 0
    if not MODEL.exists():
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "build_models.py")], check=True)
    # Side name: (interpreter, tool, overlapped load, assay sources).
    sides: dict[str, tuple[str, str, bool, Path | None]] = {
        "assay": (sys.executable, "assay", True, None),
        "assay, overlap off": (sys.executable, "assay", False, None),
    }
    if args.baseline_src is not None:
        sides["assay baseline"] = (sys.executable, "assay", True, args.baseline_src.resolve())
    if args.lmeval_python.exists():
        sides["lm-eval"] = (str(args.lmeval_python), "lm-eval", True, None)
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in sides}
    import tempfile

    from compare_lm_eval import workdir  # the task YAMLs read ../shared/data from the cwd

    cwd = workdir(args.shared)
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="assay-startup-") as tmp:
        for r in range(args.first_request_rounds):
            for i, (name, (python, tool, overlap, src)) in enumerate(sides.items()):
                out = Path(tmp) / f"{i}-{r}"
                figures[name].append(first_request(python, tool, out, overlap, src, cwd))
                loads.append(os.getloadavg()[0])
    print(
        f"\n--limit 1, HellaSwag, ~38M model, fresh process, median of "
        f"{args.first_request_rounds} rounds (1-min load average {min(loads):.1f}-"
        f"{max(loads):.1f}):"
    )
    for name, values in figures.items():
        first = statistics.median(v[0] for v in values)
        whole = statistics.median(v[1] for v in values)
        cpu = statistics.median(v[2] for v in values)
        print(
            f"{name:<18} first request after {first:6.2f} s, whole run {whole:6.2f} s wall, "
            f"{cpu:6.2f} s CPU  (rounds: {', '.join(f'{v[0]:.2f}/{v[1]:.2f}' for v in values)})"
        )
    on, off = (statistics.median(v[0] for v in figures[n]) for n in ("assay", "assay, overlap off"))
    print(f"assay time to first request, overlap on / off: {on / off:.2f}x")
    if "lm-eval" in figures:
        ratio = statistics.median(v[0] for v in figures["assay"]) / statistics.median(
            v[0] for v in figures["lm-eval"]
        )
        print(f"time to first request assay / lm-eval: {ratio:.2f}x")
    else:
        print("lm-eval side venv not found: assay figures only")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
