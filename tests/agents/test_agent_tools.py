"""Agent tools (assay/agents/tools.py): schemas read from functions, failures answered as
errors, sandboxed programs and commands contained; a task declared in Python."""

from __future__ import annotations

import json

import pytest
from calc_agent import ScriptedCalculator
from fixtures.provider_fakes import FakeProviders

from assay.agents import AgentSpec, command_tool, function_tool, sandboxed_tool
from assay.cli.main import main
from assay.requests.tools import ToolCall


def lookup(city: str, units: str = "metric") -> dict:
    """The weather in a city.

    More text that is not the description."""
    return {"city": city, "units": units}


def test_a_function_tool_reads_its_spec_from_the_signature():
    tool = function_tool(lookup)
    assert tool.spec.name == "lookup" and tool.spec.description == "The weather in a city."
    assert tool.spec.parameters == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "units": {"type": "string"}},
        "required": ["city"],
    }
    done = tool.call(ToolCall.parsed("lookup", {"city": "Oslo"}), {})
    assert (done.content, done.error) == ('{"city": "Oslo", "units": "metric"}', False)


def test_failures_are_answered_as_errors_never_raised():
    tool = function_tool(lookup)
    unparsed = tool.call(ToolCall.parsed("lookup", "{city"), {})
    assert unparsed.error and "not a JSON object" in unparsed.content
    wrong = tool.call(ToolCall.parsed("lookup", {"town": "Oslo"}), {})
    assert wrong.error and wrong.content.startswith("error: TypeError")


def hang(seconds: int) -> str:
    """A tool that never comes back in time."""
    import time

    time.sleep(seconds)
    return "late"


def test_an_in_process_tool_that_hangs_is_answered_with_an_error_at_its_timeout():
    import signal

    tool = function_tool(hang, timeout_s=0.3)
    before = signal.getsignal(signal.SIGALRM)
    done = tool.call(ToolCall.parsed("hang", {"seconds": 30}), {})
    # Answered with the timeout's error, not the tool's "late" answer 30 s on.
    assert done.error and "ran past its timeout_s of 0.3 s" in done.content
    assert signal.getsignal(signal.SIGALRM) == before  # the handler is put back
    quick = tool.call(ToolCall.parsed("hang", {"seconds": 0}), {})
    assert (quick.content, quick.error) == ("late", False)


def test_sandboxed_programs_and_commands_are_contained():
    from assay.sandbox.policy import SandboxPolicy, using

    reach = sandboxed_tool(
        "fetch",
        "def run(host):\n    import socket\n    socket.create_connection((host, 80), timeout=2)\n",
    )
    echo = command_tool("echo", ["echo", "{word}"])
    with using(SandboxPolicy("auto")):
        blocked = reach.call(ToolCall.parsed("fetch", {"host": "1.1.1.1"}), {})
        assert blocked.error and "blocked" in blocked.content and "network" in blocked.content
        said = sandboxed_tool("sum", "def run(a, b):\n    return a + b\n").call(
            ToolCall.parsed("sum", {"a": 2, "b": 3}), {}
        )
        assert (said.content, said.error) == ("5", False)
        missing = echo.call(ToolCall.parsed("echo", {}), {})
        assert missing.error and "needs argument" in missing.content
    assert reach.sandboxed and echo.sandboxed


