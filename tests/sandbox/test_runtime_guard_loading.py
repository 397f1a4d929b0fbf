"""The runtime guard watches a task's own Python from its first line: the import of its
`!function` files (module top level, threads and exit handlers started there) and every call
into them before scoring (process_docs, doc_to_text), under `assay run`, `--predict-only` and
`assay validate --no-data`; with --confirm-run-unsafe-code it runs after a notice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.cli import main

YAML = """\
task: early
dataset_path: json
dataset_kwargs:
  data_files:
    test: rows.jsonl
test_split: test
output_type: generate_until
doc_to_target: "{{a}}"
"""

CASES = {
    "os.system at the module's top level": (
        'doc_to_text: "{{q}}"\nprocess_docs: !function utils.keep\n',
        "import os\nos.system({cmd!r})\n\ndef keep(rows):\n    return rows\n",
    ),
    "exec of a string at the top level": (
        'doc_to_text: "{{q}}"\nprocess_docs: !function utils.keep\n',
        "exec('import os; os.system(' + repr({cmd!r}) + ')')\n\ndef keep(rows):\n    return rows\n",
    ),
    "a thread started at import": (
        'doc_to_text: "{{q}}"\nprocess_docs: !function utils.keep\n',
        "import os, threading\nt = threading.Thread(target=os.system, args=({cmd!r},))\n"
        "t.start()\nt.join()\n\ndef keep(rows):\n    return rows\n",
    ),
    "methodcaller in doc_to_text": (
        "doc_to_text: !function utils.text\n",
        "import operator, os\n\ndef text(doc):\n"
        "    operator.methodcaller('sys' + 'tem', {cmd!r})(os)\n    return doc['q']\n",
    ),
    "methodcaller in process_docs": (
        'doc_to_text: "{{q}}"\nprocess_docs: !function utils.keep\n',
        "import operator, os\n\ndef keep(rows):\n"
        "    operator.methodcaller('sys' + 'tem', {cmd!r})(os)\n    return rows\n",
    ),
}


def _task(folder: Path, case: str, marker: Path) -> None:
    extra, utils = CASES[case]
    folder.mkdir()
    (folder / "rows.jsonl").write_text(json.dumps({"q": "1", "a": "1"}) + "\n")
    (folder / "early.yaml").write_text(YAML + extra)
    (folder / "utils.py").write_text(utils.format(cmd=f"touch {marker}"))


def _run(tmp_path: Path, folder: Path, *extra: str) -> int:
    argv = ["run", "--model", "dummy", "--tasks", "early", "--include-path", str(folder),
            "--no-cache", "--no-progress", "--output-dir", str(tmp_path / "out"), *extra]  # fmt: skip
    return main(argv)


@pytest.mark.parametrize("mode", ["run", "predict-only", "validate"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_tasks_python_is_guarded_before_scoring(tmp_path, capsys, case, mode):
    marker, folder = tmp_path / "ran", tmp_path / f"t_{mode}"
    _task(folder, case, marker)
    if mode == "validate":
        argv = ["validate", "--tasks", "early", "--include-path", str(folder), "--no-data"]
        code = main(argv)
    else:
        code = _run(tmp_path, folder, *(["--predict-only"] if mode == "predict-only" else []))
    out, err = capsys.readouterr()
    if mode == "validate":
        imports = "top level" in case or "import" in case
        assert code == (1 if imports else 0)  # without data only the import runs task code
        assert ("FAIL task  early" in out and "runtime guard refused it" in out) == imports
    else:
        assert code == 2, err
        assert "runtime guard refused it" in err and f"{folder / 'early.yaml'}" in err
        assert "Traceback" not in err
    assert not marker.exists()
    assert not (tmp_path / "out" / "results.json").exists()


def test_with_the_flag_import_time_code_runs_after_a_notice(tmp_path, capsys):
    marker, folder = tmp_path / "ran", tmp_path / "t"
    _task(folder, "os.system at the module's top level", marker)
    assert _run(tmp_path, folder, "--confirm-run-unsafe-code") == 0
    err = capsys.readouterr().err
    assert marker.exists()
    assert "runtime guard saw" in err and "NOT in the sandbox" in err
