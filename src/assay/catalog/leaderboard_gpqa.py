"""GPQA as the Open LLM Leaderboard v2 runs it: graduate-level, "Google-proof" science questions.

`leaderboard_gpqa_main`, `leaderboard_gpqa_diamond` and `leaderboard_gpqa_extended` follow
lm-eval 0.4.13's leaderboard variant: the prompt of `gpqa_*_zeroshot` ("What is the correct
answer to this question:<question>\\nChoices:" and the four answers as "(A)".."(D)") but ending
in "Answer: " with a trailing space, so each letter is scored as " (A)" after it; acc_norm only.
Always zero-shot; the dataset has only a train split, which is evaluated. Unlike
`gpqa_*_zeroshot`, the answers also lose every other "[...]" (citation marks and the like)
after the " [title]" rewrite. The group `leaderboard_gpqa` reports acc_norm averaged over the
three, weighted by their number of questions.

The answers are shuffled as in `gpqa_*_zeroshot`: each subset with its own generator seeded 0,
the order of a fresh single-task lm-eval run. Deviation: lm-eval draws from Python's global
random state, so when it runs the group (or the whole leaderboard) in one process on a fresh
datasets cache, gpqa_extended continues the stream where gpqa_diamond left it and gpqa_main
where gpqa_extended did; assay's diamond matches such a run, its extended and main do not
(and lm-eval reuses whatever order its cache holds from an earlier run).
Dataset `Idavidrein/gpqa` (subsets gpqa_main, gpqa_diamond, gpqa_extended; gated on the hub:
accept its terms and log in before the first download); lm-eval pins no revision.
"""

from __future__ import annotations

from collections.abc import Iterable

from assay.catalog._common import LM_EVAL_DEFAULTS, Row
from assay.catalog.gpqa import EXAMPLES, gpqa_doc, shuffle_answers
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig
from assay.tasks.lm_eval_yaml import GroupConfig

SUBSETS = ("gpqa_diamond", "gpqa_extended", "gpqa_main")
"""In the order of lm-eval's group."""


def shuffle_cleaned_answers(rows: Iterable[Row]) -> list[Row]:
    """GPQA's seeded answer shuffle, with "[...]" removed from the answers first."""
    return shuffle_answers(rows, drop_brackets=True)


def leaderboard_gpqa_prompt(row: Row, task_name: str) -> Doc:
    """The question and lettered answers, ending in "Answer: " (trailing space)."""
    return gpqa_doc(row, answer_cue="Answer: ")


# gpqa's bundled row, with the "[...]" note that only the leaderboard copy strips.
_EXAMPLES = [{**EXAMPLES[0], "Correct Answer": f"{EXAMPLES[0]['Correct Answer']} [1]"}]


def _leaderboard_gpqa(subset: str) -> TaskConfig:
    return TaskConfig(
        name=f"leaderboard_{subset}",
        prompt_function=leaderboard_gpqa_prompt,
        hf_repo="Idavidrein/gpqa",
        hf_subset=subset,
        metrics=["acc_norm"],
        hf_avail_splits=("train",),
        evaluation_splits=("train",),
        few_shots_split="train",
        few_shots_select="first_n",
        num_fewshots=0,
        num_fewshots_fixed=True,
        process_docs=shuffle_cleaned_answers,
        output_type=OutputType.MULTIPLE_CHOICE,
        version=1.0,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )


TASKS_TABLE = [_leaderboard_gpqa(subset) for subset in SUBSETS]

GROUPS = [
    GroupConfig(
        name="leaderboard_gpqa",
        tasks=[f"leaderboard_{subset}" for subset in SUBSETS],
        aggregate_metric_list=[
            {"metric": "acc_norm", "aggregation": "mean", "weight_by_size": True}
        ],
    )
]
