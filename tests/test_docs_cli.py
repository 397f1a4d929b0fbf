"""docs/cli.md is what docs/gen_cli.py writes from the parser, and `assay run --help` names
every built-in backend."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from assay.backend_names import BUILTIN_BACKENDS
from assay.cli.main import build_parser
from assay.models.base import MODELS

REPO = Path(__file__).resolve().parents[1]


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_cli", REPO / "docs" / "gen_cli.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_cli_page_is_current():
    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert page == load_generator().render(), "docs/cli.md is stale: run python docs/gen_cli.py"


def test_the_page_has_a_section_per_command():
    page = load_generator().render()
    for command in ("run", "tasks list", "tasks show", "validate", "compare", "power", "report"):
        assert f"`assay {command}`" in page


def test_check_mode_fails_on_a_stale_page(tmp_path, monkeypatch):
    generator = load_generator()
    monkeypatch.setattr(generator, "PAGE", tmp_path / "cli.md")
    monkeypatch.setattr(sys, "argv", ["gen_cli.py", "--check"])
    (tmp_path / "cli.md").write_text("# old\n", encoding="utf-8")
    assert generator.main() == 1
    monkeypatch.setattr(sys, "argv", ["gen_cli.py"])
    assert generator.main() == 0
    monkeypatch.setattr(sys, "argv", ["gen_cli.py", "--check"])
    assert generator.main() == 0


def test_run_help_lists_every_built_in_backend():
    run = next(
        choice
        for action in build_parser()._actions
        if hasattr(action, "choices") and action.choices
        for name, choice in action.choices.items()
        if name == "run"
    )
    # The --model flag's own help, unwrapped: argparse breaks lines at hyphens (hf-multimodal).
    help_text = next(a.help for a in run._actions if "--model" in a.option_strings) or ""
    for name in BUILTIN_BACKENDS:
        assert name in MODELS
        assert f"{name}," in help_text or f"{name} " in help_text, name
    assert "hf-multimodal" in help_text


def test_the_generator_runs_as_a_script_in_check_mode():
    done = subprocess.run(
        [sys.executable, "docs/gen_cli.py", "--check"], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
