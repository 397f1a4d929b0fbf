"""MMMU (Yue et al. 2024): college-level questions over images, 30 subjects in 6 disciplines.

Thirty tasks `mmmu_val_<subject>` on the validation split of `MMMU/MMMU` (one subset per subject;
lm-eval pins no revision), grouped by discipline (`mmmu_val_science`, ...) and all together
(`mmmu_val`, accuracy averaged weighted by size), as lm-eval 0.4.13 defines them:

- prompt: the question, then for multiple-choice questions the options as "(A) ...", one per
  line, and "Answer with the option's letter from the given choices directly."; open questions
  end with "Answer the question using a single word or phrase." Each `<image i>` the text names
  (question or options, in order, repeats kept) contributes the row's `image_i` to the doc's
  images and becomes the placeholder `<image>`.
- greedy generation of up to 512 tokens, until "<|endoftext|>".
- `acc`: MMMU's own answer parsing. Multiple choice: the last "(X)" in the response, else the
  last " X ", else (for responses over five words) the option whose text appears last. Open
  questions: the tails of the response after "is", "so", "answer", "=", ... and the numbers in
  them, normalised (numbers rounded to two decimals, text lower-cased) and matched against the
  normalised answer.

Deviation: when a multiple-choice response names no option at all, MMMU (and lm-eval) picks a
letter at random from Python's global random stream, seeded 42 when lm-eval loads the task's
utils, so the pick depends on every unparseable answer scored before it in the run. assay draws
from a generator seeded by 42 and the doc's `id`, so a doc's score does not depend on which
other docs were scored first (sharded, resumed or reordered runs score it the same).
"""

from __future__ import annotations

import ast
import random
import re
from typing import Any

from assay.catalog._common import EXAMPLE_PNG, LM_EVAL_DEFAULTS, Row, generation_doc
from assay.catalog._generative import computed_metrics
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig
from assay.tasks.lm_eval_yaml import GroupConfig

DISCIPLINES: dict[str, tuple[str, list[str]]] = {
    "art_and_design": ("Art and Design", ["Art", "Art_Theory", "Design", "Music"]),
    "business": ("Business", ["Accounting", "Economics", "Finance", "Manage", "Marketing"]),
    "health_and_medicine": (
        "Health and Medicine",
        ["Basic_Medical_Science", "Clinical_Medicine", "Diagnostics_and_Laboratory_Medicine",
         "Pharmacy", "Public_Health"],
    ),
    "humanities_and_social_science": (
        "Humanities and Social Science", ["History", "Literature", "Sociology", "Psychology"]
    ),
    "science": ("Science", ["Biology", "Chemistry", "Geography", "Math", "Physics"]),
    "tech_and_engineering": (
        "Tech and Engineering",
        ["Agriculture", "Architecture_and_Engineering", "Computer_Science", "Electronics",
         "Energy_and_Power", "Materials", "Mechanical_Engineering"],
    ),
}  # fmt: skip
"""Group suffix -> (group alias, dataset subsets), in lm-eval's order."""

MULTIPLE_CHOICE_INSTRUCTION = "Answer with the option's letter from the given choices directly."
OPEN_INSTRUCTION = "Answer the question using a single word or phrase."
LETTERS = "ABCDEFGHI"
"""Option letters MMMU scores (at most nine options)."""
FALLBACK_SEED = 42
"""Seed of the random pick for a response that names no option (see the module docstring)."""

_NAMED_IMAGE = re.compile(r"<image ([1-7])>")


def _text_with_named_images(row: Row) -> str:
    """The prompt with MMMU's `<image i>` names still in place."""
    if row["question_type"] != "multiple-choice":
        return f"{row['question']}\n\n{OPEN_INSTRUCTION}"
    options = "\n".join(
        f"({chr(ord('A') + i)}) {option}"
        for i, option in enumerate(ast.literal_eval(row["options"]))
    )
    return f"{row['question']}\n\n{options}\n\n{MULTIPLE_CHOICE_INSTRUCTION}"


def mmmu_prompt(row: Row, task_name: str) -> Doc:
    """The question (and options) with `<image>` placeholders, the named images in order."""
    text = _text_with_named_images(row)
    images = [row[f"image_{i}"] for i in _NAMED_IMAGE.findall(text)]
    doc = generation_doc(_NAMED_IMAGE.sub("<image>", text), row["answer"])
    doc.images = images
    return doc


# ---------------------------------------------------------------- multiple choice


def parse_choice(response: str, letters: list[str], options: dict[str, str], seed: str) -> str:
    """The option letter a response picks, by MMMU's rules (see the module docstring); a
    response that names none gets a letter drawn by `random.Random(seed)`."""
    for char in ",.!?;:'":
        response = response.strip(char)
    padded = f" {response} "
    bracketed = [x for x in letters if f"({x})" in padded]
    candidates = bracketed or [x for x in letters if f" {x} " in padded]
    by_content = False
    if not candidates and len(padded.split()) > 5:
        candidates = [x for x, text in options.items() if text.lower() in padded.lower()]
        by_content = True
    if not candidates:
        return random.Random(seed).choice(letters)
    if by_content:
        positions = [padded.lower().rfind(options[x].lower()) for x in candidates]
    elif bracketed:
        positions = [padded.rfind(f"({x})") for x in candidates]
    else:
        positions = [padded.rfind(f" {x} ") for x in candidates]
    # The option named last wins; on a tie the first candidate in letter order (numpy argmax).
    return candidates[positions.index(max(positions))]


# ---------------------------------------------------------------- open questions

