"""Checks of BFCL's multi-turn tasks that need bfcl-eval, run by test_bfcl_multi_turn.py in
bfcl-eval's own environment; each prints one JSON line of what it saw.

    python bfcl_multi_turn_driver.py kill OUT   # kill -9 mid-conversation, then rerun
    python bfcl_multi_turn_driver.py hf OUT     # a tiny hf chat model with a tool template
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests"), str(ROOT / "tests" / "agents")]

from bfcl_loopback import Loopback, ScriptedBfcl  # noqa: E402
from steady_stopwatch import SteadyStopwatch, untimed_answers  # noqa: E402

from assay.cli.main import main  # noqa: E402
from assay.metrics.bfcl_multi_turn import entries  # noqa: E402
from assay.run import agents  # noqa: E402

CATEGORY = "multi_turn_miss_func"
TASK = f"bfcl_fc_{CATEGORY}"
N_DOCS = 3


def _args(url: str, out: Path) -> list[str]:
    return [
        "run", "--model", "openai-chat",
        "--model-args", f"model=scripted,base_url={url},num_concurrent=1",
        "--tasks", TASK, "--limit", str(N_DOCS),
        "--output-dir", str(out), "--log-samples", "--no-progress",
    ]  # fmt: skip


def _script() -> ScriptedBfcl:
    ids = list(entries(CATEGORY))[:N_DOCS]
    return ScriptedBfcl(CATEGORY, ids, variants=("right", "one_by_one", "wrong_value"))


def _samples(out: Path) -> bytes:
    (path,) = out.glob(f"samples_{TASK}*.jsonl")
    return path.read_bytes()


def _records(data: bytes) -> list[object]:
    return [json.loads(line) for line in data.decode().splitlines()]


def kill(out: Path) -> dict[str, object]:
    # Times from a deterministic stopwatch, in every run: samples compare byte for byte.
    agents.STOPWATCH = SteadyStopwatch()
    reference = _script()
    with Loopback(reference) as server:
        assert main(_args(server.url, out / "reference")) == 0
    total = reference.requests
    held = _script()
    held.hold_at = total // 2
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with Loopback(held) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        victim = subprocess.Popen(
            [
                sys.executable,
                str(HERE.parent / "agents" / "steady_stopwatch.py"),
                "0",
                *_args(server.url, out / "resumed"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        reached = held.held.wait(timeout=300)
        # API answers enter the cache within half a second of arriving (models.api.arrivals):
        # the answers just before the held one are kept once that window has passed.
        time.sleep(2)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=60)
    written_before = list((out / "resumed").glob("samples_*.jsonl"))
    untimed = untimed_answers(out / "resumed" / "cache.sqlite")
    rerun = _script()
    with Loopback(rerun, port=port) as server:
        assert main(_args(server.url, out / "resumed")) == 0
    resumed = _samples(out / "resumed")
    # A second rerun whose stopwatch would give other times reads them all from the cache.
    agents.STOPWATCH = SteadyStopwatch(offset=100.0)
    again = _script()
    with Loopback(again, port=port) as server:
        assert main(_args(server.url, out / "resumed")) == 0
    results = json.loads((out / "resumed" / "results.json").read_text())["results"][TASK]
    first = json.loads((out / "reference" / "results.json").read_text())["results"][TASK]
    return {
        "reached_hold": reached,
        "total_requests": total,
        "answered_before_kill": held.hold_at - 1,
        "asked_on_rerun": rerun.requests,
        "asked_twice": len(set(held.seen[: held.hold_at - 1]) & set(rerun.seen)),
        "asked_on_second_rerun": again.requests,
        "samples_before_rerun": len(written_before),
        "untimed_answers_after_kill": untimed,
        "byte_identical_to_reference": resumed == _samples(out / "reference"),
        "second_rerun_byte_identical": resumed == _samples(out / "resumed"),
        "same_scores": results == first,
        "accuracy": results["bfcl_accuracy,none"],
        "turn_roles": sorted(
            {t["role"] for line in _records(resumed) for t in line["transcript"]["turns"]}  # type: ignore[index]
        ),
    }


def hostile(out: Path) -> dict[str, object]:
    """Calls that would make bfcl-eval's `eval` run code or reach builtins, straight into an
    episode; and a model that never stops calling tools."""
    from assay.catalog.bfcl_multi_turn import BfclEpisode
    from assay.metrics.bfcl_multi_turn import multi_turn_verdict
    from assay.requests.tools import ToolCall
    from assay.requests.types import Generation

    out.mkdir(parents=True)
    victim = out / "victim.txt"
    victim.write_text("keep me")
    touched = out / "touched"
    calls = (
        ToolCall.parsed(f"__import__('pathlib').Path({str(touched)!r}).touch", {}),
        ToolCall.parsed(
            "cd", {f"folder=__import__('pathlib').Path({str(touched)!r}).touch(),x": 1}
        ),
        ToolCall.parsed("open", {"file": str(victim), "mode": "w"}),
        ToolCall.parsed("no_such_function", {"a": 1}),
        ToolCall.parsed("cd", {"folder": "document"}),
    )
    entry_id = next(iter(entries("multi_turn_base")))
    episode = BfclEpisode({"category": "multi_turn_base", "id": entry_id})
    reply = episode.reply(Generation("", tool_calls=calls))
    texts = [outcome.content for _, outcome in reply.results]
    errors = [outcome.error for _, outcome in reply.results]
    answer = [[{c.name: c.raw} for c in calls]]
    verdict = multi_turn_verdict("multi_turn_base", entry_id, [answer, [], [], []])
    steps = 0
    endless = BfclEpisode({"category": "multi_turn_base", "id": entry_id})
    stop = None
    while stop is None and steps < 100:
        stop = endless.reply(Generation("", tool_calls=(ToolCall.parsed("pwd", {}),))).stop
        steps += 1
    episode.close()
    endless.close()
    return {
        "touched": touched.exists(),
        "victim": victim.read_text(),
        "errors": errors,
        "texts": texts,
        "verdict_error": verdict.error_type,
        "endless_steps": steps,
        "endless_stop": stop,
    }


def hostile_prompt(out: Path) -> dict[str, object]:
    """Prompt mode: calls written in the text that bfcl-eval's `eval` would run as code (a
    call inside an argument, a dotted name, a builtin), beside a real call; and a text that
    does not decode."""
    from assay.catalog.bfcl_multi_turn import BfclEpisode
    from assay.requests.types import Generation

    out.mkdir(parents=True)
    touched = out / "touched"
    text = (
        f"[cd(folder=open(file={str(touched)!r}, mode='w')), "
        f"os.system(command='touch {touched}'), len(obj=[1]), cd(folder='document')]"
    )
    entry_id = next(iter(entries("multi_turn_base")))
    episode = BfclEpisode({"category": "multi_turn_base", "id": entry_id, "mode": "prompt"})
    reply = episode.reply(Generation(text))
    garbled = episode.reply(Generation("[cd(folder="))
    episode.close()
    assert reply.results_message is not None
    return {
        "touched": touched.exists(),
        "errors": [outcome.error for _, outcome in reply.results],
        "texts": [outcome.content for _, outcome in reply.results],
        "sent_role": reply.results_message.role,
        "sent": reply.results_message.content,
        "unparseable_closes_turn": not garbled.results and bool(garbled.user),
    }


def _untimed(turns: list[dict[str, object]]) -> list[dict[str, object]]:
    """Turns without their seconds (two runs, each timed as it ran)."""
    return [{k: v for k, v in turn.items() if k != "seconds"} for turn in turns]


def replay(out: Path) -> dict[str, object]:
    """A multi-turn run through the loopback model in each mode, then the same task through
    `--model replay` on lines made from its transcripts: the same verdicts and scores, and
    no answer missing."""
    from assay.agents import replay_lines

    seen: dict[str, object] = {}
    for mode in ("fc", "prompt"):
        task = f"bfcl_{mode}_{CATEGORY}"
        ids = list(entries(CATEGORY))[:N_DOCS]
        script = ScriptedBfcl(
            CATEGORY, ids, variants=("one_by_one", "skip_turn", "wrong_value"), mode=mode
        )
        args = ["--tasks", task, "--limit", str(N_DOCS), "--log-samples", "--no-progress"]
        with Loopback(script) as server:
            model_args = f"model=scripted,base_url={server.url},num_concurrent=1"
            first = out / mode / "run"
            code = main(["run", "--model", "openai-chat", "--model-args", model_args,
                         "--output-dir", str(first), *args])  # fmt: skip
        assert code == 0
        (path,) = first.glob(f"samples_{task}*.jsonl")
        records = [json.loads(line) for line in path.read_text().splitlines()]
        lines = [line for r in records for line in replay_lines(r["transcript"])]
        replay_file = out / mode / "replay.jsonl"
        replay_file.write_text("".join(json.dumps(line) + "\n" for line in lines))
        again = out / mode / "replayed"
        code = main(["run", "--model", "replay", "--model-args", f"path={replay_file}",
                     "--output-dir", str(again), *args])  # fmt: skip
        (path,) = again.glob(f"samples_{task}*.jsonl")
        replayed = [json.loads(line) for line in path.read_text().splitlines()]
        results = [
            json.loads((folder / "results.json").read_text())["results"][task]
            for folder in (first, again)
        ]
        seen[mode] = {
            "exit": code,
            "requests": script.requests,
            "lines": len(lines),
            "verdicts": [r["bfcl_accuracy"] for r in records],
            "replayed_verdicts": [r["bfcl_accuracy"] for r in replayed],
            "same_turns": [_untimed(r["transcript"]["turns"]) for r in records]
            == [_untimed(r["transcript"]["turns"]) for r in replayed],
            "accuracy": [r["bfcl_accuracy,none"] for r in results],
        }
    return seen


TOOL_TEMPLATE = (
    "{{ bos_token }}{% if tools %}<|system|>\nTools:{% for tool in tools %}\n"
    "{{ tool | tojson }}{% endfor %}\nCall one as <tool_call>{json}</tool_call>\n{% endif %}"
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}"
    "{% for call in message.get('tool_calls', []) %}<tool_call>{\"name\": "
    '"{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}'
    "</tool_call>{% endfor %}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def hf(out: Path) -> dict[str, object]:
    from fixtures.tiny_model import build_tiny_model

    model = build_tiny_model(out / "tiny", max_positions=32768)
    config_path = model / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = TOOL_TEMPLATE
    config_path.write_text(json.dumps(config))
    (model / "chat_template.jinja").unlink(missing_ok=True)
    code = main(
        [
            "run", "--model", "hf",
            "--model-args", f"pretrained={model},device=cpu,tool_parser=hermes",
            "--tasks", "bfcl_fc_multi_turn_base", "--limit", "2",
            "--gen-kwargs", "max_gen_toks=8", "--apply-chat-template",
            "--output-dir", str(out / "run"), "--log-samples", "--no-progress",
        ]
    )  # fmt: skip
    results = json.loads((out / "run" / "results.json").read_text())["results"]
    task = results["bfcl_fc_multi_turn_base"]
    # The random model seldom calls a tool, so the template's rendering of BFCL's tools, a
    # call and its result is checked on a conversation that holds them, as the loop sends it.
    from assay.catalog.bfcl import fc_tools
    from assay.models.hf.model import hf as hf_backend
    from assay.requests.tools import ToolCall, Turn
    from assay.requests.types import GenerateRequest, GenParams

    entry = next(iter(entries("multi_turn_base").values()))["asked"]
    call = ToolCall.parsed("pwd", {}, id="call_0")
    conversation = (
        Turn("user", "Where am I?"),
        Turn("assistant", "", (call,)),
        Turn("tool", '{"current_working_directory": "alex"}', (), "call_0", "pwd"),
    )
    request = GenerateRequest(
        conversation, GenParams(max_gen_toks=8), tools=fc_tools(entry["function"])
    )
    rendered = hf_backend(pretrained=str(model), device="cpu")._tool_prompt(request)
    (path,) = (out / "run").glob("samples_bfcl_fc_multi_turn_base*.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return {
        "exit": code,
        "accuracy": task["bfcl_accuracy,none"],
        "samples": len(records),
        "model_turns": task["agent_model_turns"],
        "user_turns": [sum(t["role"] == "user" for t in r["transcript"]["turns"]) for r in records],
        "stopped_by": [r["transcript"]["stopped_by"] for r in records],
        "renders_tools": all(f'"name": "{f["name"]}"' in rendered for f in entry["function"]),
        "renders_call": '<tool_call>{"name": "pwd", "arguments": {}}</tool_call>' in rendered,
        "renders_result": '<|tool|>\n{"current_working_directory": "alex"}' in rendered,
    }


if __name__ == "__main__":
    os.environ.setdefault("OPENAI_API_KEY", "unused-loopback-key")
    check, folder = sys.argv[1], Path(sys.argv[2])
    checks = {"kill": kill, "hf": hf, "hostile": hostile, "hostile_prompt": hostile_prompt}
    checks["replay"] = replay
    print(json.dumps(checks[check](folder)))
