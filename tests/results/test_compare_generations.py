"""`assay compare` sets two runs' truncated and unclosed-thinking rates side by side and flags
a truncation difference larger than its noise (Fisher's exact test at 0.05): run folders built
by `assay run --model replay` from replay files this test writes, so every count is known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures import reasoning_runs
from scipy.stats import fisher_exact

from assay.cli.main import main
from assay.results.compare import compare

N = 20


def replay_run(folder: Path, name: str, truncated: set[int], unclosed: set[int]) -> Path:
    return reasoning_runs.replay_run(folder, name, N, truncated, unclosed)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    reasoning_runs.write_task(tmp_path, N)
    return tmp_path


def test_truncation_rates_side_by_side_and_a_real_difference_flagged(folder, capsys):
    capped = replay_run(folder, "capped", truncated=set(range(8)), unclosed={0, 1, 2, 3, 4, 5})
    roomy = replay_run(folder, "roomy", truncated={0}, unclosed=set())
    capsys.readouterr()
    json_path = folder / "cmp.json"
    code = main(["compare", str(capped), str(roomy), "--json", str(json_path)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "generations (capped | roomy):" in printed
    assert (
        "think_cmp: truncated 40.0% (8/20) | 5.0% (1/20); "
        "unclosed thinking 30.0% (6/20) | 0.0% (0/20)"
    ) in printed
    p_value = fisher_exact([[8, 12], [1, 19]]).pvalue
    assert p_value < 0.05
    assert (
        f"TRUNCATION DIFFERS in think_cmp: 8/20 vs 1/20 generations hit the token cap, "
        f"Fisher's exact test (two-sided) p = {p_value:.4f} < 0.05"
    ) in printed
    (contrast,) = json.loads(json_path.read_text())["pairs"][0]["generations"]
    assert contrast["truncation_p_value"] == pytest.approx(p_value)
    assert contrast["truncation_differs"] is True
    assert contrast["a"]["truncated_rate"] == pytest.approx(8 / 20)
    assert contrast["b"]["unclosed_thinking"] == 0


def test_a_difference_within_the_noise_is_shown_but_not_flagged(folder):
    one = replay_run(folder, "one", truncated={0, 1, 2}, unclosed={0})
    two = replay_run(folder, "two", truncated={3, 4}, unclosed=set())
    (contrast,) = compare(one, two).pairs[0].generations
    assert contrast.p_value == pytest.approx(fisher_exact([[3, 17], [2, 18]]).pvalue)
    assert not contrast.truncation_differs
    assert (contrast.a.truncated, contrast.b.truncated) == (3, 2)
    assert (contrast.a.unclosed, contrast.b.unclosed) == (1, 0)


def test_runs_that_report_no_endings_print_nothing_new(folder, capsys):
    plain = folder / "plain.jsonl"
    plain.write_text(
        "".join(
            json.dumps({"prompt": f"Question: q{i}\nAnswer:", "response": f"#### {i}"}) + "\n"
            for i in range(N)
        )
    )
    outs = []
    for name in ("p1", "p2"):
        args = ["run", "--model", "replay", "--model-args", f"path={plain}", "--tasks"]
        args += ["think_cmp", "--include-path", str(folder / "tasks"), "--log-samples"]
        assert main([*args, "--output-dir", str(folder / name), "--no-progress"]) == 0
        outs.append(folder / name)
    report = compare(*outs)
    assert report.pairs[0].generations == []
    assert "generations" not in report.as_json()["pairs"][0]
