"""lighteval's few-shot selections (`few_shots_select="lighteval:<name>"`,
`tasks.fewshot.PeerSelection`) and its order of eval docs (`get_docs`), as lighteval 0.13 makes
them."""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from assay.errors import TaskConfigError

if TYPE_CHECKING:
    from assay.doc import Doc
    from assay.tasks.task import Task

# The task module's name for these log lines, which users' log settings may already select.
log = logging.getLogger("assay.tasks.task")

SELECTORS = (
    "lighteval:balanced",
    "lighteval:random",
    "lighteval:sequential",
    "lighteval:random_sampling_from_train",
    "lighteval:random_sampling",
)
"""lighteval's few-shot selections (its `few_shots_select`), as lighteval 0.13 makes them."""

SHUFFLE_SEED = 42
"""lighteval's get_docs shuffles the eval docs with random.Random(42), and the sampling
selections keep drawing from that same generator."""


def fewshot_positions(
    selector: str,
    pool_labels: Sequence[str],
    eval_count: int,
    n: int,
    *,
    task: str,
) -> list[list[int]]:
    """For each of the `eval_count` eval docs the prompt function kept (in split order), the
    positions in the few-shot pool (the pool docs the prompt function kept, in split order) of
    its examples, exactly as lighteval 0.13's FewShotSampler picks them with variance seed 0:

    - balanced: one draw for the whole task, `_balanced`; every doc gets its first n;
    - random, sequential: the first n pool docs (lighteval shuffles only for seeds other than 0);
    - random_sampling_from_train / random_sampling: `rnd.sample(pool, n)` (n + 1 for
      random_sampling, then the first n) from lighteval's Random(42), after that generator
      shuffled the eval docs, doc after doc in the shuffled order.

    lighteval's rule meant to keep a doc out of its own examples compares whole Docs that never
    match (their task names differ), so it never removes one; neither does this.
    """
    if n == 0:
        return [[] for _ in range(eval_count)]
    size = len(pool_labels)
    need = n + 1 if selector == "lighteval:random_sampling" else n
    if size < need and selector in SELECTORS[3:]:
        raise TaskConfigError(
            f"task {task!r}: {selector} draws {need} examples from a few-shot pool of {size} "
            "docs. Lower --num-fewshot or choose a larger few-shot split."
        )
    if selector == "lighteval:balanced":
        same = _balanced(pool_labels, n)
        return [same[:n] for _ in range(eval_count)]
    if selector in ("lighteval:random", "lighteval:sequential"):
        return [list(range(min(n, size))) for _ in range(eval_count)]
    if selector not in SELECTORS:
        raise TaskConfigError(f"task {task!r}: unknown few-shot selector {selector!r}.")
    rnd = random.Random(SHUFFLE_SEED)
    order = list(range(eval_count))
    rnd.shuffle(order)
    out: list[list[int]] = [[] for _ in range(eval_count)]
    for position in order:
        out[position] = rnd.sample(range(size), need)[:n]
    return out


def _balanced(labels: Sequence[str], n: int) -> list[int]:
    """lighteval's balanced pool: labels ordered by how many pool docs carry them (ties in a
    shuffled order, from a generator seeded with 0), then round-robin over the labels, popping a
    random doc of each, until n + 1 docs are drawn."""
    rng = random.Random(0)  # lighteval reseeds the global generator with the variance seed, 0
    by_label: dict[str, list[int]] = {}
    for j, label in enumerate(labels):
        by_label.setdefault(label, []).append(j)
    by_count: dict[int, list[str]] = {}
    for label, members in sorted(by_label.items()):
        by_count.setdefault(len(members), []).append(label)
    order: list[str] = []
    for count in sorted(by_count, reverse=True):
        tied = by_count[count]
        rng.shuffle(tied)
        order.extend(tied)
    picks: list[int] = []
    left = min(len(labels), n + 1)
    position = 0
    while left > 0 and order:
        label = order[position % len(order)]
        position += 1
        if not label:  # lighteval stops at a falsy label ("")
            break
        members = by_label[label]
        if not members:
            continue
        picks.append(members.pop(rng.randrange(len(members))))
        left -= 1
    return picks


def plan(
    task: Task, selector: str, shots: int, rows: Sequence[dict[str, Any]], cache: dict[int, Doc]
) -> list[list[int]]:
    """Per eval row, the pool rows of its few-shot examples, as lighteval picks them: over the
    docs the prompt function keeps (in both the pool and the eval split), so every row is built
    first, as lighteval builds them."""
    pool = task.fewshot_rows()
    if task.fewshot_split() in task.config.evaluation_splits:
        log.warning(
            "%s: few-shot examples come from the evaluation split %r, as lighteval takes "
            "them when a task has no other split; as in lighteval, a doc may be shown as "
            "its own example.",
            task.config.where(),
            task.fewshot_split(),
        )
    kept_pool = [j for j in range(len(pool)) if task.kept_pool_doc(j, cache) is not None]
    labels = [
        cache[j].fewshot_sorting_class or (cache[j].get_golds() or [""])[0] for j in kept_pool
    ]
    if selector in ("lighteval:random_sampling_from_train", "lighteval:random_sampling"):
        # The draws follow lighteval's shuffled order of the kept eval docs.
        kept = [i for i in range(len(rows)) if task.make_doc(rows[i], i) is not None]
    else:
        kept = list(range(len(rows)))
    picks = fewshot_positions(selector, labels, len(kept), shots, task=task.config.name)
    out: list[list[int]] = [[] for _ in range(len(rows))]
    for i, positions in zip(kept, picks, strict=True):
        out[i] = [kept_pool[p] for p in positions]
    return out


def get_docs(
    task: Task, max_samples: int | float | None = None, seed: int | None = SHUFFLE_SEED
) -> list[Doc]:
    """lighteval's get_docs: every eval doc shuffled with `random.Random(seed)`, then the first
    `max_samples` (a float < 1 is a fraction of the rows; None means all).

    As in lighteval, the shuffle runs over the docs the prompt function kept (after duplicate
    removal), so the subset and its order are lighteval's. It builds every doc, as lighteval
    does; runs stream through `Task.docs()` instead. `seed=None` keeps doc order: the first
    `max_samples` rows, as lm-eval's --limit.
    """
    count = len(task.doc_indices(max_samples))
    if seed is None:
        return [doc for _, doc in task.docs(range(count))]
    docs = [doc for _, doc in task.docs(range(len(task.eval_rows())))]
    random.Random(seed).shuffle(docs)
    return docs[:count]
