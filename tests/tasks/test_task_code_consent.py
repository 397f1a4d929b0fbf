"""Consent comes from the user, before a task's code runs: a `!function` naming a library
function (`logging.config.dictConfig`, which would run its data rows' handlers) is refused from a
YAML outside the named folders whatever the flags, and from one inside without
--confirm-run-unsafe-code; with it, a notice comes first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.cli import main

BASE = """\
dataset_path: json
dataset_kwargs:
  data_files:
    test: {rows}
test_split: test
output_type: generate_until
doc_to_target: "{{{{a}}}}"
generation_kwargs: {{until: ["\\n"], max_gen_toks: 4}}
metric_list:
  - metric: exact_match
doc_to_text: !function logging.config.dictConfig
"""


def _dictconfig_task(tmp_path: Path, *, outside: bool, unsafe: bool) -> tuple[Path, Path]:
    """A task whose prompt is built by dictConfig from a row that makes it run `touch MARKER`."""
    folder, elsewhere, marker = tmp_path / "t", tmp_path / "elsewhere", tmp_path / "ran"
    folder.mkdir()
    elsewhere.mkdir()
    row = {"version": 1, "handlers": {"h": {"()": "os.system", "command": f"touch {marker}"}}}
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({**row, "q": "hi", "a": "x"}) + "\n")
    base = BASE.format(rows=rows) + ("unsafe_code: true\n" if unsafe else "")
    if outside:
        (elsewhere / "base.yaml").write_text(base)
        (folder / "t.yaml").write_text(f"include: {elsewhere / 'base.yaml'}\ntask: dc\n")
    else:
        (folder / "t.yaml").write_text(f"task: dc\n{base}")
    return folder, marker


def _run(tmp_path: Path, folder: Path, *extra: str) -> int:
    argv = ["run", "--model", "dummy", "--tasks", "dc", "--include-path", str(folder), "--limit",
            "1", "--no-cache", "--no-progress", "--output-dir", str(tmp_path / "out"), *extra]  # fmt: skip
    return main(argv)


FLAGS = {
    "no flag": (),
    "the flag": ("--confirm-run-unsafe-code",),
    "the flag, --predict-only": ("--confirm-run-unsafe-code", "--predict-only"),
}


@pytest.mark.parametrize("unsafe", [False, True])
@pytest.mark.parametrize("flags", list(FLAGS))
def test_a_library_function_from_an_included_yaml_outside_is_refused(
    tmp_path, capsys, flags, unsafe
):
    folder, marker = _dictconfig_task(tmp_path, outside=True, unsafe=unsafe)
    assert _run(tmp_path, folder, *FLAGS[flags]) == 2
    err = capsys.readouterr().err
    assert not marker.exists()
    base = tmp_path / "elsewhere" / "base.yaml"
    assert f"doc_to_text: '!function logging.config.dictConfig' (from {base})" in err
    assert f"--include-path {base.parent}" in err and "Traceback" not in err


@pytest.mark.parametrize("unsafe", [False, True])
def test_inside_the_named_folders_a_library_function_needs_the_flag(tmp_path, capsys, unsafe):
    """The task's `unsafe_code: true` is no consent: only the user's flag is."""
    folder, marker = _dictconfig_task(tmp_path, outside=False, unsafe=unsafe)
    assert _run(tmp_path, folder) == 2
    err = capsys.readouterr().err
    assert not marker.exists()
    assert "'!function logging.config.dictConfig'" in err and "Traceback" not in err
    assert "pass --confirm-run-unsafe-code" in err


def test_with_the_flag_the_notice_comes_before_the_function_runs(tmp_path, capfd):
    folder, marker = _dictconfig_task(tmp_path, outside=False, unsafe=False)
    # dictConfig runs `touch` through the shell, which writes nothing: the row's handler then
    # fails to configure, which the run reports as a prompt it could not build.
    code = _run(tmp_path, folder, "--confirm-run-unsafe-code")
    err = capfd.readouterr().err
    assert marker.exists() and code == 2
    notice = err.index("names a function of an installed or standard-library module")
    assert "NOT in the sandbox" in err[notice:]
    assert notice < err.index("could not build the prompt")


UNSAFE = """\
task: imp
dataset_path: json
dataset_kwargs:
  data_files:
    test: {rows}
