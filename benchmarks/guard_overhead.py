"""What the runtime guard costs a task whose scoring is Python of its own.

An lm-eval YAML task with `process_results: !function utils.process_results` (a regex
extraction and an exact match, as gsm8k-like utils do) is loaded through assay's registry; its
process_results is called --calls times, in a fresh interpreter each arm:

- plain: no guard installed (what a task with unsafe_code, or any run before this guard, pays);
- guarded: inside `scoring_window`, the audit hook installed (what every task without
  unsafe_code that has Python of its own pays);
- guarded, with events: the same, each call also opening a file (an `open` audit event: the hook
  runs for every event in the process once installed, watched or not).

Also the cost of opening and closing one scoring window (assay opens two per shard of docs).

    python benchmarks/guard_overhead.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

YAML = """\
task: guard_bench
dataset_path: json
dataset_kwargs:
  data_files:
    test: rows.jsonl
test_split: test
output_type: generate_until
doc_to_text: "{{q}}"
doc_to_target: "{{a}}"
process_results: !function utils.process_results
metric_list:
  - metric: exact_match
"""

UTILS = textwrap.dedent(
    """\
    import re

    ANSWER = re.compile(r"#### (\\-?[0-9\\.\\,]+)")

    def process_results(doc, results):
        found = ANSWER.search(results[0])
        answer = found.group(1).replace(",", "") if found else "[invalid]"
        return {"exact_match": float(answer == doc["a"])}
    """
)

ARM = textwrap.dedent(
    """\
    import json, sys, time
    from assay.tasks.registry import Registry
    from assay.tasks.runtime_guard import scoring_window

    folder, calls, arm = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    config = Registry([folder], builtins=False).get("guard_bench")
    score = config.process_results
    doc, results = {"q": "q", "a": "42"}, ["so the answer is #### 42"]
    touched = folder + "/rows.jsonl"

    def loop(with_event):
        start = time.perf_counter()
        for _ in range(calls):
            score(doc, results)
            if with_event:
                open(touched).close()
        return (time.perf_counter() - start) / calls

    out = {}
    if arm == "plain":
        out["call"] = loop(False)
        out["call+open"] = loop(True)
    else:
        with scoring_window(config, confirmed=False):
            out["call"] = loop(False)
            out["call+open"] = loop(True)
        start = time.perf_counter()
        for _ in range(1000):
            with scoring_window(config, confirmed=False):
                pass
        out["window"] = (time.perf_counter() - start) / 1000
    print(json.dumps(out))
    """
)


def arm(folder: Path, calls: int, name: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", ARM, str(folder), str(calls), name],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    calls = parser.parse_args().calls
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "bench.yaml").write_text(YAML)
        (folder / "utils.py").write_text(UTILS)
        (folder / "rows.jsonl").write_text(json.dumps({"q": "q", "a": "42"}) + "\n")
        plain, guarded = arm(folder, calls, "plain"), arm(folder, calls, "guarded")
    us = 1e6
    print(f"process_results calls: {calls} per arm")
    for key in ("call", "call+open"):
        extra = guarded[key] - plain[key]
        print(
            f"  {key:10s} plain {plain[key] * us:7.2f} us   guarded {guarded[key] * us:7.2f} us"
            f"   guard {extra * us:+6.2f} us/call"
        )
    print(f"  one scoring window (open and close): {guarded['window'] * us:.1f} us")


if __name__ == "__main__":
    main()
