"""DROP (Dua et al. 2019): reading comprehension needing discrete reasoning over paragraphs.

`drop` follows lm-eval 0.4.13: the prompt is "<passage> <question>", generation stops at the
first period, and the answer is scored with DROP's official rules (bag-of-tokens F1 with
numbers normalised and spans aligned one to one, exact match of the normalised spans), taking
the best over the original and validated answers. Zero-shot by default; few-shot examples come
from train.

lm-eval renders the target as `answer|join(',')` of the answer record, which joins its field
names: every target (and every few-shot answer) is the literal "number,date,spans". assay
reproduces that so prompts stay comparable; scoring uses the real answers.

Dataset `EleutherAI/drop`, validation split; lm-eval pins no revision.
"""

from __future__ import annotations

import re
import string
from typing import Any

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, generation_doc, map_rows
from assay.catalog._generative import computed_metrics
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def answer_tuple(answer: dict[str, Any]) -> tuple[str, ...]:
    """One answer record as a tuple of strings: the number, else the spans, else the date."""
    if answer["number"] != "":
        return (str(answer["number"]),)
    if answer["spans"]:
        return tuple(answer["spans"])
    date = answer["date"]
    return (" ".join([date["day"], date["month"], date["year"]]).strip(),)


def all_answers(row: Row) -> list[list[str]]:
    """The original answer, then each validated answer, without duplicates."""
    validated = row["validated_answers"]
    candidates = [row["answer"]] + [
        {"number": number, "date": date, "spans": spans}
        for number, date, spans in zip(validated["number"], validated["date"], validated["spans"])
    ]
    seen: set[tuple[str, ...]] = set()
    out = []
    for candidate in candidates:
        answer = answer_tuple(candidate)
        if answer not in seen:
            seen.add(answer)
            out.append(list(answer))
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _normalize_token(token: str) -> str:
    token = token.lower()
    if not _is_number(token):
        token = "".join(ch for ch in token if ch not in _PUNCTUATION)
    if _is_number(token):
        token = str(float(token))
    return " ".join(_ARTICLES.sub(" ", token).split())


def normalize(text: str) -> str:
    """DROP's answer normalisation: per token (split on space and hyphen) lower-case, drop
    punctuation unless numeric, write numbers as floats, drop articles, squeeze spaces."""
    tokens = [_normalize_token(token) for token in re.split(" |-", text)]
    return " ".join(token for token in tokens if token.strip()).strip()


def _bags(answer: str | list[str] | tuple[str, ...]) -> tuple[list[str], list[set[str]]]:
    spans = list(answer) if isinstance(answer, list | tuple) else [answer]
    normalized = [normalize(span) for span in spans]
    return normalized, [set(span.split()) for span in normalized]


def _f1(predicted: set[str], gold: set[str]) -> float:
    common = len(gold & predicted)
    precision = common / len(predicted) if predicted else 1.0
    recall = common / len(gold) if gold else 1.0
    if precision == 0.0 and recall == 0.0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def _numbers_agree(gold: set[str], predicted: set[str]) -> bool:
    """A gold span with numbers only scores against predictions sharing one of them."""
    gold_numbers = {word for word in gold if _is_number(word)}
    predicted_numbers = {word for word in predicted if _is_number(word)}
    return not gold_numbers or bool(gold_numbers & predicted_numbers)


def _aligned_f1(predicted: list[set[str]], gold: list[set[str]]) -> list[float]:
    """Per gold span, its F1 under the best one-to-one alignment with predicted spans."""
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    scores = np.zeros([len(gold), len(predicted)])
    for g, gold_bag in enumerate(gold):
        for p, predicted_bag in enumerate(predicted):
            if _numbers_agree(gold_bag, predicted_bag):
                scores[g, p] = _f1(predicted_bag, gold_bag)
    rows, columns = linear_sum_assignment(-scores)
    best = np.zeros([max(len(gold), len(predicted))])
    for row, column in zip(rows, columns):
        best[row] = max(best[row], scores[row, column])
    return list(best)


def em_and_f1(predicted: Any, gold: Any) -> tuple[float, float]:
    """DROP exact match and F1 (rounded to 2 places) of a prediction against one gold answer."""
    import numpy as np

    predicted_spans, predicted_bags = _bags(predicted)
    gold_spans, gold_bags = _bags(gold)
    same = set(predicted_spans) == set(gold_spans) and len(predicted_spans) == len(gold_spans)
    f1 = round(float(np.mean(_aligned_f1(predicted_bags, gold_bags))), 2)
    return (1.0 if same else 0.0), f1


def drop_results(row: Row, results: list[Any]) -> dict[str, float]:
    """Best em and f1 over the row's non-empty gold answers."""
    best_em = best_f1 = 0.0
    for gold in row["answers"]:
        em, f1 = em_and_f1(results, gold)
        if gold[0].strip():
            best_em, best_f1 = max(best_em, em), max(best_f1, f1)
    return {"em": best_em, "f1": best_f1}


def _processed(row: Row) -> Row:
    """lm-eval's processed columns: id, passage, question and the list of answers."""
    return {
        "id": row["query_id"],
        "passage": row["passage"],
        "question": row["question"],
        "answers": all_answers(row),
    }


def drop_prompt(row: Row, task_name: str) -> Doc:
    """Passage and question; the target is lm-eval's joined field names (see module doc)."""
    return generation_doc(f"{row['passage']} {row['question']}", ",".join(row["answer"]))


TASKS_TABLE = [
    TaskConfig(
        name="drop",
        prompt_function=drop_prompt,
        hf_repo="EleutherAI/drop",
        metrics=computed_metrics("em", "f1"),
        process_docs=map_rows(_processed),
        process_results=drop_results,
        # Each passage carries several questions: they share its context.
        cluster_key="passage",
        evaluation_splits=("validation",),
        few_shots_split="train",
        # lm-eval sets neither fewshot_split nor test_split here, which its sampler treats
        # as "few-shot pool = eval split": it draws one example more and drops the doc itself.
        fewshot_drop_equal=True,
        output_type=OutputType.GENERATE_UNTIL,
        target_delimiter="",
        generation_kwargs={"until": ["."]},
        version=3.0,
        example_rows=[
            {
                "section_id": "example",
                "query_id": "example_1",
                "passage": "The Bears scored 14 points in the first quarter and 7 in the second.",
                "question": "How many points did the Bears score in the first half?",
                "answer": {
                    "number": "21",
                    "date": {"day": "", "month": "", "year": ""},
                    "spans": [],
                },
                "validated_answers": {"number": [], "date": [], "spans": []},
            }
        ],
        **LM_EVAL_DEFAULTS,
    )
]
