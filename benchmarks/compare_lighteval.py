"""lighteval's own tasks run by lighteval and by assay, side by side: parity per doc and wall time.

    .venv/bin/python benchmarks/compare_lighteval.py [--cases arc_easy,gsm8k,math_500]
        [--lighteval-python ../lighteval-venv/bin/python] [--rounds 1] [--keep DIR]
    .venv/bin/python benchmarks/compare_lighteval.py --freeze   # rewrite tests/data/lighteval_parity/

Both harnesses get lighteval's task by its name (`arc:easy|5`, `gsm8k|5`, `math_500|0`) and
load its dataset with their own, unmodified code: the rows are served offline as the hub dataset
the task names (tests/fixtures/hf_cache.py writes the datasets cache entry; HF_DATASETS_OFFLINE=1).

Cases (the three shapes of the parity requirement):
- arc_easy: `arc:easy|5` (log-likelihood multiple choice, loglikelihood_acc, few-shot examples
  drawn by lighteval's random_sampling_from_train). Rows in ARC's schema (question, choices
  {text, label}, answerKey) built from ../shared/data/hellaswag (context as the question, the four
  endings as choices). llama-38m, batch size 16.
- gsm8k: `gsm8k|5` (generative, stop at "Question:", 256 new tokens, math-verify extractive match
  `expr_gold_metric`), ../shared/data/gsm8k test and train rows. llama-2m, batch size 8.
- math_500: `math_500|0` (generative to the end of the context window, `pass@k:k=1&n=1` with
  math-verify) over the hand-written MATH-schema rows of benchmarks/data/math_500_local.jsonl,
  with the tokenizer's chat template (lighteval crashes on this task without one: it adds the
  task's stop tuple to a list). llama-2m, max_length 512. lighteval runs with batch size 1: it
  caps each batch's new tokens at the context window minus the batch's longest prompt, so only
  single-doc batches give each doc its own cap, which assay gives it in any batch (batch size 8).

lighteval runs through benchmarks/lighteval_side.py in its own virtualenv (docs/coming-from.md,
"From lighteval"); assay through `python -m assay run` with this checkout's source, by default in that
same virtualenv (assay reads lighteval's task definitions from the installed lighteval), so both
use the same torch and transformers. Each whole command is timed (rounds interleaved, median).
Parity: prompts identical on every doc, greedy generations identical on >= 95% of docs,
per-doc metric values equal, scores equal. Target: assay <= 0.5x lighteval's wall time.

--freeze runs lighteval alone on the small test cases (the 2048-position test model of
tests/fixtures/tiny_model.py) and writes its rows and per-doc outputs to tests/data/lighteval_parity/,
which the parity tests read (they never run lighteval); for the generative tasks also lighteval's
metric values on crafted answers (benchmarks/lighteval_side.py --score-texts), which assay's
replay backend answers with in the tests.
"""

from __future__ import annotations

import argparse
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "benchmarks" / ".models"
DATA = ROOT.parent / "shared" / "data"
FIXTURES = ROOT / "tests" / "data" / "lighteval_parity"
DEFAULT_LIGHTEVAL_PYTHON = ROOT.parent / "lighteval-venv" / "bin" / "python"

sys.path.insert(0, str(ROOT / "tests"))
from fixtures.lighteval_parity import (  # noqa: E402
    Parity,
    assay_samples,
    assay_scores,
    compare,
    write_datasets,
)


@dataclass(frozen=True)
class Case:
    name: str
    task: str
    """lighteval's task string."""
    model: str
    batch_size: int
    chat_template: bool = False
    max_length: int | None = None
    metrics: tuple[tuple[str, str], ...] = ()
    """(lighteval's per-doc metric name, assay's) pairs."""
    assay_batch_size: int | None = None
    """assay's batch size when it differs: assay gives each prompt its own generation cap,
    whatever shares its batch; lighteval needs single-doc batches for that."""


def _jsonl(path: Path, n: int, skip: int = 0) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    return rows[skip : skip + n]


def _arc_row(row: dict[str, Any]) -> dict[str, Any]:
    """A HellaSwag row in ARC's schema."""
    labels = ["A", "B", "C", "D"]
    return {
        "id": f"hellaswag-{row['ind']}",
        "question": row["ctx"],
        "choices": {"text": row["endings"], "label": labels},
        "answerKey": labels[int(row["label"])],
    }


def arc_rows(test: int, train: int) -> dict[str, Any]:
    source = DATA / "hellaswag" / "hellaswag_val.jsonl"
    return {
        "allenai/ai2_arc": {
            "subset": "ARC-Easy",
            "splits": {
                "test": [_arc_row(r) for r in _jsonl(source, test)],
                "train": [_arc_row(r) for r in _jsonl(source, train, skip=test)],
            },
        }
    }


