"""Time `assay --help`, `assay tasks list` and `import assay` in fresh processes.

Each command runs --rounds times (interleaved); the median wall time is printed. Then one
`assay --help` runs in a process that reports which heavy libraries it imported: torch,
transformers and datasets must stay unimported (they load lazily, only when a run needs them).

    python benchmarks/startup.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

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


def _time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.rounds):
        for name, command in CASES.items():
            times[name].append(_time(command))
    print(f"{'command':<20} {'median s':>9} {'min s':>7}  (fresh process, {args.rounds} rounds)")
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
        return 1
    print("ok: `assay --help` imports no heavy library")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
