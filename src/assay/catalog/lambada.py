"""LAMBADA (Paperno et al. 2016), OpenAI's version: predict the last word of a passage.

`lambada_openai` follows lm-eval 0.4.13: the passage up to its last space-separated word is the
context and " <last word>" the continuation; scored by perplexity over the corpus and acc (the
word is the greedy continuation). Test split, no few-shot pool.
Dataset `EleutherAI/lambada_openai` (subset default); lm-eval pins no revision.
"""

from __future__ import annotations

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, loglikelihood_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig


def lambada_prompt(row: Row, task_name: str) -> Doc:
    """Split on single spaces (not whitespace runs, as lm-eval does): all but the last piece
    rejoined form the context, the last piece after a space is the continuation."""
    words = row["text"].split(" ")
    return loglikelihood_doc(" ".join(words[:-1]), " " + words[-1])


_EXAMPLES = [
    {
        "text": "in my palm is a clear stone , and inside it is a small ivory statuette . a "
        "guardian angel . `` figured if you 're going to be out at night getting hit by cars , "
        "you might as well have some backup . '' i look at him , feeling stunned"
    }
]

TASKS_TABLE = [
    TaskConfig(
        name="lambada_openai",
        prompt_function=lambada_prompt,
        hf_repo="EleutherAI/lambada_openai",
        hf_subset="default",
        metrics=["perplexity", "acc"],
        hf_avail_splits=("test",),
        evaluation_splits=("test",),
        output_type=OutputType.LOGLIKELIHOOD,
        tags=["lambada"],
        version=1.0,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )
]
