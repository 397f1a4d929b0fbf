"""MT-Bench (Zheng et al., 2023): 80 two-turn questions in 8 categories, graded 1-10 by a judge.

`mt_bench_turn1` asks the first question; `mt_bench_turn2` asks it, then the second question in
the conversation with the model's own first answer, and grades the second answer; the group
`mt_bench` is the mean of both turns' scores, MT-Bench's overall score. Grading is
`judge_mt_bench`: FastChat's single-answer judge prompts, reference-guided for the math,
reasoning and coding categories (FastChat's NEED_REF_CATS) with GPT-4's reference answers, as
FastChat's `gen_judgment.py` does.

`mt_bench` runs on the questions and GPT-4 reference answers bundled with assay (FastChat's
`fastchat/llm_judge/data/mt_bench/`, Apache-2.0; see `assay/data/mt_bench/PROVENANCE.md`);
`mt_bench_hub` loads the questions from the hub (`HuggingFaceH4/mt_bench_prompts`, whose
`reference` field holds the short references of FastChat's question file, not GPT-4's answers).
`mt_bench_example` (turns `mt_bench_example_turn1`, `mt_bench_example_turn2`) is the same on the
first three bundled questions (81-83, writing), which the replay files in `examples/judges/`
answer and grade, so a judged run works offline without a model.
Generation is greedy with up to 1024 new tokens; FastChat samples the writing and roleplay
categories at temperature 0.7 and stem and humanities at 0.1, so its published answers differ
from a greedy run's.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig
from assay.tasks.lm_eval_yaml import GroupConfig

NEED_REFERENCE = ("math", "reasoning", "coding")
"""Categories FastChat grades against reference answers (its NEED_REF_CATS)."""


def _turns(row: dict[str, Any]) -> list[str]:
    # FastChat's question file calls them `turns`; the hub copy `prompt`.
    return list(row.get("turns") or row["prompt"])


def _references(row: dict[str, Any]) -> list[str] | None:
    refs = row.get("reference")
    if row.get("category") not in NEED_REFERENCE or not refs:
        return None
    return [str(r) for r in refs]


def _doc(row: dict[str, Any], turn: int) -> Doc:
    turns = _turns(row)
    return Doc(
        query=turns[0],
        choices=[""],
        gold_index=0,
        follow_ups=turns[1:turn] or None,
        specific={
            "target": "",
            "category": row.get("category"),
            "references": _references(row),
        },
    )


def _turn1(row: dict[str, Any], task_name: str) -> Doc:
    return _doc(row, 1)


def _turn2(row: dict[str, Any], task_name: str) -> Doc:
    return _doc(row, 2)


def _lines(name: str) -> list[dict[str, Any]]:
    text = resources.files("assay.data.mt_bench").joinpath(name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _bundled(**_: Any) -> dict[str, list[dict[str, Any]]]:
    """FastChat's questions, with GPT-4's reference answers where FastChat grades with them."""
    answers = {
        r["question_id"]: r["choices"][0]["turns"] for r in _lines("reference_answer_gpt-4.jsonl")
    }
    rows = []
    for row in _lines("question.jsonl"):
        row = dict(row)
        if row["category"] in NEED_REFERENCE:
            row["reference"] = answers[row["question_id"]]
        rows.append(row)
    return {"train": rows}


EXAMPLE_QUESTIONS = (81, 82, 83)
"""The questions of `mt_bench_example` (those examples/judges/ replays)."""


def _example(**_: Any) -> dict[str, list[dict[str, Any]]]:
    """The bundled rows of EXAMPLE_QUESTIONS."""
    return {"train": [r for r in _bundled()["train"] if r["question_id"] in EXAMPLE_QUESTIONS]}


_COMMON: dict[str, Any] = dict(
    metrics=["judge_mt_bench"],
    evaluation_splits=("train",),
    output_type=OutputType.GENERATE_UNTIL,
    generation_kwargs={"until": [], "do_sample": False, "temperature": 0.0, "max_gen_toks": 1024},
    num_fewshots=0,
    num_fewshots_fixed=True,
    instruction_in_query=False,
    version=1.0,
    example_rows=[
        {
            "question_id": 81,
            "category": "writing",
            "turns": [
                "Compose an engaging travel blog post about a recent trip to Hawaii, "
                "highlighting cultural experiences and must-see attractions.",
                "Rewrite your previous response. Start every sentence with the letter A.",
            ],
        }
    ],
)

TASKS_TABLE = [
    TaskConfig(name="mt_bench_turn1", prompt_function=_turn1, dataset_loader=_bundled, **_COMMON),
    TaskConfig(name="mt_bench_turn2", prompt_function=_turn2, dataset_loader=_bundled, **_COMMON),
    TaskConfig(
        name="mt_bench_example_turn1", prompt_function=_turn1, dataset_loader=_example, **_COMMON
    ),
    TaskConfig(
        name="mt_bench_example_turn2", prompt_function=_turn2, dataset_loader=_example, **_COMMON
    ),
    TaskConfig(
        name="mt_bench_hub_turn1",
        prompt_function=_turn1,
        hf_repo="HuggingFaceH4/mt_bench_prompts",
        **_COMMON,
    ),
    TaskConfig(
        name="mt_bench_hub_turn2",
        prompt_function=_turn2,
        hf_repo="HuggingFaceH4/mt_bench_prompts",
        **_COMMON,
    ),
]

_BOTH_TURNS = [{"metric": "judge_mt_bench", "weight_by_size": True}]

GROUPS = [
    GroupConfig(
        name="mt_bench",
        tasks=["mt_bench_turn1", "mt_bench_turn2"],
        aggregate_metric_list=_BOTH_TURNS,
        version=1,
    ),
    GroupConfig(
        name="mt_bench_example",
        tasks=["mt_bench_example_turn1", "mt_bench_example_turn2"],
        aggregate_metric_list=_BOTH_TURNS,
        version=1,
    ),
    GroupConfig(
        name="mt_bench_hub",
        tasks=["mt_bench_hub_turn1", "mt_bench_hub_turn2"],
        aggregate_metric_list=_BOTH_TURNS,
        version=1,
    ),
]
