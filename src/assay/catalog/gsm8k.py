"""GSM8K (Cobbe et al. 2021): grade-school math word problems with a numeric final answer.

Three tasks, as lm-eval 0.4.13 defines them (dataset `openai/gsm8k`, subset `main`, test split;
lm-eval pins no revision):

- `gsm8k`: "Question: ...\\nAnswer:", 5 examples drawn from train (full worked answers ending in
  "#### N"), greedy until "Question:". Filters `strict-match` (the number after "####") and
  `flexible-extract` (the last number in the response); exact_match ignores case, commas, "$",
  everything up to "#### " and a final period.
- `gsm8k_cot`: "Q: ...\\nA:" with the 8 fixed chain-of-thought examples of Wei et al. (2022),
  greedy until "Q:"; `strict-match` reads "The answer is N.".
- `gsm8k_cot_self_consistency`: the same prompt, 64 samples per question at temperature 0.2,
  scored on the first sample (`score-first`) and by majority vote over all 64 (`maj@64`) or
  the first 8 (`maj@8`) extracted answers.
"""

from __future__ import annotations

from typing import Any

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, generation_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import FilterSpec, MetricSpec, TaskConfig

EXACT_MATCH = MetricSpec(
    "exact_match",
    kwargs={
        "ignore_case": True,
        "ignore_punctuation": False,
        "regexes_to_ignore": [",", "\\$", "(?s).*#### ", "\\.$"],
    },
    aggregation="mean",
    higher_is_better=True,
)
"""exact_match as every GSM8K task configures it."""

FLEXIBLE_EXTRACT: FilterSpec = (
    "flexible-extract",
    [("regex", {"group_select": -1, "regex_pattern": "(-?[$0-9.,]{2,})|(-?[0-9]+)"}),
     ("take_first", {})],
)  # fmt: skip

COT_EXAMPLES: list[Row] = [
    {
        "question": "There are 15 trees in the grove. Grove workers will plant trees in the grove today. After they are done, there will be 21 trees. How many trees did the grove workers plant today?",
        "target": "There are 15 trees originally. Then there were 21 trees after some more were planted. So there must have been 21 - 15 = 6. The answer is 6.",
    },
    {
        "question": "If there are 3 cars in the parking lot and 2 more cars arrive, how many cars are in the parking lot?",
        "target": "There are originally 3 cars. 2 more cars arrive. 3 + 2 = 5. The answer is 5.",
    },
    {
        "question": "Leah had 32 chocolates and her sister had 42. If they ate 35, how many pieces do they have left in total?",
        "target": "Originally, Leah had 32 chocolates. Her sister had 42. So in total they had 32 + 42 = 74. After eating 35, they had 74 - 35 = 39. The answer is 39.",
    },
    {
        "question": "Jason had 20 lollipops. He gave Denny some lollipops. Now Jason has 12 lollipops. How many lollipops did Jason give to Denny?",
        "target": "Jason started with 20 lollipops. Then he had 12 after giving some to Denny. So he gave Denny 20 - 12 = 8. The answer is 8.",
    },
    {
        "question": "Shawn has five toys. For Christmas, he got two toys each from his mom and dad. How many toys does he have now?",
        "target": "Shawn started with 5 toys. If he got 2 toys each from his mom and dad, then that is 4 more toys. 5 + 4 = 9. The answer is 9.",
    },
    {
        "question": "There were nine computers in the server room. Five more computers were installed each day, from monday to thursday. How many computers are now in the server room?",
        "target": "There were originally 9 computers. For each of 4 days, 5 more computers were added. So 5 * 4 = 20 computers were added. 9 + 20 is 29. The answer is 29.",
    },
    {
        "question": "Michael had 58 golf balls. On tuesday, he lost 23 golf balls. On wednesday, he lost 2 more. How many golf balls did he have at the end of wednesday?",
        "target": "Michael started with 58 golf balls. After losing 23 on tuesday, he had 58 - 23 = 35. After losing 2 more, he had 35 - 2 = 33 golf balls. The answer is 33.",
    },
    {
        "question": "Olivia has $23. She bought five bagels for $3 each. How much money does she have left?",
        "target": "Olivia had 23 dollars. 5 bagels for 3 dollars each will be 5 x 3 = 15 dollars. So she has 23 - 15 dollars left. 23 - 15 is 8. The answer is 8.",
    },
]  # fmt: skip
"""The chain-of-thought exemplars of Wei et al. (2022), as lm-eval's gsm8k-cot.yaml lists them."""


