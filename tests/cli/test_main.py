"""The `assay` command: help, tasks list/show/dump, validate, run, and errors with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from fixtures.json_tasks import choice_yaml, even_rows, write_task

from assay.cli.main import build_parser, main


@pytest.fixture
def folder(tmp_path):
    return write_task(tmp_path, choice_yaml("cli_task"), even_rows(4), "cli.yaml")


def test_help_lists_commands_and_imports_nothing_heavy():
    code = (
        "import sys\nfrom assay.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "run" in out.stdout and "tasks" in out.stdout and "validate" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_tasks_list_show_dump(folder, capsys):
    assert main(["tasks", "list", "--include-path", str(folder)]) == 0
    listed = capsys.readouterr().out
    assert any(line.startswith("cli_task ") for line in listed.splitlines())
    assert main(["tasks", "show", "cli_task", "--include-path", str(folder)]) == 0
    shown = capsys.readouterr().out
    assert "task: cli_task" in shown and "\nIs 0 even?\n" in shown
    assert "continuation scored: ' yes'" in shown
    assert main(["tasks", "dump"]) == 0
    dumped = json.loads(capsys.readouterr().out)
    assert isinstance(dumped, list) and dumped[0]["tasks"]


def test_validate_loads_data_without_a_model(folder, capsys):
    assert main(["validate", "--tasks", "cli_task", "--include-path", str(folder)]) == 0
    assert "ok  cli_task: 4 docs, output multiple_choice" in capsys.readouterr().out


def test_run_prints_the_table_and_writes_results(folder, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["run", "--model", "dummy", "--tasks", "cli_task", "--include-path", str(folder),
                 "--output-dir", str(out), "--no-progress", "--limit", "2"])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "dummy, limit: 2, num_fewshot: None, batch_size: None" in printed
    assert "|cli_task|" in printed and "acc_norm" in printed
    assert json.loads((out / "results.json").read_text())["n-samples"]["cli_task"]["effective"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tasks", "nope_task"], "unknown task 'nope_task'"),
        (["--tasks", "cli_task", "--model", "no_such_model"], "no_such_model"),
        (["--tasks", "cli_task", "--model-args", "seed"], "not key=value"),
        (["--tasks", "cli_task", "--log-samples"], "--log-samples needs --output-path"),
        (["--tasks", "cli_task|x"], "number of few-shot"),
        (["--tasks", "cli_task", "--samples", "{bad"], "--samples: not valid JSON"),
        (["--tasks", "cli_task", "--samples", "nofile.json"], "neither a JSON object nor"),
        (["--tasks", "cli_task", "--samples", "[1]"], "neither a JSON object nor"),
        (["--tasks", "cli_task", "--metadata", "{1"], "--metadata: not valid JSON"),
    ],
)
def test_user_mistakes_exit_2_with_one_message_and_no_traceback(folder, capsys, args, message):
    code = main(["run", "--model", "dummy", "--include-path", str(folder), "--no-progress", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err
    assert err.startswith("assay: error: ")


@pytest.mark.parametrize("args", [["run"], ["run", "--tasks", "x", "--limit", "-1"], ["bogus"]])
def test_bad_flags_exit_2(args, capsys):
    try:  # argparse exits; a setting's check raises ConfigError, which main answers with 2
        code = main(args)
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert "assay: error:" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["-v", "tasks", "list"], ["tasks", "-v", "list"], ["tasks", "list", "-v"]]
)
def test_verbose_works_before_and_after_the_command(argv):
    assert build_parser().parse_args(argv).verbose is True
    assert getattr(build_parser().parse_args(["tasks", "list"]), "verbose", False) is False
