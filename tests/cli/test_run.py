"""`assay run`: lm-eval's flag spellings, --config files, --show-config, --tasks list, and bad
numbers answered with the value typed."""

from __future__ import annotations

import json

import pytest
from fixtures.json_tasks import choice_yaml, even_rows, write_task

from assay.cli.main import build_parser, main
from assay.cli.run import settings_from_args
from assay.run.settings import RunSettings


@pytest.fixture
def folder(tmp_path):
    return write_task(tmp_path, choice_yaml("cli_task"), even_rows(6), "cli.yaml")


LM_EVAL_SPELLINGS = [
    ("--model_args", "pretrained=x", "model_args", "pretrained=x"),
    ("--include_path", "dir", "include_path", ["dir"]),
    ("--batch_size", "4", "batch_size", "4"),  # as typed: RunSettings converts it
    ("--output_path", "out", "output_path", "out"),
    ("--num_fewshot", "3", "num_fewshot", "3"),
    ("--gen_kwargs", "max_gen_toks=5", "gen_kwargs", "max_gen_toks=5"),
    ("--system_instruction", "Be brief.", "system_instruction", "Be brief."),
]


@pytest.mark.parametrize(("flag", "value", "dest", "expected"), LM_EVAL_SPELLINGS)
def test_lm_evals_underscore_flags_are_accepted(flag, value, dest, expected):
    args = build_parser().parse_args(["run", "--tasks", "t", flag, value])
    assert getattr(args, dest) == expected
    joined = build_parser().parse_args(["run", "--tasks", "t", f"{flag}={value}"])
    assert getattr(joined, dest) == expected


@pytest.mark.parametrize(
    ("flag", "dest"),
    [
        ("--log_samples", "log_samples"),
        ("--apply_chat_template", "apply_chat_template"),
        ("--fewshot_as_multiturn", "fewshot_as_multiturn"),
        ("--predict_only", "predict_only"),
        ("--show_config", "show_config"),
    ],
)
def test_lm_evals_underscore_switches_are_accepted(flag, dest):
    assert getattr(build_parser().parse_args(["run", "--tasks", "t", flag]), dest) is True


def test_an_underscore_flag_assay_does_not_have_is_still_an_error(capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["run", "--tasks", "t", "--no_such_flag"])
    assert exc.value.code == 2 and "--no_such_flag" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["list", "list_groups", "list_tags"])
