"""AlpacaEval 2.0 (Dubois et al., 2024): 805 instructions; the judge compares the model's output
with a reference model's, and the score is the win rate (ties count half).

`alpaca_eval` loads the evaluation set and GPT-4 Turbo's reference outputs from the hub
(`tatsu-lab/alpaca_eval`, file `alpaca_eval_gpt4_baseline.json`, the baseline of AlpacaEval 2.0's
leaderboard). That data is licensed CC BY-NC 4.0, so assay does not bundle it; the annotator
prompt (`alpaca_eval_clf_gpt4_turbo`, Apache-2.0 code) is bundled and used by
`judge_alpaca_eval`, which asks the judge in both orders (see `assay.metrics.judges.benchmarks`).
`alpaca_eval_example` runs offline on three instructions and reference outputs written for
assay (`assay/data/alpaca_eval/example.jsonl`, same schema). Generation is greedy with up to
2048 new tokens. AlpacaEval's length-controlled win rate is not computed.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig

HUB_FILE = "https://huggingface.co/datasets/tatsu-lab/alpaca_eval/resolve/main/alpaca_eval_gpt4_baseline.json"
"""The AlpacaEval 2.0 set with GPT-4 Turbo's outputs (`instruction`, `output`, `generator`,
`dataset`); the hub repository's loading script reads the same file."""


def _prompt(row: dict[str, Any], task_name: str) -> Doc:
    return Doc(
        query=row["instruction"],
        choices=[row["output"]],
        gold_index=0,
        specific={"target": row["output"], "generator": row.get("generator")},
    )


def _example(**_: Any) -> dict[str, list[dict[str, Any]]]:
    text = resources.files("assay.data.alpaca_eval").joinpath("example.jsonl")
    lines = text.read_text(encoding="utf-8").splitlines()
    return {"eval": [json.loads(line) for line in lines if line.strip()]}


_COMMON: dict[str, Any] = dict(
    prompt_function=_prompt,
    metrics=["judge_alpaca_eval"],
    evaluation_splits=("eval",),
    output_type=OutputType.GENERATE_UNTIL,
    generation_kwargs={"until": [], "do_sample": False, "temperature": 0.0, "max_gen_toks": 2048},
    num_fewshots=0,
    num_fewshots_fixed=True,
    instruction_in_query=False,
    version=2.0,
    example_rows=[
        {
            "instruction": "Name three primary colours.",
            "output": "Red, blue and yellow.",
            "generator": "reference",
            "dataset": "assay-example",
        }
    ],
)

TASKS_TABLE = [
    TaskConfig(
        name="alpaca_eval",
        hf_repo="json",
        hf_data_files={"eval": HUB_FILE},
        hf_avail_splits=("eval",),
        **_COMMON,
    ),
    TaskConfig(name="alpaca_eval_example", dataset_loader=_example, **_COMMON),
]
