"""Safe defaults: user code runs only from named paths, no remote code unless asked, secrets stay
out of every output, and model-written code runs only with consent and inside the sandbox."""

from __future__ import annotations

import json
import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from toy_tasks import write_data, write_task

from assay.cli.main import main

TRAP = """\
import pathlib
pathlib.Path({marker!r}).write_text("imported")
def fix(docs):
    return docs
"""


def plant_traps(folder: Path, names: list[str]) -> Path:
    """Modules that record being imported; returns the marker file they write."""
    marker = folder / "TRAP_RAN"
    for name in names:
        (folder / f"{name}.py").write_text(TRAP.format(marker=str(marker)))
    return marker


# ------------------------------------------------------------------ user code
@pytest.mark.slow
def test_builtin_tasks_run_no_code_from_the_current_directory(tmp_path):
    marker = plant_traps(tmp_path, ["utils", "helpers", "tasks", "preprocess", "custom_tasks"])
    for argv in (["tasks", "list"], ["tasks", "show", "arc_easy"], ["tasks", "show", "humaneval"]):
        done = subprocess.run(
            [sys.executable, "-m", "assay", *argv],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    assert not marker.exists()


@pytest.mark.slow
def test_function_tag_does_not_import_a_module_from_the_current_directory(tmp_path):
    work = tmp_path / "cwd"
    work.mkdir()
    marker = plant_traps(work, ["trapmod"])
    tasks = tmp_path / "tasks"
    write_task(tasks, "uses_fn", data=write_data(tmp_path / "data"))
    path = tasks / "uses_fn.yaml"
    path.write_text(path.read_text() + "process_docs: !function trapmod.fix\n")
    done = subprocess.run(
        [sys.executable, "-m", "assay", "run", "--model", "dummy", "--tasks", "uses_fn",
         "--include-path", str(tasks), "--no-cache"],
        cwd=work, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "trapmod" in done.stderr and "current directory" in done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists()
    # Next to the YAML (a folder named with --include-path) the same module is used.
    (tasks / "trapmod.py").write_text("def fix(docs):\n    return docs\n")
    done = subprocess.run(
        [sys.executable, "-m", "assay", "run", "--model", "dummy", "--tasks", "uses_fn",
         "--include-path", str(tasks), "--no-cache", "--limit", "2"],
        cwd=work, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not marker.exists()


def _inheriting_task(tmp_path: Path, base: Path) -> list[str]:
    """Task `inherits` in tmp_path/tasks, including `base`; returns the run's arguments."""
    tasks = tmp_path / "tasks"
    path = write_task(tasks, "inherits", data=write_data(tmp_path / "data"))
    include = Path("..") / base.relative_to(tmp_path)
    path.write_text(path.read_text() + f"include: {include}\n")
    return ["run", "--model", "dummy", "--tasks", "inherits", "--include-path", str(tasks),
            "--no-cache", "--limit", "2", "--no-progress"]  # fmt: skip


def test_function_of_an_included_yaml_outside_the_named_folders_is_refused(tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    marker = plant_traps(outside, ["utils"])
    base = outside / "base.yaml"
    base.write_text("process_docs: !function utils.fix\n")
    argv = _inheriting_task(tmp_path, base)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "inherits.yaml" in err and "utils.fix" in err and str(base) in err
    assert f"--include-path {outside}" in err and "Traceback" not in err
    assert not marker.exists()
    # Once its folder is named on the command line, the code runs.
    assert main([*argv, "--include-path", str(outside)]) == 0
    assert marker.exists()


def test_function_of_an_included_yaml_inside_a_named_folder_runs(tmp_path):
    # lm-eval's layout: subtasks include a shared base whose utils.py sits beside it.
    shared = tmp_path / "tasks" / "_shared"
    shared.mkdir(parents=True)
    marker = plant_traps(shared, ["utils"])
    (shared / "base.yaml").write_text("process_docs: !function utils.fix\n")
    assert main(_inheriting_task(tmp_path, shared / "base.yaml")) == 0
    assert marker.exists()


def test_custom_task_code_runs_only_when_its_file_is_named(tmp_path, monkeypatch, capsys):
    marker = plant_traps(tmp_path, ["mytasks"])
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    tasks = tmp_path / "yaml"
    write_task(tasks, "plain", data=write_data(tmp_path / "data"))
    argv = ["run", "--model", "dummy", "--tasks", "plain", "--include-path", str(tasks)]
    assert main([*argv, "--no-cache", "--limit", "2", "--no-progress"]) == 0
    assert not marker.exists()
    # Named with --custom-tasks, the file is imported (and must define TASKS_TABLE).
    code = main(["tasks", "list", "--custom-tasks", str(tmp_path / "mytasks.py")])
    assert marker.exists()
    assert code == 2 and "TASKS_TABLE" in capsys.readouterr().err


# ------------------------------------------------------------------ remote code
def test_hf_trust_remote_code_is_off_unless_asked():
    from assay.models.hf.args import parse_hf_args

    assert parse_hf_args({"pretrained": "org/model"}).trust_remote_code is False
    assert parse_hf_args({"pretrained": "org/model", "trust_remote_code": True}).trust_remote_code
    assert (
        parse_hf_args({"pretrained": "m", "trust_remote_code": "false"}).trust_remote_code is False
    )


def test_vllm_trust_remote_code_is_off_unless_asked():
    from assay.models.vllm.requests import VLLM_ARGS

    assert VLLM_ARGS["trust_remote_code"].default is False


def test_dataset_loading_never_passes_trust_remote_code(tmp_path, monkeypatch):
    import datasets

    from assay.tasks.registry import Registry
    from assay.tasks.task import Task

    seen: list[dict] = []
    real = datasets.load_dataset

    def spy(*args, **kwargs):
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", spy)
    path = write_task(tmp_path / "t", "remote", data=write_data(tmp_path / "d"))
    text = path.read_text().replace(
        "dataset_kwargs:\n", "dataset_kwargs:\n  trust_remote_code: true\n"
    )
    path.write_text(text)
    Task(Registry([tmp_path / "t"], builtins=False).get("remote")).load()
    assert seen and all("trust_remote_code" not in kwargs for kwargs in seen)


# ------------------------------------------------------------------ secrets
@pytest.fixture(scope="module")
def planted_key() -> str:
    return "sk-assay-planted-" + secrets.token_hex(16)


@pytest.fixture(scope="module")
def keyed_server(tiny_model_dir, planted_key):
    from fixtures.openai_server import OpenAIStubServer

    with OpenAIStubServer(tiny_model_dir, api_key=planted_key) as server:
        yield server


def _all_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_api_key_appears_in_no_output_cache_or_log(
    keyed_server, planted_key, tmp_path, monkeypatch, capsys, caplog
):
    monkeypatch.setattr(logging.root, "handlers", [])
    monkeypatch.setenv("OPENAI_API_KEY", planted_key)
    caplog.set_level(logging.DEBUG)
    tasks = tmp_path / "tasks"
    write_task(tasks, "toy_gen", "gen", data=write_data(tmp_path / "data"))
    out = tmp_path / "out"
    code = main(
        ["-v", "run", "--model", "openai-chat",
         "--model-args", f"model=tiny,base_url={keyed_server.base_url},max_retries=0",
         "--tasks", "toy_gen", "--include-path", str(tasks), "--limit", "3",
         "--gen-kwargs", "max_gen_toks=4", "--output-dir", str(out), "--log-samples",
         "--no-progress"]
    )  # fmt: skip
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    assert keyed_server.requests >= 3  # the key was accepted, so it was really sent
    files = _all_bytes(out)
    assert any(name.endswith("cache.sqlite") for name in files)
    assert any("samples_toy_gen" in name for name in files)
    key = planted_key.encode()
    for name, data in files.items():
        assert key not in data, name
    for text in (stdout, stderr, caplog.text):
        assert planted_key not in text
    results = json.loads((out / "results.json").read_text())
    assert "api_key" not in json.dumps(results["config"]).lower().replace("api_key_env", "")


@pytest.mark.slow
def test_a_refused_key_is_not_echoed_in_the_error(
    keyed_server, tmp_path, monkeypatch, capsys, caplog
):
    wrong = "sk-assay-wrong-" + secrets.token_hex(16)
    monkeypatch.setattr(logging.root, "handlers", [])
    monkeypatch.setenv("OPENAI_API_KEY", wrong)
    caplog.set_level(logging.DEBUG)
    tasks = tmp_path / "tasks"
    write_task(tasks, "toy_gen", "gen", data=write_data(tmp_path / "data"))
    out = tmp_path / "out"
    code = main(
        ["-v", "run", "--model", "openai-chat",
         "--model-args", f"model=tiny,base_url={keyed_server.base_url},max_retries=0",
         "--tasks", "toy_gen", "--include-path", str(tasks), "--limit", "2",
         "--output-dir", str(out), "--log-samples", "--no-progress"]
    )  # fmt: skip
    stdout, stderr = capsys.readouterr()
    assert code == 2
    assert "OPENAI_API_KEY" in stderr  # the message says where the key comes from
    for text in (stdout, stderr, caplog.text):
        assert wrong not in text
    for name, data in _all_bytes(out).items():
        assert wrong.encode() not in data, name


# ------------------------------------------------------------------ model-written code
HEADER = 'def add(a: int, b: int) -> int:\n    """Return a + b."""\n'

CODE_TASKS = """\
from dataclasses import replace

from assay.catalog.humaneval import TASKS_TABLE as BUILTIN

TASKS_TABLE = [
    replace(BUILTIN[0], name="local_humaneval", hf_repo="json",
            hf_data_files={{"test": {data!r}}}, example_rows=None)
]
"""


def code_task(tmp_path: Path) -> Path:
    rows = [
        {
            "task_id": f"local/{i}",
            "prompt": HEADER,
            "canonical_solution": "    return a + b\n",
            "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n",
            "entry_point": "add",
        }
        for i in range(2)
    ]
    data = tmp_path / "code.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "code_tasks.py"
    path.write_text(CODE_TASKS.format(data=str(data)))
    return path


def run_code_task(tmp_path: Path, response: str, *extra: str) -> int:
    return main(
        ["run", "--model", "dummy", "--model-args", json.dumps({"response": response}),
         "--custom-tasks", str(code_task(tmp_path)), "--tasks", "local_humaneval",
         "--output-dir", str(tmp_path / "out"), "--no-cache", "--no-progress", "--overwrite", *extra]
    )  # fmt: skip


def pass_at_1(tmp_path: Path) -> float:
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    entry = results["results"]["local_humaneval"]
    return next(v for k, v in entry.items() if k.startswith("pass@1,"))


def test_code_task_is_refused_without_consent(tmp_path, capsys):
    assert run_code_task(tmp_path, "    return a + b\n") == 2
    err = capsys.readouterr().err
    assert "local_humaneval" in err and "--confirm-run-unsafe-code" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out" / "results.json").exists()


def test_consent_message_says_only_builtin_code_metrics_are_sandboxed(tmp_path, capsys):
    # A YAML task scoring model-written code with its own metric runs that metric in-process.
    tasks = tmp_path / "tasks"
    path = write_task(tasks, "own_code_metric", "gen", data=write_data(tmp_path / "data"))
    (tasks / "scoring.py").write_text("def run_it(references, predictions):\n    return 1.0\n")
    text = path.read_text().replace(
        "  - metric: exact_match\n", "  - metric: !function scoring.run_it\n"
    )
    path.write_text(text + "unsafe_code: true\n")
    code = main(["run", "--model", "dummy", "--tasks", "own_code_metric", "--include-path",
                 str(tasks), "--no-cache", "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "own_code_metric" in err and "--confirm-run-unsafe-code" in err
    assert "(humaneval, mbpp) and evaluate's code_eval" in err
    assert "run each program in a subprocess" in err
    assert "runs in this process, not sandboxed" in err


@pytest.mark.slow
def test_code_task_with_consent_runs_in_the_sandbox(tmp_path, monkeypatch):
    assert run_code_task(tmp_path, "    return a + b\n", "--confirm-run-unsafe-code") == 0
    assert pass_at_1(tmp_path) == 1.0
    assert run_code_task(tmp_path, "    return a - b\n", "--confirm-run-unsafe-code") == 0
    assert pass_at_1(tmp_path) == 0.0


@pytest.mark.slow
def test_sandboxed_code_sees_no_secrets_and_hits_the_memory_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-assay-sandbox-secret")
    snoop = (
        "    import os\n"
        "    assert not any('sk-assay' in v for v in os.environ.values())\n"
        "    return a + b\n"
    )
    assert run_code_task(tmp_path, snoop, "--confirm-run-unsafe-code") == 0
    assert pass_at_1(tmp_path) == 1.0
    bomb = "    blob = bytearray(8 * 1024 ** 3)\n    return a + b\n"
    assert run_code_task(tmp_path, bomb, "--confirm-run-unsafe-code") == 0
    assert pass_at_1(tmp_path) == 0.0
    # The host's own environment is untouched.
    assert os.environ["OPENAI_API_KEY"] == "sk-assay-sandbox-secret"
