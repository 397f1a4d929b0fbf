"""Hostile tools: a tool that writes outside, connects out, starts programs or reads the
environment's secrets is refused in-process and contained in the sandbox (the code sandbox's
own checks); the same attack succeeding in the rlimits mode shows each attack is real."""

from __future__ import annotations

import importlib
import json
import socket
import threading
from pathlib import Path

import pytest
from calc_agent import ScriptedCalculator, write_task
from fixtures.provider_fakes import FakeProviders

from assay.agents import command_tool, function_tool
from assay.agents.spec import agent_spec_from_yaml
from assay.cli.main import main
from assay.errors import TaskConfigError
from assay.requests.tools import ToolCall
from assay.sandbox.policy import SandboxPolicy, using

CHECKOUT = Path(__file__).resolve().parents[2]
SECRET = "hunter2-assay-tool-secret"

HOSTILE = '''
import os
import socket
import subprocess


def write_outside(path: str) -> str:
    """Write a file where the caller says."""
    with open(path, "w") as handle:
        handle.write("pwned")
    return "wrote " + path


def connect_out(port: int) -> str:
    """Connect to a port of this machine."""
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    return "connected"


def read_secret(name: str) -> str:
    """Read an environment variable."""
    return os.environ.get(name, "absent")


def spawn(word: str) -> str:
    """Start a program."""
    return subprocess.run(["echo", word], capture_output=True, text=True).stdout


def write_from_a_thread(path: str) -> str:
    """Write a file from a thread of its own."""
    import threading

    refused = []

    def work():
        try:
            with open(path, "w") as handle:
                handle.write("pwned")
        except OSError as exc:
            refused.append(str(exc))

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    return refused[0] if refused else "wrote " + path


def count(step: int, state: dict) -> int:
    """Add to the sample's counter."""
    print("noise the tool prints")
    state["n"] = state.get("n", 0) + step
    return state["n"]
'''


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "hostile_tools.py").write_text(HOSTILE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("ASSAY_TOOL_SECRET", SECRET)
    module = importlib.import_module("hostile_tools")
    yield module
    importlib.sys.modules.pop("hostile_tools", None)


@pytest.fixture
def listener():
    """A TCP server on 127.0.0.1 counting the connections it accepts."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join(timeout=5)
    server.close()


def call(tool, **arguments):
    return tool.call(ToolCall.parsed(tool.spec.name, arguments), {})


def test_in_process_tools_may_not_write_connect_or_start_programs(hostile, listener, tmp_path):
    port, accepted = listener
    target = tmp_path / "outside.txt"
    written = call(function_tool(hostile.write_outside), path=str(target))
    assert written.error and "writes the file" in written.content
    assert "sandbox: true" in written.content and not target.exists()
    connected = call(function_tool(hostile.connect_out), port=port)
    assert connected.error and "network" in connected.content and accepted == []
    spawned = call(function_tool(hostile.spawn), word="hi")
    assert spawned.error and "starts a program" in spawned.content
    threaded = call(function_tool(hostile.write_from_a_thread), path=str(target))
    assert "writes the file" in threaded.content and not target.exists()
    # Outside a tool's call nothing is guarded: the test itself writes and connects.
    target.write_text("fine")
    socket.create_connection(("127.0.0.1", port), timeout=2).close()


@pytest.mark.parametrize(
    ("mode", "contained"), [("bwrap", True), ("rlimits", False)], ids=["bwrap", "rlimits"]
)
def test_sandboxed_function_tools_are_contained(hostile, listener, tmp_path, mode, contained):
    port, accepted = listener
    target = tmp_path / "outside.txt"
    with using(SandboxPolicy(mode)):
        written = call(function_tool(hostile.write_outside, sandbox=True), path=str(target))
        connected = call(function_tool(hostile.connect_out, sandbox=True), port=port)
        secret = call(function_tool(hostile.read_secret, sandbox=True), name="ASSAY_TOOL_SECRET")
    assert SECRET not in secret.content  # no mode passes the caller's environment on
    if contained:
        assert written.error and not target.exists()
        assert connected.error and "blocked" in connected.content and accepted == []
    else:  # the attacks are real: the rlimits mode lets them through
        assert not written.error and target.read_text() == "pwned"
        assert (connected.content, len(accepted)) == ("connected", 1)


def test_a_sandboxed_function_tool_changes_the_state_and_its_prints_are_not_its_answer(hostile):
    tool = function_tool(hostile.count, sandbox=True)
    state = {"n": 40}
    with using(SandboxPolicy("bwrap")):
        done = tool.call(ToolCall.parsed("count", {"step": 2}), state)
    assert (done.content, done.error, state) == ("42", False, {"n": 42})
    assert tool.sandboxed and tool.spec.parameters["required"] == ["step"]


def test_command_tools_run_in_the_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_TOOL_SECRET", SECRET)
    target = tmp_path / "touched"
    with using(SandboxPolicy("bwrap")):
        touched = call(command_tool("touch", ["touch", "{path}"]), path=str(target))
        read = call(command_tool("cat", ["cat", "{path}"]), path=str(CHECKOUT / "pyproject.toml"))
        env = call(command_tool("env", ["env"]))
    assert touched.error and not target.exists()
    assert read.error and "[project]" not in read.content
    assert not env.error and SECRET not in env.content and "PATH=" in env.content


def test_sandbox_is_declared_on_function_tools_in_yaml(hostile):
    spec = agent_spec_from_yaml(
        {"tools": [{"function": hostile.count, "sandbox": True}]}, "task.yaml"
    )
    assert spec.sandboxed
    with pytest.raises(TaskConfigError, match="'sandbox' is true or false"):
        agent_spec_from_yaml({"tools": [{"function": hostile.count, "sandbox": "yes"}]}, "t")
    with pytest.raises(TaskConfigError, match="on a 'function' tool only"):
        agent_spec_from_yaml({"tools": [{"name": "ls", "command": ["ls"], "sandbox": False}]}, "t")


def test_a_task_with_sandboxed_function_tools_scores_as_in_process(tmp_path):
    tasks = tmp_path / "tasks"
    path = write_task(tasks, n_docs=2)
    text = path.read_text(encoding="utf-8")
    for name in ("add", "multiply"):
        text = text.replace(
            f"- function: !function calc_tools.{name}\n",
            f"- function: !function calc_tools.{name}\n        sandbox: true\n",
        )
    path.write_text(text, encoding="utf-8")
    script = ScriptedCalculator()
    with FakeProviders(reply=script.reply, calls=script.calls) as fake:
        args = [
            "run", "--model", "openai-chat", "--model-args",
            f"model=fake,base_url={fake.openai_url}", "--tasks", "calc_agent",
            "--include-path", str(tasks), "--output-dir", str(tmp_path / "out"), "--no-progress",
        ]  # fmt: skip
        assert main(args) == 2  # its tools run programs: consent is asked
        assert fake.bodies == []
        assert main([*args, "--confirm-run-unsafe-code"]) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())["results"]["calc_agent"]
    assert results["exact_match,none"] == 1.0 and results["end_state,none"] == 1.0
    assert results["agent_tool_errors"] == 0
