"""WikiText-2 (Merity et al. 2016): language-modelling perplexity on whole Wikipedia articles.

`wikitext` follows lm-eval 0.4.13: each document (a `page`) is detokenised (WikiText's spaced
punctuation and @-@ separators undone) and scored whole with loglikelihood_rolling, in windows
of the model's context length. Metrics are corpus-level word_perplexity, byte_perplexity and
bits_per_byte; as in lm-eval, words and bytes are counted on the page *before* detokenisation.
Test split, no few-shot. Dataset `EleutherAI/wikitext_document_level` (subset
wikitext-2-raw-v1); lm-eval pins no revision.
"""

from __future__ import annotations

import re
from typing import Any

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, rolling_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig

_PLAIN_REPLACEMENTS = [
    (" @-@ ", "-"),
    (" @,@ ", ","),
    (" @.@ ", "."),
    (" : ", ": "),
    (" ; ", "; "),
    (" . ", ". "),
    (" ! ", "! "),
    (" ? ", "? "),
    (" , ", ", "),
]
_BRACKETS = [
    (re.compile(r"\(\s*([^\)]*?)\s*\)"), r"(\1)"),
    (re.compile(r"\[\s*([^\]]*?)\s*\]"), r"[\1]"),
    (re.compile(r"{\s*([^}]*?)\s*}"), r"{\1}"),
    (re.compile(r"\"\s*([^\"]*?)\s*\""), r'"\1"'),
    (re.compile(r"'\s*([^']*?)\s*'"), r"'\1'"),
]
_LAST_REPLACEMENTS = [
    ("= = = =", "===="),
    ("= = =", "==="),
    ("= =", "=="),
    (" \N{DEGREE SIGN} ", "\N{DEGREE SIGN}"),
    (" \n", "\n"),
    ("\n ", "\n"),
    (" N ", " 1 "),
    (" 's", "'s"),
]


def detokenize(page: str) -> str:
    """WikiText's tokenised text back to plain text, rule for rule in lm-eval's order."""
    text = page.replace("s '", "s'")
    # lm-eval's pattern has literal slashes, so it (almost) never matches; kept for parity.
    text = re.sub(r"/' [0-9]/", r"/'[0-9]/", text)
    for old, new in _PLAIN_REPLACEMENTS:
        text = text.replace(old, new)
    for pattern, replacement in _BRACKETS:
        text = pattern.sub(replacement, text)
    for old, new in _LAST_REPLACEMENTS:
        text = text.replace(old, new)
    return text


def wikitext_prompt(row: Row, task_name: str) -> Doc:
    """The detokenised page, scored whole."""
    return rolling_doc(detokenize(row["page"]))


def wikitext_results(row: Row, results: list[Any]) -> dict[str, Any]:
    """(log-likelihood, count) pairs with words and bytes of the raw page, as lm-eval counts."""
    from assay.metrics.perplexity import count_bytes, count_words

    (logprob,) = results
    words, size = count_words(row["page"]), count_bytes(row["page"])
    return {
        "word_perplexity": (logprob, words),
        "byte_perplexity": (logprob, size),
        "bits_per_byte": (logprob, size),
    }


_EXAMPLES = [
    {
        "page": " = Robert Boulter = \n \n Robert Boulter is an English film , television and "
        "theatre actor . He had a guest @-@ starring role on the television series The Bill in "
        "2000 . \n"
    }
]

TASKS_TABLE = [
    TaskConfig(
        name="wikitext",
        prompt_function=wikitext_prompt,
        hf_repo="EleutherAI/wikitext_document_level",
        hf_subset="wikitext-2-raw-v1",
        metrics=["word_perplexity", "byte_perplexity", "bits_per_byte"],
        evaluation_splits=("test",),
        few_shots_split="train",
        output_type=OutputType.LOGLIKELIHOOD_ROLLING,
        process_results=wikitext_results,
        version=2.0,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )
]
