"""assay's `hf` backend against lm-eval's on one GPU, in one command under a deadline.

    python3 benchmarks/gpu_check.py --out gpu.json            # on a machine with a GPU
    .venv/bin/python benchmarks/gpu_check.py --dry-run --out dry.json   # the same steps on the CPU

What it does, in this order, each step skipped (and recorded as skipped) once it would overrun
`--deadline` (450 s by default, so that start-up and clean-up keep the run within 8 minutes; a
running step is stopped at the deadline):
1. builds random-init Llama models from configs (seeded, saved once to a local folder with a
   byte-level BPE tokenizer trained on the benchmark data, so both harnesses load the same
   files): ~1B parameters in bfloat16, and ~3B after the 1B steps when time is left;
2. per task, assay `hf` and lm-eval `hf` in this process (`assay.evaluate`,
   `lm_eval.simple_evaluate`), same model, same dtype (the checkpoint's: dtype=auto on both),
   batch size `auto` on both, then a fixed 32:
   - hellaswag: benchmarks/tasks/hellaswag.yaml over benchmarks/data (1,000 docs, 0-shot);
   - mmlu_shaped: benchmarks/tasks/hellaswag_mmlu.yaml (200 docs, 5-shot, ~600 shared tokens);
   - gsm8k: benchmarks/tasks/gsm8k.yaml over benchmarks/data (100 docs, 5-shot, greedy, at
     most 256 new tokens);
   with wall time (model load included on both sides), tokens/s, peak GPU memory (PyTorch's
   allocator, reset before each run) and per-doc parity: per-choice loglikelihood max |diff|,
   share of docs with equal acc, share of identical generations;
3. assay with each of its tricks switched off in turn (batch splitting switched *on*, since it
   is off on CUDA), batch size 32, so each one's effect on the GPU is a number; and with
   FlashAttention-2 in place of SDPA where the flash_attn package is installed.

`--dry-run` runs every step on the CPU with tiny float32 models and a handful of docs (lm-eval
and assay both), so the script is exercised by the test suite (tests/benchmarks/).

On the GPU machine (no network, no package index): `make gpu-wheels` here first, then there
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site python3 benchmarks/gpu_check.py --out $OUT/gpu.json
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import gzip
import importlib.util
import json
import math
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "benchmarks" / "tasks"
DATA = ROOT / "benchmarks" / "data"
sys.path.insert(0, str(ROOT / "tests"))

TARGETS: dict[str, Any] = {
    "loglikelihood_max_abs_diff": "within bfloat16 noise",
    "acc_equal_share": 0.99,
    "generations_identical_share": 0.95,
    "wall_ratio": {"hellaswag": 0.6, "mmlu_shaped": 0.3, "gsm8k": 0.8},
    "peak_memory_ratio": 1.0,
}
"""assay / lm-eval: what a GPU run should show (docs/performance.md, GPU)."""


@dataclass(frozen=True)
class Shape:
    """A Llama configuration; vocabulary size comes from the trained tokenizer."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int


@dataclass(frozen=True)
class TaskCase:
    """One task as both harnesses run it."""

    name: str
    task: str
    yaml: str
    docs: int
    generation: bool = False


@dataclass(frozen=True)
class Plan:
    """Models, doc counts and devices of a full run or a dry run."""

    models: dict[str, Shape]
    cases: tuple[TaskCase, ...]
    device: str
    dtype: str
    vocab: int
    max_positions: int
    max_gen_toks: int
    fixed_batch: int = 32


