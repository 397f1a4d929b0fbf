"""Agent tasks: a model that calls tools over several turns until it answers.

A task declares its tools and limits (`AgentSpec`, `TaskConfig.agent`; YAML tasks under
`metadata: {agent: ...}`); the run's agent stage (`run.agents`) asks the model, runs the
tools it calls, gives it their results and asks again, until it answers without calling a
tool or a limit is reached. Every model turn goes through the response cache, so a killed run
resumes without asking anything twice. Each sample keeps its whole `Transcript`.
"""

from assay.agents.spec import AgentSpec, agent_spec_from_yaml
from assay.agents.tools import AgentTool, command_tool, function_tool, sandboxed_tool
from assay.agents.transcript import Transcript, replay_lines

__all__ = [
    "AgentSpec",
    "AgentTool",
    "Transcript",
    "agent_spec_from_yaml",
    "command_tool",
    "function_tool",
    "replay_lines",
    "sandboxed_tool",
]
