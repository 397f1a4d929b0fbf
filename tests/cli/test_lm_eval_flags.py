"""lm-eval's command-line habits: no subcommand, its flags assay maps or refuses, auto:N."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.cli.main import main
from assay.models.args import to_batch_size
from assay.models.hf.args import _dtype

TASKS_DIR = Path(__file__).parents[1] / "data" / "lm_eval_parity" / "tasks"


def run(tmp_path: Path, *flags: str, command: tuple[str, ...] = ("run",)) -> int:
    return main(
        [
            *command,
            "--model",
            "dummy",
            "--include_path",
            str(TASKS_DIR),
            "--tasks",
            "parity_mc_same_split",
            "--limit",
            "2",
            "--no-progress",
            "--output-dir",
            str(tmp_path / "out"),
            *flags,
        ]
    )


def test_no_subcommand_runs_run_and_says_so(tmp_path, capsys):
    assert run(tmp_path, command=()) == 0
    captured = capsys.readouterr()
    assert "no command given; running `assay run`" in captured.err
    assert "parity_mc_same_split" in captured.out


def test_use_cache_is_the_response_cache(tmp_path, capsys):
    cache = tmp_path / "responses.sqlite"
    assert run(tmp_path, "--use_cache", str(cache)) == 0
    assert cache.exists()
    assert "--use_cache" in capsys.readouterr().err


def test_batch_size_auto_n_runs_as_auto(tmp_path, capsys):
    assert run(tmp_path, "--batch_size", "auto:4") == 0
    assert "running with auto" in capsys.readouterr().err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["config"]["batch_size"] == "auto"
    assert to_batch_size("auto:4") == "auto"
    with pytest.raises(ValueError):
        to_batch_size("auto:x")


@pytest.mark.parametrize(
    ("flags", "note"),
    [
        (("--verbosity", "INFO"), "--verbosity INFO: the log level"),
        (("--write_out",), "assay tasks show TASK"),
        (("--cache_requests",), "no effect"),
    ],
)
def test_lm_eval_flags_run_with_a_note(tmp_path, capsys, flags, note):
    assert run(tmp_path, *flags) == 0
    assert note in capsys.readouterr().err


def test_trust_remote_code_becomes_a_model_arg(tmp_path, capsys):
    # dummy takes no trust_remote_code: the backend refuses the model arg it was mapped to.
    assert run(tmp_path, "--trust_remote_code") == 2
    err = capsys.readouterr().err
    assert "model arg trust_remote_code=True" in err and "trust_remote_code" in err.splitlines()[-1]


@pytest.mark.parametrize(
    ("flags", "instead"),
    [
        (("--wandb_args", "project=x"), "--log-to wandb"),
        (("--check_integrity",), "assay validate"),
        (("--verbosity", "LOUD"), "give one of DEBUG"),
    ],
)
def test_lm_eval_flags_assay_cannot_honour_are_refused(tmp_path, capsys, flags, instead):
    assert run(tmp_path, *flags) == 2
    err = capsys.readouterr().err
    assert instead in err and "Traceback" not in err


def test_half_is_float16():
    assert _dtype("half") == "float16" and _dtype("torch.float") == "float32"
