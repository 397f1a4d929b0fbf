"""`make quickstart`: the bundled IFEval task replayed with GPT-4's responses, through the CLI."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from assay.cli.main import main

RESPONSES = Path(str(resources.files("assay") / "data" / "ifeval" / "gpt4_responses.jsonl"))


def test_quickstart_prints_and_writes_the_papers_gpt4_row(tmp_path: Path, capsys) -> None:
    code = main(
        [
            "run",
            "--model", "replay",
            "--model-args", f"path={RESPONSES}",
            "--tasks", "ifeval",
            "--output-dir", str(tmp_path),
            "--log-samples",
            "--no-progress",
        ]
    )  # fmt: skip
    assert code == 0
    results = json.loads((tmp_path / "results.json").read_text())["results"]["ifeval"]
    figures = {
        name: round(100 * results[f"{name},none"], 2)
        for name in (
            "prompt_level_strict_acc",
            "inst_level_strict_acc",
            "prompt_level_loose_acc",
            "inst_level_loose_acc",
        )
    }
    assert figures == {
        "prompt_level_strict_acc": 76.89,
        "inst_level_strict_acc": 83.57,
        "prompt_level_loose_acc": 79.30,
        "inst_level_loose_acc": 85.37,
    }
    table = capsys.readouterr().out
    assert "|ifeval|" in table and "0.7689" in table and "0.8537" in table
    samples = (tmp_path / "samples_ifeval.jsonl").read_text().splitlines()
    assert len(samples) == 541
