"""A YAML task without fewshot_split that draws its examples from the evaluated split: lm-eval
keeps a doc drawn as its own example; assay replaces it, says so during the run, records which
docs, and `--fewshot-keep-self` gives lm-eval's prompts exactly (checked against lm-eval)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.cli.main import main

TASK = """\
task: selfshot
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "Q: {{{{q}}}}\\nA:"
doc_to_target: "{{{{a}}}}"
generation_kwargs:
  until: ["\\n"]
metric_list:
  - metric: exact_match
"""


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "tasks"
    folder.mkdir()
    data = folder / "test.jsonl"
    data.write_text("".join(json.dumps({"q": f"item {i}", "a": str(i)}) + "\n" for i in range(6)))
    (folder / "selfshot.yaml").write_text(TASK.format(data=data), encoding="utf-8")
    return folder


def lm_eval_prompts(task_dir: Path) -> list[str]:
    """The prompts lm-eval's own task builds (2 shots, fewshot seed 1234)."""
    pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    task = TaskManager(include_path=str(task_dir)).load_task_or_group(["selfshot"])["selfshot"]
    task._config.num_fewshot = 2
    task.set_fewshot_seed(1234)
    task.build_all_requests(limit=None, rank=0, world_size=1)
    return [inst.args[0] for inst in sorted(task.instances, key=lambda x: x.doc_id)]


def run(task_dir: Path, out: Path, *flags: str) -> tuple[int, list[str], dict]:
    code = main(["run", "--model", "dummy", "--include-path", str(task_dir), "--tasks",
                 "selfshot", "--num-fewshot", "2", "--no-progress", "--log-samples",
                 "--output-dir", str(out), *flags])  # fmt: skip
    lines = (out / "samples_selfshot.jsonl").read_text().splitlines()
    records = sorted((json.loads(x) for x in lines), key=lambda r: r["doc_id"])
    results = json.loads((out / "results.json").read_text())
    return code, [r["arguments"]["gen_args_0"]["arg_0"] for r in records], results


@pytest.mark.slow
def test_keep_self_gives_lm_evals_prompts_and_the_default_says_where_it_differs(
    task_dir, tmp_path, capsys
):
    theirs = lm_eval_prompts(task_dir)
    assert "Q: item 0\nA: 0" in theirs[0]  # lm-eval shows doc 0 as its own example
    code, kept, kept_results = run(task_dir, tmp_path / "kept", "--fewshot-keep-self")
    assert code == 0 and kept == theirs
    assert "fewshot_replaced_self" not in kept_results["provenance"]["tasks"]["selfshot"]
    assert "drew their own row" not in capsys.readouterr().err
    code, ours, results = run(task_dir, tmp_path / "ours")
    assert code == 0
    differing = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    replaced = results["provenance"]["tasks"]["selfshot"]["fewshot_replaced_self"]
    assert differing == replaced and 0 in replaced
    for i in replaced:  # never the doc's own answer in its examples
        assert f"Q: item {i}\nA: {i}" not in ours[i]
    err = capsys.readouterr().err
    assert f"selfshot: {len(replaced)} doc(s) drew their own row" in err
    assert "--fewshot-keep-self" in err
    # compare names the cause of the mismatch: which run, which rule, which docs.
    assert main(["compare", str(tmp_path / "ours"), str(tmp_path / "kept")]) == 2
    err = capsys.readouterr().err
    assert "sent different prompts" in err
    assert f"in {len(replaced)} of the {len(replaced)} docs (docs 0" in err
    assert "replaced a doc drawn as its own few-shot example" in err
