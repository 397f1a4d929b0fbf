"""Every entry point refuses a bad setting with the same message: `assay run`'s flags, a
--config file, `evaluate()`, `RunSettings(...)` and (for the executor settings) `Experiment`."""

from __future__ import annotations

import pytest

from assay.cli.main import main
from assay.errors import ConfigError
from assay.run.api import evaluate
from assay.run.settings import RunSettings, describe, setting_names

REFUSED = [  # (field, what the command line types, the same value from Python)
    ("model_args", "pretrained", "pretrained"),
    ("limit", "-2", -2),
    ("limit", "0", 0),
    ("limit", "inf", float("inf")),
    ("limit", "ten", "ten"),
    ("samples", '{"t": [-1]}', {"t": [-1]}),
    ("samples", '{"t": [0.5]}', {"t": [0.5]}),
    ("num_fewshot", "-1", -1),
    ("num_fewshot", "two", "two"),
    ("batch_size", "0", 0),
    ("batch_size", "auto:0", "auto:0"),
    ("batch_size", "big", "big"),
    ("gen_kwargs", "max_gen_toks=0", {"max_gen_toks": 0}),
    ("metadata", "x", "x"),
    ("cluster_by", "race", "race"),
    ("bootstrap_iters", "-5", -5),
    ("bootstrap_iters", "many", "many"),
    ("judge_model_args", "x", "x"),
    ("second_judge_model_args", "x", "x"),
    ("unclosed_thinking", "maybe", "maybe"),
    ("sandbox", "vm", "vm"),
    ("seed", "1,2", [1, 2]),
    ("log_samples_reasoning", "some", "some"),
    ("sandbox_workers", "0", 0),
    ("executor", "spark", "spark"),
    ("replicas", "0", 0),
    ("gpus_per_replica", "-1", -1),
    ("batch_failed", "retry", "retry"),
    ("max_cost", "0", 0),
    ("max_cost", "free", "free"),
    ("log_to_args", "x", "x"),
]


def _cli_message(field: str, typed: str, capsys) -> str:
    flag = describe(field).flag
    assert flag is not None
    assert main(["run", "--model", "dummy", "--tasks", "t", flag.names[0], typed]) == 2
    err = capsys.readouterr().err
    assert err.startswith("assay: error: ") and "Traceback" not in err
    return err.removeprefix("assay: error: ").rstrip("\n")


@pytest.mark.parametrize(("field", "typed", "value"), REFUSED)
def test_python_refuses_what_the_command_line_refuses_with_the_same_message(
    field, typed, value, capsys
):
    message = _cli_message(field, typed, capsys)
    assert describe(field).flag.names[0] in message  # the message names the flag
    with pytest.raises(ConfigError) as made:
        RunSettings(**{field: value})
    assert str(made.value) == message
    with pytest.raises(ConfigError) as evaluated:
        evaluate("dummy", "t", **{field: value})
    assert str(evaluated.value) == message


def test_every_flag_that_can_be_typed_wrong_has_a_case_above():
    any_text = {  # a flag whose every text is a value (a name, a path, an address)
        "model", "device", "system_instruction", "judge_model", "second_judge_model",
        "sandbox_image", "output_path", "output_dir", "cache", "ray_address", "log_to",
    }  # fmt: skip
    valued = {
        name
        for name in setting_names()
        if describe(name).flag is not None
        and describe(name).flag.argparse.get("action") not in ("store_true", "store_false")
    }
    assert valued - any_text == {field for field, _, _ in REFUSED}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [  # values only Python can give
        ("log_samples", "yes", "--log-samples 'yes': give True or False."),
        ("show_progress", None, "--no-progress None: give True or False."),
        ("device", 0, "--device 0: give a string."),
        ("dataset_loading_processes", 0, "dataset_loading_processes 0: must be 1 or more."),
        ("limit", True, "--limit True: not a number."),
        ("log_to", 5, "--log-to 5: give names, comma separated or as a list."),
        ("model_args", ["a=1"], "--model-args ['a=1']: give a dict, k=v,k2=v2 or a JSON object."),
        ("cluster_by", {"race": 1}, "--cluster-by {'race': 1}: map task names to field names"),
    ],
)
def test_values_of_the_wrong_kind_are_refused_from_python(field, value, message):
    with pytest.raises(ConfigError) as made:
        RunSettings(**{field: value})
    assert str(made.value).startswith(message)


