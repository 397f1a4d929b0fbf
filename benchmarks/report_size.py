"""Size and load time of `assay report` pages for large runs.

Two synthetic assay run folders per size (a multiple-choice task with few-shot-length prompts,
four choices, per-doc acc), written as `assay run --log-samples` writes them; the report of the
pair is built, then opened in headless Chromium until its script has decoded the samples and
drawn the first page. Load time is Chromium's wall time for the page minus its wall time for an
empty page (browser start-up), best of --rounds.

    python benchmarks/report_size.py [--sizes 10000 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from assay.results.readers import read_run
from assay.results.report import build_report

TASK = "synthetic_mc"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_run(folder: Path, docs: int, seed: int) -> None:
    """An assay run folder with `docs` samples records."""
    rng = random.Random(seed)
    truth = random.Random(0)
    folder.mkdir(parents=True)
    correct = 0
    with (folder / f"samples_{TASK}.jsonl").open("w") as out:
        for doc_id in range(docs):
            question = f"Question {doc_id}: " + " ".join(
                truth.choice(["which", "value", "is", "the", "largest", "of", "these"])
                for _ in range(truth.randint(20, 120))
            )
            choices = [f" option {k} for {doc_id}" for k in range(4)]
            gold = truth.randrange(4)
            logprobs = [-rng.uniform(1, 20) for _ in choices]
            acc = float(max(range(4), key=lambda k: logprobs[k]) == gold)
            correct += int(acc)
            doc = {
                "question": question,
                "choices": choices,
                "label": gold,
                "subject": f"s{doc_id % 17}",
            }
            prompt = "The following are questions.\n\n" + question + "\nAnswer:"
            record = {
                "doc_id": doc_id,
                "doc": doc,
                "target": str(gold),
                "arguments": {
                    f"gen_args_{k}": {"arg_0": prompt, "arg_1": c} for k, c in enumerate(choices)
                },
                "resps": [[[str(lp), "False"]] for lp in logprobs],
                "filtered_resps": [[str(lp), "False"] for lp in logprobs],
                "filter": "none",
                "metrics": ["acc"],
                "doc_hash": sha(json.dumps(doc, indent=2, ensure_ascii=False)),
                "prompt_hash": sha(prompt),
                "target_hash": sha(str(gold)),
                "acc": acc,
                "cluster": doc["subject"],
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    mean = correct / docs
    results = {
        "results": {
            TASK: {
                "name": TASK,
                "alias": TASK,
                "sample_len": docs,
                "acc,none": mean,
                "acc_stderr,none": (mean * (1 - mean) / (docs - 1)) ** 0.5,
            }
        },
        "configs": {TASK: {"task": TASK, "metadata": {"cluster_key": "subject"}}},
        "n-samples": {TASK: {"original": docs, "effective": docs}},
        "config": {"model": "synthetic", "model_args": f"seed={seed}"},
    }
    (folder / "results.json").write_text(json.dumps(results))


def chromium_seconds(page: Path, profile: Path) -> tuple[float, str]:
    command = [
        shutil.which("chromium") or "/usr/bin/chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=60000",
        "--dump-dom",
        page.as_uri(),
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    return time.perf_counter() - start, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="assay-report-bench-"))
    empty = root / "empty.html"
    empty.write_text("<!DOCTYPE html><html><body></body></html>")
    baseline = min(chromium_seconds(empty, root / "p0")[0] for _ in range(args.rounds))
    print(f"chromium start-up (empty page): {baseline:.2f} s")
    print(f"{'docs per run':>12} {'runs':>4} {'report MB':>10} {'build s':>8} {'load s':>7}")
    for size in args.sizes:
        runs = []
        for seed in (1, 2):
            write_run(root / f"{size}_{seed}", size, seed)
            runs.append(read_run(root / f"{size}_{seed}"))
        start = time.perf_counter()
        page_text = build_report(runs)
        build = time.perf_counter() - start
        page = root / f"report_{size}.html"
        page.write_text(page_text, encoding="utf-8")
        loads = []
        for round_ in range(args.rounds):
            seconds, dom = chromium_seconds(page, root / f"p{size}_{round_}")
            if 'data-ready="1"' not in dom:
                raise SystemExit(f"the {size}-sample page did not finish loading")
            loads.append(seconds - baseline)
        size_mb = page.stat().st_size / 1e6
        print(f"{size:>12} {2:>4} {size_mb:>10.1f} {build:>8.1f} {min(loads):>7.2f}")
    shutil.rmtree(root)


if __name__ == "__main__":
    main()
