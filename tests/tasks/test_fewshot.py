"""Few-shot selection: the four selectors, lm-eval's stream, and never a doc's own row."""

from __future__ import annotations

import random

import pytest

from assay.compat.lighteval.fewshot import get_docs
from assay.doc import Doc
from assay.errors import TaskConfigError
from assay.tasks.config import TaskConfig
from assay.tasks.fewshot import select_fewshots
from assay.tasks.task import Task

POOL = [{"q": f"p{i}", "label": "AB"[i % 2] if i < 8 else "C"} for i in range(10)]
EVAL = [{"q": f"e{i}", "label": "A"} for i in range(6)]


def plan(selector, n, pool=POOL, rows=EVAL, **kwargs):
    kwargs = {"seed": 1234, "task": "t", "exclude_self": False, **kwargs}
    return list(select_fewshots(selector, pool, rows, n, **kwargs))


@pytest.mark.parametrize("selector", ["first_n", "sequential"])
def test_first_n_and_sequential_take_the_pool_in_order(selector):
    assert plan(selector, 3) == [[0, 1, 2]] * len(EVAL)


def test_random_is_seeded_per_doc_and_reproducible():
    first = plan("random", 4)
    assert first == plan("random", 4)
    assert first != plan("random", 4, seed=99)
    assert all(len(set(p)) == 4 for p in first)
    assert len({tuple(p) for p in first}) > 1  # docs get different examples
    # Doc i's examples do not depend on how many docs follow it.
    assert plan("random", 4, rows=EVAL[:2]) == first[:2]


def test_balanced_round_robins_over_sorted_classes():
    label = lambda j: POOL[j]["label"]  # noqa: E731
    picks = plan("balanced", 6, sorting_class=label)
    for p in picks:
        assert [label(j) for j in p] == ["A", "B", "C", "A", "B", "C"]
        assert len(set(p)) == 6


def test_lm_eval_selector_replays_one_seeded_stream_in_doc_order():
    stream = random.Random(1234)
    expected = [stream.sample(range(len(POOL)), 3) for _ in EVAL]
    assert plan("lm_eval", 3) == expected


def test_lm_eval_drop_equal_draws_one_more_and_drops_the_doc():
    rows = [POOL[2], POOL[5]]
    stream = random.Random(1234)
    expected = []
    for row in rows:
        drawn = stream.sample(range(len(POOL)), 4)
        expected.append([j for j in drawn if POOL[j] != row][:3])
    assert plan("lm_eval", 3, rows=rows, exclude_self=True) == expected


@pytest.mark.parametrize("selector", ["lm_eval", "first_n", "sequential", "random", "balanced"])
@pytest.mark.parametrize("drop_equal", [None, False])
def test_a_doc_is_never_among_its_own_examples(selector, drop_equal):
    label = lambda j: POOL[j]["label"]  # noqa: E731
    picks = plan(
        selector,
        3,
        rows=POOL,
        exclude_self=True,
        drop_equal=drop_equal,
        sorting_class=label if selector == "balanced" else None,
    )
    for doc_index, p in enumerate(picks):
        assert doc_index not in p
        assert len(p) == 3


def test_too_small_a_pool_is_a_clear_error():
    with pytest.raises(TaskConfigError, match="only 2 rows"):
        plan("random", 3, pool=POOL[:2])


def _prompt(row, task_name):
    return Doc(row["q"], choices=[row["label"]], gold_index=0)


@pytest.mark.parametrize("selector", ["first_n", "random", "balanced", "lm_eval"])
def test_task_attaches_examples_never_the_doc_itself(selector):
    cfg = TaskConfig(
        name="fs",
        prompt_function=_prompt,
        dataset_loader=lambda **_: {"validation": POOL},
        evaluation_splits=("validation",),
        few_shots_select=selector,
        num_fewshots=3,
        metrics=["acc"],
    )
    docs = list(Task(cfg).eval_docs())
    assert len(docs) == len(POOL)
    for doc in docs:
        queries = [s.query for s in doc.fewshot_samples]
        assert len(queries) == 3
        assert doc.query not in queries
    if selector == "first_n":
        assert [s.query for s in docs[5].fewshot_samples] == ["p0", "p1", "p2"]
        assert [s.query for s in docs[1].fewshot_samples] == ["p0", "p2", "p3"]


def test_fewshot_assignment_does_not_depend_on_limit():
    cfg = TaskConfig(
        name="fs",
        prompt_function=_prompt,
        dataset_loader=lambda **_: {"train": POOL, "validation": EVAL},
        num_fewshots=2,
        metrics=["acc"],
    )
    everything = [[s.query for s in d.fewshot_samples] for d in Task(cfg).eval_docs()]
    # lighteval's get_docs shuffles the docs: each keeps its own examples.
    shuffled = get_docs(Task(cfg), None)
    assert [d.id for d in shuffled] != [str(i) for i in range(len(everything))]
    assert {d.id: [s.query for s in d.fewshot_samples] for d in shuffled} == {
        str(i): shots for i, shots in enumerate(everything)
    }
    ((_, fifth),) = Task(cfg).docs([4])
    assert [s.query for s in fifth.fewshot_samples] == everything[4]
    # The pool is the train split: examples come from it.
    assert all(q.startswith("p") for shots in everything for q in shots)