def test_checked_values_take_the_settings_types_and_a_replace_keeps_them():
    from dataclasses import replace

    settings = RunSettings(
        limit="5", num_fewshot="0", batch_size="8", model_args="a=1", cluster_by="t=f",
        seed="3", max_cost="2", log_to="mlflow,wandb", samples='{"t": [0, 2]}',
    )  # fmt: skip
    assert (settings.limit, settings.num_fewshot, settings.batch_size) == (5, 0, 8)
    assert settings.model_args == {"a": 1} and settings.cluster_by == {"t": "f"}
    assert tuple(settings.seed) == (3, 3, 3, 3) and settings.max_cost == 2.0
    assert settings.log_to == ["mlflow", "wandb"] and settings.samples == {"t": [0, 2]}
    assert replace(settings) == settings
    assert RunSettings(limit=0.25).limit == 0.25 and RunSettings(limit=7.0).limit == 7


def test_a_config_file_value_is_refused_by_its_file_and_key(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text("max_cost: -1\n", encoding="utf-8")
    assert main(["run", "--config", str(config), "--tasks", "t"]) == 2
    err = capsys.readouterr().err
    assert f"--config {config}: max_cost -1: give a positive amount of USD" in err


def test_evaluate_names_an_unknown_keyword_and_the_close_one():
    with pytest.raises(ConfigError, match="'limt' is not a keyword \\(did you mean 'limit'\\?\\)"):
        evaluate("dummy", "t", limt=3)


def test_experiment_checks_its_executor_settings_as_the_run_does(tmp_path):
    from assay.pipelines.experiment import Experiment

    for keywords, message in (
        ({"executor": "spark"}, "Experiment executor 'spark': choose one of local, ray."),
        ({"executor": "ray", "replicas": 0}, "Experiment replicas 0: must be 1 or more."),
        ({"replicas": 2}, "Experiment replicas=2 applies to executor='ray' only"),
        ({"replica": 2}, "Experiment: 'replica' is not a keyword; the executor settings are "),
    ):
        with pytest.raises(ConfigError) as made:
            Experiment("e", output_dir=tmp_path / "e", **keywords)
        assert str(made.value).startswith(message)
    assert Experiment("e", output_dir=tmp_path / "e", executor="local").executor == "local"


def test_batch_failed_is_the_backends_batch_failed_and_needs_the_batch_api():
    from assay.models.api.batches import FAILED_CHOICES
    from assay.run.backend import backend_args
    from assay.run.settings import BATCH_FAILED

    assert BATCH_FAILED == FAILED_CHOICES
    given = {"model": "openai-chat", "model_args": "model=m", "output_dir": "o"}
    with pytest.raises(ConfigError, match="--batch-failed stop applies to runs through a provider"):
        backend_args(RunSettings(**given, batch_failed="stop"))
    args = backend_args(RunSettings(**given, batch_api=True, batch_failed="stop"))
    assert args["batch_failed"] == "stop"
    with pytest.raises(ConfigError, match="disagree"):
        backend_args(
            RunSettings(
                **{**given, "model_args": "model=m,batch_failed=resubmit"},
                batch_api=True,
                batch_failed="stop",
            )
        )


def test_power_refuses_a_cluster_by_value_as_compare_does(capsys):
    # `assay power --cluster-by` takes compare's FIELD|TASK=FIELD and refuses what it refuses.
    argv = ["--difference", "0.1", "--cluster-by"]
    for command in (["power", "a", "b", *argv, "=f"], ["compare", "a", "b", "--cluster-by", "=f"]):
        assert main(command) == 2
        assert "--cluster-by '=f': expected FIELD or TASK=FIELD." in capsys.readouterr().err
