"""The measured choice between one context pass per doc and one row per choice (`choice_cost`).

Asked to (ASSAY_MEASURE_CHOICE_PACKING=1), the first call with docs whose choices have several
tokens times a few of them both ways; the
faster way scores the rest, the inputs and the choice are kept for results.json, and either way
gives the plain per-choice log-likelihoods within 1e-5.
"""

from __future__ import annotations

import json

import pytest

from assay.models.hf.choice_cost import MEASURED_DOCS, ChoicePacking
from assay.models.hf.model import hf
from assay.requests.types import LoglikelihoodRequest

ENDINGS = [" then walks to the door.", " and falls", " ,", " sings a song about the rain today"]


def docs(n: int, offset: int = 0) -> list[LoglikelihoodRequest]:
    """HellaSwag-shaped: distinct contexts, each with four endings of several tokens."""
    return [
        LoglikelihoodRequest(f"Scene {i}: a man {'slowly ' * (i % 4)}picks up a cup", ending)
        for i in range(offset, offset + n)
        for ending in ENDINGS
    ]


@pytest.fixture(scope="module")
def plain(tiny_model_dir):
    """One row per choice, never measured (packing off)."""
    lm = hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4, prefix_cache=False)
    lm.scorer.share_prefixes = False
    return lm


@pytest.fixture(autouse=True)
def _measuring(monkeypatch):
    monkeypatch.setenv("ASSAY_MEASURE_CHOICE_PACKING", "1")


def test_nothing_is_measured_unless_asked(tiny_model_dir, monkeypatch):
    monkeypatch.delenv("ASSAY_MEASURE_CHOICE_PACKING")
    lm = _fresh(tiny_model_dir, prefix_cache=False)
    lm.loglikelihood(docs(3))
    assert lm.scoring_choice() is None


def _fresh(tiny_model_dir, **args):
    return hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4, **args)


def test_the_faster_way_wins_and_a_tie_keeps_the_packed_way():
    packed = ChoicePacking.of((1.0, 2.0), (10, 30), 8, "cpu", 5)
    single = ChoicePacking.of((2.0, 1.0), (10, 30), 8, "cpu", 5)
    tie = ChoicePacking.of((1.0, 1.0), (10, 30), 8, "cpu", 5)
    assert packed.context_once and not single.context_once and tie.context_once
    assert single.as_dict()["per_choice_seconds"] == 1.0 and single.as_dict()["backend"] == "hf"


@pytest.mark.parametrize("prefix_cache", [True, False])
def test_first_call_measures_both_ways_and_scores_match_one_row_per_choice(
    tiny_model_dir, plain, prefix_cache
):
    lm = _fresh(tiny_model_dir, prefix_cache=prefix_cache)
    assert lm.scoring_choice() is None
    requests = docs(12)
    got = lm.loglikelihood(requests)
    want = plain.loglikelihood(requests)
    assert max(abs(g.logprob - w.logprob) for g, w in zip(got, want, strict=True)) <= 1e-5
    assert [g.is_greedy for g in got] == [w.is_greedy for w in want]
    record = lm.scoring_choice()
    assert record is not None and record["measured_docs"] == MEASURED_DOCS
    assert record["context_once_seconds"] > 0 and record["per_choice_seconds"] > 0
    assert record["context_once_tokens"] < record["per_choice_tokens"]
    assert record["context_once"] == (
        record["context_once_seconds"] <= record["per_choice_seconds"]
    )
    assert record["device"] == "cpu" and record["parameters"] > 0
    # Measured once: a later call keeps the choice.
    lm.loglikelihood(docs(3, offset=40))
    assert lm.scoring_choice() == record


@pytest.mark.parametrize("context_once", [True, False])
def test_the_recorded_choice_is_the_way_later_calls_run(tiny_model_dir, plain, context_once):
    lm = _fresh(tiny_model_dir, prefix_cache=False)
    lm.scorer.packing = ChoicePacking.of(
        (1.0, 2.0) if context_once else (2.0, 1.0), (1, 2), 1, "cpu", 1
    )
    widths: list[int] = []
    inner = lm.scorer._run_rows

    def recording(rows, **kwargs):
        widths.extend(len(row.targets) for row in rows)
        return inner(rows, **kwargs)

    lm.scorer._run_rows = recording
    requests = docs(5)
    got = lm.loglikelihood(requests)
    # Packed: a doc's four endings are one row's targets; otherwise one row each.
    assert set(widths) == ({len(ENDINGS)} if context_once else {1})
    want = plain.loglikelihood(requests)
    assert max(abs(g.logprob - w.logprob) for g, w in zip(got, want, strict=True)) <= 1e-5


def test_single_token_choices_measure_nothing(tiny_model_dir):
    lm = _fresh(tiny_model_dir, prefix_cache=False)
    lm.loglikelihood([LoglikelihoodRequest(f"Q{i}: 2+2=", x) for i in range(4) for x in "45"])
    assert lm.scoring_choice() is None


TASK = """\
task: toy_endings
dataset_path: json
dataset_kwargs:
  data_files:
    test: {rows}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{ctx}}}}"
doc_to_choice: "{{{{endings}}}}"
doc_to_target: "{{{{label}}}}"
metric_list:
  - metric: acc
  - metric: acc_norm
"""


def test_results_json_records_the_choice_per_task(tmp_path, tiny_model_dir):
    from assay.run.api import evaluate

    rows = tmp_path / "rows.jsonl"
    with rows.open("w", encoding="utf-8") as handle:
        for i in range(10):
            row = {"ctx": f"Scene {i}: a man picks up a cup", "endings": ENDINGS, "label": i % 4}
            handle.write(json.dumps(row) + "\n")
    (tmp_path / "toy_endings.yaml").write_text(TASK.format(rows=rows), encoding="utf-8")
    results = evaluate(
        "hf",
        "toy_endings",
        include_path=tmp_path,
        model_args={"pretrained": str(tiny_model_dir), "dtype": "float32"},
        output_dir=tmp_path / "out",
        show_progress=False,
    )
    written = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    for record in (results, written):
        scoring = record["assay"]["requests"]["toy_endings"]["scoring"]
        # batch_size 1: the run's calls hold one doc each, so the first call measured one.
        assert scoring["backend"] == "hf" and scoring["measured_docs"] == 1
        assert isinstance(scoring["context_once"], bool)