test_split: test
unsafe_code: true
output_type: generate_until
doc_to_target: "{{{{a}}}}"
generation_kwargs: {{until: ["\\n"], max_gen_toks: 4}}
doc_to_text: !function utils.text
metric_list:
  - metric: exact_match
"""


def _unsafe_task(tmp_path: Path) -> tuple[Path, Path]:
    """A task declaring unsafe_code whose utils.py runs `touch MARKER` as it is imported
    (by a spelling the static scan cannot read)."""
    folder, marker = tmp_path / "imp", tmp_path / "imported"
    folder.mkdir()
    (folder / "rows.jsonl").write_text(json.dumps({"q": "hi", "a": "x"}) + "\n")
    (folder / "imp.yaml").write_text(UNSAFE.format(rows=folder / "rows.jsonl"))
    (folder / "utils.py").write_text(
        f"import operator, os\noperator.methodcaller('sys' + 'tem', 'touch {marker}')(os)\n"
        "def text(doc):\n    return doc['q']\n"
    )
    return folder, marker


RUN = ["run", "--model", "dummy", "--limit", "1", "--no-cache", "--no-progress"]
RUNS = {
    "run": RUN,
    "run --predict-only": [*RUN, "--predict-only"],
    "validate --no-data": ["validate", "--no-data"],
    "validate": ["validate"],
}


@pytest.mark.parametrize("command", list(RUNS))
def test_an_unsafe_tasks_python_is_not_imported_without_the_flag(tmp_path, capsys, command):
    folder, marker = _unsafe_task(tmp_path)
    out_dir = ["--output-dir", str(tmp_path / "out")] if command.startswith("run") else []
    code = main([*RUNS[command], *out_dir, "--tasks", "imp", "--include-path", str(folder)])
    out, err = capsys.readouterr()
    assert not marker.exists()
    assert code == (1 if command == "validate --no-data" else 2)
    said = out if command == "validate --no-data" else err
    assert "declares unsafe_code" in said and "Nothing of it has run" in said
    assert str(folder / "utils.py") in said and "--confirm-run-unsafe-code" in said
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["run", "validate --no-data"])
def test_with_the_flag_the_import_comes_after_a_notice(tmp_path, capfd, command):
    folder, marker = _unsafe_task(tmp_path)
    out_dir = ["--output-dir", str(tmp_path / "out")] if command == "run" else []
    argv = [*RUNS[command], *out_dir, "--tasks", "imp", "--include-path", str(folder)]
    assert main([*argv, "--confirm-run-unsafe-code"]) == 0
    assert marker.exists()
    assert "its own Python" in capfd.readouterr().err


def test_evaluate_refuses_before_the_import_too(tmp_path):
    from assay import evaluate
    from assay.errors import ConfigError

    folder, marker = _unsafe_task(tmp_path)
    with pytest.raises(ConfigError, match="Nothing of it has run"):
        evaluate("dummy", "imp", include_path=folder, limit=1, cache=False)
    assert not marker.exists()


def test_a_task_defined_inline_in_a_group_is_refused_before_its_import(tmp_path, capsys):
    folder, marker = _unsafe_task(tmp_path)
    (folder / "imp.yaml").unlink()
    inline = UNSAFE.format(rows=folder / "rows.jsonl").replace("task: imp", "task: inner")
    body = "\n".join("    " + line for line in inline.splitlines())
    (folder / "grp.yaml").write_text(f"group: grp\ntask:\n  -\n{body}\n")
    code = main([*RUN, "--output-dir", str(tmp_path / "out"), "--tasks", "grp",
                 "--include-path", str(folder)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and not marker.exists()
    assert "declares unsafe_code" in err and "Nothing of it has run" in err
