"""MBPP (Austin et al. 2021): short Python programming problems checked by three asserts.

`mbpp` follows lm-eval 0.4.13: "You are an expert Python programmer, and here is your task:
<text> Your code should pass these tests:\\n\\n<three asserts>\\n[BEGIN]\\n", three fixed
examples (MBPP tasks 2-4, each answered with its code and "[DONE]"), greedy until "[DONE]",
then pass@1 of the completion run with the three asserts. Dataset
`google-research-datasets/mbpp`, subset `full`, test split; lm-eval pins no revision.

This task executes model-written code: assay refuses it without --confirm-run-unsafe-code
and runs each program in a separate interpreter with time and memory limits
(`assay.sandbox.run_untrusted`).
"""

from __future__ import annotations

from typing import Any

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, generation_doc
from assay.catalog._generative import computed_metrics
from assay.doc import Doc, OutputType
from assay.sandbox.programs import pass_at_ks
from assay.tasks.config import TaskConfig

FEWSHOT_EXAMPLES: list[Row] = [
    {
        "task_id": 2,
        "text": "Write a function to find the similar elements from the given two tuple lists.",
        "code": "def similar_elements(test_tup1, test_tup2):\r\n  res = tuple(set(test_tup1) & set(test_tup2))\r\n  return (res) ",
        "test_list": [
            "assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)",
            "assert similar_elements((1, 2, 3, 4),(5, 4, 3, 7)) == (3, 4)",
            "assert similar_elements((11, 12, 14, 13),(17, 15, 14, 13)) == (13, 14)",
        ],
        "is_fewshot": True,
    },
    {
        "task_id": 3,
        "text": "Write a python function to identify non-prime numbers.",
        "code": "import math\r\ndef is_not_prime(n):\r\n    result = False\r\n    for i in range(2,int(math.sqrt(n)) + 1):\r\n        if n % i == 0:\r\n            result = True\r\n    return result",
        "test_list": [
            "assert is_not_prime(2) == False",
            "assert is_not_prime(10) == True",
            "assert is_not_prime(35) == True",
        ],
        "is_fewshot": True,
    },
    {
        "task_id": 4,
        "text": "Write a function to find the largest integers from a given list of numbers using heap queue algorithm.",
        "code": "import heapq as hq\r\ndef heap_queue_largest(nums,n):\r\n  largest_nums = hq.nlargest(n, nums)\r\n  return largest_nums",
        "test_list": [
            "assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],3)==[85, 75, 65] ",
            "assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],2)==[85, 75] ",
            "assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],5)==[85, 75, 65, 58, 35]",
        ],
        "is_fewshot": True,
    },
]  # fmt: skip
"""MBPP tasks 2, 3 and 4 (the prompt split), as lm-eval lists them."""


def _tests(row: Row) -> str:
    return "\n".join(row["test_list"][:3])


def mbpp_prompt(row: Row, task_name: str) -> Doc:
    """Task text and its three asserts; the target is the asserts (examples: code + [DONE])."""
    query = (
        f"You are an expert Python programmer, and here is your task: {row['text']} "
        f"Your code should pass these tests:\n\n{_tests(row)}\n[BEGIN]\n"
    )
    target = f"{row['code']}\n[DONE]" if "is_fewshot" in row else _tests(row)
    return generation_doc(query, target)


def mbpp_results(row: Row, results: list[Any]) -> dict[str, float]:
    """pass@1 of the completion against the three asserts."""
    return {"pass_at_1": pass_at_ks([results[0]], _tests(row), [1])["pass@1"]}


TASKS_TABLE = [
    TaskConfig(
        name="mbpp",
        prompt_function=mbpp_prompt,
        hf_repo="google-research-datasets/mbpp",
        hf_subset="full",
        metrics=computed_metrics("pass_at_1"),
        process_results=mbpp_results,
        evaluation_splits=("test",),
        fewshot_samples=FEWSHOT_EXAMPLES,
        few_shots_select="first_n",
        num_fewshots=3,
        output_type=OutputType.GENERATE_UNTIL,
        target_delimiter="",
        generation_kwargs={"until": ["[DONE]"], "do_sample": False},
        unsafe_code=True,
        version=1.0,
        example_rows=[
            {
                "task_id": 12,
                "text": "Write a function to square a number.",
                "code": "def square(x):\r\n  return x * x",
                "test_list": [
                    "assert square(2) == 4",
                    "assert square(-3) == 9",
                    "assert square(0) == 0",
                ],
                "test_setup_code": "",
                "challenge_test_list": [],
            }
        ],
        **LM_EVAL_DEFAULTS,
    )
]
