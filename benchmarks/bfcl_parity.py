"""BFCL parity: assay's verdicts against bfcl-eval's own evaluation runner, entry by entry.

For every offline BFCL category, in function-calling and prompt mode, each entry gets a model
answer made from its ground truth and bent by one checker branch (right, wrong type, missing
parameter, extra parameter, wrong value, wrong function, parallel order, no call, malformed),
the branch chosen by the entry's position. assay scores the answers by replaying them
(`--model replay`) through the BFCL tasks; bfcl-eval scores the same answers written as its
result files, by its `evaluate_task` and leaderboard aggregation. The script prints, per
category and mode, the agreement and both accuracies, then the aggregated scores, and lists
every entry where the verdicts differ. Exit status 1 when a category agrees on less than
99.5 % of its entries or a score differs.

Run it in the environment that has bfcl-eval (`make bfcl-venv`):
    .venv-bfcl/bin/python benchmarks/bfcl_parity.py            # every entry (minutes)
    .venv-bfcl/bin/python benchmarks/bfcl_parity.py --sample 8 # 8 entries per category
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from assay.catalog import bfcl
from assay.catalog.bfcl import OFFLINE

VARIANTS = (
    "right",
    "wrong_type",
    "missing_param",
    "extra_param",
    "wrong_value",
    "wrong_function",
    "parallel_order",
    "no_call",
    "malformed",
)
MODEL_OF_MODE = {"fc": "gpt-5-mini-2025-08-07-FC", "prompt": "gpt-5-mini-2025-08-07"}
"""The bfcl-eval model each mode is scored as (assay.metrics.bfcl)."""


def chosen_value(options: list[Any]) -> tuple[bool, Any]:
    """The first accepted value of a ground-truth parameter; (False, None) when only
    omission ("") is accepted."""
    for option in options:
        if option != "":
            return True, option
    return False, None


def calls_of(truth: list[dict[str, Any]] | None, functions: list[dict[str, Any]]) -> list:
    """The right calls: each ground-truth call with its first accepted values (relevance
    entries, which have none, call their first function with no arguments)."""
    if truth is None:
        return [(functions[0]["name"] if functions else "unknown_function", {})]
    out = []
    for call in truth:
        name, params = next(iter(call.items()))
        args = {}
        for param, options in params.items():
            present, value = chosen_value(options)
            if present:
                args[param] = value
        out.append((name, args))
    return out


def bent(calls: list, variant: str, functions: list[dict[str, Any]]) -> list | str:
    """`calls` bent by one checker branch; a string is an answer with no parseable call."""
    calls = [(name, dict(args)) for name, args in calls]
    first_name, first_args = calls[0]
    if variant == "wrong_type" and first_args:
        key = next(iter(first_args))
        value = first_args[key]
        first_args[key] = str(value) if not isinstance(value, str) else 12345
    elif variant == "missing_param" and first_args:
        first_args.pop(next(iter(first_args)))
    elif variant == "extra_param":
        first_args["zz_unexpected"] = 1
    elif variant == "wrong_value" and first_args:
        key = next(iter(first_args))
        value = first_args[key]
        first_args[key] = (
            value + "_x"
            if isinstance(value, str)
            else (
                not value
                if isinstance(value, bool)
                else [value]
                if not isinstance(value, list | dict)
                else []
            )
        )
    elif variant == "wrong_function":
        calls[0] = (first_name + "_other", first_args)
    elif variant == "parallel_order":
        calls.reverse()
    elif variant == "no_call":
        return "I cannot answer that with the functions I have."
    elif variant == "malformed":
        return "MALFORMED"
    return calls


def fc_answer(calls: list | str) -> tuple[list[dict[str, str]] | str, dict[str, Any]]:
    """bfcl-eval's result entry and the replay line's answer, function-calling mode."""
    if calls == "MALFORMED":
        result = [{"f": '{"a": 1'}]
        return result, {"tool_calls": [{"name": "f", "arguments": '{"a": 1'}]}
    if isinstance(calls, str):
        return calls, {"response": calls}
    named = [(re.sub(r"\.", "_", name), args) for name, args in calls]
    result = [{name: json.dumps(args)} for name, args in named]
    return result, {"tool_calls": [{"name": n, "arguments": json.dumps(a)} for n, a in named]}


def prompt_answer(calls: list | str) -> tuple[str, dict[str, Any]]:
    """bfcl-eval's result entry and the replay line's answer, prompt mode (Python syntax)."""
    if calls == "MALFORMED":
        text = "[f(a=1, b="
    elif isinstance(calls, str):
        text = calls
    else:
        text = (
            "["
            + ", ".join(
                f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
                for name, args in calls
            )
            + "]"
        )
    return text, {"response": text}


def picked(total: int, sample: int | None) -> list[int]:
    """The doc indices a run checks: all, or `sample` spread evenly."""
    if sample is None or sample >= total:
        return list(range(total))
    return [int(i * total / sample) for i in range(sample)]


def answers(
    category: str, mode: str, sample: int | None, seen: dict[str, Any]
) -> tuple[list[dict], list[dict], list[int]]:
    """bfcl-eval's result entries for the category's entries (maybe a sample), the replay
    lines of the same answers, and the doc indices answered; `seen` holds the answers given
    so far, by what was asked."""
    everything = bfcl._entries(category)
    indices = picked(len(everything), sample)
    entries = [everything[i] for i in indices]
    prompt_of = bfcl._prompt(mode, category)
    results, lines = [], []
    for i, entry in enumerate(entries):
        doc = prompt_of(entry, "parity")
        messages = [{"role": t.role, "content": t.content} for t in doc.conversation or ()]
        tools = [tool.name for tool in doc.tools]
        key = json.dumps([messages, tools])
        if key in seen:
            # Two entries (of any category) ask the same: a model answers both alike.
            results.append({"id": entry["id"], "result": seen[key]})
            continue
        # An entry offering no functions offers no tools: a model can only answer in text.
        variant = VARIANTS[i % len(VARIANTS)] if entry["function"] else "no_call"
        calls = bent(
            calls_of(entry["ground_truth"], entry["checker_function"]),
            variant,
            entry["checker_function"],
        )
        result, line = fc_answer(calls) if mode == "fc" else prompt_answer(calls)
        seen[key] = result
        results.append({"id": entry["id"], "result": result})
        lines.append({"prompt": messages, "tools": tools, **line})
    return results, lines, indices


def assay_verdicts(
    tasks: list[str], docs: dict[str, list[int]], replay: Path, out: Path
) -> dict[str, dict[str, float]]:
    """Per task, bfcl id -> assay's bfcl_accuracy, from the samples files of a replayed run."""
    from assay import evaluate

    evaluate(
        "replay",
        tasks,
        model_args={"path": str(replay)},
        samples=docs,
        output_dir=out,
        log_samples=True,
        cache=False,
        show_progress=False,
    )
    verdicts: dict[str, dict[str, float]] = {}
    for task in tasks:
        (path,) = out.rglob(f"samples_{task}.jsonl")
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                verdicts.setdefault(task, {})[record["doc"]["id"]] = record["bfcl_accuracy"]
    return verdicts


