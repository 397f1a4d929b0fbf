"""TaskConfig: validation rejects what assay cannot honour, output types follow the metrics."""

from __future__ import annotations

import pytest

from assay.doc import Doc, OutputType, SamplingMethod
from assay.errors import TaskConfigError
from assay.tasks.config import MetricSpec, TaskConfig


def prompt(row, task_name):
    return Doc(row["q"], choices=["a", "b"], gold_index=0)


def config(**kwargs):
    return TaskConfig(**{"name": "t", "prompt_function": prompt, "hf_repo": "json", **kwargs})


def test_a_valid_config_passes_and_metric_names_become_specs():
    cfg = config(metrics=["acc", MetricSpec("acc_norm")])
    cfg.validate()
    assert [m.name for m in cfg.metrics] == ["acc", "acc_norm"]
    assert all(isinstance(m, MetricSpec) for m in cfg.metrics)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "a|b"}, "name"),
        ({"prompt_function": "not callable"}, "prompt_function"),
        ({"hf_repo": None}, "hf_repo"),
        ({"generation_grammar": {"type": "regex"}}, "generation_grammar"),
        ({"few_shots_select": "cleverest"}, "few_shots_select"),
        ({"num_fewshots": -1}, "num_fewshots"),
        ({"num_samples": 0}, "num_samples"),
        ({"evaluation_splits": ()}, "evaluation_splits"),
        ({"metrics": []}, "metrics"),
    ],
)
def test_invalid_fields_are_rejected_naming_the_field(kwargs, field):
    cfg = config(**{"metrics": ["acc"], **kwargs})
    with pytest.raises(TaskConfigError) as err:
        cfg.validate()
    assert field in str(err.value)
    assert "task" in str(err.value)


def test_validate_hook_runs_before_any_model():
    def hook():
        raise TaskConfigError("bundled file missing")

    with pytest.raises(TaskConfigError, match="bundled file missing"):
        config(metrics=["acc"], validate_hook=hook).validate()


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        (["acc"], OutputType.MULTIPLE_CHOICE),
        (["exact_match"], OutputType.GENERATE_UNTIL),
        (["prompt_level_strict_acc"], OutputType.GENERATE_UNTIL),
        (["word_perplexity"], OutputType.LOGLIKELIHOOD_ROLLING),
    ],
)
def test_output_type_is_derived_from_metrics(metrics, expected):
    cfg = config(metrics=metrics)
    assert cfg.resolved_output_type is expected


def test_explicit_output_type_wins_and_maps_to_a_sampling_method():
    cfg = config(metrics=["acc"], output_type="generate_until")
    assert cfg.output_type is OutputType.GENERATE_UNTIL
    assert cfg.sampling_method is SamplingMethod.GENERATIVE
    assert config(metrics=["acc"]).sampling_method is SamplingMethod.LOGPROBS
