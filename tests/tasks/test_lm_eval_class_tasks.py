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
from assay.models.dummy import DummyLM
from assay.requests.types import GenerateRequest
from assay.run.api import evaluate
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


CHOICE_PY = '''
import datasets

from lm_eval.api.task import MultipleChoiceTask

ROWS = [
    {"query": "Q: 2+2=", "choices": ["4", "five", "22"], "gold": 0},
    {"query": "Q: sky?", "choices": ["green", "blue"], "gold": 1},
    {"query": "Q: up?", "choices": ["down", "up", "left", "sideways"], "gold": 1},
]


class TinyChoice(MultipleChoiceTask):
    """lm-eval's MultipleChoiceTask over the test's rows (loglikelihood requests)."""

    VERSION = 0

    def download(self, *args, **kwargs):
        self.dataset = datasets.DatasetDict({"test": datasets.Dataset.from_list(ROWS)})

    def has_training_docs(self):
        return False

    def has_validation_docs(self):
        return False

    def has_test_docs(self):
        return True

    def test_docs(self):
        return self.dataset["test"]

    def doc_to_text(self, doc):
        return doc["query"]

    def construct_requests(self, doc, ctx, apply_chat_template=False, chat_template=None, **kw):
        # lm-eval 0.4.13's build_all_requests passes the chat keywords, which its
        # MultipleChoiceTask hands to Instance (which takes none): a class drops them.
        return super().construct_requests(doc, ctx, **kw)
'''


def test_a_loglikelihood_class_task_matches_lm_eval_doc_by_doc(tmp_path):
    import importlib

    from assay.requests.types import LoglikelihoodRequest

    (tmp_path / "choice_task.py").write_text(CHOICE_PY)
    (tmp_path / "tiny_choice.yaml").write_text(
        "task: tiny_choice\nclass: !function choice_task.TinyChoice\n"
    )
    out = tmp_path / "out"
    results = evaluate(
        DummyLM(), "tiny_choice", include_path=[tmp_path], output_dir=out, log_samples=True,
        cache=False, show_progress=False,
    )  # fmt: skip
    samples = sorted(
        (json.loads(line) for line in (out / "samples_tiny_choice.jsonl").open()),
        key=lambda s: s["doc_id"],
    )
    # lm-eval's path, answered by the same model.
    sys.path.insert(0, str(tmp_path))
    try:
        task = importlib.import_module("choice_task").TinyChoice(config={"task": "tiny_choice"})
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("choice_task", None)
    task.set_fewshot_seed(seed=1234)
    task.build_all_requests(limit=None, rank=0, world_size=1)
    answers = DummyLM().loglikelihood(
        [LoglikelihoodRequest(*instance.arguments) for instance in task.instances]
    )
    for instance, result in zip(task.instances, answers, strict=True):
        instance.resps.append(tuple(result))
    task.apply_filters()
    expected = []
    for doc_id, doc in enumerate(task.eval_docs):
        mine = sorted((i for i in task.instances if i.doc_id == doc_id), key=lambda i: i.idx)
        expected.append(task.process_results(doc, [i.filtered_resps["none"] for i in mine]))
    assert [{"acc": s["acc"], "acc_norm": s["acc_norm"]} for s in samples] == expected
    asked = [
        [(a["arg_0"], a["arg_1"]) for a in s["arguments"].values()] for s in samples
    ]  # the same (context, continuation) pairs lm-eval asks for
    assert asked == [
        [i.arguments for i in sorted(task.instances, key=lambda i: i.idx) if i.doc_id == d]
        for d in range(3)
    ]
    entry = results["results"]["tiny_choice"]
    assert entry["acc,none"] == pytest.approx(sum(e["acc"] for e in expected) / 3)
    # lm-eval's own `mean` aggregation: assay's, with lm-eval's standard error.
    assert isinstance(entry["acc_stderr,none"], float)
