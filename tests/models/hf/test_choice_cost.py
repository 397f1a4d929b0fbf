"""The choice between one context pass per doc and one row per choice (`choice_cost`).

By default the first call with docs whose choices have several tokens reads the choice from the
stored calibration table (by device type and model size); asked to
(ASSAY_MEASURE_CHOICE_PACKING=1), it times a few of them both ways instead and the faster way
scores the rest. The choice and what it rests on are kept for results.json, and either way gives
the plain per-choice log-likelihoods within 1e-5.
"""

from __future__ import annotations

import json

import pytest

from assay.models.hf import choice_cost
from assay.models.hf.choice_cost import MEASURED_DOCS, ChoicePacking, calibrated
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


def test_unless_asked_nothing_is_measured_and_the_table_decides(tiny_model_dir, monkeypatch):
    monkeypatch.delenv("ASSAY_MEASURE_CHOICE_PACKING")
    lm = _fresh(tiny_model_dir, prefix_cache=False)
    assert lm.scoring_choice() is None  # no call with such docs yet
    lm.loglikelihood(docs(3))
    record = lm.scoring_choice()
    assert record is not None and record["source"] == "calibration table"
    assert "context_once_seconds" not in record and record["device"] == "cpu"
    row = choice_cost.calibration_row("cpu", record["parameters"])
    assert record["row"] == (row if row is not None else record["row"])
    # The same model on the same device reads the same row: repeated runs give the same bits.
    again = _fresh(tiny_model_dir, prefix_cache=False)
    assert again.loglikelihood(docs(3)) == lm.loglikelihood(docs(3))
    assert again.scoring_choice() == record


ROWS = [
    {"device": "cpu", "min_parameters": 0, "max_parameters": 1000, "context_once": False},
    {"device": "cpu", "min_parameters": 1000, "max_parameters": None, "context_once": True},
    {"device": "cuda", "min_parameters": 0, "max_parameters": None, "context_once": False},
]


@pytest.mark.parametrize(
    ("device", "parameters", "index"),
    [("cpu", 0, 0), ("cpu", 999, 0), ("cpu", 1000, 1), ("cpu", 10**12, 1), ("cuda", 5, 2)],
)
def test_a_row_covers_its_device_and_size_bucket(monkeypatch, device, parameters, index):
    monkeypatch.setattr(choice_cost, "_rows", lambda: tuple(ROWS))
    assert choice_cost.calibration_row(device, parameters) is ROWS[index]
    choice = calibrated(device, device, parameters)
    assert choice.context_once is ROWS[index]["context_once"]
    assert choice.as_dict()["row"] == ROWS[index]


def test_a_device_no_row_covers_packs_and_says_it_was_not_measured(monkeypatch):
    monkeypatch.setattr(choice_cost, "_rows", lambda: tuple(ROWS))
    assert choice_cost.calibration_row("mps", 10) is None
    record = calibrated("mps", "mps", 10).as_dict()
    assert record["context_once"] is True and record["row"]["measured"] is False
    assert "no calibration row" in record["row"]["note"]


def test_the_shipped_table_reads_and_its_rows_are_complete():
    for row in choice_cost._rows():
        assert row["device"] in ("cpu", "cuda") and isinstance(row["context_once"], bool)
        assert row["max_parameters"] is None or row["max_parameters"] > row["min_parameters"]


@pytest.mark.parametrize("context_once", [True, False])
def test_the_table_row_is_the_way_the_run_scores(tiny_model_dir, plain, monkeypatch, context_once):
    monkeypatch.delenv("ASSAY_MEASURE_CHOICE_PACKING")
    row = {"device": "cpu", "min_parameters": 0, "max_parameters": None}
    monkeypatch.setattr(choice_cost, "_rows", lambda: ({**row, "context_once": context_once},))
    lm = _fresh(tiny_model_dir, prefix_cache=False)
    widths: list[int] = []
    inner = lm.scorer._run_rows

    def recording(rows, **kwargs):
        widths.extend(len(row.targets) for row in rows)
        return inner(rows, **kwargs)

    lm.scorer._run_rows = recording
    requests = docs(5)
    got = lm.loglikelihood(requests)
    assert set(widths) == ({len(ENDINGS)} if context_once else {1})
    assert lm.scoring_choice()["context_once"] is context_once
    want = plain.loglikelihood(requests)
    assert max(abs(g.logprob - w.logprob) for g, w in zip(got, want, strict=True)) <= 1e-5


def _fresh(tiny_model_dir, **args):
    return hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4, **args)


def test_the_faster_way_wins_and_a_tie_keeps_the_packed_way():
    packed = ChoicePacking.of((1.0, 2.0), (10, 30), 8, "cpu", 5)
    single = ChoicePacking.of((2.0, 1.0), (10, 30), 8, "cpu", 5)
    tie = ChoicePacking.of((1.0, 1.0), (10, 30), 8, "cpu", 5)
    assert packed.context_once and not single.context_once and tie.context_once
    assert single.as_dict()["per_choice_seconds"] == 1.0 and single.as_dict()["backend"] == "hf"
    assert single.as_dict()["source"] == "measured on this run"


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
    assert record["source"] == "measured on this run"
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
