"""BIG-Bench Hard as the Open LLM Leaderboard v2 scores it: 24 BBH subsets, multiple choice.

Each subset is a task `leaderboard_bbh_<subset>` as in lm-eval 0.4.13: the subset's
description, then three fixed exemplars "Q: <input>\\nA: <answer>" (BBH's chain-of-thought
questions with their final answers only, no reasoning), then "Q: <input>\\nA:". As in lm-eval,
the description runs straight into the first "Q:" with no separator. The subset's answer
options ("(A)", "(B)", ...; "Yes"/"No"; "valid"/"invalid"; "0".."18"; ...) are scored as
continuations after " " and acc_norm (log-likelihood per character) is reported. As in lm-eval,
a target made of digits is an index into the options (for object_counting's "0".."18" that is
the same option) and a target matching no option never counts as correct.
The group `leaderboard_bbh` reports acc_norm averaged over the 24 subsets weighted by size
(BBH's dyck_languages, multistep_arithmetic_two and word_sorting, which have no fixed options,
are left out, as on the leaderboard).
The exemplars and descriptions are taken from the bundled `assay/data/bbh/cot_fewshot.json`
(shared with `bbh_cot_fewshot_*`): its inputs with the answer after "So the answer is ", and
its descriptions without their trailing blank line, which is exactly what lm-eval's YAMLs list.
Dataset `SaylorTwift/bbh` (one subset per task, test split); lm-eval pins no revision.
"""

from __future__ import annotations

from collections.abc import Callable

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, choice_doc
from assay.catalog.bbh import cot_prompts
from assay.doc import Doc, OutputType
from assay.tasks.config import MetricSpec, TaskConfig
from assay.tasks.lm_eval_yaml import GroupConfig


def letters(count: int) -> list[str]:
    """The lettered options "(A)", "(B)", ... of a subset with `count` of them."""
    return [f"({chr(ord('A') + i)})" for i in range(count)]


YES_NO = ["Yes", "No"]

CHOICES: dict[str, list[str]] = {
    "boolean_expressions": ["False", "True"],
    "causal_judgement": YES_NO,
    "date_understanding": letters(6),
    "disambiguation_qa": letters(3),
    "formal_fallacies": ["valid", "invalid"],
    "geometric_shapes": letters(11),
    "hyperbaton": letters(2),
    "logical_deduction_five_objects": letters(5),
    "logical_deduction_seven_objects": letters(7),
    "logical_deduction_three_objects": letters(3),
    "movie_recommendation": letters(6),
    "navigate": YES_NO,
    "object_counting": [str(n) for n in range(19)],
    "penguins_in_a_table": letters(5),
    "reasoning_about_colored_objects": letters(18),
    "ruin_names": letters(6),
    "salient_translation_error_detection": letters(6),
    "snarks": letters(2),
    "sports_understanding": ["yes", "no"],
    "temporal_sequences": letters(4),
    "tracking_shuffled_objects_five_objects": letters(5),
    "tracking_shuffled_objects_seven_objects": letters(7),
    "tracking_shuffled_objects_three_objects": letters(3),
    "web_of_lies": YES_NO,
}
"""Each subset's answer options (lm-eval's doc_to_choice), in lm-eval's group order."""

ANSWER_CUE = "So the answer is "
"""What precedes the final answer in a chain-of-thought exemplar."""


def description(subset: str) -> str:
    """The subset's description: the CoT prompt's, without its trailing blank line."""
    return cot_prompts()[subset]["description"].removesuffix("\n\n")


def final_answer(chain_of_thought: str) -> str:
    """The answer a chain-of-thought exemplar ends with ("... So the answer is X.")."""
    return chain_of_thought.rsplit(ANSWER_CUE, 1)[1].removesuffix(".")


def fewshot_samples(subset: str) -> list[Row]:
    """The subset's three exemplars: the CoT exemplars' inputs with their final answers."""
    return [
        {"input": sample["input"], "target": final_answer(sample["target"])}
        for sample in cot_prompts()[subset]["samples"]
    ]


def gold_index(target: str, choices: list[str]) -> int:
    """lm-eval's gold for a target string: digits are an index, otherwise the matching option;
    no match gives an index past the options, which never counts as correct."""
    if target.isdigit():
        return int(target)
    return choices.index(target) if target in choices else len(choices)


def _prompt_for(subset: str) -> Callable[[Row, str], Doc]:
    choices = CHOICES[subset]

    def leaderboard_bbh_prompt(row: Row, task_name: str) -> Doc:
        """ "Q: <input>\\nA:" with the subset's options as continuations."""
        target = row["target"]
        return choice_doc(
            f"Q: {row['input']}\nA:",
            choices,
            gold_index(target, choices),
            target=target,
            instruction=description(subset),
        )

    return leaderboard_bbh_prompt


def _samples_for(subset: str) -> Callable[[], list[Row]]:
    def samples() -> list[Row]:
        return fewshot_samples(subset)

    return samples


_EXAMPLES: list[Row] = [
    {"input": "not ( True and False ) is", "target": "True"},
    {
        "input": "If you follow these instructions, do you return to the starting point? "
        "Take 2 steps. Turn around. Take 2 steps.\nOptions:\n- Yes\n- No",
        "target": "Yes",
    },
    {
        "input": '"All cats are mammals. Tom is a cat. Therefore, Tom is a mammal."\n'
        "Is the argument, given the explicitly stated premises, deductively valid or invalid?"
        "\nOptions:\n- valid\n- invalid",
        "target": "valid",
    },
    {
        "input": "I have a flute, a piano, and a trombone. How many musical instruments do I have?",
        "target": "3",
    },
    {
        "input": 'Is the following sentence plausible? "Lionel Messi scored a penalty kick."',
        "target": "yes",
    },
    {
        "input": "Which sentence has the correct adjective order?\nOptions:\n"
        "(A) big old red car\n(B) red old big car",
        "target": "(A)",
    },
]
"""Rows for `assay tasks show`; each subset shows the first whose answer is one of its options."""


def _example_for(subset: str) -> Row:
    return next(row for row in _EXAMPLES if row["target"] in CHOICES[subset])


def _subset_task(subset: str) -> TaskConfig:
    return TaskConfig(
        name=f"leaderboard_bbh_{subset}",
        prompt_function=_prompt_for(subset),
        hf_repo="SaylorTwift/bbh",
        hf_subset=subset,
        metrics=[MetricSpec("acc_norm", aggregation="mean", higher_is_better=True)],
        evaluation_splits=("test",),
        fewshot_samples=_samples_for(subset),
        few_shots_select="first_n",
        num_fewshots=3,
        output_type=OutputType.MULTIPLE_CHOICE,
        version=1.0,
        example_rows=[_example_for(subset)],
        **LM_EVAL_DEFAULTS,
    )


TASKS_TABLE = [_subset_task(subset) for subset in CHOICES]

GROUPS = [
    GroupConfig(
        name="leaderboard_bbh",
        tasks=[f"leaderboard_bbh_{subset}" for subset in CHOICES],
        aggregate_metric_list=[
            {"metric": "acc_norm", "aggregation": "mean", "weight_by_size": True}
        ],
    )
]