def test_an_agent_task_declared_in_python(tmp_path):
    module = tmp_path / "calc_tasks.py"
    data = tmp_path / "calc.jsonl"
    data.write_text(json.dumps({"a": 2, "b": 5, "c": 3, "answer": "21"}) + "\n")
    module.write_text(
        f'''
from assay import Doc, TaskConfig
from assay.agents import AgentSpec, function_tool


def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


def multiply(a: int, b: int) -> int:
    """Multiply two whole numbers."""
    return a * b


def prompt(row, task_name):
    return Doc(query=f"Compute ({{row['a']}} + {{row['b']}}) * {{row['c']}} with the tools.",
               choices=[row["answer"]], gold_index=0)


TASKS_TABLE = [
    TaskConfig(name="calc_py", prompt_function=prompt, hf_repo="json",
               hf_data_files={{"test": "{data}"}}, evaluation_splits=["test"],
               metrics=["exact_match"], generation_size=64,
               agent=AgentSpec(tools=[function_tool(add), function_tool(multiply)], max_turns=4)),
]
'''
    )
    script = ScriptedCalculator()
    with FakeProviders(reply=script.reply, calls=script.calls) as fake:
        code = main(["run", "--model", "openai-chat", "--model-args",
                     f"model=fake,base_url={fake.openai_url}", "--custom-tasks", str(module),
                     "--tasks", "calc_py", "--output-dir", str(tmp_path / "out"), "--no-progress"])  # fmt: skip
        assert code == 0 and len(fake.bodies) == 3
    results = json.loads((tmp_path / "out" / "results.json").read_text())["results"]["calc_py"]
    assert results["exact_match,none"] == 1.0 and results["agent_tool_calls"] == 2


def test_sandboxed_tools_need_unsafe_code_in_python():
    from assay.errors import TaskConfigError
    from assay.tasks.config import TaskConfig

    spec = AgentSpec(tools=[command_tool("ls", ["ls"])])
    config = TaskConfig(name="t", prompt_function=lambda r, n: None, hf_repo="json",
                        metrics=["exact_match"], agent=spec)  # fmt: skip
    with pytest.raises(TaskConfigError, match="unsafe_code=True"):
        config.validate()


def test_a_flooding_tool_is_cut_and_says_so():
    from assay.agents.tools import MAX_RESULT_CHARS

    flood = function_tool(lambda n: "x" * n, name="flood")
    done = flood.call(ToolCall.parsed("flood", {"n": MAX_RESULT_CHARS + 5}), {})
    assert done.content.endswith("[... 5 more characters cut]") and not done.error


def test_unknown_tools_are_answered_as_errors_in_the_loop(tmp_path):
    from calc_agent import write_task

    tasks = tmp_path / "tasks"
    write_task(tasks, n_docs=1)

    def calls(body):
        if any(m.get("role") == "tool" for m in body["messages"]):
            return None
        return [("rm_rf", {"path": "/"})]

    with FakeProviders(reply=lambda body: ("9", None), calls=calls) as fake:
        code = main(["run", "--model", "openai-chat", "--model-args",
                     f"model=fake,base_url={fake.openai_url}", "--tasks", "calc_agent",
                     "--include-path", str(tasks), "--output-dir", str(tmp_path / "out"),
                     "--log-samples", "--no-progress"])  # fmt: skip
        assert code == 0
        tool_message = fake.bodies[1]["messages"][2]
    assert tool_message["role"] == "tool" and "no tool named 'rm_rf'" in tool_message["content"]
    results = json.loads((tmp_path / "out" / "results.json").read_text())["results"]["calc_agent"]
    assert results["agent_tool_errors"] == 1 and results["tool_call_match,none"] == 0.0


def test_max_cost_stops_the_loops_and_a_rerun_continues(tmp_path, capsys):
    from calc_agent import write_task

    tasks = tmp_path / "tasks"
    write_task(tasks, n_docs=3)
    script = ScriptedCalculator()
    with FakeProviders(reply=script.reply, calls=script.calls) as fake:
        args = ["run", "--model", "openai-chat", "--model-args",
                f"model=fake,base_url={fake.openai_url},price_in=10000,price_out=0,batch_size=1,num_concurrent=1",
                "--tasks", "calc_agent", "--include-path", str(tasks),
                "--output-dir", str(tmp_path / "out"), "--no-progress"]  # fmt: skip
        assert main([*args, "--max-cost", "0.15"]) != 0
        assert "--max-cost" in capsys.readouterr().err
        sent = len(fake.bodies)
        assert 0 < sent < 9
        assert main([*args, "--max-cost", "100"]) == 0
        assert len(fake.bodies) == 9  # the answers that arrived were not asked again