_KEY_INDICATORS = ["could be ", "so ", "is ", "thus ", "therefore ", "final ", "answer ", "result "]
_TRIVIAL = {":", ",", ".", "!", "?", ";", "'"}
_NUMBER_PATTERNS = (
    re.compile(r"-?\b\d{1,3}(?:,\d{3})+\b"),  # with thousands separators
    re.compile(r"-?\d+(?:\.\d+)?[eE][+-]?\d+"),  # scientific notation
    re.compile(r"-?(?:\d+\.\d+|\.\d+|\d+\b)(?![eE][+-]?\d+)(?![,\d])"),  # plain
)


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def normalize_answer(text: str) -> list[str | float]:
    """A number rounded to two decimals; text lower-cased (one character padded with a space
    on either side, so that it only matches as a word)."""
    text = text.strip()
    if _is_number(text):
        return [round(float(text.replace(",", "")), 2)]
    text = text.lower()
    return [" " + text, text + " "] if len(text) == 1 else [text]


def extract_numbers(text: str) -> list[str]:
    """Every number written in `text`: with thousands separators, scientific, then plain."""
    return [m for pattern in _NUMBER_PATTERNS for m in pattern.findall(text)]


def _key_responses(response: str) -> list[str]:
    """Per line, the shortest tail after an indicator ("is ", "so ", ...; "=" on the last line)."""
    response = response.strip().strip(".").lower()
    # MMMU also splits at ". " before a capital letter, which never occurs once lower-cased.
    lines = re.split(r"\.\s(?=[A-Z])|\n", response)
    keys: list[str] = []
    for index, line in enumerate(lines):
        indicators = _KEY_INDICATORS + (["="] if index == len(lines) - 1 else [])
        shortest: str | None = None
        for indicator in indicators:
            if indicator in line:
                tail = line.split(indicator)[-1].strip()
                # An empty tail counts as no tail yet, as in MMMU.
                if not shortest or len(tail) < len(shortest):
                    shortest = tail
        if shortest and shortest.strip() not in _TRIVIAL:
            keys.append(shortest)
    return keys or [response]


def parse_open(response: str) -> set[str | float]:
    """The normalised answers a free-form response may be giving."""
    keys = _key_responses(response)
    found = keys + [n for key in keys for n in extract_numbers(key)]
    return {value for text in found for value in normalize_answer(text)}


def open_correct(gold: str | list[str], predictions: set[str | float]) -> bool:
    """A predicted number equals a normalised gold number, or a gold text occurs in a
    predicted text."""
    golds = [
        g
        for answer in (gold if isinstance(gold, list) else [gold])
        for g in normalize_answer(answer)
    ]
    for pred in predictions:
        if isinstance(pred, str):
            if any(isinstance(g, str) and g in pred for g in golds):
                return True
        elif pred in golds:
            return True
    return False


def mmmu_results(row: Row, results: list[Any]) -> dict[str, float]:
    """acc: the parsed answer is the gold one."""
    response = results[0]
    if row["question_type"] == "multiple-choice":
        options = ast.literal_eval(row["options"])
        letters = list(LETTERS[: len(options)])
        seed = f"{FALLBACK_SEED}:{row['id']}"
        pred = parse_choice(response, letters, dict(zip(LETTERS, options)), seed)
        gold = row["answer"]
        correct = pred in gold if isinstance(gold, list) else pred == gold
    else:
        correct = open_correct(row["answer"], parse_open(response))
    return {"acc": float(correct)}


# ---------------------------------------------------------------- tasks and groups

_EXAMPLES = [
    {
        "id": "validation_Example_1",
        "question": "<image 1> Which bar is the tallest?",
        "options": "['the first', 'the second']",
        "explanation": "",
        "image_1": EXAMPLE_PNG,
        "image_2": None,
        "image_3": None,
        "image_4": None,
        "image_5": None,
        "image_6": None,
        "image_7": None,
        "img_type": "['Plots and Charts']",
        "answer": "B",
        "topic_difficulty": "Easy",
        "question_type": "multiple-choice",
        "subfield": "Charts",
    }
]


def _task_name(subset: str) -> str:
    return f"mmmu_val_{subset.lower()}"


def _subject_task(subset: str) -> TaskConfig:
    return TaskConfig(
        name=_task_name(subset),
        prompt_function=mmmu_prompt,
        hf_repo="MMMU/MMMU",
        hf_subset=subset,
        metrics=computed_metrics("acc"),
        process_results=mmmu_results,
        evaluation_splits=("validation",),
        output_type=OutputType.GENERATE_UNTIL,
        generation_kwargs={
            "until": ["<|endoftext|>"],
            "temperature": 0.0,
            "do_sample": False,
            "max_gen_toks": 512,
        },
        alias=subset.replace("_", " "),
        version=0.0,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )


TASKS_TABLE = [_subject_task(subset) for _, subsets in DISCIPLINES.values() for subset in subsets]

_ACC_BY_SIZE = [{"metric": "acc", "aggregation": "mean", "weight_by_size": True}]

GROUPS = [
    GroupConfig(
        name=f"mmmu_val_{discipline}",
        alias=alias,
        tasks=[_task_name(s) for s in subsets],
        aggregate_metric_list=_ACC_BY_SIZE,
        version=0.0,
    )
    for discipline, (alias, subsets) in DISCIPLINES.items()
] + [
    GroupConfig(
        name="mmmu_val",
        tasks=[f"mmmu_val_{discipline}" for discipline in DISCIPLINES],
        aggregate_metric_list=_ACC_BY_SIZE,
        version=0.0,
    )
]
