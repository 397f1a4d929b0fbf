"""lm-eval's own code tasks: the programs their `code_eval` runs go to assay's sandbox.

lm-eval's packaged `mbpp` YAML scores with `utils.pass_at_1`, which calls evaluate's
`code_eval`; that metric would run each program in assay's own process. The test runs that
YAML (from the installed lm_eval package, with rows it writes) on two canned answers: a
correct program, and one that writes a marker file on the host before it defines the right
function. In the bwrap sandbox the marker is never written and only the correct program
passes; with the limits alone (`rlimits`) the same program writes it and passes, which shows
the escape is real.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from assay.models.dummy import DummyLM
from assay.requests.types import GenerateRequest
from assay.run.api import evaluate
from assay.sandbox.code_eval import SandboxedCodeEval

lm_eval = pytest.importorskip("lm_eval")
evaluate_package = pytest.importorskip("evaluate")
MBPP = Path(lm_eval.__file__).parent / "tasks" / "mbpp"

RIGHT = "def add(a, b):\n    return a + b\n"


def rows() -> list[dict]:
    tests = ["assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(-1, 1) == 0"]
    return [
        {"task_id": 11, "text": "Add two numbers (right).", "code": RIGHT, "test_list": tests},
        {"task_id": 12, "text": "Add two numbers (escape).", "code": RIGHT, "test_list": tests},
    ]


class Canned(DummyLM):
    """The right program for the first doc; the escaping one for the second."""

    def __init__(self, escape: str) -> None:
        super().__init__()
        self.escape = escape

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
        return [self.escape if "(escape)" in str(r.prompt) else RIGHT for r in requests]


def run(tmp_path: Path, sandbox: str) -> tuple[dict, list[dict], Path]:
    folder = tmp_path / sandbox
    folder.mkdir()
    marker = folder / "escaped.txt"
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows()))
    (folder / "mbpp_local.yaml").write_text(
        textwrap.dedent(
            f"""\
            include: {MBPP / "mbpp.yaml"}
            task: mbpp_local
            dataset_path: json
            dataset_name: null
            dataset_kwargs:
              data_files:
                test: rows.jsonl
            """
        )
    )
    escape = f"open({str(marker)!r}, 'w').write('out of the sandbox')\n" + RIGHT
    out = folder / "out"
    results = evaluate(
        Canned(escape),
        "mbpp_local",
        include_path=[folder, MBPP],
        confirm_run_unsafe_code=True,
        sandbox=sandbox,  # type: ignore[arg-type]
        output_dir=out,
        log_samples=True,
        cache=False,
        show_progress=False,
    )
    samples = [
        json.loads(line) for line in (out / "samples_mbpp_local.jsonl").read_text().splitlines()
    ]
    return results, samples, marker


@pytest.mark.slow
def test_lm_eval_mbpp_yaml_runs_its_programs_in_the_sandbox(tmp_path, capsys):
    results, samples, marker = run(tmp_path, "bwrap")
    assert not marker.exists()
    assert results["results"]["mbpp_local"]["pass_at_1,none"] == 0.5
    by_text = {s["doc"]["text"]: s for s in samples}
    assert by_text["Add two numbers (right)."]["pass_at_1"] == 1.0
    escaped = by_text["Add two numbers (escape)."]
    assert escaped["pass_at_1"] == 0.0
    [execution] = escaped["executions"]
    # The host's folder is not there: the sandbox's /tmp is its own.
    assert execution["mode"] == "bwrap" and execution["outcome"] == "failed"
    assert "FileNotFoundError" in execution["stderr_tail"]
    assert results["provenance"]["tasks"]["mbpp_local"]["sandbox"] == "bwrap"
    notice = capsys.readouterr().err
    assert "task mbpp_local:" in notice and "code_eval" in notice
    assert "runs in the bwrap sandbox" in notice

    # The same program, with the limits alone, writes on the host: the escape is real.
    results, _, marker = run(tmp_path, "rlimits")
    assert marker.read_text() == "out of the sandbox"
    assert results["results"]["mbpp_local"]["pass_at_1,none"] == 1.0


def test_sandboxed_code_eval_returns_what_code_eval_returns(monkeypatch):
    from assay.sandbox import SandboxPolicy
    from assay.sandbox.policy import using

    candidates = [
        ["def add(a, b): return a * b", "def add(a, b): return a + b"],
        ["def add(a, b): return a + b", "def add(a, b): return a + b", "raise SystemExit(3)"],
    ]
    tests = ["assert add(2, 3) == 5", "assert add(1, 1) == 2"]
    with using(SandboxPolicy("rlimits")):
        scores, results = SandboxedCodeEval().compute(
            references=tests, predictions=candidates, k=[1, 2, 3]
        )
    # pass@3 is left out, as code_eval leaves it: the first problem has only two candidates.
    assert set(scores) == {"pass@1", "pass@2"}
    assert isinstance(scores["pass@1"], np.floating)
    assert scores["pass@1"] == pytest.approx(np.mean([1 / 2, 2 / 3]))
    assert scores["pass@2"] == pytest.approx(np.mean([1.0, 1.0]))
    assert [passed["passed"] for _, passed in results[0]] == [False, True]
    assert results[1][2] == (
        2,
        {"task_id": 1, "passed": False, "result": results[1][2][1]["result"], "completion_id": 2},
    )
    assert results[1][2][1]["result"].startswith("failed")
    assert results[0][1][1]["result"] == "passed"


def test_sandboxed_code_eval_refuses_misshapen_inputs():
    with pytest.raises(ValueError, match="2 predictions and 1 references"):
        SandboxedCodeEval().compute(references=["assert True"], predictions=[["x"], ["y"]])
    with pytest.raises(ValueError, match=r"predictions\[0\] must be a list"):
        SandboxedCodeEval().compute(references=["assert True"], predictions=["x = 1"])


def test_task_modules_get_the_sandboxed_code_eval(tmp_path):
    """The packaged humaneval's utils.py, imported as assay imports task code, holds it; the
    import's own self-test ran (with the limits alone) and evaluate.load is restored after."""
    from assay.tasks._yaml_io import FunctionRef

    original = evaluate_package.load
    ref = FunctionRef("utils.pass_at_k", lm_eval_tasks() / "humaneval" / "humaneval.yaml")
    function = ref.resolve()
    assert isinstance(function.__globals__["compute_"], SandboxedCodeEval)
    assert evaluate_package.load is original


