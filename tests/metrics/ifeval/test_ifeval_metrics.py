"""The four IFEval metrics and the instruction-level aggregation, as a task uses them."""

from __future__ import annotations

import pytest

from assay.doc import Doc, OutputType
from assay.errors import DataError
from assay.metrics.base import AGGREGATIONS, SampleInput, get_metric
from assay.metrics.ifeval import specific_from_row

ROW = {
    "key": 3,
    "prompt": "Answer without commas and wrap it in double quotes.",
    "instruction_id_list": ["punctuation:no_comma", "startend:quotation"],
    "kwargs": [{"num_words": None}, {}],
}
METRICS = {
    "prompt_level_strict_acc": "mean",
    "inst_level_strict_acc": "inst_level_acc",
    "prompt_level_loose_acc": "mean",
    "inst_level_loose_acc": "inst_level_acc",
}


def sample(response, specific=None) -> SampleInput:
    doc = Doc(
        query=ROW["prompt"], specific=specific or specific_from_row(ROW), id="3", task_name="ifeval"
    )
    return SampleInput(doc, OutputType.GENERATE_UNTIL, response)


@pytest.mark.parametrize(("name", "aggregation"), METRICS.items())
def test_metrics_are_registered_for_generation(name, aggregation):
    metric = get_metric(name)
    assert metric.name == name
    assert metric.aggregation == aggregation
    assert metric.higher_is_better is True
    assert metric.output_types == frozenset({OutputType.GENERATE_UNTIL})


def test_per_sample_values_strict_and_loose():
    # The comma sits in a preamble line that loose scoring drops; the quotes hold throughout.
    values = {
        name: get_metric(name).sample_fn(sample('Sure, here:\n"no commas here"'))
        for name in METRICS
    }
    assert values == {
        "prompt_level_strict_acc": False,
        "inst_level_strict_acc": [False, False],
        "prompt_level_loose_acc": True,
        "inst_level_loose_acc": [True, True],
    }


def test_first_of_several_kept_responses_is_scored():
    fn = get_metric("inst_level_strict_acc").sample_fn
    assert fn(sample(['"fine"', "bad, bad"])) == [True, True]


def test_inst_level_aggregation_flattens():
    aggregation = AGGREGATIONS.get("inst_level_acc")
    assert aggregation.stderr == "flat_mean"
    assert aggregation.fn([[True, False], [True], [False, False, True]]) == pytest.approx(3 / 6)


def test_docs_without_ifeval_data_are_refused():
    doc = Doc(query="q", id="9", task_name="other")
    with pytest.raises(DataError, match="task 'other', doc '9': IFEval metrics need"):
        get_metric("prompt_level_strict_acc").sample_fn(
            SampleInput(doc, OutputType.GENERATE_UNTIL, "x")
        )
    with pytest.raises(DataError, match="score generated text, got int"):
        get_metric("prompt_level_strict_acc").sample_fn(sample(3))
