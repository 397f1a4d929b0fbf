"""Three run_evals configs on GSM8K, with live estimates after every shard.

    .venv/bin/python benchmarks/run_evals_gsm8k.py [--limit 64] [--shards 4] [--model dummy]

Configs: zero-shot greedy, 2-shot greedy (examples chosen by MiniLM similarity from the train
split) and 2-shot sampled (temperature 0.7). The model is benchmarks/.models/llama-2m (built by
benchmarks/build_models.py) through the "hf" backend when present, else the "dummy" backend.
Data: ../shared/data/gsm8k (test rows to score, train rows as the few-shot pool). Prints the
status table after every shard, then timings, index/engine build counts and a paired comparison.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "gsm8k"
TINY = REPO / "benchmarks" / ".models" / "llama-2m"


def read_jsonl(path: Path, limit: int) -> list[dict[str, Any]]:
    rows = []
    with path.open() as handle:
        for line in handle:
            rows.append(json.loads(line))
            if len(rows) == limit:
                break
    return rows


def final_answer(text: str) -> str:
    found = re.search(r"####\s*(-?[0-9.,]+)", text)
    return found.group(1).replace(",", "") if found else "[invalid]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=64, help="test rows to score")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--model", choices=("auto", "hf", "dummy"), default="auto")
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    if not DATA.is_dir():
        sys.exit(f"GSM8K not found at {DATA}")

    from langchain_core.prompts import PromptTemplate

    from assay.pipelines import (
        Experiment,
        GridSearch,
        List,
        ModelConfig,
        PromptManager,
        SentenceTransformerEmbeddings,
        exact_match,
        mean_of_rows,
    )

    use_hf = args.model == "hf" or (args.model == "auto" and TINY.is_dir())
    if use_hf:
        backend, model_args = "hf", {"pretrained": str(TINY), "dtype": "float32", "batch_size": 16}
    else:
        backend, model_args = "dummy", {"response": "#### 18"}
    test = read_jsonl(DATA / "test.jsonl", args.limit)
    pool = read_jsonl(DATA / "train.jsonl", 50)

    embeddings = SentenceTransformerEmbeddings("sentence-transformers/all-MiniLM-L6-v2")
    template = PromptTemplate.from_template("Question: {question}\nAnswer: {answer}")

    def manager(k: int) -> PromptManager:
        return PromptManager(
            instructions="Solve the math problem. Finish with '#### <number>'.",
            examples=pool,
            embedding_cfg={"class": lambda **_: embeddings, "model_name": "all-MiniLM-L6-v2"},
            example_selector_cls="semantic",
            example_prompt_template=template,
            k=k,
            input_keys=["question"],
        )

    def preprocess(batch: dict, rag: Any, prompt_manager: Any) -> dict:
        shots = prompt_manager.get_fewshot_examples(user_queries=batch["question"])
        prompts = [
            f"{prompt_manager.get_instructions()}\n\n{s}\n\nQuestion: {q}\nAnswer:".replace(
                "\n\n\n\n", "\n\n"
            )
            for q, s in zip(batch["question"], shots)
        ]
        return {"prompts": prompts, **batch}

    def postprocess(batch: dict) -> dict:
        batch["model_answer"] = [final_answer(t) for t in batch["generated_text"]]
        batch["ground_truth"] = [final_answer(a) for a in batch["answer"]]
        return batch

    greedy = {"max_tokens": args.max_tokens, "stop": ["Question:"], "temperature": 0.0}
    sampled = {**greedy, "temperature": 0.7, "seed": 1234}
    config_group = GridSearch(
        [
            {
                "pipeline": ModelConfig(backend, model_args, greedy, prompt_manager=manager(0)),
                "batch_size": 16,
                "preprocess_fn": preprocess,
                "postprocess_fn": postprocess,
                "compute_metrics_fn": exact_match("model_answer", "ground_truth"),
                "accumulate_metrics_fn": mean_of_rows,
            },
            {
                "pipeline": ModelConfig(
                    backend, model_args, List([greedy, sampled]), prompt_manager=manager(2)
                ),
                "batch_size": 16,
                "preprocess_fn": preprocess,
                "postprocess_fn": postprocess,
                "compute_metrics_fn": exact_match("model_answer", "ground_truth"),
                "accumulate_metrics_fn": mean_of_rows,
                "online_strategy_kwargs": {"strategy_name": "wilson", "confidence_level": 0.95},
            },
        ]
    )
    print(
        f"model: {backend} {model_args.get('pretrained', '')}; rows: {len(test)}; shards: {args.shards}"
    )
    with tempfile.TemporaryDirectory() as out:
        experiment = Experiment("gsm8k-bench", output_dir=out, display="text")
        started = time.perf_counter()
        results = experiment.run_evals(config_group, test, num_shards=args.shards, seed=42)
        elapsed = time.perf_counter() - started
        print(f"wall time: {elapsed:.1f} s for {len(results)} configs x {len(test)} rows")
        print(
            f"engines built: {experiment.engines.builds}; resources: {dict(experiment.resources.builds)}"
        )
        for cid, (_, metrics) in results.items():
            acc = metrics["Accuracy"]
            print(
                f"config {cid}: accuracy {acc['value']:.3f} [{acc['lower_bound']:.3f}, "
                f"{acc['upper_bound']:.3f}] ({acc['ci_method']}), "
                f"{metrics['Samples Per Second']['value']:.1f} rows/s"
            )
        diff = experiment.compare(2, 1, "Accuracy")
        print(
            f"paired 2-shot greedy minus zero-shot: {diff.value:+.3f} "
            f"[{diff.lower:+.3f}, {diff.upper:+.3f}] on {diff.n} rows"
        )
        experiment.engines.close()


if __name__ == "__main__":
    main()
