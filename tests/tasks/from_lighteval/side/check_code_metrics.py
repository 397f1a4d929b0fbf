"""lighteval's LiveCodeBench metric on assay: the same pass@1 as lighteval's own on honest
programs, doc by doc, with every program run in assay's sandbox instead of a fork of this
process; a program that exits before its checks return scores 0."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from lighteval.models.model_output import ModelResponse
from lighteval.tasks.requests import Doc as LightevalDoc
from lighteval.tasks.tasks.lcb.main import CodegenMetric, lcb_codegen_metric
from sandbox.hostile_programs import HOSTILE as HOSTILE_FAMILIES

from assay.compat.lighteval.code import codegen_pass_at_1
from assay.compat.lighteval.files import config_from_lighteval
from assay.doc import Doc, OutputType
from assay.metrics.base import SampleInput
from assay.run.scoring import build_metrics
from assay.sandbox import SandboxPolicy
from assay.sandbox.policy import using
from assay.tasks.code_routes import code_route


def fenced(code: str) -> str:
    return f"Here it is:\n```python\n{code}```\nDone."


CALL = {"inputs": ["1\n2", "3\n4"], "outputs": ["3", "7"], "fn_name": "add"}
STDIO = {"inputs": ["2\n", "5\n"], "outputs": ["4\n", "10\n"], "fn_name": None}


def method(body: str) -> str:
    return "class Solution:\n    def add(self, a: int, b: int) -> int:\n" + body


CALL_GENERATIONS = [
    method("        return a + b\n"),
    method("        return a - b\n"),
    method("        raise ValueError(a)\n"),
    method("        return (\n"),
    "def add(a, b):\n    return a + b\n",  # no class Solution: a function of the module
    "no code block at all",
]
STDIO_GENERATIONS = [
    "n = int(input())\nprint(n * 2)\n",
    "import sys\nn = int(sys.stdin.read())\nprint(n * 2)\nsys.exit(0)\n",
    "def main():\n    print(int(input()) * 2)\n\nif __name__ == '__main__':\n    main()\n",
    "n = int(input())\nprint(n * 3)\n",
    "print(int(input()) * 2)\nprint('extra')\n",
    "raise ValueError('no')\n",
    "from math import *\nprint(int(input()) * 2 + floor(0.5))\n",
]


def docs() -> list[tuple[LightevalDoc, list[str]]]:
    """Docs with several generations each, in lighteval's types (fenced as models answer)."""
    out = []
    for specific, generations in ((CALL, CALL_GENERATIONS), (STDIO, STDIO_GENERATIONS)):
        for start in range(0, len(generations), 3):
            picked = generations[start : start + 3]
            doc = LightevalDoc(query="q", choices=[""], gold_index=0, specific=dict(specific))
            out.append((doc, [g if "```" in g or "no code" in g else fenced(g) for g in picked]))
    return out


def test_pass_at_1_equals_lighteval_s_own_on_honest_programs():
    with using(SandboxPolicy("rlimits")):
        for doc, generations in docs():
            response = ModelResponse(text=generations)
            theirs = CodegenMetric().compute(model_response=response, doc=doc)
            ours = codegen_pass_at_1(doc, response)
            assert ours == pytest.approx(float(theirs), abs=1e-12), (generations, theirs, ours)
    # The docs are not all alike: passes and failures on both kinds of tests.
    values = []
    with using(SandboxPolicy("rlimits")):
        for doc, generations in docs():
            values.append(codegen_pass_at_1(doc, ModelResponse(text=generations)))
    assert 0.0 in values and any(0 < v < 1 for v in values) and len(set(values)) >= 3


HOSTILE = [textwrap.indent(code, " " * 8) for code in HOSTILE_FAMILIES.values()]
"""Every hostile family of the other routes, as the first lines of the method."""


def bwrap_here() -> bool:
    from assay.sandbox._bwrap import bwrap_executable

    return bwrap_executable() is not None


MODES = [
    pytest.param(
        "bwrap",
        marks=pytest.mark.skipif(
            not bwrap_here(),
            reason="no bubblewrap in this virtualenv (make lighteval-venv installs it); the "
            "same checks run under bwrap in tests/sandbox/test_io_tests.py",
        ),
    ),
    "rlimits",
    "none",
]


@pytest.mark.parametrize("mode", MODES)
def test_the_task_s_metric_runs_programs_in_the_sandbox_and_hostile_ones_score_zero(tmp_path, mode):
    """Through assay's metric stage (the converted lcb metric): the program's side effects
    happen in the sandbox's process, not this one, and the exit family scores 0."""
    from lighteval.tasks.lighteval_task import LightevalTaskConfig

    config = config_from_lighteval(
        LightevalTaskConfig(
            name="lcb_local", prompt_function=lambda line, task_name: None, hf_repo="x",
            hf_subset="y", metrics=[lcb_codegen_metric], generation_size=16,
        ),
        "f.py",
    )  # fmt: skip
    assert config.unsafe_code and code_route(config).route == "assay"
    [scored] = build_metrics(config)
    marker = tmp_path / "ran-here.txt"
    here = f"        open({str(marker)!r}, 'w').write(str(__import__('sys').flags.isolated))\n"
    generations = [fenced(method(here + "        return a + b\n"))] + [
        fenced(method(code + "        return a - b\n")) for code in HOSTILE
    ]
    doc = Doc(query="q", choices=[""], gold_index=0, specific=dict(CALL))
    if mode == "bwrap":  # the host's folders are out of its reach there
        generations[0] = fenced(method("        return a + b\n"))
    with using(SandboxPolicy(mode)):  # type: ignore[arg-type]
        value = scored.metric.sample_fn(SampleInput(doc, OutputType.GENERATE_UNTIL, generations))
    assert value == pytest.approx(1 / len(generations))
    if mode != "bwrap":
        # The right program ran in a fresh `python -I` (the sandbox's), not a fork of this one.
        assert Path(marker).read_text() == "1"