def gsm8k_prompt(row: Row, task_name: str) -> Doc:
    """Question, then the full worked answer (ending in "#### N") as the target."""
    return generation_doc(f"Question: {row['question']}\nAnswer:", row["answer"])


def gsm8k_cot_prompt(row: Row, task_name: str) -> Doc:
    """ "Q: ...\\nA:"; the target is the number after "####" (exemplars carry `target`)."""
    target = row["answer"].split("####")[-1].strip() if "answer" in row else row["target"]
    return generation_doc(f"Q: {row['question']}\nA:", target)


def _answer_filters(pattern: str) -> list[FilterSpec]:
    return [("strict-match", [("regex", {"regex_pattern": pattern}), ("take_first", {})])]


# Enough rows for `assay tasks show gsm8k` to fill its five random shots offline.
_EXAMPLES = [
    {
        "question": "Janet has 3 boxes with 4 pens each. How many pens does she have?",
        "answer": "She has 3 * 4 = <<3*4=12>>12 pens.\n#### 12",
    },
    {
        "question": "A baker makes 24 rolls and sells 15. How many rolls are left?",
        "answer": "24 - 15 = <<24-15=9>>9 rolls are left.\n#### 9",
    },
    {
        "question": "Tom reads 12 pages a day. How many pages does he read in a week?",
        "answer": "A week has 7 days, so he reads 12 * 7 = <<12*7=84>>84 pages.\n#### 84",
    },
    {
        "question": "Four friends share 36 stickers equally. How many stickers does each get?",
        "answer": "Each gets 36 / 4 = <<36/4=9>>9 stickers.\n#### 9",
    },
    {
        "question": "Mia had $50. She spent $18 on a book and $7 on lunch. How much is left?",
        "answer": "She spent 18 + 7 = <<18+7=25>>25 dollars.\nShe has 50 - 25 = <<50-25=25>>25 dollars left.\n#### 25",
    },
    {
        "question": "A train travels 60 miles an hour for 3 hours. How far does it go?",
        "answer": "It goes 60 * 3 = <<60*3=180>>180 miles.\n#### 180",
    },
]

_COMMON: dict[str, Any] = dict(
    hf_repo="openai/gsm8k",
    hf_subset="main",
    metrics=[EXACT_MATCH],
    evaluation_splits=("test",),
    output_type=OutputType.GENERATE_UNTIL,
    example_rows=_EXAMPLES,
    **LM_EVAL_DEFAULTS,
)

_COT: dict[str, Any] = dict(
    prompt_function=gsm8k_cot_prompt,
    fewshot_samples=COT_EXAMPLES,
    few_shots_select="first_n",
    num_fewshots=8,
    **_COMMON,
)

SELF_CONSISTENCY_PATTERN = "The answer is (\\-?[0-9\\.\\,]*[0-9]+)"

TASKS_TABLE = [
    TaskConfig(
        name="gsm8k",
        prompt_function=gsm8k_prompt,
        few_shots_split="train",
        num_fewshots=5,
        generation_kwargs={
            "until": ["Question:", "</s>", "<|im_end|>"],
            "do_sample": False,
            "temperature": 0.0,
        },
        filters=[*_answer_filters("#### (\\-?[0-9\\.\\,]+)"), FLEXIBLE_EXTRACT],
        tags=["math_word_problems"],
        version=3.0,
        **_COMMON,
    ),
    TaskConfig(
        name="gsm8k_cot",
        generation_kwargs={"do_sample": False, "until": ["Q:", "</s>", "<|im_end|>"]},
        filters=[*_answer_filters("The answer is (\\-?[0-9\\.\\,]+)."), FLEXIBLE_EXTRACT],
        tags=["chain_of_thought"],
        version=3.0,
        **_COT,
    ),
    TaskConfig(
        name="gsm8k_cot_self_consistency",
        generation_kwargs={"until": ["Q:", "\n\n"], "do_sample": True, "temperature": 0.2},
        num_samples=64,
        filters=[
            (
                "score-first",
                [("regex", {"regex_pattern": SELF_CONSISTENCY_PATTERN}), ("take_first", {})],
            ),
            (
                "maj@64",
                [
                    ("regex", {"regex_pattern": SELF_CONSISTENCY_PATTERN}),
                    ("majority_vote", {}),
                    ("take_first", {}),
                ],
            ),
            (
                "maj@8",
                [
                    ("take_first_k", {"k": 8}),
                    ("regex", {"regex_pattern": SELF_CONSISTENCY_PATTERN}),
                    ("majority_vote", {}),
                    ("take_first", {}),
                ],
            ),
        ],
        tags=["chain_of_thought", "self_consistency"],
        version=2.0,
        **_COT,
    ),
]
