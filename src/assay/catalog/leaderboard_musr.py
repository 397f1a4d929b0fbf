"""MuSR (Sprague et al. 2024) as the Open LLM Leaderboard v2 runs it: multistep soft reasoning
over long generated narratives (murder mysteries, object placements, team allocation).

`leaderboard_musr_murder_mysteries`, `leaderboard_musr_object_placements` and
`leaderboard_musr_team_allocation` follow lm-eval 0.4.13: the narrative, a blank line, the
question, a blank line, the options numbered "1 - ...", then "Answer:", scored against each
option's text (acc_norm). Zero-shot by default; few-shot examples, when asked for, are drawn
as lm-eval draws them from the evaluated split itself (the dataset has no other). The group
`leaderboard_musr` reports acc_norm averaged over the three, weighted by their number of
questions.

Deviation (few-shot only): lm-eval's draw for a doc can include the doc itself; assay never
shows a doc its own row and swaps such an example for another row of the split (as for race).
Dataset `TAUR-Lab/MuSR` (one split per task; `choices` is a Python list literal in a string);
lm-eval pins no revision.
"""

from __future__ import annotations

import ast

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, choice_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig
from assay.tasks.lm_eval_yaml import GroupConfig

SPLITS = ("murder_mysteries", "object_placements", "team_allocation")
"""One split per task, in the order of lm-eval's group."""


def options(row: Row) -> list[str]:
    """The answer options (the `choices` column is a list literal)."""
    return ast.literal_eval(row["choices"])


def musr_prompt(row: Row, task_name: str) -> Doc:
    """Narrative, question and numbered options; each option's text is a continuation."""
    choices = options(row)
    numbered = "".join(f"{i} - {choice}\n" for i, choice in enumerate(choices, start=1))
    query = f"{row['narrative']}\n\n{row['question']}\n\n{numbered}\nAnswer:"
    answer = row["answer_choice"]
    return choice_doc(query, choices, choices.index(answer), target=answer)


_EXAMPLES: dict[str, Row] = {
    "murder_mysteries": {
        "narrative": "The librarian Harold was found dead among the stacks. Mackenzie had "
        "argued with him that morning and had a key to the back door. Ana, the night guard, "
        "was on her rounds all evening.",
        "question": "Who is the most likely murderer?",
        "choices": "['Mackenzie', 'Ana']",
        "answer_index": 0,
        "answer_choice": "Mackenzie",
    },
    "object_placements": {
        "narrative": "Alice put her glasses on the desk. While she was out, Bob moved them to "
        "the kitchen. Alice did not see this.",
        "question": "Which location is the most likely place Alice would look to find the "
        "glasses given the story?",
        "choices": "['desk', 'kitchen']",
        "answer_index": 0,
        "answer_choice": "desk",
    },
    "team_allocation": {
        "narrative": "The bakery needs one person at the oven and two at the counter. Alice "
        "burns everything she bakes; Bob is a trained baker; Carol is careful with money.",
        "question": "Given the story, how would you uniquely allocate each person to make sure "
        "both tasks are accomplished efficiently?",
        "choices": "['Oven: Alice, Counter: Bob and Carol', 'Oven: Bob, Counter: Alice and Carol']",
        "answer_index": 1,
        "answer_choice": "Oven: Bob, Counter: Alice and Carol",
    },
}
"""One made-up row per split, for `assay tasks show`."""


def _musr(split: str) -> TaskConfig:
    return TaskConfig(
        name=f"leaderboard_musr_{split}",
        prompt_function=musr_prompt,
        hf_repo="TAUR-Lab/MuSR",
        metrics=["acc_norm"],
        hf_avail_splits=SPLITS,
        evaluation_splits=(split,),
        few_shots_split=split,
        fewshot_drop_equal=False,  # lm-eval samples this pool without dropping the doc
        output_type=OutputType.MULTIPLE_CHOICE,
        # Several questions are asked about each story: they share its context.
        cluster_key="narrative",
        version=1.0,
        example_rows=[_EXAMPLES[split]],
        **LM_EVAL_DEFAULTS,
    )


TASKS_TABLE = [_musr(split) for split in SPLITS]

GROUPS = [
    GroupConfig(
        name="leaderboard_musr",
        tasks=[config.name for config in TASKS_TABLE],
        aggregate_metric_list=[
            {"metric": "acc_norm", "aggregation": "mean", "weight_by_size": True}
        ],
    )
]
