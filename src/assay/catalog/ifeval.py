"""IFEval (Zhou et al. 2023): 541 prompts with verifiable instructions, scored strict and loose.

`ifeval` runs offline on the 541 prompts bundled with assay (google-research, Apache-2.0);
`ifeval_hub` loads the same prompts from the hub (`google/IFEval`). Prompts, generation settings
and metrics follow lm-eval 0.4.13's `ifeval` task: zero-shot, greedy, up to 1280 new tokens,
no stop string but end of sequence.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig


def _prompt(row: dict[str, Any], task_name: str) -> Doc:
    kwargs = row["kwargs"]
    return Doc(
        query=row["prompt"],
        choices=["0"],
        gold_index=0,
        specific={
            "key": row.get("key"),
            "instruction_id_list": list(row["instruction_id_list"]),
            "kwargs": kwargs,
            "prompt": row["prompt"],
            "target": "0",
        },
    )


def _bundled(**_: Any) -> dict[str, list[dict[str, Any]]]:
    text = (
        resources.files("assay.data.ifeval")
        .joinpath("input_data.jsonl")
        .read_text(encoding="utf-8")
    )
    return {"train": [json.loads(line) for line in text.splitlines() if line.strip()]}


def _check_resources() -> None:
    from assay.metrics.ifeval import ensure_ifeval_resources

    ensure_ifeval_resources()


_COMMON: dict[str, Any] = dict(
    prompt_function=_prompt,
    metrics=[
        "prompt_level_strict_acc",
        "inst_level_strict_acc",
        "prompt_level_loose_acc",
        "inst_level_loose_acc",
    ],
    evaluation_splits=("train",),
    output_type=OutputType.GENERATE_UNTIL,
    generation_kwargs={"until": [], "do_sample": False, "temperature": 0.0, "max_gen_toks": 1280},
    num_fewshots=0,
    num_fewshots_fixed=True,
    instruction_in_query=False,
    version=4.0,
    validate_hook=_check_resources,
    example_rows=[
        {
            "key": 1000,
            "prompt": "Write a haiku about rain. Your entire response should be in lowercase letters.",
            "instruction_id_list": ["change_case:english_lowercase"],
            "kwargs": [{}],
        }
    ],
)

TASKS_TABLE = [
    TaskConfig(name="ifeval", dataset_loader=_bundled, **_COMMON),
    TaskConfig(name="ifeval_hub", hf_repo="google/IFEval", **_COMMON),
]
