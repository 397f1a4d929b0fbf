"""Built-in tasks without the network: `assay tasks show` renders from bundled rows, a missing
dataset fails before any model loads with a message saying how to get it, and a local copy of
the data can replace the hub dataset."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from assay.cli.task_listing import show
from assay.errors import ConfigError
from assay.tasks.registry import Registry
from assay.tasks.task import Task

# What each task's first rendered request must contain (as `tasks show` prints it, line breaks
# and all): the prompt as lm-eval builds it from the task's bundled example row (detokenised,
# cleaned, lettered, shuffled...).
SHOWN = {
    "hellaswag": "Removing ice from car: Then, the man writes over the snow covering the window of a car. Then",
    "winogrande": "Sarah was a much better surgeon than Maria so Sarah",
    "piqa": "Question: When boiling butter, when it's ready, you can\nAnswer:",
    "social_iqa": "gathered her friends together. How would Others feel as a result?\nA:",
    "openbookqa": "The sun is responsible for",
    "boolq": "Question: is windows movie maker part of windows essentials?\nAnswer:",
    "commonsense_qa": "\nE. avoid\nAnswer:",
    "sciq": "cheese and yogurt.\nQuestion: What type of organism",
    "race": "Question: How long had the rain lasted?\nAnswer: seven days\nWhat had the flood created?",
    "lambada_openai": "continuation scored: ' stunned'",
    "wikitext": "Robert Boulter is an English film, television and theatre actor. He had a guest-starring",
    "truthfulqa_mc1": "Barcelona, Spain.\n\nQ: What is the smallest country",
    "truthfulqa_mc2": "continuation scored: ' The smallest country in the world that is at least one square mile in area is Vatican City.'",
    "mmlu_pro_math": "Answer: Let's think step by step. 21, 27, 33 have factors. The answer is (C).\n\nQuestion:",
    "leaderboard_mmlu_pro": "Which is a prime number?\nA. 21\nB. 27\nC. 29\nD. 33\nAnswer: C\n\nWhat is 15%",
    "gpqa_main_zeroshot": "Choices:\n(A) antisense\n(B) lariat\n(C) polyA tail\n(D) R-loops\nAnswer:",
    "leaderboard_gpqa_main": "(C) polyA tail\n(D) R-loops \nAnswer:",
    "leaderboard_musr_murder_mysteries": "Who is the most likely murderer?\n\n1 - Mackenzie\n2 - Ana\n\nAnswer:",
}  # fmt: skip


_SHOWS_A_REQUEST = re.compile(r"^(── )?request 0\b", re.M)
"""The first request's heading: a rule for a prompt, a line for a scored continuation."""


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry()


@pytest.mark.parametrize("name", sorted(SHOWN))
def test_show_renders_a_prompt_from_bundled_rows(registry, name, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    text = show(registry, name, None)
    assert f"task: {name}" in text
    assert _SHOWS_A_REQUEST.search(text)
    assert SHOWN[name] in text


def test_every_catalog_task_bundles_example_rows(registry):
    missing = [n for n, c in registry.python_configs().items() if not c.example_rows]
    assert not missing, f"tasks without example_rows (assay tasks show needs them): {missing}"


def _needs_bfcl_eval(name: str) -> str | None:
    """What `tasks show` must say of a BFCL task here: the way to install bfcl-eval when this
    environment lacks it (the tests in its own run the shows), the reason of a category assay
    does not run; None for any other task."""
    if not name.startswith("bfcl_"):
        return None
    from assay.catalog.bfcl import OFFLINE

    multi_turn = "_multi_turn_" in name
    if not multi_turn and not any(name.endswith(f"_{category}") for category in OFFLINE):
        return "is not run by assay"
    return None if importlib.util.find_spec("bfcl_eval") else "make bfcl-venv"


def test_every_catalog_task_shows_with_its_default_shots_offline(registry, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in sorted(registry.python_configs()):
        refusal = _needs_bfcl_eval(name)
        if refusal is not None:
            with pytest.raises(ConfigError, match=refusal):
                show(registry, name, None)
            continue
        assert _SHOWS_A_REQUEST.search(show(registry, name, None)), name


@pytest.mark.slow
def test_missing_dataset_fails_before_the_model_loads(tmp_path):
    env = {
        **os.environ,
        "HF_HOME": str(tmp_path / "empty-hf-home"),
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("HF_DATASETS_CACHE", None)
    run = [sys.executable, "-m", "assay", "run", "--model", "hf", "--tasks", "boolq"]
    # The model does not exist either: if it were loaded first, its error would show instead.
    run += ["--model-args", f"pretrained={tmp_path / 'no-such-model'}"]
    done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    message = done.stderr
    assert "'aps/super_glue'" in message and "subset 'boolq'" in message
    assert "revision 'main'" in message
    assert "HF_DATASETS_OFFLINE=1" in message and "data_files" in message
    assert "no-such-model" not in message


def test_a_local_copy_replaces_the_hub_dataset(tmp_path):
    rows = [
        {"question": "is water wet", "passage": "Water is wet.", "idx": 0, "label": 1},
        {"question": "is fire cold", "passage": "Fire is hot.", "idx": 1, "label": 0},
    ]
    data = tmp_path / "boolq_validation.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    override = tmp_path / "local_boolq.py"
    override.write_text(
        "from dataclasses import replace\n"
        "from assay.catalog.boolq import TASKS_TABLE as BUILTIN\n"
        "TASKS_TABLE = [replace(BUILTIN[0], hf_repo='json', hf_subset=None,\n"
        f"    hf_data_files={{'validation': {str(data)!r}}})]\n",
        encoding="utf-8",
    )
    config = Registry(custom_tasks=[Path(override)]).get("boolq")
    docs = list(Task(config).eval_docs())
    assert [d.query for d in docs] == [
        "Water is wet.\nQuestion: is water wet?\nAnswer:",
        "Fire is hot.\nQuestion: is fire cold?\nAnswer:",
    ]
    assert [d.gold_index for d in docs] == [1, 0]