def gsm8k_rows(test: int, train: int) -> dict[str, Any]:
    return {
        "openai/gsm8k": {
            "subset": "main",
            "splits": {
                "test": _jsonl(DATA / "gsm8k" / "test.jsonl", test),
                "train": _jsonl(DATA / "gsm8k" / "train.jsonl", train),
            },
        }
    }


def math_rows(test: int) -> dict[str, Any]:
    source = ROOT / "benchmarks" / "data" / "math_500_local.jsonl"
    return {
        "HuggingFaceH4/MATH-500": {"subset": "default", "splits": {"test": _jsonl(source, test)}}
    }


ARC_METRICS = (("acc", "acc"),)
GSM8K_METRICS = (("extractive_match", "extractive_match"),)
MATH_METRICS = (("pass@k:k=1&n=1", "pass@k:k=1&n=1"),)

CASES = {
    "arc_easy": (Case("arc_easy", "arc:easy|5", "llama-38m", 16, metrics=ARC_METRICS), lambda: arc_rows(200, 100)),
    "gsm8k": (Case("gsm8k", "gsm8k|5", "llama-2m", 8, metrics=GSM8K_METRICS), lambda: gsm8k_rows(40, 200)),
    "math_500": (
        Case("math_500", "math_500|0", "llama-2m", 1, True, 512, MATH_METRICS, 8),
        lambda: math_rows(24),
    ),
}  # fmt: skip

TEST_MODEL = "tiny-2k"
"""tests/fixtures/tiny_model.py's model with 2048 positions (build_tiny_model(max_positions=2048))."""

FREEZE = {
    "arc_easy": (Case("arc_easy", "arc:easy|3", TEST_MODEL, 8, metrics=ARC_METRICS), lambda: arc_rows(20, 20)),
    "gsm8k": (Case("gsm8k", "gsm8k|3", TEST_MODEL, 8, metrics=GSM8K_METRICS), lambda: gsm8k_rows(20, 20)),
    "math_500": (
        Case("math_500", "math_500|0", TEST_MODEL, 1, True, 320, MATH_METRICS),
        lambda: math_rows(12),
    ),
}  # fmt: skip


def first_docs(datasets: dict[str, Any], n: int | None) -> dict[str, Any]:
    """`datasets` with only the first `n` rows of each evaluation (test) split."""
    if n is None:
        return datasets
    return {
        repo: {**spec, "splits": {**spec["splits"], "test": spec["splits"]["test"][:n]}}
        for repo, spec in datasets.items()
    }


def lighteval_command(python: Path, case: Case, model: Path, out: Path) -> list[str]:
    command = [
        str(python), str(ROOT / "benchmarks" / "lighteval_side.py"), "--model", str(model),
        "--tasks", case.task, "--out", str(out / "lighteval.json"),
        "--batch-size", str(case.batch_size),
    ]  # fmt: skip
    if case.chat_template:
        # The test models' chat template writes BOS; lighteval would add a second one.
        command += ["--chat-template", "--no-special-tokens"]
    if case.max_length is not None:
        command += ["--max-length", str(case.max_length)]
    return command


def assay_command(python: Path, case: Case, model: Path, out: Path) -> list[str]:
    model_args = f"pretrained={model},dtype=float32"
    if case.max_length is not None:
        model_args += f",max_length={case.max_length}"
    command = [
        str(python), "-m", "assay", "run", "--model", "hf", "--model-args", model_args,
        "--tasks", f"lighteval|{case.task}",
        "--batch-size", str(case.assay_batch_size or case.batch_size),
        "--output-dir", str(out), "--log-samples",
        "--no-cache", "--no-progress",
    ]  # fmt: skip
    if case.chat_template:
        command.append("--apply-chat-template")
    return command


