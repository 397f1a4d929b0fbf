"""BFCL multi-turn end to end: assay's agent loop through `openai-chat` against a loopback
scripted model (benchmarks/bfcl_loopback.py), scored by assay, then the same transcripts
scored by bfcl-eval's own evaluation runner (`evaluate_task`, its multi-turn checker) and
leaderboard table; the script prints, per category, the agreement and both accuracies, the
verdicts per scripted variant, and the multi-turn and overall scores beside bfcl-eval's
data_overall.csv. Exit status 1 when a verdict or a score differs.

Run it in the environment that has bfcl-eval (`make bfcl-venv`):
    .venv-bfcl/bin/python benchmarks/bfcl_multi_turn.py --sample 14
    .venv-bfcl/bin/python benchmarks/bfcl_multi_turn.py --sample 14 --mode prompt
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bfcl_loopback import Loopback, ScriptedBfcl
from bfcl_parity import MODEL_OF_MODE, bfcl_verdicts

from assay.catalog.bfcl import leaderboard_scores
from assay.metrics.bfcl_multi_turn import MULTI_TURN, entries


def chosen(category: str, sample: int | None) -> list[int]:
    """Entry positions: `sample` spread over the category (every entry without it)."""
    n = len(entries(category))
    if sample is None or sample >= n:
        return list(range(n))
    return sorted({round(i * n / sample) for i in range(sample)})


def run_assay(
    mode: str, category: str, positions: list[int], url: str, out: Path, cache: Any
) -> None:
    from assay import evaluate

    task = f"bfcl_{mode}_{category}"
    evaluate(
        "openai-chat",
        [task],
        model_args={"model": "scripted", "base_url": url, "num_concurrent": 8},
        samples={task: positions},
        output_dir=out,
        log_samples=True,
        cache=cache,
        show_progress=False,
    )


def samples_of(mode: str, out: Path, category: str) -> list[dict[str, Any]]:
    (path,) = out.rglob(f"samples_bfcl_{mode}_{category}*.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def bfcl_result(record: dict[str, Any]) -> dict[str, Any]:
    """A sample's conversation as bfcl-eval's generation writes a model's result: per user
    turn, each model turn's calls as {name: arguments text}, or its text (prompt mode: always
    its text)."""
    turns: list[list[Any]] = [[]]
    for turn in record["transcript"]["turns"]:
        if turn["role"] == "user" and not turn.get("results"):
            turns.append([])
        elif turn["role"] == "assistant":
            calls = turn["tool_calls"]
            turns[-1].append(
                [{c["name"]: c["raw"]} for c in calls] if calls else (turn["content"] or "")
            )
    return {"id": record["doc"]["id"], "result": turns}


def leaderboard_row(mode: str, table: dict[str, Any], root: Path) -> dict[str, str]:
    """bfcl-eval's data_overall.csv row for `table`."""
    import csv

    from bfcl_eval.eval_checker.eval_runner_helper import generate_leaderboard_csv

    score_dir = root / "leaderboard"
    score_dir.mkdir()
    with contextlib.redirect_stdout(io.StringIO()):
        generate_leaderboard_csv({MODEL_OF_MODE[mode]: table}, score_dir)
    with (score_dir / "data_overall.csv").open(encoding="utf-8") as handle:
        (row,) = list(csv.DictReader(handle))
    return dict(row)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=None, help="entries per category")
    parser.add_argument("--categories", default=",".join(MULTI_TURN))
    parser.add_argument(
        "--mode", choices=("fc", "prompt"), default="fc", help="function calling or prompt mode"
    )
    args = parser.parse_args()
    mode = args.mode
    os.environ.setdefault("OPENAI_API_KEY", "unused-loopback-key")
    failures = 0
    table: dict[str, Any] = {"cost": {"input_data": [], "output_data": []}}
    table["latency"] = {"data": []}
    accuracy: dict[str, float] = {}
    print(
        f"{'category':24s} {'n':>4s} {'agree':>7s} {'assay':>7s} {'bfcl':>7s}  verdicts by variant"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for category in args.categories.split(","):
            positions = chosen(category, args.sample)
            ids = [list(entries(category))[i] for i in positions]
            script = ScriptedBfcl(category, ids, mode=mode)
            with Loopback(script) as server, contextlib.redirect_stdout(io.StringIO()):
                run_assay(mode, category, positions, server.url, root / category / "assay", False)
            records = samples_of(mode, root / category / "assay", category)
            mine = {r["doc"]["id"]: r["bfcl_accuracy"] for r in records}
            results = sorted((bfcl_result(r) for r in records), key=lambda r: ids.index(r["id"]))
            theirs, entry = bfcl_verdicts(mode, category, results, root / category / "bfcl")
            for model_table in entry.values():
                table.update({k: v for k, v in model_table.items() if k == category})
            differ = [i for i in theirs if bool(mine[i]) != theirs[i]]
            n = len(theirs)
            accuracy[category] = sum(mine.values()) / n
            by_variant: dict[str, list[int]] = {}
            for i in ids:
                by_variant.setdefault(script.variant_of[i], []).append(int(mine[i]))
            shown = " ".join(f"{v}={sum(s)}/{len(s)}" for v, s in by_variant.items())
            agree = 1 - len(differ) / n
            acc_theirs = sum(theirs.values()) / n
            print(
                f"{category:24s} {n:4d} {agree:7.2%} {accuracy[category]:7.2%} "
                f"{acc_theirs:7.2%}  {shown}"
            )
            for i in differ:
                print(f"    differs: {i} assay={mine[i]} bfcl={theirs[i]}")
            failures += bool(differ)
        if set(accuracy) == set(MULTI_TURN):
            row = leaderboard_row(mode, table, root)
            sizes = {c: len(entries(c)) for c in MULTI_TURN}
            scores = leaderboard_scores({c: (a, sizes[c]) for c, a in accuracy.items()})
            for part, column in (("multi_turn", "Multi Turn Acc"), ("overall", "Overall Acc")):
                ours = f"{scores[part] * 100:.2f}%"
                same = "same" if ours == row[column] else "DIFFERENT"
                print(f"{part:24s} assay {ours:>8s}  bfcl {row[column]:>8s}  {same}")
                failures += same != "same"
    print(
        "multi-turn parity: ok" if not failures else f"multi-turn parity: {failures} difference(s)"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
