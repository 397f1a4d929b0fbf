"""MMLU (Hendrycks et al. 2021): 57 subjects of four-way multiple-choice questions.

Each subject is a task `mmlu_<subject>` as in lm-eval 0.4.13's default MMLU: the description
"The following are multiple choice questions (with answers) about <subject>.\\n\\n", the question
with lettered options, and the letters " A".." D" scored as continuations (acc). Few-shot
examples are the first k rows of the subject's dev split (0 by default; 5 is the usual setting).
The groups `mmlu_stem`, `mmlu_other`, `mmlu_social_sciences`, `mmlu_humanities` and `mmlu`
report acc averaged over their subjects weighted by subject size, as lm-eval does.
Dataset `cais/mmlu` (one subset per subject); lm-eval pins no revision.
"""

from __future__ import annotations

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, choice_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig
from assay.tasks.lm_eval_yaml import GroupConfig

LETTERS = ["A", "B", "C", "D"]

SUBJECTS: dict[str, list[str]] = {
    "stem": [
        "abstract_algebra", "anatomy", "astronomy", "college_biology", "college_chemistry",
        "college_computer_science", "college_mathematics", "college_physics",
        "computer_security", "conceptual_physics", "electrical_engineering",
        "elementary_mathematics", "high_school_biology", "high_school_chemistry",
        "high_school_computer_science", "high_school_mathematics", "high_school_physics",
        "high_school_statistics", "machine_learning",
    ],
    "other": [
        "business_ethics", "clinical_knowledge", "college_medicine", "global_facts",
        "human_aging", "management", "marketing", "medical_genetics", "miscellaneous",
        "nutrition", "professional_accounting", "professional_medicine", "virology",
    ],
    "social_sciences": [
        "econometrics", "high_school_geography", "high_school_government_and_politics",
        "high_school_macroeconomics", "high_school_microeconomics", "high_school_psychology",
        "human_sexuality", "professional_psychology", "public_relations", "security_studies",
        "sociology", "us_foreign_policy",
    ],
    "humanities": [
        "formal_logic", "high_school_european_history", "high_school_us_history",
        "high_school_world_history", "international_law", "jurisprudence",
        "logical_fallacies", "moral_disputes", "moral_scenarios", "philosophy", "prehistory",
        "professional_law", "world_religions",
    ],
}  # fmt: skip
"""Subjects by category, as lm-eval groups them."""


def description(subject: str) -> str:
    """The instruction placed once before the examples."""
    return (
        "The following are multiple choice questions (with answers) about "
        f"{subject.replace('_', ' ')}.\n\n"
    )


def mmlu_query(row: Row) -> str:
    """Question and lettered options, ending in "Answer:"."""
    options = "".join(f"\n{letter}. {text}" for letter, text in zip(LETTERS, row["choices"]))
    return f"{row['question'].strip()}{options}\nAnswer:"


def _prompt_for(subject: str):
    instruction = description(subject)

    def mmlu_prompt(row: Row, task_name: str) -> Doc:
        return choice_doc(mmlu_query(row), LETTERS, row["answer"], instruction=instruction)

    return mmlu_prompt


_EXAMPLES = [
    {
        "question": "What is 2 + 3?",
        "subject": "elementary_mathematics",
        "choices": ["4", "5", "6", "7"],
        "answer": 1,
    },
    {
        "question": "Which organ pumps blood?",
        "subject": "anatomy",
        "choices": ["lung", "liver", "heart", "kidney"],
        "answer": 2,
    },
]


def _subject_task(subject: str, category: str) -> TaskConfig:
    return TaskConfig(
        name=f"mmlu_{subject}",
        prompt_function=_prompt_for(subject),
        hf_repo="cais/mmlu",
        hf_subset=subject,
        metrics=["acc"],
        evaluation_splits=("test",),
        few_shots_split="dev",
        few_shots_select="first_n",
        output_type=OutputType.MULTIPLE_CHOICE,
        alias=subject,
        tags=[f"mmlu_{category}_tasks"],
        version=1.0,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )


TASKS_TABLE = [
    _subject_task(subject, category)
    for category, subjects in SUBJECTS.items()
    for subject in subjects
]

_ACC_BY_SIZE = [{"metric": "acc", "weight_by_size": True}]

GROUPS = [
    GroupConfig(
        name=f"mmlu_{category}",
        alias=category.replace("_", " "),
        tasks=[f"mmlu_{s}" for s in subjects],
        aggregate_metric_list=_ACC_BY_SIZE,
        version=2,
    )
    for category, subjects in SUBJECTS.items()
] + [
    GroupConfig(
        name="mmlu",
        tasks=["mmlu_stem", "mmlu_other", "mmlu_social_sciences", "mmlu_humanities"],
        aggregate_metric_list=_ACC_BY_SIZE,
        version=2,
    )
]
