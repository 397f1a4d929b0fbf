"""Size and load time of `assay report` pages for large runs.

Two synthetic assay run folders per size (a multiple-choice task with few-shot-length prompts,
four choices, per-doc acc), written as `assay run --log-samples` writes them; the report of the
pair is built, then opened in headless Chromium (driven by Playwright) and timed from
navigation to the page's own phase marks: tables drawn, the samples decoded and their first
page drawn (the page is usable), plots drawn. Best of --rounds.

    python benchmarks/report_size.py [--sizes 10000 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
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


def load_phases(page: Path) -> dict[str, float]:
    """Seconds from navigation to each phase mark of the page (tables drawn, first page of
    samples decoded and drawn, plots drawn), in headless Chromium driven by Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shutil.which("chromium") or "/usr/bin/chromium",
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        tab = browser.new_page()
        tab.goto(page.as_uri(), timeout=600_000)
        tab.wait_for_selector('body[data-plotted="1"][data-ready="1"]', timeout=600_000)
        marks = tab.evaluate(
            "Object.fromEntries(performance.getEntriesByType('mark')"
            ".map(m => [m.name, m.startTime / 1000]))"
        )
        browser.close()
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="assay-report-bench-"))
    print("seconds from navigation: tables drawn / first samples page usable / plots drawn")
    header = ("docs per run", "runs", "report MB", "build s", "tables s", "usable s", "plots s")
    print(" ".join(f"{h:>12}" for h in header))
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
        best = min((load_phases(page) for _ in range(args.rounds)), key=lambda m: m["samples"])
        row = (size, 2, f"{page.stat().st_size / 1e6:.2f}", f"{build:.1f}")
        row += tuple(f"{best[mark]:.2f}" for mark in ("tables", "samples", "plots"))
        print(" ".join(f"{v:>12}" for v in row))
    shutil.rmtree(root)


if __name__ == "__main__":
    main()
