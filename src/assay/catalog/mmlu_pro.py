"""MMLU-Pro (Wang et al. 2024): harder, ten-option MMLU with chain-of-thought answers.

Each of the 14 categories is a task `mmlu_pro_<category>` as in lm-eval 0.4.13: a description
asking to think step by step and finish with "the answer is (X)", the question with options
lettered A-J, and "Answer: Let's think step by step."; the model generates greedily (up to 2048
tokens, until "Question:"). The few-shot examples are the category's first 5 validation rows
with their worked answers. The filter `custom-extract` takes the letter after "answer is"
(optionally in parentheses); exact_match ignores case and punctuation. The group `mmlu_pro`
averages exact_match over the categories weighted by size.
Dataset `TIGER-Lab/MMLU-Pro` (rows filtered by `category`); lm-eval pins no revision.
"""

from __future__ import annotations

from collections.abc import Iterable

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, filter_rows, generation_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import FilterSpec, MetricSpec, TaskConfig
from assay.tasks.lm_eval_yaml import GroupConfig

LETTERS = "ABCDEFGHIJ"

CATEGORIES = [
    "biology", "business", "chemistry", "computer science", "economics", "engineering",
    "health", "history", "law", "math", "other", "philosophy", "physics", "psychology",
]  # fmt: skip
"""Values of the dataset's `category` column, one task each."""

_COT_START = "A: Let's think step by step."

EXACT_MATCH = MetricSpec(
    "exact_match",
    kwargs={"ignore_case": True, "ignore_punctuation": True},
    aggregation="mean",
    higher_is_better=True,
)

CUSTOM_EXTRACT: FilterSpec = (
    "custom-extract",
    [("regex", {"regex_pattern": r"answer is \(?([ABCDEFGHIJ])\)?"}), ("take_first", {})],
)


def description(category: str) -> str:
    """The instruction placed once before the examples."""
    return (
        f"The following are multiple choice questions (with answers) about {category}. Think "
        'step by step and then finish your answer with "the answer is (X)" where X is the '
        "correct letter choice.\n"
    )


def option_lines(options: Iterable[str], letters: str = LETTERS) -> str:
    """One "X. option" line per option, lettered from `letters` (options beyond them dropped)."""
    return "".join(f"{letter}. {option}\n" for letter, option in zip(letters, options))


def mmlu_pro_query(row: Row) -> str:
    """Question, up to ten stripped options, and the chain-of-thought opener."""
    options = option_lines(option.strip() for option in row["options"])
    return f"Question:\n{row['question']}\nOptions:\n{options}Answer: Let's think step by step."


def _prompts_for(category: str):
    instruction = description(category)

    def mmlu_pro_prompt(row: Row, task_name: str) -> Doc:
        """The question; the target is the answer letter."""
        return generation_doc(mmlu_pro_query(row), row["answer"], instruction=instruction)

    def mmlu_pro_example(row: Row, task_name: str) -> Doc:
        """A few-shot example: the question, then the worked answer after the opener."""
        reasoning = row["cot_content"].replace(_COT_START + " ", "")
        return generation_doc(mmlu_pro_query(row), reasoning, instruction=instruction)

    return mmlu_pro_prompt, mmlu_pro_example


def _in_category(category: str):
    def keep(row: Row) -> bool:
        return row["category"] == category

    keep.__doc__ = f"Rows of category {category!r}."
    return keep


def _example(question: str, options: list[str], answer: int, reasoning: str) -> Row:
    letter = LETTERS[answer]
    return {
        "question_id": 0,
        "question": question,
        "options": options,
        "answer": letter,
        "answer_index": answer,
        "cot_content": f"{_COT_START} {reasoning} The answer is ({letter}).",
        "category": "",
        "src": "assay-example",
    }


EXAMPLES = [
    _example("What is 7 * 8?", ["54", "56", "58", "64"], 1, "7 * 8 = 56."),
    _example("Which is a prime number?", ["21", "27", "29", "33"], 2, "21, 27, 33 have factors."),
    _example("What is 15% of 200?", ["15", "20", "30", "45"], 2, "0.15 * 200 = 30."),
    _example("Which is largest?", ["0.5", "2/3", "0.6", "3/5"], 1, "2/3 is about 0.667."),
    _example("What is 2 to the power 10?", ["512", "1000", "1024", "2048"], 2, "2^10 = 1024."),
    _example("What is 81 / 9?", ["7", "8", "9", "10"], 2, "9 * 9 = 81."),
]
"""Built-in sample rows (`assay tasks show`): enough for the 5 default few-shot examples."""


def _category_task(category: str) -> TaskConfig:
    prompt, example = _prompts_for(category)
    slug = category.replace(" ", "_")
    examples = [{**row, "category": category} for row in EXAMPLES]
    return TaskConfig(
        name=f"mmlu_pro_{slug}",
        prompt_function=prompt,
        fewshot_prompt_function=example,
        hf_repo="TIGER-Lab/MMLU-Pro",
        metrics=[EXACT_MATCH],
        hf_avail_splits=("validation", "test"),
        evaluation_splits=("test",),
        few_shots_split="validation",
        few_shots_select="first_n",
        num_fewshots=5,
        process_docs=filter_rows(_in_category(category)),
        output_type=OutputType.GENERATE_UNTIL,
        generation_kwargs={
            "until": ["Question:"],
            "max_gen_toks": 2048,
            "do_sample": False,
            "temperature": 0.0,
        },
        filters=[CUSTOM_EXTRACT],
        alias=slug,
        version=3.1,
        example_rows=examples,
        **LM_EVAL_DEFAULTS,
    )


TASKS_TABLE = [_category_task(category) for category in CATEGORIES]

GROUPS = [
    GroupConfig(
        name="mmlu_pro",
        tasks=[f"mmlu_pro_{c.replace(' ', '_')}" for c in CATEGORIES],
        aggregate_metric_list=[
            {
                "metric": "exact_match",
                "aggregation": "mean",
                "weight_by_size": True,
                "filter_list": "custom-extract",
            }
        ],
        version=2.0,
    )
]
