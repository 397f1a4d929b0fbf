"""lm-eval's packaged multimodal task files (doc_to_image / doc_to_audio) through assay's YAML path.

Every task and group defined in a folder of lm-eval 0.4.13's tree whose files use doc_to_image
or doc_to_audio (mmmu, chartqa, pisa, common_voice: 46 tasks and 9 groups) is checked without
data: the image tasks load; the audio task is refused with a message naming `doc_to_audio`, and
running it exits with status 2 before any model loads. (Their prompts and scores on rows are
compared with lm-eval's in catalog/test_catalog_parity.py.)
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from assay.cli.main import main
from assay.run.validate import Validator
from assay.tasks.registry import Registry

pytestmark = [
    pytest.mark.slow,  # indexes lm-eval's whole tree once
    pytest.mark.skipif(
        importlib.util.find_spec("lm_eval") is None, reason="needs the lm-eval-tasks extra"
    ),
]


def _tree() -> Path:
    import lm_eval

    return Path(lm_eval.__file__).parent / "tasks"


def _folders_using(*keys: str) -> set[Path]:
    """Folders of lm-eval's tree with a task file (YAML or include template) using `keys`."""
    found = set()
    for path in _tree().rglob("*"):
        if path.suffix == ".yaml" or path.name.endswith("_yaml"):
            text = path.read_text(encoding="utf-8", errors="replace")
            if any(f"{key}:" in text for key in keys):
                found.add(path.parent)
    return found


@pytest.fixture(scope="module")
def checks():
    registry = Registry([str(_tree())])
    folders = _folders_using("doc_to_image", "doc_to_audio")
    sources = {n: registry.source(n) for n in registry.yaml_entries()}
    names = sorted(n for n, src in sources.items() if src and Path(src).parent in folders)
    return {check.name: check for check in Validator(registry).run(names)}


def test_the_multimodal_folders_define_55_tasks_and_groups(checks):
    kinds = [c.kind for c in checks.values()]
    assert (kinds.count("task"), kinds.count("group")) == (46, 9)


def test_every_image_task_and_group_loads(checks):
    audio = {p.name for p in _folders_using("doc_to_audio")}
    failed = {n: c.error for n, c in checks.items() if not c.ok}
    assert audio == {"common_voice"}
    assert list(failed) == ["common_voice_en"]
    assert "'doc_to_audio' is not supported" in failed["common_voice_en"]
    assert "no assay backend takes audio" in failed["common_voice_en"]
    assert {"mmmu_val", "mmmu_val_math", "chartqa", "chartqa_llama", "pisa_en"} <= set(checks)


def test_running_an_audio_task_exits_2_naming_the_key(capsys):
    code = main(
        ["run", "--model", "dummy", "--include-path", str(_tree()), "--tasks", "common_voice_en"]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "common_voice_en.yaml" in err and "'doc_to_audio' is not supported" in err
    assert "Traceback" not in err