FULL = Plan(
    models={
        "llama-1b": Shape(hidden=2048, layers=16, heads=32, kv_heads=8, intermediate=8192),
        "llama-3b": Shape(hidden=3072, layers=28, heads=24, kv_heads=8, intermediate=8192),
    },
    cases=(
        TaskCase("hellaswag", "hellaswag_local", "hellaswag.yaml", 1000),
        TaskCase("mmlu_shaped", "hellaswag_mmlu_local", "hellaswag_mmlu.yaml", 200),
        TaskCase("gsm8k", "gsm8k_local", "gsm8k.yaml", 100, generation=True),
    ),
    device="cuda",
    dtype="bfloat16",
    vocab=8192,
    max_positions=2048,  # the longest prompt (GSM8K, 5-shot) plus 256 new tokens fits
    max_gen_toks=256,
)
DRY = Plan(
    models={
        "tiny-a": Shape(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128),
        "tiny-b": Shape(hidden=96, layers=2, heads=4, kv_heads=2, intermediate=192),
    },
    cases=(
        TaskCase("hellaswag", "hellaswag_local", "hellaswag.yaml", 6),
        TaskCase("mmlu_shaped", "hellaswag_mmlu_local", "hellaswag_mmlu.yaml", 4),
        TaskCase("gsm8k", "gsm8k_local", "gsm8k.yaml", 3, generation=True),
    ),
    device="cpu",
    dtype="float32",
    vocab=512,
    max_positions=1024,  # lm-eval's batch_size=auto tries rows this long: keep the CPU quick
    max_gen_toks=16,
)

DATA_FILES = {
    "../shared/data/hellaswag/hellaswag_val.jsonl": "hellaswag_val_1000.jsonl.gz",
    "../shared/data/gsm8k/train.jsonl": "gsm8k_train_500.jsonl.gz",
    "../shared/data/gsm8k/test.jsonl": "gsm8k_test_100.jsonl.gz",
}
"""The task YAMLs' shared-data paths and the repository slices that replace them."""


class DeadlineReached(BaseException):
    """Raised inside a step when the run's deadline passes (a BaseException, so that a
    harness's own `except Exception` cannot swallow it)."""


@dataclass
class Step:
    """One measured run, or why it did not run."""

    name: str
    status: str = "pending"
    """done, skipped, stopped (at the deadline) or failed."""
    reason: str | None = None
    seconds: float | None = None
    figures: dict[str, Any] = field(default_factory=dict)


class Clock:
    """The deadline: steps that would overrun it are skipped, a running one is stopped.

    `seconds` may be math.inf (no deadline: every step runs to its end, as the dry run's test
    needs on a busy machine); `now` reads the time (a test passes its own)."""

    def __init__(self, seconds: float, now: Callable[[], float] = time.monotonic) -> None:
        self.now = now
        self.start = now()
        self.seconds = seconds

    def elapsed(self) -> float:
        return self.now() - self.start

    def left(self) -> float:
        return self.seconds - self.elapsed()

    @contextlib.contextmanager
    def limit(self) -> Iterator[None]:
        """Raise DeadlineReached in this thread if the block is still running at the deadline."""

        def stop(signum: int, frame: Any) -> None:
            raise DeadlineReached

        if math.isinf(self.seconds):
            yield
            return
        previous = signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, max(0.01, self.left()))
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


