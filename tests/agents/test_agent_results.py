"""Agent runs as results: results.json's loop counts (turns, calls, failed and unparseable
calls, limits) and `assay compare` pairing two agent runs of the same task doc by doc."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from calc_agent import ScriptedCalculator, write_task
from fixtures.provider_fakes import FakeProviders

from assay.cli.main import main


class SloppyCalculator(ScriptedCalculator):
    """The calculator's script, except: doc a=2 answers a wrong number; doc a=3 first calls
    add with arguments that are not JSON, then calls a tool that does not exist, then answers
    right in its fifth turn; doc a=4 never stops calling add (the turn limit ends it)."""

    def calls(self, body: dict[str, Any]) -> list[tuple[str, Any]] | None:
        a, b, c, results = self._turn(body)
        if a == 3 and len(results) == 0:
            return [("add", '{"a": 3, "b": ')]
        if a == 3 and len(results) == 1:
            return [("subtract", {"a": 3, "b": 4})]
        if a == 3 and len(results) == 2:
            return [("add", {"a": a, "b": b})]
        if a == 3 and len(results) == 3:
            return [("multiply", {"a": int(results[2]), "b": c})]
        if a == 4:
            return [("add", {"a": a, "b": b})]
        return super().calls(body)

    def reply(self, body: dict[str, Any]) -> tuple[str, str | None]:
        a, _, _, results = self._turn(body)
        if a == 2:
            return "0", None
        return (results[-1] if results else ""), None


def _run(script: ScriptedCalculator, tasks: Path, out: Path) -> dict[str, Any]:
    with FakeProviders(reply=script.reply, calls=script.calls) as fake:
        args = [
            "run", "--model", "openai-chat", "--model-args",
            f"model=fake,base_url={fake.openai_url},batch_size=1,num_concurrent=1",
            "--tasks", "calc_agent", "--include-path", str(tasks), "--output-dir", str(out),
            "--log-samples", "--no-progress",
        ]  # fmt: skip
        code = main(args)
        assert code == 0
    results: dict[str, Any] = json.loads((out / "results.json").read_text())["results"]
    return results["calc_agent"]


def test_loop_counts_in_results_and_compare_pairs_agent_runs_by_doc(tmp_path):
    tasks = tmp_path / "tasks"
    write_task(tasks, n_docs=4, max_turns=5)
    right = _run(ScriptedCalculator(), tasks, tmp_path / "right")
    sloppy = _run(SloppyCalculator(), tasks, tmp_path / "sloppy")

    assert right["agent_samples"] == 4 and right["agent_tool_errors"] == 0
    assert right["agent_model_turns_mean"] == 3.0 and right["agent_tool_calls_mean"] == 2.0
    # Doc a=1: 3 turns; a=2: 3 turns; a=3: 5 turns (bad JSON, unknown tool, add, multiply,
    # the answer); a=4: 5 turns of add until the turn limit.
    assert sloppy["agent_model_turns"] == 3 + 3 + 5 + 5
    assert sloppy["agent_tool_calls"] == 2 + 2 + 4 + 5
    assert sloppy["agent_tool_errors"] == 2 and sloppy["agent_samples_with_tool_errors"] == 1
    assert sloppy["agent_tool_calls_unparsed"] == 1
    assert sloppy["agent_stopped_by_answer"] == 3 and sloppy["agent_stopped_by_max_turns"] == 1
    assert sloppy["agent_stopped_by_max_tokens"] == sloppy["agent_stopped_by_max_seconds"] == 0
    # Scores carry their intervals, as any task's.
    assert sloppy["exact_match,none"] == 0.5 and sloppy["exact_match_stderr,none"] > 0
    assert right["exact_match,none"] == 1.0

    report = tmp_path / "compare.json"
    args = ["compare", str(tmp_path / "right"), str(tmp_path / "sloppy"), "--json", str(report)]
    assert main(args) == 0
    rows = {
        (row["metric"], row["filter"]): row
        for row in json.loads(report.read_text())["comparisons"]
        if row["task"] == "calc_agent"
    }
    exact = rows[("exact_match", "none")]
    # Paired doc by doc: the 4 docs of both runs, 2 of them lost by the sloppy run.
    assert exact["n"] == 4
    assert exact["mean_a"] == 1.0 and exact["mean_b"] == 0.5
    assert exact["diff"] == -0.5
    assert exact["mcnemar_p"] is not None
    state = rows[("end_state", "none")]
    # Failed calls change no state: only doc a=4 (five adds) ends in the wrong state.
    assert state["n"] == 4 and state["mean_b"] == 0.75
    pairs = json.loads(report.read_text())["pairs"]
    assert pairs[0]["unpaired_docs"] == {}
