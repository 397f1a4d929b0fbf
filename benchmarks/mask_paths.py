"""Forward time of the `hf` backend's ways to run a multiple-choice doc's rows, side by side.

    .venv/bin/python benchmarks/mask_paths.py [--docs 48] [--repeats 3] [--model llama-38m]

Packed rows (a doc's context once, then each choice's tokens) need a 4-D mask so each choice
sees the context and itself only; an explicit mask keeps torch's SDPA off its causal kernel.
On the same HellaSwag docs as benchmarks/choice_calibration.py (0-shot, batch 16, float32),
interleaved --repeats times in one process after an untimed warm-up, this times:

- `packed, boolean 4-D mask`: the path runs take today (`sdpa`'s mask form);
- `packed, additive 4-D mask`: the same rows with the mask as float 0 / -inf (`eager`'s form);
- `one row per choice, causal kernel`: right-padded rows, no mask (`attention_mask` None, so
  SDPA runs `is_causal`): the context recomputed per choice;
- `packed ids, causal kernel`: the packed run's very input ids and positions replayed without
  the mask: the same token work on the causal kernel. Its scores are wrong (choices see each
  other); it only says what the mask itself costs.

For each: the best wall and CPU seconds inside the model's forward passes and of the whole
loglikelihood call, token positions computed, and the largest log-likelihood difference from
the first path.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from choice_calibration import MODELS, requests  # the same docs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default="llama-38m")
    args = parser.parse_args()

    import torch

    from assay.models.hf.choice_cost import ChoicePacking
    from assay.models.hf.model import hf

    lm = hf(pretrained=str(MODELS / args.model), dtype="float32", batch_size=16, device="cpu")
    scorer = lm.scorer
    work = requests(args.docs)
    forward = scorer._forward
    spent = {"wall": 0.0, "cpu": 0.0, "tokens": 0}
    passes: list[tuple[Any, Any, dict[str, Any]]] = []

    def timed_forward(ids: Any, keep: Any, kwargs: dict[str, Any]) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return forward(ids, keep, kwargs)
        finally:
            spent["wall"] += time.perf_counter() - wall
            spent["cpu"] += time.process_time() - cpu
            spent["tokens"] += ids.numel()
            passes.append((ids, keep, {k: v for k, v in kwargs.items() if k != "attention_mask"}))

    scorer._forward = timed_forward

    def scored(context_once: bool, mask_style: str) -> list[float]:
        scorer.packing = ChoicePacking(context_once, 0, 0.0, 0.0, 0, 0, "cpu", 0)
        scorer.mask_style = mask_style
        return [r.logprob for r in lm.loglikelihood(work)]

    def replay() -> None:
        for ids, keep, kwargs in packed_passes:
            forward(ids, keep, kwargs)

    paths = {
        "packed, boolean 4-D mask": lambda: scored(True, "bool"),
        "packed, additive 4-D mask": lambda: scored(True, "additive"),
        "one row per choice, causal kernel": lambda: scored(False, "bool"),
        "packed ids, causal kernel": replay,
    }
    passes.clear()
    scored(True, "bool")
    packed_passes = list(passes)
    best: dict[str, dict[str, float]] = {}
    values: dict[str, list[float]] = {}
    for repeat in range(args.repeats + 1):  # the first round warms up, untimed
        order = list(paths) if repeat % 2 else list(reversed(paths))
        for name in order:
            spent.update(wall=0.0, cpu=0.0, tokens=0)
            wall, cpu = time.perf_counter(), time.process_time()
            got = paths[name]()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if name == "packed ids, causal kernel":
                spent.update(wall=wall, cpu=cpu, tokens=sum(p[0].numel() for p in packed_passes))
            if got is not None:
                values[name] = got
            if not repeat:
                continue
            figures = {"wall": wall, "cpu": cpu, **{"fwd_" + k: v for k, v in spent.items()}}
            seen = best.setdefault(name, figures)
            for key in ("wall", "cpu", "fwd_wall", "fwd_cpu"):
                seen[key] = min(seen[key], figures[key])
    reference = values["packed, boolean 4-D mask"]
    print(
        f"{args.model}, {args.docs} HellaSwag docs ({len(work)} requests), batch 16, float32, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}, best of {args.repeats}, "
        f"load average {os.getloadavg()[0]:.1f} at the end"
    )
    print(
        f"{'path':<36} {'forward s':>9} {'fwd CPU s':>9} {'call s':>7} {'call CPU':>8} "
        f"{'tokens':>7} {'ms/token':>8} {'max |diff|':>10}"
    )
    for name, b in best.items():
        diff = (
            f"{max(abs(x - y) for x, y in zip(values[name], reference, strict=True)):10.2e}"
            if name in values
            else f"{'(wrong)':>10}"
        )
        print(
            f"{name:<36} {b['fwd_wall']:9.3f} {b['fwd_cpu']:9.3f} {b['wall']:7.3f} "
            f"{b['cpu']:8.3f} {int(b['fwd_tokens']):7d} {1000 * b['fwd_wall'] / b['fwd_tokens']:8.3f} "
            f"{diff}"
        )


if __name__ == "__main__":
    main()
