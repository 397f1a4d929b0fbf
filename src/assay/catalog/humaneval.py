"""HumanEval (Chen et al. 2021): 164 Python functions to complete from signature and docstring.

Two tasks as lm-eval 0.4.13 defines them (dataset `openai/openai_humaneval`, test split; lm-eval
pins no revision), zero-shot: the prompt is the function header, generation stops at a new
top-level block ("\\nclass", "\\ndef", "\\n#", "\\nif", "\\nprint"), the `create_test` filter
prepends the header to each completion, and the result is run against the problem's tests.

- `humaneval`: one greedy completion, pass@1.
- `humaneval_64`: 64 samples at temperature 0.2, top_p 0.95; pass@2, 8, 16, 32 and 64 (the
  unbiased estimator).

These tasks execute model-written code: assay refuses them without --confirm-run-unsafe-code
and runs each program in a separate interpreter with time and memory limits
(`assay.sandbox.run_untrusted`, which does not block network or file access: use a container
for untrusted models).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, generation_doc
from assay.catalog._generative import computed_metrics
from assay.doc import Doc, OutputType
from assay.sandbox.programs import pass_at_ks
from assay.tasks.config import TaskConfig

STOPS = ["\nclass", "\ndef", "\n#", "\nif", "\nprint"]


def humaneval_prompt(row: Row, task_name: str) -> Doc:
    """The function header; the target is the test code followed by the check call."""
    return generation_doc(row["prompt"], f"{row['test']}\ncheck({row['entry_point']})")


def with_header(resps: Sequence[Sequence[str]], docs: Sequence[Row]) -> list[list[str]]:
    """`create_test` filter: each completion becomes a full program (header + completion)."""
    return [[doc["prompt"] + r for r in responses] for responses, doc in zip(resps, docs)]


def _results_for(ks: Sequence[int]):
    def humaneval_results(row: Row, results: list[Any]) -> dict[str, float]:
        """pass@k of the doc's programs against its tests."""
        tests = f"{row['test']}\ncheck({row['entry_point']})"
        return pass_at_ks(list(results[0]), tests, ks)

    return humaneval_results


def _humaneval(name: str, ks: list[int], repeats: int, sampling: dict[str, Any]) -> TaskConfig:
    return TaskConfig(
        name=name,
        prompt_function=humaneval_prompt,
        hf_repo="openai/openai_humaneval",
        metrics=computed_metrics(*(f"pass@{k}" for k in ks)),
        process_results=_results_for(ks),
        evaluation_splits=("test",),
        num_fewshots=0,
        num_samples=repeats,
        output_type=OutputType.GENERATE_UNTIL,
        generation_kwargs={"until": STOPS, "max_gen_toks": 1024, **sampling},
        filters=[("create_test", [("custom", {"filter_fn": with_header})])],
        unsafe_code=True,
        version=1.0,
        example_rows=[
            {
                "task_id": "HumanEval/example",
                "prompt": 'def add(a: int, b: int) -> int:\n    """Return a + b."""\n',
                "canonical_solution": "    return a + b\n",
                "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n",
                "entry_point": "add",
            }
        ],
        **LM_EVAL_DEFAULTS,
    )


TASKS_TABLE = [
    _humaneval("humaneval", [1], 1, {"do_sample": False}),
    _humaneval(
        "humaneval_64",
        [2, 8, 16, 32, 64],
        64,
        {"do_sample": True, "temperature": 0.2, "top_p": 0.95},
    ),
]
