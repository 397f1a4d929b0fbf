"""Representative runs on the repository's offline fixtures, and a diff of two sets of them.

A refactor of the run keeps results.json and samples files byte-identical; this script is how
that is checked. `run OUT` writes one folder per fixture run under OUT (multiple choice and a
generated answer with filters from lm-eval YAMLs, IFEval replayed, MT-Bench's follow-up turns and
AlpacaEval graded by replayed judges, HumanEval's example rows scored in the sandbox, and the
tiny Llama of the tests through `--model hf`); `diff A B` compares two such trees: samples files
byte for byte, results.json without the fields that record when and how long (and the versions
that hold the commit).

    PYTHONPATH=src python benchmarks/fixture_runs.py run /tmp/before
    ... change the code ...
    PYTHONPATH=src python benchmarks/fixture_runs.py run /tmp/after
    python benchmarks/fixture_runs.py diff /tmp/before /tmp/after
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
INPUTS = Path(tempfile.gettempdir()) / "assay_fixture_inputs"
"""The task file and tiny model every tree's runs read."""

HUMANEVAL_EXAMPLES = """\
from dataclasses import replace

from assay.catalog.humaneval import TASKS_TABLE as HUMANEVAL


def example_rows(config):
    rows = list(config.example_rows)
    return lambda **_: {"test": rows}


TASKS_TABLE = [
    replace(c, name="example_" + c.name, hf_repo=None, dataset_loader=example_rows(c))
    for c in HUMANEVAL
]
"""

RUNS: dict[str, list[str]] = {
    "lm_eval_yaml": [
        "--model", "dummy", "--include-path", "examples/tasks",
        "--tasks", "arithmetic,arithmetic_mc", "--num-fewshot", "2",
    ],
    "ifeval_replay": [
        "--model", "replay", "--model-args", "path=examples/ifeval_gpt4_responses.jsonl",
        "--tasks", "ifeval", "--limit", "60",
    ],
    "mt_bench_judged": [
        "--tasks", "mt_bench_example",
        "--model", "replay", "--model-args", "path=examples/judges/mt_bench_responses.jsonl",
        "--judge-model", "replay",
        "--judge-model-args", "path=examples/judges/mt_bench_verdicts.jsonl",
    ],
    "alpaca_eval_judged": [
        "--tasks", "alpaca_eval_example",
        "--model", "replay", "--model-args", "path=examples/judges/alpaca_eval_responses.jsonl",
        "--judge-model", "replay",
        "--judge-model-args", "path=examples/judges/alpaca_eval_verdicts.jsonl",
    ],
    "humaneval_sandbox": [
        "--model", "dummy", "--custom-tasks", "{work}/humaneval_examples.py",
        "--tasks", "example_humaneval", "--confirm-run-unsafe-code", "--sandbox", "rlimits",
    ],
}  # fmt: skip

VOLATILE = frozenset(
    {
        "date",
        "start_time",
        "end_time",
        "total_evaluation_time_seconds",
        "timings",
        "versions",
        "git_hash",
    }
)
"""results.json fields that say when a run happened, how long it took, or which commit ran it."""


ADDRESS = re.compile(r" at 0x[0-9a-f]+")

CHECKOUT = "checkout.txt"
"""The file `run` writes into OUT naming the checkout that ran: paths under it (a task's
config_source) are compared relative to it, so that two checkouts' trees compare equal."""


def _run_all(out: Path, only: list[str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    (out / CHECKOUT).write_text(str(ROOT), encoding="utf-8")
    # The inputs stay in one place, so that two trees record the same paths and weights.
    work = INPUTS
    work.mkdir(exist_ok=True)
    (work / "humaneval_examples.py").write_text(HUMANEVAL_EXAMPLES, encoding="utf-8")
    runs = dict(RUNS)
    if not only or "tiny_hf" in only:
        sys.path.insert(0, str(ROOT / "tests"))
        from fixtures.tiny_model import build_tiny_model

        model = work / "tiny_llama"
        if not (model / "config.json").exists():
            build_tiny_model(model)
        runs["tiny_hf"] = [
            "--model", "hf", "--model-args", f"pretrained={model},dtype=float32",
            "--include-path", "examples/tasks", "--tasks", "arithmetic_mc,arithmetic",
            "--limit", "12", "--device", "cpu",
        ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    failed = 0
    for name, args in runs.items():
        if only and name not in only:
            continue
        folder = out / name
        command = [
            sys.executable, "-m", "assay", "run", *(a.format(work=work) for a in args),
            "--output-dir", str(folder), "--log-samples", "--overwrite", "--no-progress",
        ]  # fmt: skip
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        print(f"{name}: exit {done.returncode}")
        if done.returncode != 0:
            failed += 1
            print(done.stderr[-3000:], file=sys.stderr)
    return 1 if failed else 0


def _stable(value: Any, root: str | None) -> Any:
    """`value` without the volatile fields, at any depth, with the checkout `root` (where
    known) written as `<checkout>`."""
    if isinstance(value, dict):
        return {k: _stable(v, root) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v, root) for v in value]
    if isinstance(value, str):  # a function's repr holds its address in that process
        value = ADDRESS.sub(" at 0x", value)
        return value.replace(root, "<checkout>") if root else value
    return value


def _comparable(results: dict[str, Any], root: str | None) -> Any:
    """A results.json as compared: without volatile fields, paths under the checkout `root`
    relative to it, and without the task hash of a task whose config holds a function's repr
    (its address, so its hash, changes per process)."""
    for name, config in results.get("configs", {}).items():
        if ADDRESS.search(json.dumps(config)):
            results.get("provenance", {}).get("tasks", {}).get(name, {}).pop("task_hash", None)
    return _stable(results, root)


def _checkout(tree: Path) -> str | None:
    """The checkout that wrote `tree` (None for a tree written before `run` recorded it)."""
    path = tree / CHECKOUT
    return path.read_text(encoding="utf-8") if path.is_file() else None


def _diff(a: Path, b: Path) -> int:
    differ = 0
    names = sorted({p.relative_to(a) for p in a.rglob("*") if p.is_file()})
    for rel in names:
        left, right = a / rel, b / rel
        if not right.exists():
            print(f"missing in {b}: {rel}")
            differ += 1
        elif rel.name.startswith("results") and rel.suffix == ".json":
            one = _comparable(json.loads(left.read_text(encoding="utf-8")), _checkout(a))
            two = _comparable(json.loads(right.read_text(encoding="utf-8")), _checkout(b))
            if one != two:
                print(f"differs: {rel}")
                differ += 1
        elif rel.name.startswith("samples") and left.read_bytes() != right.read_bytes():
            print(f"differs: {rel}")
            differ += 1
    compared = [r for r in names if r.name.startswith(("results", "samples"))]
    print(f"{len(compared)} results/samples files compared, {differ} differ")
    return 1 if differ or not compared else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the fixtures into OUT")
    run.add_argument("out", type=Path)
    run.add_argument("--only", nargs="*", default=[], help="run only these fixture runs")
    diff = sub.add_parser("diff", help="compare two trees written by `run`")
    diff.add_argument("a", type=Path)
    diff.add_argument("b", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        return _run_all(args.out, args.only)
    return _diff(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