class Runner:
    """Runs steps in order under the clock and keeps their records."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.steps: list[Step] = []

    def run(self, name: str, fn: Callable[[], dict[str, Any]], estimate: float = 0.0) -> Step:
        step = Step(name)
        self.steps.append(step)
        left = self.clock.left()
        if estimate > left:
            step.status = "skipped"
            step.reason = f"deadline: {left:.0f} s left, step estimated at {estimate:.0f} s"
            print(f"[skip] {name}: {step.reason}", flush=True)
            return step
        start = time.monotonic()
        try:
            with self.clock.limit():
                step.figures = fn()
            step.status = "done"
        except DeadlineReached:
            step.status, step.reason = "stopped", "deadline reached while running"
        except Exception as exc:  # one failed step must not lose the others' figures
            where = "".join(traceback.format_exc().splitlines(keepends=True)[-12:])
            step.status, step.reason = "failed", f"{type(exc).__name__}: {exc}"[:2000]
            step.figures = {"traceback": where}
        step.seconds = time.monotonic() - start
        _release_memory()
        shown = step.reason or ", ".join(f"{k} {v}" for k, v in _headline(step.figures))
        print(f"[{step.status}] {name} ({step.seconds:.1f} s): {shown}", flush=True)
        return step

    def skip(self, name: str, reason: str) -> Step:
        """Record a step that cannot run here."""
        step = Step(name, status="skipped", reason=reason)
        self.steps.append(step)
        print(f"[skip] {name}: {reason}", flush=True)
        return step

    def seconds_of(self, name: str) -> float | None:
        for step in self.steps:
            if step.name == name and step.status == "done":
                return step.seconds
        return None


def _headline(figures: dict[str, Any]) -> list[tuple[str, Any]]:
    keys = ("wall_s", "tokens_per_s", "peak_gpu_mb", "metric")
    return [(k, figures[k]) for k in keys if figures.get(k) is not None]


def _release_memory() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# -- inputs: tasks over the repository's data, models from configs ---------------------------


def write_tasks(folder: Path, plan: Plan) -> Path:
    """The benchmark task YAMLs with their data paths pointed at benchmarks/data."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(TASKS / "utils.py", folder / "utils.py")
    for case in plan.cases:
        text = (TASKS / case.yaml).read_text(encoding="utf-8")
        for shared, local in DATA_FILES.items():
            text = text.replace(shared, str(DATA / local))
        if case.generation:
            assert "max_gen_toks: 32" in text, f"{case.yaml}: generation budget not found"
            text = text.replace("max_gen_toks: 32", f"max_gen_toks: {plan.max_gen_toks}")
        data_lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
        assert not any("../shared/data" in line for line in data_lines), case.yaml
        (folder / case.yaml).write_text(text, encoding="utf-8")
    return folder


