"""lm-eval's Python-class tasks (`class:` YAMLs) through lm-eval's own Task API.

Each of lm-eval's squad_completion, fda and swde classes is pointed at rows the test writes
(a subclass whose `download` reads them: the classes fix their hub dataset), run by assay with
canned answers, and compared doc by doc with lm-eval's own request building, filters and
process_results on the same answers.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from assay.cli import main
from assay.errors import TaskConfigError
from assay.evaluator import evaluate
from assay.models.dummy import DummyLM
from assay.requests.types import GenerateRequest
from assay.tasks.registry import Registry

pytest.importorskip("lm_eval")

CLASSES = {
    "squad_completion": "lm_eval.tasks.squad_completion.task.SQUADCompletion",
    "fda": "lm_eval.tasks.fda.task.FDA",
    "swde": "lm_eval.tasks.swde.task.SWDE",
}

ROWS = [
    {"text": "  The capital of France is", "value": "Paris "},
    {"text": "Water boils at", "value": "100 degrees"},
    {"text": "The alpha particle is a", "value": "helium nucleus"},
    {"text": "Shakespeare wrote", "value": "Hamlet"},
]


def answer(prompt: str) -> str:
    """A canned completion that depends only on the prompt: right for some docs only."""
    if "France" in prompt:
        return " PARIS, of course"
    if "alpha" in prompt:
        return " helium nucleus\nmore"
    return " no idea"


class Canned(DummyLM):
    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
        out = []
        for request in requests:
            text = answer(str(request.prompt))
            for stop in request.params.until or ():
                text = text.split(stop)[0]
            out.append(text)
        return out


TASK_PY = '''
import datasets

from {module} import {name} as Packaged

ROWS = {rows!r}


class Local(Packaged):
    """lm-eval's class, its dataset replaced by the test's rows."""

    def download(self, *args, **kwargs):
        self.dataset = datasets.DatasetDict({{"validation": datasets.Dataset.from_list(ROWS)}})
'''


def write_task(folder: Path, task: str) -> Path:
    module, name = CLASSES[task].rsplit(".", 1)
    where = folder / task
    where.mkdir(parents=True)
    (where / "local_task.py").write_text(TASK_PY.format(module=module, name=name, rows=ROWS))
    (where / f"{task}_local.yaml").write_text(
        f"task: {task}_local\nclass: !function local_task.Local\n"
    )
    return where


def lm_eval_per_doc(where: Path) -> tuple[list[str], list[dict]]:
    """lm-eval's own path: build_all_requests, the canned answers, filters, process_results."""
    sys.path.insert(0, str(where))
    try:
        import importlib

        module = importlib.import_module("local_task")
        task = module.Local()
    finally:
        sys.path.remove(str(where))
        sys.modules.pop("local_task", None)
    task.build_all_requests(limit=None, rank=0, world_size=1)
    for instance in task.instances:
        context, settings = instance.arguments
        text = answer(context)
        for stop in settings["until"]:
            text = text.split(stop)[0]
        instance.resps.append(text)
    task.apply_filters()
    contexts, values = [], []
    for doc_id, doc in enumerate(task.eval_docs):
        [instance] = [i for i in task.instances if i.doc_id == doc_id]
        contexts.append(instance.arguments[0])
        values.append(task.process_results(doc, [instance.filtered_resps["none"]]))
    return contexts, values


@pytest.mark.parametrize("task", sorted(CLASSES))
def test_class_task_matches_lm_eval_doc_by_doc(tmp_path, task):
    where = write_task(tmp_path, task)
    out = tmp_path / "out"
    results = evaluate(
        Canned(),
        f"{task}_local",
        include_path=[where],
        output_dir=out,
        log_samples=True,
        cache=False,
        show_progress=False,
    )
    samples = [json.loads(line) for line in (out / f"samples_{task}_local.jsonl").open()]
    contexts, expected = lm_eval_per_doc(where)
    assert [s["contains"] for s in sorted(samples, key=lambda s: s["doc_id"])] == [
        v["contains"] for v in expected
    ]
    assert [v["contains"] for v in expected] == [1, 0, 1, 0]  # the canned answers' design
    assert [s["arguments"]["gen_args_0"]["arg_0"] for s in samples] == contexts
    entry = results["results"][f"{task}_local"]
    assert entry["contains,none"] == 0.5
    assert results["higher_is_better"][f"{task}_local"] == {"contains": True}


def test_validate_counts_class_tasks_loadable_without_building_them(tmp_path, capsys):
    where = write_task(tmp_path, "squad_completion")
    # Building the task would load its data, which validate --no-data never does.
    (where / "local_task.py").write_text(
        (where / "local_task.py")
        .read_text()
        .replace("self.dataset = ", "raise RuntimeError('built'); self.dataset = ")
    )
    assert main(["validate", "--no-data", "--include-path", str(where)]) == 0
    assert "ok   task  squad_completion_local" in capsys.readouterr().out


def test_lm_eval_tree_class_tasks_are_loadable(capsys):
    code = main(["validate", "--no-data", "--include-path", "lm-eval", "-t", ",".join(CLASSES)])
    assert code == 0, capsys.readouterr().out


def test_without_lm_eval_the_refusal_names_the_extra(tmp_path, monkeypatch):
    (tmp_path / "t.yaml").write_text("task: needs_lm_eval\nclass: !function mod.Cls\n")
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    monkeypatch.setitem(sys.modules, "lm_eval.api", None)
    monkeypatch.setitem(sys.modules, "lm_eval.api.task", None)
    with pytest.raises(TaskConfigError, match=r"pip install 'assay\[lm-eval-tasks\]'"):
        Registry([tmp_path], builtins=False).get("needs_lm_eval")


def test_a_class_that_is_not_an_lm_eval_task_is_refused(tmp_path):
    (tmp_path / "mod.py").write_text("class NotATask:\n    pass\n")
    (tmp_path / "t.yaml").write_text(textwrap.dedent("task: odd\nclass: !function mod.NotATask\n"))
    with pytest.raises(TaskConfigError, match="must name an lm-eval Task subclass"):
        Registry([tmp_path], builtins=False).get("odd")
