"""Time a doc's choices behind one context pass against one row per choice; write the table.

    .venv/bin/python benchmarks/choice_calibration.py [--docs 64] [--repeats 3]
        [--models llama-2m,llama-38m] [--device cpu] [--write]

For each benchmark model (benchmarks/build_models.py), the `hf` backend scores the same HellaSwag
docs (0-shot, benchmarks/data, each context with its four endings, as lm-eval's hellaswag) both
ways, interleaved, --repeats times in one process; the best wall time of each way decides (CPU
time is recorded beside it). The two ways' log-likelihoods are checked to agree within 1e-5.

Each model stands for a size bucket (BUCKETS); with --write the rows replace those of the same
device in src/assay/models/hf/choice_calibration.json, the table `hf` runs read their choice
from (`assay.models.hf.choice_cost`). A device or size no row covers packs.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "benchmarks" / ".models"
DATA = ROOT / "benchmarks" / "data" / "hellaswag_val_1000.jsonl.gz"
TABLE = ROOT / "src" / "assay" / "models" / "hf" / "choice_calibration.json"
sys.path.insert(0, str(ROOT / "benchmarks" / "tasks"))

BUCKETS = {"llama-2m": (0, 10_000_000), "llama-38m": (10_000_000, 300_000_000)}
"""The model size bucket [min, max) each benchmark model stands for: the nearest measured size."""


def requests(n: int) -> list[Any]:
    """The first n HellaSwag docs' requests: (query, " " + ending) for each of four endings."""
    from utils import preprocess, split_context  # benchmarks/tasks/utils.py, as the task YAML

    from assay.requests.types import LoglikelihoodRequest

    out = []
    with gzip.open(DATA, "rt", encoding="utf-8") as lines:
        for _, line in zip(range(n), lines, strict=False):
            doc = json.loads(line)
            ctx_a, ctx_b = split_context(doc["ctx"])
            ctx = ctx_a + " " + ctx_b.capitalize() if ctx_a else ctx_b.capitalize()
            query = preprocess(doc["activity_label"] + ": " + ctx)
            out += [LoglikelihoodRequest(query, " " + preprocess(e)) for e in doc["endings"]]
    return out


def measure(model: str, device: str, docs: int, repeats: int) -> dict[str, Any]:
    """Both ways on one model: best wall and CPU seconds, tokens computed, and the table row."""
    import torch

    from assay.models.hf.choice_cost import ChoicePacking
    from assay.models.hf.model import hf

    lm = hf(pretrained=str(MODELS / model), dtype="float32", batch_size=16, device=device)
    work = requests(docs)
    tokens = [0]
    inner = lm.scorer._run_rows

    def counting(rows: Any, **kwargs: Any) -> Any:
        tokens[0] += sum(len(row.tokens) for row in rows)
        return inner(rows, **kwargs)

    lm.scorer._run_rows = counting
    best: dict[bool, dict[str, float]] = {}
    scores: dict[bool, list[float]] = {}
    counted: dict[bool, int] = {}
    for repeat in range(repeats + 1):  # the first round warms up, untimed
        for way in (True, False) if repeat % 2 else (False, True):
            lm.scorer.packing = ChoicePacking(way, 0, 0.0, 0.0, 0, 0, device, 0)
            tokens[0] = 0
            if device == "cuda":
                torch.cuda.synchronize()
            wall, cpu = time.perf_counter(), time.process_time()
            got = lm.loglikelihood(work)
            if device == "cuda":
                torch.cuda.synchronize()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            scores[way], counted[way] = [r.logprob for r in got], tokens[0]
            if repeat:
                seen = best.setdefault(way, {"wall": wall, "cpu": cpu})
                seen["wall"], seen["cpu"] = min(seen["wall"], wall), min(seen["cpu"], cpu)
    worst = max(abs(a - b) for a, b in zip(scores[True], scores[False], strict=True))
    if worst > 1e-5:
        sys.exit(f"{model}: the two ways differ by {worst:.2e} (> 1e-5): not calibrated")
    low, high = BUCKETS[model]
    return {
        "device": device,
        "min_parameters": low,
        "max_parameters": high,
        "context_once": best[True]["wall"] <= best[False]["wall"],
        "model": f"benchmarks/build_models.py {model}",
        "parameters": lm.scorer.parameters,
        "task": f"HellaSwag 0-shot, {docs} docs, batch size 16, float32",
        "context_once_seconds": round(best[True]["wall"], 3),
        "per_choice_seconds": round(best[False]["wall"], 3),
        "context_once_cpu_seconds": round(best[True]["cpu"], 3),
        "per_choice_cpu_seconds": round(best[False]["cpu"], 3),
        "context_once_tokens": counted[True],
        "per_choice_tokens": counted[False],
        "max_abs_difference": worst,
        "best_of": repeats,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "measured": datetime.date.today().isoformat(),
        "machine": f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", default="llama-2m,llama-38m")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--write", action="store_true", help=f"update {TABLE.name}")
    args = parser.parse_args()
    rows = [measure(m, args.device, args.docs, args.repeats) for m in args.models.split(",")]
    for row in rows:
        way = "one context pass per doc" if row["context_once"] else "one row per choice"
        print(
            f"{row['model']}: context once {row['context_once_seconds']:.3f} s "
            f"({row['context_once_tokens']:,} tokens), per choice {row['per_choice_seconds']:.3f} s "
            f"({row['per_choice_tokens']:,} tokens); CPU {row['context_once_cpu_seconds']:.3f} / "
            f"{row['per_choice_cpu_seconds']:.3f} s: {way}"
        )
    print(json.dumps(rows, indent=1))
    if args.write:
        table = json.loads(TABLE.read_text(encoding="utf-8"))
        kept = [r for r in table["rows"] if r["device"] != args.device]
        table["rows"] = kept + rows
        TABLE.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {len(rows)} {args.device} rows to {TABLE}")


if __name__ == "__main__":
    main()
