"""ChartQA (Masry et al. 2022): questions about charts, answered with a word or a number.

`chartqa` as lm-eval 0.4.13 defines it, on the test split of `HuggingFaceM4/ChartQA` (lm-eval
pins no revision): the chart image, then the question and instructions to reason step by step
and end with "Final Answer: <answer>"; greedy generation of up to 512 tokens with no stop
string. The target is the first label. Three scores per answer (Mistral's chartqa evaluation):

- `exact_match`: the text after the last line's "Final Answer: " equals the target, ignoring
  case and a final period.
- `relaxed_accuracy`: the first non-empty line after the last "answer:" (markdown stripped)
  matches the target: numbers within 5 % (a percentage may also be read as a fraction), a
  one-letter target by the answer's first letter, other text exactly up to case and trailing
  punctuation.
- `anywhere_accuracy`: relaxed_accuracy, or when the response has no "answer:", the target
  number appearing anywhere in it (with or without thousands separators or a % sign), or a
  text target after "is ", "was ", "are ", before "." or after a blank line.
"""

from __future__ import annotations

import re
import string
from typing import Any

from assay.catalog._common import EXAMPLE_PNG, LM_EVAL_DEFAULTS, Row, generation_doc
from assay.catalog._generative import computed_metrics
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig

INSTRUCTIONS = """Analyze the image and question carefully, using step-by-step reasoning.
First, describe any image provided in detail. Then, present your reasoning. And finally your final answer in this format:
Final Answer: <answer>
where <answer> follows the following instructions:
- <answer> should should be a single phrase or number.
- <answer> should not paraphrase or reformat the text in the image.
- If <answer> is a ratio, it should be a decimal value like 0.25 instead of 1:4.
- If the question is a Yes/No question, <answer> should be Yes/No.
- If <answer> is a number, it should not contain any units.
- If <answer> is a percentage, it should include a % sign.
- If <answer> is an entity, it should include the full label from the graph.
IMPORTANT: Remember, to end your answer with Final Answer: <answer>.
"""
"""lm-eval's chartqa.yaml prompt after the question (its typo "should should" included)."""

MAX_RELATIVE_CHANGE = 0.05
"""How far a numeric answer may be from the target and still count (relaxed accuracy)."""


def chartqa_prompt(row: Row, task_name: str) -> Doc:
    """`<image>` and the question, then the instructions; the chart is the doc's one image."""
    doc = generation_doc(f"<image>{row['query']}\n{INSTRUCTIONS}", row["label"][0])
    doc.images = [row["image"]]
    return doc


# ---------------------------------------------------------------- relaxed correctness


def _unquoted(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    # A lone quote character is both first and last: lm-eval's rule strips it to "".
    return "" if text in ('"', "'") else text


def _without_end_punctuation(text: str) -> str:
    while text and (text[-1] in string.punctuation or text[-1].isspace()) and text[-1] != "%":
        text = text[:-1]
    return text


def _prepared(text: str) -> str:
    """Text without digits is unquoted; text with digits loses trailing punctuation (but a
    %), commas and dollar signs."""
    if not any(ch.isdigit() for ch in text):
        return _unquoted(text)
    return _without_end_punctuation(text).replace(",", "").replace("$", "")


def _number(text: str) -> tuple[float | None, bool]:
    """(value, is a percentage) of a numeric answer; (None, False) for any other text."""
    text = text.strip()
    try:
        return float(text.rstrip("%")), text.endswith("%")
    except ValueError:
        return None, False


def _close(prediction: float, target: float) -> bool:
    return abs(prediction - target) / max(abs(target), 1e-10) <= MAX_RELATIVE_CHANGE


def relaxed_match(prediction: str, targets: list[str]) -> float:
    """1.0 when the prediction matches any target by the relaxed rules, else 0.0."""
    prediction = _prepared(prediction)
    pred_value, pred_percent = _number(prediction)
    best = 0.0
    for target in targets:
        target = _prepared(target)
        value, percent = _number(target)
        if pred_value is not None and value is not None:
            match = _close(pred_value, value) or (
                (pred_percent or percent)
                and (
                    _close(pred_value / 100 if pred_percent else pred_value, value)
                    or _close(pred_value, value / 100 if percent else value)
                )
            )
        elif target.isalpha() and len(target) == 1 and prediction:
            match = prediction[0].lower() == target.lower()
        else:
            text = prediction
            while text and text[-1] in string.punctuation:
                text = text[:-1]
            match = text.lower() == target.lower()
        best = max(best, float(bool(match)))
    return best


def final_answer(generation: str) -> str:
    """The first non-empty line after the last "answer:" (any case; markdown bold around the
    colon and the characters *_[]() removed), or "" when there is none."""
    generation = re.sub(r"([aA]nswer)\**:\**", "\\1:", generation)
    at = generation.lower().rfind("answer:")
    if at == -1:
        return ""
    lines = generation[at + len("answer:") :].split("\n")
    answer = next((line.strip() for line in lines if line.strip()), "")
    return re.sub(r"[*_\[\]\(\)]", "", answer)


def relaxed_accuracy(response: str, target: str) -> float:
    """Relaxed match of the stated final answer; 0.0 when the response states none."""
    answer = final_answer(response)
    return relaxed_match(answer, [target]) if answer else 0.0


def anywhere_accuracy(response: str, target: str) -> float:
    """Relaxed accuracy, or without a stated answer the target found anywhere in the response."""
    answer = final_answer(response)
    if answer:
        return relaxed_match(answer, [target])
    try:
        number = float(target)
        shown: float | int = int(number) if int(number) == number else number
    except ValueError:  # not a number (int() of "nan" lands here too, as in lm-eval)
        # Case-sensitive on the response's side, as lm-eval: the patterns are lower-cased, the
        # response is not.
        patterns = [
            f"is {target}",
            f"was {target}",
            f" {target}.",
            f"are {target}",
            f"\n\n{target}",
        ]
        return float(any(p.lower() in response for p in patterns))
    found = format(shown, ",") in response or str(shown) in response or f"{shown}%" in response
    return float(found)


def exact_match(response: str, target: str) -> float:
    """The text after "Final Answer: " (to the end of the response, on one line) equals the
    target, ignoring case and one final period."""
    match = re.search(r"(?:Final Answer|FINAL ANSWER): (.+)$", response, re.IGNORECASE)
    if not match:
        return 0.0
    return float(match.group(1).strip().lower().removesuffix(".") == target.strip().lower())


def chartqa_results(row: Row, results: list[Any]) -> dict[str, float]:
    """exact_match, relaxed_accuracy and anywhere_accuracy against the first label."""
    response, target = results[0], row["label"][0]
    return {
        "exact_match": exact_match(response, target),
        "relaxed_accuracy": relaxed_accuracy(response, target),
        "anywhere_accuracy": anywhere_accuracy(response, target),
    }


_EXAMPLES = [
    {
        "image": EXAMPLE_PNG,
        "query": "What is the value of the tallest bar?",
        "label": ["12"],
        "human_or_machine": 0,
    }
]

TASKS_TABLE = [
    TaskConfig(
        name="chartqa",
        prompt_function=chartqa_prompt,
        hf_repo="HuggingFaceM4/ChartQA",
        metrics=computed_metrics("exact_match", "relaxed_accuracy", "anywhere_accuracy"),
        process_results=chartqa_results,
        evaluation_splits=("test",),
        output_type=OutputType.GENERATE_UNTIL,
        generation_kwargs={
            "until": [],
            "temperature": 0.0,
            "do_sample": False,
            "max_gen_toks": 512,
        },
        version=0.0,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )
]