def test_tasks_list_points_to_the_tasks_command(name, capsys):
    assert main(["run", "--model", "dummy", "--tasks", name]) == 2
    assert "assay tasks list" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "typed"),
    [(["--limit", "-3"], "-3"), (["--limit", "0"], "0"), (["--batch-size", "0"], "0 ")],
)
def test_bad_numbers_are_answered_with_the_value_typed(args, typed, capsys):
    assert main(["run", "--tasks", "t", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"assay: error: {args[0]} {typed.strip()}: ") and "Traceback" not in err


def test_version(capsys):
    from assay import __version__

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"assay {__version__}"


def test_config_file_sets_every_flag_and_the_command_line_wins(folder, tmp_path, capsys):
    out = tmp_path / "out"
    config = tmp_path / "run.yaml"
    config.write_text(
        f"""\
model: dummy
model_args: {{seed: 3}}
tasks: [cli_task]
include_path: {folder}
limit: 4
output_path: {out}
log_samples: true
no_progress: true
gen_kwargs: {{max_gen_toks: 5}}
""",
        encoding="utf-8",
    )
    args = build_parser().parse_args(["run", "--config", str(config)])  # parsed without the file
    assert args.tasks is None
    assert main(["run", "--config", str(config), "--limit", "3"]) == 0
    # output_path: lm-eval's layout, OUT/<model>/results_<ts>.json with its samples beside it
    [written] = (out / "dummy").glob("results_*.json")
    results = json.loads(written.read_text())
    assert results["config"]["model"] == "dummy" and results["config"]["model_args"] == {"seed": 3}
    assert results["config"]["limit"] == 3  # the command line wins over the file's 4
    assert results["config"]["gen_kwargs"] == {"max_gen_toks": 5}
    stamp = written.stem.removeprefix("results_")
    assert len((out / "dummy" / f"samples_cli_task_{stamp}.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("modle: dummy\n", "'modle' is not an `assay run` flag (did you mean 'model'?)"),
        ("limit: -2\n", "limit -2: give a positive number"),
        ("bootstrap_iters: -5\n", "bootstrap_iters -5: give 0 or more iterations"),
        ("no_progress: 1\n", "no_progress must be true or false"),
        ("log_samples: yes please\n", "log_samples must be true or false"),
        ("- a\n- b\n", "expected a mapping"),
        ("tasks: [a\n", "not valid YAML"),
    ],
)
def test_config_file_mistakes_name_the_file_and_key(tmp_path, capsys, text, message):
    config = tmp_path / "run.yaml"
    config.write_text(text, encoding="utf-8")
    assert main(["run", "--config", str(config), "--tasks", "t"]) == 2
    err = capsys.readouterr().err
    assert f"--config {config}" in err and message in err


def test_config_without_tasks_is_refused_like_the_command_line(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text("model: dummy\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["run", "--config", str(config)])
    assert exc.value.code == 2 and "--tasks" in capsys.readouterr().err


def test_show_config_prints_each_tasks_config(folder, capsys):
    code = main(["run", "--model", "dummy", "--tasks", "cli_task", "--include-path", str(folder),
                 "--no-progress", "--show-config"])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    body = printed[printed.index("\ncli_task:\n") + len("\ncli_task:\n") :]
    shown = json.loads(body[: body.index("\n}") + 2])
    assert shown["task"] == "cli_task" and shown["doc_to_choice"] == ["no", "yes"]


def test_run_flags_default_to_the_run_settings_defaults():
    args = build_parser().parse_args(["run", "--tasks", "x"])
    assert settings_from_args(args) == RunSettings()


def test_flags_convert_to_the_settings_types():
    args = build_parser().parse_args(
        ["run", "--tasks", "x", "--limit", "0.5", "--num-fewshot", "2", "--batch-size", "8",
         "--no-progress", "--cluster-by", "a=x,b=y", "--max-cost", "2.5", "--replicas", "3"]
    )  # fmt: skip
    settings = settings_from_args(args)
    assert (settings.limit, settings.num_fewshot, settings.batch_size) == (0.5, 2, 8)
    assert (settings.show_progress, settings.max_cost, settings.replicas) == (False, 2.5, 3)
    assert settings.cluster_by == {"a": "x", "b": "y"}


@pytest.mark.parametrize(
    ("given", "expected"),
    [  # lm-eval 0.4.13's _int_or_none_list_arg_type(3, 4, "0,1234,1234,1234", value)
        ("42", (42, 42, 42, 42)),
        ("0,1,2,7", (0, 1, 2, 7)),
        ("0,None,8,none", (0, None, 8, None)),
        ("5,6,7", (5, 6, 7, 1234)),
    ],
)
def test_seed_takes_lm_evals_forms(given, expected):
    args = build_parser().parse_args(["run", "--tasks", "t", "--seed", given])
    assert tuple(settings_from_args(args).seed) == expected


@pytest.mark.parametrize(
    ("given", "named"),
    [("1,2", "2 values"), ("1,2,3,4,5", "5 values"), ("0,x,2,3", "'x' is not a whole number")],
)
def test_malformed_seed_lists_are_refused_with_the_value_and_the_fix(folder, capsys, given, named):
    code = main(["run", "--model", "dummy", "--tasks", "cli_task", "--include-path", str(folder),
                 "--seed", given, "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and f"--seed {given}: {named}" in err
    assert "python,numpy,torch,fewshot" in err and "Traceback" not in err


def test_the_four_seeds_are_recorded_as_lm_eval_records_them(folder, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["run", "--model", "dummy", "--tasks", "cli_task", "--include-path", str(folder),
                 "--seed", "3,None,5,7", "--output-dir", str(out), "--no-progress"])  # fmt: skip
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    config = {k: results["config"][k] for k in ("random_seed", "numpy_seed", "torch_seed")}
    assert config == {"random_seed": 3, "numpy_seed": None, "torch_seed": 5}
    assert results["config"]["fewshot_seed"] == 7
    assert results["provenance"]["seeds"]["fewshot_seed"] == 7


def test_a_config_file_seed_takes_lm_evals_forms_and_is_refused_by_its_key(
    folder, tmp_path, capsys
):
    config, out = tmp_path / "run.yaml", tmp_path / "out"
    config.write_text("model: dummy\nseed: [0, 1, None, 7]\n", encoding="utf-8")
    code = main(["run", "--config", str(config), "--tasks", "cli_task", "--include-path",
                 str(folder), "--output-dir", str(out), "--no-progress"])  # fmt: skip
    assert code == 0
    recorded = json.loads((out / "results.json").read_text())["config"]
    keys = ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed")
    assert [recorded[k] for k in keys] == [0, 1, None, 7]
    config.write_text("seed: 1,2\n", encoding="utf-8")
    assert main(["run", "--config", str(config), "--tasks", "t"]) == 2
    assert f"--config {config}: seed 1,2: 2 values" in capsys.readouterr().err
