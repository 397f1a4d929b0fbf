"""lm-eval's packaged task tree through assay: listing times beside lm-eval's, and the share that validates.

    .venv/bin/python benchmarks/lm_eval_tree.py [--lm-eval-python /work/lmeval-venv/bin/python]

The peer's Python (a virtualenv with lm-eval installed) provides the tree, `lm-eval ls tasks`
and the set of task YAMLs whose `!function` code imports in lm-eval's own environment (the
denominator of the validation share: a task whose code cannot even import there is broken for
lm-eval users too). Prints:
- wall and CPU seconds of `assay tasks list --include-path <tree>`, cold (empty index cache)
  and warm, beside `lm-eval ls tasks`;
- the share of tasks, groups and tags that pass `assay validate --no-data`, and the most
  common reasons for the rest.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run in the peer's Python: every task YAML of lm-eval's index, loaded as lm-eval loads it
# (includes merged, `!function` imported); prints the files whose code does not import.
_IMPORTS_IN_PEER = r"""
import json, logging, sys
logging.disable(logging.CRITICAL)
from lm_eval.tasks._index import Kind
from lm_eval.tasks._yaml_loader import load_yaml
from lm_eval.tasks.manager import TaskManager
failing = {}
for name, entry in TaskManager().task_index.items():
    if entry.kind in (Kind.TASK, Kind.PY_TASK) and entry.yaml_path:
        try:
            load_yaml(entry.yaml_path, resolve_func=True)
        except (Exception, SystemExit) as exc:
            failing[str(entry.yaml_path)] = f"{type(exc).__name__}: {exc}"[:300]
json.dump(failing, open(sys.argv[1], "w"))
"""


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds, CPU seconds (user + system of the child) and the finished process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def reason(error: str) -> str:
    """An error message with paths and quoted names blanked, to count failures by cause."""
    error = re.sub(r"/\S+", "<path>", error)
    return re.sub(r"'[^']*'", "'…'", error)[:110]


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--lm-eval-python", default="/work/lmeval-venv/bin/python")
    args = parser.parse_args()
    peer = Path(args.lm_eval_python)
    if not peer.exists():
        sys.exit(f"{peer}: no such Python; pass --lm-eval-python of a virtualenv with lm-eval.")
    tree = subprocess.run(
        [str(peer), "-c", "import lm_eval, os; print(os.path.dirname(lm_eval.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tree = f"{tree}/tasks"
    assay = [sys.executable, "-m", "assay"]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "ASSAY_TASK_INDEX_CACHE": f"{tmp}/index"}
        print(f"tree: {tree} ({sum(1 for _ in Path(tree).rglob('*.yaml'))} YAML files)")
        print(f"{'listing':<44}{'wall s':>8}{'cpu s':>8}{'lines':>8}")
        for label, cmd in (
            ("assay tasks list (cold: empty index cache)", [*assay, "tasks", "list", "--include-path", tree]),
            ("assay tasks list (warm)", [*assay, "tasks", "list", "--include-path", tree]),
            ("lm-eval ls tasks", [str(peer.parent / "lm-eval"), "ls", "tasks"]),
        ):  # fmt: skip
            wall, cpu, done = timed(cmd, env)
            if done.returncode != 0:
                sys.exit(f"{' '.join(cmd)} failed: {done.stderr[-2000:]}")
            print(f"{label:<44}{wall:>8.2f}{cpu:>8.2f}{len(done.stdout.splitlines()):>8}")

        failing_file = f"{tmp}/failing.json"
        subprocess.run([str(peer), "-c", _IMPORTS_IN_PEER, failing_file], check=True)
        import_fails = json.loads(Path(failing_file).read_text())
        report = f"{tmp}/validate.json"
        wall, cpu, done = timed(
            [*assay, "validate", "--no-data", "--include-path", tree, "--json", report], env
        )
        entries = json.loads(Path(report).read_text())["entries"]
    print(f"\nassay validate --no-data on the whole tree: {wall:.1f} s wall, {cpu:.1f} s cpu")
    tasks = [e for e in entries if e["kind"] == "task"]
    importable = [e for e in tasks if e["file"] not in import_fails]
    for label, group in (
        ("tasks", tasks),
        ("tasks whose !function code imports in lm-eval's env", importable),
        ("groups", [e for e in entries if e["kind"] == "group"]),
        ("tags", [e for e in entries if e["kind"] == "tag"]),
        ("unreadable YAML files", [e for e in entries if e["kind"] == "file"]),
    ):
        ok = sum(e["ok"] for e in group)
        share = f"{100 * ok / len(group):6.2f} %" if group else "     -"
        print(f"  {label:<54}{ok:>6} / {len(group):<6}{share}")
    print("\nmost common reasons among importable tasks that fail:")
    causes = collections.Counter(reason(e["error"]) for e in importable if not e["ok"])
    for cause, count in causes.most_common(12):
        print(f"  {count:>5}  {cause}")


if __name__ == "__main__":
    main()