def lm_eval_tasks() -> Path:
    return Path(lm_eval.__file__).parent / "tasks"


def test_each_code_task_is_told_where_its_programs_run():
    """Built-in mbpp: assay's metric; lm-eval's mbpp: code_eval, sandboxed; lm-eval's
    cruxeval: its own exec, in this process, said plainly."""
    from assay.tasks.code_routes import code_route, describe
    from assay.tasks.registry import Registry

    builtin = Registry().get("mbpp")
    assert code_route(builtin).route == "assay"
    registry = Registry([lm_eval_tasks() / "cruxeval", MBPP])
    mbpp, cruxeval = registry.get("mbpp"), registry.get("cruxeval_output")
    assert code_route(mbpp).route == "code_eval"
    route = code_route(cruxeval)
    assert not route.sandboxed and route.files[0].endswith("cruxeval/utils.py")
    line = describe("cruxeval_output", route, "bwrap")
    assert "NOT in the sandbox" in line and "cruxeval/utils.py" in line


def test_a_yaml_that_reaches_code_eval_is_a_code_task_whatever_it_says(tmp_path, capsys):
    """Without `unsafe_code: true`, a task whose metric calls code_eval still needs consent."""
    from assay.cli import main

    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "rows.jsonl").write_text(json.dumps({"q": "add", "tests": "assert True"}) + "\n")
    (folder / "scoring.py").write_text(
        "import evaluate\n\ncode_eval = evaluate.load('code_eval')\n\n"
        "def passes(references, predictions):\n"
        "    return code_eval.compute(references=references, predictions=[predictions], k=[1])"
        "[0]['pass@1']\n"
    )
    (folder / "quiet_code.yaml").write_text(
        textwrap.dedent(
            """\
            task: quiet_code
            dataset_path: json
            dataset_kwargs:
              data_files:
                test: rows.jsonl
            test_split: test
            output_type: generate_until
            doc_to_text: "{{q}}"
            doc_to_target: "{{tests}}"
            metric_list:
              - metric: !function scoring.passes
            """
        )
    )
    argv = ["run", "--model", "dummy", "--tasks", "quiet_code", "--include-path", str(folder),
            "--no-cache", "--no-progress"]  # fmt: skip
    assert main(argv) == 2
    assert "--confirm-run-unsafe-code" in capsys.readouterr().err


def test_lm_eval_humaneval_yaml_scores_pass_at_1_in_the_sandbox(tmp_path):
    """lm-eval's humaneval metric returns {"pass@1": ...} from `pass_at_k`: reported as
    pass@1, as lm-eval reports it; the right completion passes, a wrong one fails."""
    from assay.catalog.humaneval import TASKS_TABLE

    humaneval = lm_eval_tasks() / "humaneval"
    row = TASKS_TABLE[0].example_rows[0]  # add(a, b)
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "he_local.yaml").write_text(
        f"include: {humaneval / 'humaneval.yaml'}\ntask: he_local\ndataset_path: json\n"
        "dataset_kwargs:\n  data_files:\n    test: rows.jsonl\n"
    )
    scores = {}
    for completion in ("    return a + b\n", "    return a - b\n"):
        results = evaluate(
            DummyLM(response=completion), "he_local", include_path=[tmp_path, humaneval],
            confirm_run_unsafe_code=True, sandbox="bwrap", cache=False, show_progress=False,
        )  # fmt: skip
        scores[completion] = results["results"]["he_local"]["pass@1,create_test"]
    assert list(scores.values()) == [1.0, 0.0]
