"""lighteval's metric names: the same metric is served, others are refused with the closest."""

from __future__ import annotations

import pytest

from assay.compat.lighteval.names import CLOSEST, SAME
from assay.doc import Doc
from assay.errors import ConfigError
from assay.metrics.base import get_metric
from assay.run.evaluation import Evaluation
from assay.run.settings import RunSettings
from assay.tasks.config import TaskConfig
from assay.tasks.registry import Resolved, TaskRequest

ROWS = [{"q": f"q{i}", "label": i % 3} for i in range(9)]


def mc_task(metric):
    return TaskConfig(
        name="mc",
        prompt_function=lambda row, _: Doc(row["q"], [" a", " bb", " ccc"], row["label"]),
        dataset_loader=lambda **_: {"validation": ROWS},
        metrics=[metric],
    )


def run(config):
    resolved = Resolved([TaskRequest(config)])
    return Evaluation(resolved, RunSettings(model="dummy", show_progress=False)).run()


@pytest.mark.parametrize(
    ("lighteval", "assay"), [("loglikelihood_acc", "acc"), ("loglikelihood_acc_norm", "acc_norm")]
)
def test_lighteval_names_of_the_same_metric_give_assays_numbers(lighteval, assay):
    ported = run(mc_task(lighteval))["results"]["mc"]
    native = run(mc_task(assay))["results"]["mc"]
    assert ported == native and f"{assay},none" in ported


@pytest.mark.parametrize("name", ["quasi_exact_match", "loglikelihood_acc_norm_nospace", "rouge1"])
def test_lighteval_names_without_an_exact_counterpart_are_refused_with_the_closest(name):
    with pytest.raises(ConfigError) as refused:
        run(mc_task(name))
    message = str(refused.value)
    assert f"metric {name!r} is lighteval's" in message and CLOSEST[name] in message


def test_the_tables_do_not_shadow_assay_names():
    from assay.metrics.base import METRICS

    assert not (set(SAME) | set(CLOSEST)) & set(METRICS.names())
    assert get_metric("loglikelihood_acc").name == "acc"