def bfcl_verdicts(mode: str, category: str, results: list[dict], root: Path) -> tuple[dict, dict]:
    """bfcl-eval's evaluation of `results`: id -> valid, and its leaderboard table entry."""
    from bfcl_eval.eval_checker import eval_runner

    model = MODEL_OF_MODE[mode]
    handler = eval_runner.get_handler(model)
    table: dict[str, Any] = {}
    score_dir = root / "score"
    with contextlib.redirect_stdout(io.StringIO()):
        eval_runner.evaluate_task(
            category, root / "result", score_dir, results, model.replace("/", "_"), handler,
            table, allow_missing=True,
        )  # fmt: skip
    failed = set()
    for path in score_dir.rglob(f"*_{category}_score.json"):
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        failed |= {line["id"] for line in lines[1:]}
    return {r["id"]: r["id"] not in failed for r in results}, table


CSV_COLUMNS = {
    "overall": "Overall Acc",
    "non_live": "Non-Live AST Acc",
    "non_live_simple": "Non-Live Simple AST",
    "live": "Live Acc",
    "irrelevance": "Irrelevance Detection",
    "relevance": "Relevance Detection",
}
"""assay's leaderboard scores and the columns of bfcl-eval's data_overall.csv that hold them."""


def compare_scores(
    mode: str, categories: list[str], ours: dict[str, dict[str, float]], table: dict, root: Path
) -> int:
    """assay's leaderboard scores against bfcl-eval's data_overall.csv, as that file shows
    them (percent, two decimals); the number that differ. bfcl-eval shows "N/A" for a part
    with a category not run (--categories): nothing to compare there, and it says so."""
    import csv

    from bfcl_eval.eval_checker.eval_runner_helper import generate_leaderboard_csv

    model = MODEL_OF_MODE[mode]
    score_dir = root / "leaderboard"
    score_dir.mkdir()
    with contextlib.redirect_stdout(io.StringIO()):
        generate_leaderboard_csv({model.replace("/", "_"): table}, score_dir)
    with (score_dir / "data_overall.csv").open(encoding="utf-8") as handle:
        (row,) = list(csv.DictReader(handle))
    mine = bfcl.leaderboard_scores(
        {
            c: (sum(ours[f"bfcl_{mode}_{c}"].values()) / len(ours[f"bfcl_{mode}_{c}"]),
                len(ours[f"bfcl_{mode}_{c}"]))
            for c in categories
        }
    )  # fmt: skip
    differ = 0
    for name, column in CSV_COLUMNS.items():
        shown = f"{mine[name] * 100:.2f}%"
        theirs = row[column]
        verdict = "not shown" if theirs == "N/A" else "same" if shown == theirs else "DIFFERENT"
        print(f"{mode:6s} {name:24s} assay {shown:>8s}  bfcl {theirs:>8s}  {verdict}")
        differ += verdict == "DIFFERENT"
    return differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=None, help="entries per category")
    parser.add_argument("--categories", default=",".join(OFFLINE))
    parser.add_argument("--modes", default="fc,prompt")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "unused-bfcl-handlers-are-built-not-called")
    categories = args.categories.split(",")
    failures = 0
    for mode in args.modes.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            replay = root / "replay.jsonl"
            per_category, docs, seen = {}, {}, {}
            with replay.open("w", encoding="utf-8") as handle:
                for category in categories:
                    results, lines, docs[f"bfcl_{mode}_{category}"] = answers(
                        category, mode, args.sample, seen
                    )
                    per_category[category] = results
                    handle.writelines(json.dumps(line) + "\n" for line in lines)
            tasks = [f"bfcl_{mode}_{c}" for c in categories]
            with contextlib.redirect_stdout(io.StringIO()):
                ours = assay_verdicts(tasks, docs, replay, root / "assay")
            table: dict[str, Any] = {"cost": {"input_data": [], "output_data": []}}
            table["latency"] = {"data": []}
            print(f"{mode:6s} {'category':24s} {'n':>5s} {'agree':>7s} {'assay':>7s} {'bfcl':>7s}")
            for category in categories:
                theirs, entry = bfcl_verdicts(
                    mode, category, per_category[category], root / category
                )
                for model_table in entry.values():
                    table.update({k: v for k, v in model_table.items() if k == category})
                mine = ours[f"bfcl_{mode}_{category}"]
                differ = [i for i in theirs if bool(mine[i]) != theirs[i]]
                n = len(theirs)
                agree = 1 - len(differ) / n
                acc_ours = sum(mine.values()) / n
                acc_theirs = sum(theirs.values()) / n
                print(
                    f"{mode:6s} {category:24s} {n:5d} {agree:7.2%} {acc_ours:7.2%} {acc_theirs:7.2%}"
                )
                for i in differ:
                    print(f"    differs: {i} assay={mine[i]} bfcl={theirs[i]}")
                if agree < 0.995 or acc_ours != acc_theirs:
                    failures += 1
            failures += compare_scores(mode, categories, ours, table, root)
    print("parity: ok" if not failures else f"parity: {failures} difference(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