def corpus() -> Iterator[str]:
    """HellaSwag contexts and endings, GSM8K questions and answers from benchmarks/data."""
    with gzip.open(DATA / "hellaswag_val_1000.jsonl.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            yield f"{row['activity_label']}: {row['ctx']}"
            yield from row["endings"]
    for name in ("gsm8k_train_500.jsonl.gz", "gsm8k_test_100.jsonl.gz"):
        with gzip.open(DATA / name, "rt", encoding="utf-8") as lines:
            for line in lines:
                row = json.loads(line)
                yield f"Question: {row['question']}\nAnswer: {row['answer']}"


def build_model(folder: Path, shape: Shape, plan: Plan, seed: int) -> dict[str, Any]:
    """Train the tokenizer, draw the weights (seeded) on the plan's device, save both."""
    import torch
    from fixtures.tiny_model import train_tokenizer
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = train_tokenizer(corpus(), plan.vocab, model_max_length=plan.max_positions)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        intermediate_size=shape.intermediate,
        max_position_embeddings=plan.max_positions,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    with torch.device(plan.device):
        model = LlamaForCausalLM(config)
    model = model.to(getattr(torch, plan.dtype)).eval()
    model.save_pretrained(folder)  # config.json records the dtype: dtype=auto loads it back
    tokenizer.save_pretrained(folder)
    params = sum(p.numel() for p in model.parameters())
    del model
    return {"parameters": params, "vocab": len(tokenizer), "dtype": plan.dtype}


# -- one run of each harness -------------------------------------------------------------------


@contextlib.contextmanager
def measured(device: str) -> Iterator[dict[str, Any]]:
    """Wall time and peak memory of PyTorch's allocator on `device` (None on the CPU)."""
    import torch

    on_gpu = device == "cuda" and torch.cuda.is_available()
    if on_gpu:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    figures: dict[str, Any] = {}
    start = time.perf_counter()
    yield figures
    if on_gpu:
        torch.cuda.synchronize()
    figures["wall_s"] = round(time.perf_counter() - start, 3)
    figures["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1) if on_gpu else None


def run_assay(
    model_dir: Path, case: TaskCase, tasks: Path, out: Path, batch: int | str, plan: Plan,
    tweak: Callable[[Any], None] | None = None, **model_args: Any,
) -> dict[str, Any]:  # fmt: skip
    """assay `hf` on one task; `tweak` switches a trick off on the loaded backend."""
    from assay import evaluate
    from assay.models.hf.model import hf

    with measured(plan.device) as figures:
        lm: Any = hf(pretrained=str(model_dir), batch_size=batch, device=plan.device, **model_args)
        if tweak is not None:
            tweak(lm)
        results = evaluate(
            lm, case.task, include_path=tasks, limit=case.docs, output_dir=out,
            log_samples=True, cache=False, show_progress=False,
        )  # fmt: skip
    [path] = sorted(out.rglob(f"samples_{case.task}*.jsonl"))
    samples = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    figures.update(
        samples=samples,
        metrics=results["results"][case.task],
        batch_sizes=lm.batch_sizes or None,
        prefix_cache=lm.prefix_cache_stats(),
        tokenizer=lm.tokenizer,
    )
    return figures


def run_lm_eval(
    model_dir: Path, case: TaskCase, task_manager: Any, batch: int | str, plan: Plan
) -> dict[str, Any]:
    """lm-eval `hf` on one task, in this process."""
    from lm_eval import simple_evaluate

    with measured(plan.device) as figures:
        results = simple_evaluate(
            model="hf", model_args=f"pretrained={model_dir},dtype=auto", tasks=[case.task],
            batch_size=batch, device=plan.device, limit=case.docs, log_samples=True,
            task_manager=task_manager, bootstrap_iters=0, verbosity="ERROR",
        )  # fmt: skip
    assert results is not None
    figures.update(
        samples=results["samples"][case.task],
        metrics=results["results"][case.task],
        batch_sizes=results.get("config", {}).get("batch_sizes") or None,
    )
    return figures


# -- what the samples say ---------------------------------------------------------------------


def _pairs(sample: dict[str, Any]) -> list[tuple[str, ...]]:
    """A sample's request arguments in either layout (lm-eval's tuples, samples files' dicts)."""
    arguments = sample["arguments"]
    if isinstance(arguments, dict):
        return [tuple(str(v) for v in a.values()) for a in arguments.values()]
    return [tuple(a) if isinstance(a, list | tuple) else (str(a),) for a in arguments]


def by_doc(samples: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """One sample per doc (filters of one doc share its responses)."""
    docs: dict[int, dict[str, Any]] = {}
    for sample in samples:
        docs.setdefault(int(sample["doc_id"]), sample)
    return docs


def request_tokens(samples: list[dict[str, Any]], tokenizer: Any, generation: bool) -> int:
    """Tokens of every request as run alone (context + continuation, or prompt + answer)."""
    texts = []
    for sample in by_doc(samples).values():
        for pair, resp in zip(_pairs(sample), sample["resps"], strict=True):
            answer = str(resp[0]) if generation else ""
            texts.append("".join(str(part) for part in pair[: 1 if generation else 2]) + answer)
    return sum(len(ids) for ids in tokenizer(texts)["input_ids"])


def parity(
    assay: list[dict[str, Any]], lm_eval: list[dict[str, Any]], generation: bool
) -> dict[str, Any]:
    """Per-doc agreement of assay's samples with lm-eval's."""
    a, b = by_doc(assay), by_doc(lm_eval)
    if set(a) != set(b):
        return {"error": f"docs differ: {len(set(a) ^ set(b))} in only one side"}
    docs = sorted(a)
    figures: dict[str, Any] = {"docs": len(docs)}
    if generation:
        same = sum(a[d]["resps"] == b[d]["resps"] for d in docs)
        figures["generations_identical_share"] = round(same / len(docs), 4)
        return figures
    worst, choices = 0.0, 0
    for d in docs:
        for ra, rb in zip(a[d]["resps"], b[d]["resps"], strict=True):
            worst = max(worst, abs(float(ra[0][0]) - float(rb[0][0])))
            choices += 1
    acc_equal = sum(a[d].get("acc") == b[d].get("acc") for d in docs)
    figures.update(
        choices=choices,
        loglikelihood_max_abs_diff=worst,
        acc_equal_share=round(acc_equal / len(docs), 4),
        arguments_equal_share=round(sum(_pairs(a[d]) == _pairs(b[d]) for d in docs) / len(docs), 4),
    )
    return figures


def summary(figures: dict[str, Any], case: TaskCase) -> dict[str, Any]:
    """The figures of one run that go into the JSON (samples and tokenizer stay out)."""
    tokens = figures.pop("tokens", None)
    wall = figures["wall_s"]
    metric = "exact_match,strict-match" if case.generation else "acc,none"
    return {
        "wall_s": wall,
        "tokens": tokens,
        "tokens_per_s": round(tokens / wall, 1) if tokens else None,
        "peak_gpu_mb": figures["peak_gpu_mb"],
        "metric": figures["metrics"].get(metric),
        "batch_sizes": figures.get("batch_sizes"),
        "prefix_cache": figures.get("prefix_cache"),
    }


# -- the tricks, switched off one at a time ---------------------------------------------------


def _context_once_off(lm: Any) -> None:
    """Each choice in a row of its own, its context recomputed: the way the calibration table
    (`assay.models.hf.choice_cost`) weighs against one context pass per doc."""
    from assay.models.hf.choice_cost import ChoicePacking

    lm.scorer.packing = ChoicePacking(False, 0, 0.0, 0.0, 0, 0, str(lm.device), 0)


def _no_last_layer_pruning(lm: Any) -> None:
    if lm.scorer.last_layer is not None:
        lm.scorer.last_layer.remove()
        lm.scorer.last_layer = None


def _no_logits_to_keep(lm: Any) -> None:
    _no_last_layer_pruning(lm)  # the pruned layer only runs with kept logits
    lm.scorer.keep_logits = False
    if lm.scorer.prefixes is not None:
        lm.scorer.prefixes.keep_logits = False


def _batch_split_on(lm: Any) -> None:
    from assay.models.hf.score import PASS_OVERHEAD_TOKENS

    lm.scorer.pass_overhead = PASS_OVERHEAD_TOKENS


TRICKS: dict[str, tuple[dict[str, Any], Callable[[Any], None] | None]] = {
    "prefix_cache_off": ({"prefix_cache": False}, None),
    "context_once_off": ({}, _context_once_off),
    "last_layer_pruning_off": ({}, _no_last_layer_pruning),
    "logits_to_keep_off": ({}, _no_logits_to_keep),
    "batch_split_on": ({}, _batch_split_on),
    "flash_attention_2_on": ({"attn_implementation": "flash_attention_2"}, None),
}
"""Each of assay's scoring tricks as a model arg or a switch on the loaded backend, and the
FlashAttention-2 kernel in place of SDPA (run only where the flash_attn package is installed)."""


# -- the run ----------------------------------------------------------------------------------


def environment(plan: Plan) -> dict[str, Any]:
    import torch
    import transformers

    cuda = torch.cuda.is_available()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name(0) if cuda and plan.device == "cuda" else "cpu",
        "cuda": torch.version.cuda,
    }


def main(argv: list[str] | None = None, clock: Clock | None = None) -> dict[str, Any]:
    """Run the check `argv` asks for; `clock` replaces --deadline's (a test passes one)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--dry-run", action="store_true", help="tiny models on the CPU")
    parser.add_argument(
        "--deadline",
        type=float,
        default=450.0,
        help="seconds for all steps (default 450: with "
        "start-up and clean-up, the run stays within 8 minutes)",
    )
    parser.add_argument("--work", type=Path, help="models and outputs (default: a temp dir)")
    args = parser.parse_args(argv)
    plan = DRY if args.dry_run else FULL
    # Started before torch's import, which the deadline also pays for.
    clock = clock or Clock(args.deadline)
    import torch

    if plan.device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA device: run with --dry-run on the CPU")
    runner = Runner(clock)
    work = args.work or Path(tempfile.mkdtemp(prefix="assay-gpu-check-"))
    os.environ.setdefault("HF_DATASETS_CACHE", str(work / "datasets"))
    tasks = write_tasks(work / "tasks", plan)
    from lm_eval.tasks import TaskManager

    task_manager = TaskManager(include_path=str(tasks), include_defaults=False)
    report: dict[str, Any] = {
        "dry_run": args.dry_run,
        "deadline_s": None if math.isinf(clock.seconds) else clock.seconds,
        "environment": environment(plan),
        "targets": TARGETS,
        "models": {},
        "comparisons": [],
        "tricks": [],
    }
    for seed, (name, shape) in enumerate(plan.models.items()):
        folder = work / "models" / name
        built = runner.seconds_of(f"{_first(plan)}/build")
        scale = _params(shape) / _params(plan.models[_first(plan)])
        step = runner.run(
            f"{name}/build",
            lambda f=folder, s=shape, i=seed: build_model(f, s, plan, i),  # type: ignore[misc]
            estimate=(built or 0.0) * scale,
        )
        report["models"][name] = {**asdict(shape), **step.figures}
        if step.status != "done":
            continue
        compare_model(runner, plan, name, folder, tasks, task_manager, work, report, scale)
        if name == _first(plan):
            tricks(runner, plan, name, folder, tasks, work, report)
    report["steps"] = [asdict(step) for step in runner.steps]
    report["elapsed_s"] = round(clock.elapsed(), 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    print_report(report)
    print(f"wrote {args.out}")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return report


def _first(plan: Plan) -> str:
    return next(iter(plan.models))


def _params(shape: Shape) -> int:
    attention = 2 * shape.hidden * shape.hidden * (1 + shape.kv_heads / shape.heads)
    return int(shape.layers * (attention + 3 * shape.hidden * shape.intermediate))


def compare_model(
    runner: Runner, plan: Plan, name: str, folder: Path, tasks: Path, task_manager: Any,
    work: Path, report: dict[str, Any], scale: float,
) -> None:  # fmt: skip
    """Both harnesses on every task, batch size auto then fixed."""
    first = _first(plan)
    for batch in ("auto", plan.fixed_batch):
        for case in plan.cases:
            runs: dict[str, dict[str, Any]] = {}
            for side in ("assay", "lm-eval"):
                label = f"{case.name}/{batch}/{side}"
                earlier = runner.seconds_of(f"{first}/{label}") if name != first else None

                def one(
                    side: str = side, label: str = label, case: TaskCase = case,
                    batch: int | str = batch,
                ) -> dict[str, Any]:  # fmt: skip
                    if side == "assay":
                        out = work / "out" / name / label.replace("/", "-")
                        return run_assay(folder, case, tasks, out, batch, plan)
                    return run_lm_eval(folder, case, task_manager, batch, plan)

                step = runner.run(f"{name}/{label}", one, estimate=(earlier or 0.0) * scale)
                if step.status == "done":
                    runs[side] = step.figures
                    step.figures = {}
            if len(runs) < 2:
                continue
            tokenizer = runs["assay"].pop("tokenizer")
            for figures in runs.values():
                figures["tokens"] = request_tokens(figures["samples"], tokenizer, case.generation)
            entry: dict[str, Any] = {
                "model": name,
                "task": case.name,
                "docs": case.docs,
                "batch_size": batch,
                "parity": parity(
                    runs["assay"]["samples"], runs["lm-eval"]["samples"], case.generation
                ),
                "assay": summary(runs["assay"], case),
                "lm_eval": summary(runs["lm-eval"], case),
            }
            entry["wall_ratio"] = round(entry["assay"]["wall_s"] / entry["lm_eval"]["wall_s"], 3)
            peaks = entry["assay"]["peak_gpu_mb"], entry["lm_eval"]["peak_gpu_mb"]
            entry["peak_memory_ratio"] = (
                round(peaks[0] / peaks[1], 3) if None not in peaks and peaks[1] else None
            )
            entry["meets_targets"] = verdicts(entry, case)
            report["comparisons"].append(entry)


def verdicts(entry: dict[str, Any], case: TaskCase) -> dict[str, bool | None]:
    """Which of TARGETS a comparison meets (None: not measured, as peak memory on the CPU).
    Log-likelihood differences get no verdict: "within bfloat16 noise" is for a person to read."""
    share = "generations_identical_share" if case.generation else "acc_equal_share"
    value = entry["parity"].get(share)
    found: dict[str, bool | None] = {share: None if value is None else value >= TARGETS[share]}
    found["wall_ratio"] = entry["wall_ratio"] <= TARGETS["wall_ratio"][case.name]
    memory = entry["peak_memory_ratio"]
    found["peak_memory_ratio"] = None if memory is None else memory <= TARGETS["peak_memory_ratio"]
    return found


def tricks(
    runner: Runner, plan: Plan, name: str, folder: Path, tasks: Path, work: Path,
    report: dict[str, Any],
) -> None:  # fmt: skip
    """assay with each trick switched off in turn (batch size fixed, so only the trick moves)."""
    batch = plan.fixed_batch
    for case in plan.cases:
        # The same measure as the trick runs: the comparison's wall time, else the step's.
        base = next(
            (
                c["assay"]["wall_s"]
                for c in report["comparisons"]
                if (c["model"], c["task"], c["batch_size"]) == (name, case.name, batch)
            ),
            runner.seconds_of(f"{name}/{case.name}/{batch}/assay"),
        )
        for trick, (model_args, tweak) in TRICKS.items():
            if case.generation and trick not in ("prefix_cache_off", "flash_attention_2_on"):
                continue  # the others act on loglikelihood scoring only
            label = f"{case.name}/{batch}/assay/{trick}"
            if "attn_implementation" in model_args and not importlib.util.find_spec("flash_attn"):
                runner.skip(f"{name}/{label}", "the flash_attn package is not installed")
                continue
            out = work / "out" / name / label.replace("/", "-")

            def one(
                case: TaskCase = case, out: Path = out, model_args: dict = model_args,
                tweak: Callable | None = tweak,
            ) -> dict[str, Any]:  # fmt: skip
                figures = run_assay(folder, case, tasks, out, batch, plan, tweak, **model_args)
                figures.pop("tokenizer")
                figures.pop("samples")
                return summary(figures, case)

            step = runner.run(f"{name}/{label}", one, estimate=base or 0.0)
            if step.status == "done" and base:
                report["tricks"].append(
                    {
                        "model": name,
                        "task": case.name,
                        "trick": trick,
                        "wall_s": step.figures["wall_s"],
                        "wall_with_all_tricks_s": round(base, 3),
                        "slowdown": round(step.figures["wall_s"] / base, 3),
                        "peak_gpu_mb": step.figures["peak_gpu_mb"],
                        "metric": step.figures["metric"],
                    }
                )


def print_report(report: dict[str, Any]) -> None:
    print(f"\n== {report['environment']['device']}, dry run: {report['dry_run']}")
    for c in report["comparisons"]:
        p = c["parity"]
        agreement = (
            f"generations identical {p.get('generations_identical_share')}"
            if "generations_identical_share" in p
            else f"ll max|d| {p.get('loglikelihood_max_abs_diff', math.nan):.2e}, "
            f"acc equal {p.get('acc_equal_share')}"
        )
        print(
            f"{c['model']:9s} {c['task']:11s} batch {c['batch_size']!s:4s} "
            f"wall {c['assay']['wall_s']:7.2f} s vs lm-eval {c['lm_eval']['wall_s']:7.2f} s "
            f"({c['wall_ratio']:.2f}x), peak memory ratio {c['peak_memory_ratio']}, {agreement}"
        )
    for t in report["tricks"]:
        print(
            f"{t['model']:9s} {t['task']:11s} {t['trick']:24s} {t['wall_s']:7.2f} s "
            f"({t['slowdown']:.2f}x of all tricks on)"
        )
    skipped = [s["name"] for s in report.get("steps", []) if s["status"] != "done"]
    if skipped:
        print(f"not done: {', '.join(skipped)}")


if __name__ == "__main__":
    main()