def timed(command: list[str], log: Path, env: dict[str, str]) -> float:
    """Wall time of `command` (output to `log`); exits when it fails."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with log.open("w") as sink:
        code = subprocess.call(command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    seconds = time.perf_counter() - start
    if code != 0:
        sys.exit(f"command failed ({code}): {' '.join(command)}\nsee {log}")
    return seconds


def offline_env(cache: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HF_DATASETS_CACHE": str(cache),
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(ROOT / "src"),
    }


def parity(case: Case, lighteval_out: dict[str, Any], assay_out: Path) -> Parity:
    [(task, run)] = lighteval_out["tasks"].items()
    return compare(
        task,
        run["docs"],
        run["results"],
        assay_samples(assay_out, case.task),
        assay_scores(assay_out, case.task),
        dict(case.metrics),
    )


def build_model(name: str) -> Path:
    if name == TEST_MODEL:
        from fixtures.tiny_model import build_tiny_model

        path = MODELS / TEST_MODEL
        if not path.exists():
            build_tiny_model(path, max_positions=2048)
        return path
    if not (MODELS / name).exists():
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "build_models.py")], check=True)
    return MODELS / name


def freeze(python: Path, work: Path, only: list[str]) -> None:
    """Run lighteval on the test cases and write tests/data/lighteval_parity/<case>.json."""
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for name, (case, rows) in FREEZE.items():
        if only and name not in only:
            continue
        datasets = rows()
        cache = work / name / "cache"
        write_datasets(cache, datasets)
        out = work / name / "lighteval"
        model = build_model(case.model)
        seconds = timed(
            lighteval_command(python, case, model, out), out / "log.txt", offline_env(cache)
        )
        run = json.loads((out / "lighteval.json").read_text())
        for task in run["tasks"].values():
            for doc in task["docs"]:
                del doc["input_tokens"]  # the prompt text is what the tests compare
        fixture = {
            "about": "lighteval's own run of its task over these rows (benchmarks/"
            "compare_lighteval.py --freeze); the parity tests compare assay with it.",
            "case": {
                "task": case.task,
                "model": "tests/fixtures/tiny_model.py build_tiny_model(max_positions=2048)",
                "batch_size": case.batch_size,
                "chat_template": case.chat_template,
                "max_length": case.max_length,
                "metrics": dict(case.metrics),
            },
            "datasets": datasets,
            "lighteval": run,
        }
        if run["tasks"][next(iter(run["tasks"]))]["docs"][0]["text"]:
            # Generative: lighteval's metrics also on crafted answers (no model).
            command = [
                str(python), str(ROOT / "benchmarks" / "lighteval_side.py"), "--score-texts",
                "--tasks", case.task, "--out", str(out / "scored.json"),
            ]  # fmt: skip
            timed(command, out / "scored.log", offline_env(cache))
            fixture["lighteval_scored"] = json.loads((out / "scored.json").read_text())
        path = FIXTURES / f"{name}.json"
        path.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {case.task}, lighteval {seconds:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=None, help=f"default: {','.join(CASES)}")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--lighteval-python", type=Path, default=DEFAULT_LIGHTEVAL_PYTHON)
    parser.add_argument(
        "--assay-python",
        type=Path,
        default=DEFAULT_LIGHTEVAL_PYTHON,
        help="runs `-m assay` with this checkout's source; lighteval's task names need "
        "lighteval importable, hence lighteval's virtualenv by default",
    )
    parser.add_argument(
        "--freeze", action="store_true", help="rewrite tests/data/lighteval_parity/"
    )
    parser.add_argument(
        "--docs", type=int, default=None, help="evaluate only the first N docs of each case"
    )
    parser.add_argument("--keep", type=Path, help="keep outputs here (default: a temp dir)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="assay-vs-lighteval-"))
    if args.freeze:
        if not args.lighteval_python.exists():
            sys.exit(
                f"{args.lighteval_python} not found: create lighteval's venv (docs/performance.md)"
            )
        freeze(args.lighteval_python, work, args.cases.split(",") if args.cases else [])
        return
    if not args.assay_python.exists():
        sys.exit(f"{args.assay_python} not found: create lighteval's venv (docs/performance.md)")
    use_lighteval = args.lighteval_python.exists()
    cases = [CASES[name] for name in (args.cases or ",".join(CASES)).split(",")]
    walls: dict[str, dict[str, list[float]]] = {}
    for round_ in range(args.rounds):
        for case, rows in cases:
            cache = work / case.name / "cache"
            if round_ == 0:
                write_datasets(cache, first_docs(rows(), args.docs))
            env = offline_env(cache)
            model = build_model(case.model)
            sides = walls.setdefault(case.name, {"assay": [], "lighteval": []})
            base = work / case.name / str(round_)
            sides["assay"].append(
                timed(
                    assay_command(args.assay_python, case, model, base / "assay"),
                    base / "assay.log",
                    env,
                )
            )
            if use_lighteval:
                command = lighteval_command(args.lighteval_python, case, model, base / "lighteval")
                sides["lighteval"].append(timed(command, base / "lighteval.log", env))
            print(f"round {round_ + 1}/{args.rounds} {case.name} done", file=sys.stderr)
    for case, _ in cases:
        sides = walls[case.name]
        print(f"\n== {case.name}: {case.task}, {case.model}, batch size {case.batch_size}")
        for label, seconds in sides.items():
            if seconds:
                rounds = ", ".join(f"{s:.1f}" for s in seconds)
                print(f"{label:10s} wall {statistics.median(seconds):6.2f} s (rounds: {rounds})")
        if not sides["lighteval"]:
            continue
        ratio = statistics.median(sides["assay"]) / statistics.median(sides["lighteval"])
        print(
            f"ratio assay/lighteval {ratio:.2f}x (target <= 0.5x): {'ok' if ratio <= 0.5 else 'MISSED'}"
        )
        last = work / case.name / str(args.rounds - 1)
        lighteval_out = json.loads((last / "lighteval" / "lighteval.json").read_text())
        for line in parity(case, lighteval_out, last / "assay").lines():
            print(line)
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
