"""Agent tasks end to end: a YAML task with Python tools, run through openai-chat against a
loopback server playing a scripted model; scoring by final answer, tool calls and end state;
kill -9 mid-conversation then a rerun gives the same transcripts and scores, and no
conversation is asked twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from calc_agent import ScriptedCalculator, write_task
from fixtures.provider_fakes import FakeProviders
from fixtures.waiting import cached_rows, wait_for
from steady_stopwatch import SteadyStopwatch, untimed_answers

from assay.cli.main import main
from assay.run import agents

ROOT = Path(__file__).resolve().parents[2]


def _args(url: str, tasks: Path, out: Path) -> list[str]:
    return [
        "run", "--model", "openai-chat",
        "--model-args", f"model=fake,base_url={url},batch_size=1,num_concurrent=1",
        "--tasks", "calc_agent", "--include-path", str(tasks),
        "--output-dir", str(out), "--log-samples", "--no-progress",
    ]  # fmt: skip


def _samples(out: Path) -> list[dict]:
    (path,) = out.glob("samples_calc_agent*.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _without_times(value):
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def test_a_loop_calls_tools_then_answers_and_scores_three_ways(tmp_path):
    tasks = tmp_path / "tasks"
    write_task(tasks)
    script = ScriptedCalculator()
    with FakeProviders(reply=script.reply, calls=script.calls) as fake:
        assert main(_args(fake.openai_url, tasks, tmp_path / "out")) == 0
        assert len(fake.bodies) == 12  # 4 docs x 3 turns
        # Turn 2 carries the first call and its result, and the tools every time.
        second = next(b for b in fake.bodies if len(b["messages"]) == 3)
        assert second["messages"][1]["tool_calls"][0]["function"]["name"] == "add"
        assert second["messages"][2]["role"] == "tool"
        assert [t["function"]["name"] for t in second["tools"]] == ["add", "multiply"]
        assert second["tools"][0]["function"]["parameters"] == {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        }
    results = json.loads((tmp_path / "out" / "results.json").read_text())["results"]["calc_agent"]
    assert results["exact_match,none"] == 1.0
    assert results["tool_call_match,none"] == 1.0
    assert results["end_state,none"] == 1.0
    assert results["agent_model_turns"] == 12 and results["agent_tool_calls"] == 8
    assert results["agent_stopped_by_answer"] == 4
    first = _samples(tmp_path / "out")[0]
    transcript = first["transcript"]
    assert [t["role"] for t in transcript["turns"]] == [
        "prompt", "assistant", "tool", "assistant", "tool", "assistant"
    ]  # fmt: skip
    assert transcript["turns"][2]["content"] == "3" and transcript["end_state"] == {"calls": 2}
    assert first["resps"] == [["9"]]


def test_max_turns_stops_the_loop_and_is_counted(tmp_path):
    tasks = tmp_path / "tasks"
    write_task(tasks, n_docs=2, max_turns=1)
    script = ScriptedCalculator()
    with FakeProviders(reply=script.reply, calls=script.calls) as fake:
        assert main(_args(fake.openai_url, tasks, tmp_path / "out")) == 0
        assert len(fake.bodies) == 2
    results = json.loads((tmp_path / "out" / "results.json").read_text())["results"]["calc_agent"]
    assert results["agent_stopped_by_max_turns"] == 2
    assert results["exact_match,none"] == 0.0 and results["tool_call_match,none"] == 0.0
    assert _samples(tmp_path / "out")[0]["transcript"]["stopped_by"] == "max_turns"


def test_kill_9_mid_conversation_then_rerun_is_byte_identical_and_asks_nothing_twice(
    tmp_path, monkeypatch
):
    # Times come from a deterministic stopwatch, so the samples files compare byte for byte.
    monkeypatch.setattr(agents, "STOPWATCH", SteadyStopwatch())
    tasks = tmp_path / "tasks"
    write_task(tasks)
    # The reference: one uninterrupted run.
    script = ScriptedCalculator()
    with FakeProviders(reply=script.reply, calls=script.calls) as fake:
        assert main(_args(fake.openai_url, tasks, tmp_path / "reference")) == 0
    out, marker = tmp_path / "resumed", tmp_path / "held"
    held = ScriptedCalculator(hold_doc_a=3, held_marker=marker)  # doc 2's second turn waits
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])}
    log = tmp_path / "victim.log"
    with FakeProviders(reply=held.reply, calls=held.calls) as fake, log.open("w") as err:
        victim = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("steady_stopwatch.py")), "0",
             *_args(fake.openai_url, tasks, out)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            assert victim.poll() is None, log.read_text()
            time.sleep(0.05)
        assert marker.exists(), "the run never reached the held turn"
        # Answers enter the cache within half a second of arriving: wait for every one asked
        # before the held turn to land (bounded), whatever the machine's load.
        wait_for(lambda: cached_rows(out / "cache.sqlite") >= len(held.seen) - 1)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        held.release.set()
        asked_before = list(held.seen)
        port = int(fake.openai_url.rsplit(":", 1)[1].split("/")[0])
    assert not list(out.glob("samples_*.jsonl"))  # killed mid-conversation: nothing written
    # Every answer the killed run kept was kept with its time (mid-round included).
    assert untimed_answers(out / "cache.sqlite") == 0
    rerun = ScriptedCalculator()
    # The same port: the base_url is part of the model's identity, hence of the cache keys.
    with FakeProviders(reply=rerun.reply, calls=rerun.calls, port=port) as fake:
        assert main(_args(fake.openai_url, tasks, out)) == 0
    # Nothing answered before the kill is asked again; only the held turn and what follows.
    answered_before = set(asked_before[:-1])
    assert not answered_before & set(rerun.seen)
    assert len(asked_before) - 1 + len(rerun.seen) == 12
    (path,) = out.glob("samples_calc_agent*.jsonl")
    (first,) = (tmp_path / "reference").glob("samples_calc_agent*.jsonl")
    assert path.read_bytes() == first.read_bytes()
    scores = json.loads((out / "results.json").read_text())["results"]["calc_agent"]
    reference = json.loads((tmp_path / "reference" / "results.json").read_text())
    assert scores == reference["results"]["calc_agent"]
    # A rerun whose stopwatch would give other times reads every turn's time from the cache.
    monkeypatch.setattr(agents, "STOPWATCH", SteadyStopwatch(offset=100.0))
    again = ScriptedCalculator()
    with FakeProviders(reply=again.reply, calls=again.calls, port=port) as fake:
        assert main(_args(fake.openai_url, tasks, out)) == 0
        assert fake.bodies == []
    assert path.read_bytes() == first.read_bytes()


def test_turn_times_are_the_stopwatchs_and_a_fresh_cache_measures_anew(tmp_path, monkeypatch):
    tasks = tmp_path / "tasks"
    write_task(tasks, n_docs=1)
    script = ScriptedCalculator()
    monkeypatch.setattr(agents, "STOPWATCH", SteadyStopwatch(offset=100.0))
    with FakeProviders(reply=script.reply, calls=script.calls) as fake:
        assert main(_args(fake.openai_url, tasks, tmp_path / "out")) == 0
    turns = _samples(tmp_path / "out")[0]["transcript"]["turns"]
    model = [t["seconds"] for t in turns if t["role"] == "assistant"]
    assert len(model) == 3 and all(100.0 <= s < 116.0 for s in model)
    assert [t["seconds"] for t in turns if t["role"] == "tool"] == [100.125, 100.125]


def test_a_backend_without_tools_is_refused_by_name(tmp_path, capsys):
    tasks = tmp_path / "tasks"
    write_task(tasks, n_docs=1)
    code = main(["run", "--model", "dummy", "--tasks", "calc_agent", "--include-path", str(tasks),
                 "--no-progress"])  # fmt: skip
    assert code != 0
    assert "takes no tools" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ("{tools: []}", "'agent.tools' is empty"),
        ("{tools: [{function: 3}]}", "'function' must be a !function"),
        ("{tools: [{command: [ls]}]}", "needs a 'name'"),
        ("{max_turns: 0, tools: [{name: x, command: [ls]}]}", "max_turns"),
        ("{turns: 3}", "unknown key 'metadata.agent.turns'"),
        ("{tools: [{name: x, command: [ls], timeout_s: soon}]}", "'timeout_s' must be a number"),
        ("{tools: [{name: x, command: [ls], timeout_s: 0}]}", "above 0, got 0"),
        ("{tools: [{name: x, command: [ls], timeout_s: .inf}]}", "above 0, got inf"),
        ("{tool_choice: sometimes, tools: [{name: x, command: [ls]}]}", "tool_choice"),
    ],
)
def test_bad_agent_declarations_are_refused_naming_the_field(tmp_path, capsys, agent, message):
    tasks = tmp_path / "tasks"
    path = write_task(tasks, n_docs=1)
    text = path.read_text().split("metadata:")[0] + f"metadata:\n  agent: {agent}\n"
    path.write_text(text)
    assert main(["run", "--model", "dummy", "--tasks", "calc_agent", "--include-path", str(tasks),
                 "--no-progress"]) == 2  # fmt: skip
    assert message in capsys.readouterr().err
