"""AgentSpec: what an agent task offers the model and how long its loop may run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assay.agents.episode import EpisodeFactory
from assay.agents.tools import AgentTool, command_tool, function_tool, sandboxed_tool
from assay.errors import TaskConfigError
from assay.requests.tools import ToolSpec

LIMITS = ("max_turns", "max_tokens", "max_seconds")


@dataclass(frozen=True)
class AgentSpec:
    """An agent task's tools and limits (`TaskConfig.agent`).

    The loop stops when the model answers without calling a tool, or when a limit is reached:
    `max_turns` model turns, `max_tokens` generated tokens over all turns, `max_seconds` of
    model and tool time (as first measured, so a resumed run stops where the first would
    have). The run's --max-cost stops every loop alike.
    """

    tools: Sequence[AgentTool]
    max_turns: int = 10
    max_tokens: int | None = None
    max_seconds: float | None = None
    tool_choice: str | None = None
    """Sent with every turn: auto, none, required or a tool's name (None: the provider's
    default)."""
    state_field: str | None = None
    """Dataset field holding the sample's initial state (a mapping) that tools may change."""
    episode: EpisodeFactory | None = None
    """A task that drives the conversation itself (user turns, tools per turn, calls run
    against its own simulated APIs): `agents.episode`. `tools` is then unused."""
    offers_tools: bool = True
    """The model is offered tools (a backend that takes none is refused); False for an
    episode whose model writes its calls in its text (BFCL's prompt mode)."""

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(tool.spec for tool in self.tools)

    @property
    def sandboxed(self) -> bool:
        """Some tool runs in the sandbox (the task then needs --confirm-run-unsafe-code)."""
        return any(tool.sandboxed for tool in self.tools)

    def check(self, where: str) -> None:
        """Refuse what no loop could honour, naming the field."""
        if not self.tools and self.episode is None:
            raise TaskConfigError(f"{where}: 'agent.tools' is empty; declare at least one tool.")
        names = [tool.spec.name for tool in self.tools]
        doubled = sorted({n for n in names if names.count(n) > 1})
        if doubled:
            raise TaskConfigError(f"{where}: 'agent.tools' names {doubled[0]!r} twice.")
        if not isinstance(self.max_turns, int) or self.max_turns < 1:
            raise TaskConfigError(
                f"{where}: 'agent.max_turns' must be a whole number >= 1, got {self.max_turns!r}."
            )
        for name in ("max_tokens", "max_seconds"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
            ):
                raise TaskConfigError(
                    f"{where}: 'agent.{name}' must be a positive number, got {value!r}."
                )
        if self.tool_choice is not None and self.tool_choice not in (
            "auto", "none", "required", *names
        ):  # fmt: skip
            raise TaskConfigError(
                f"{where}: 'agent.tool_choice' is {self.tool_choice!r}; use auto, none, "
                f"required or a tool's name ({', '.join(names)})."
            )


_TOOL_KEYS = {
    "function", "code", "command", "name", "description", "parameters", "timeout_s", "sandbox"
}  # fmt: skip


def agent_spec_from_yaml(raw: Any, where: str) -> AgentSpec:
    """`metadata.agent` of a YAML task: `tools` (each a `function: !function module.fn`, or
    `code:` Python defining run(**arguments), or `command: [argv]`, both run in the sandbox,
    with `name`, `description`, `parameters`; `sandbox: true` runs a function in the sandbox
    too), and the limits."""
    if not isinstance(raw, Mapping):
        raise TaskConfigError(f"{where}: 'metadata.agent' must be a mapping, got {raw!r}.")
    known = {"tools", "tool_choice", "state_field", *LIMITS}
    for key in raw:
        if key not in known:
            raise TaskConfigError(
                f"{where}: unknown key 'metadata.agent.{key}'. Valid: {', '.join(sorted(known))}."
            )
    tools = raw.get("tools") or []
    if not isinstance(tools, list):
        raise TaskConfigError(f"{where}: 'metadata.agent.tools' must be a list of tools.")
    spec = AgentSpec(
        tools=[
            _tool(entry, f"{where}: metadata.agent.tools[{i}]") for i, entry in enumerate(tools)
        ],
        max_turns=raw.get("max_turns", 10),
        max_tokens=raw.get("max_tokens"),
        max_seconds=raw.get("max_seconds"),
        tool_choice=raw.get("tool_choice"),
        state_field=raw.get("state_field"),
    )
    spec.check(where)
    return spec


def _tool(entry: Any, where: str) -> AgentTool:
    if not isinstance(entry, Mapping):
        raise TaskConfigError(f"{where}: a tool must be a mapping, got {entry!r}.")
    unknown = sorted(set(entry) - _TOOL_KEYS)
    if unknown:
        raise TaskConfigError(
            f"{where}: unknown key {unknown[0]!r}. Valid: {', '.join(sorted(_TOOL_KEYS))}."
        )
    kinds = [k for k in ("function", "code", "command") if k in entry]
    if len(kinds) != 1:
        raise TaskConfigError(
            f"{where}: give exactly one of 'function' (!function module.fn), 'code' (Python "
            f"defining run(**arguments)) or 'command' (a list of words); got {kinds or 'none'}."
        )
    parameters = entry.get("parameters")
    if parameters is not None and not isinstance(parameters, Mapping):
        raise TaskConfigError(f"{where}: 'parameters' must be a JSON Schema object (a mapping).")
    description = entry.get("description")
    timeout = entry.get("timeout_s", 10.0)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout < float("inf")
    ):
        raise TaskConfigError(
            f"{where}: 'timeout_s' must be a number of seconds above 0, got {timeout!r}."
        )
    sandbox = entry.get("sandbox", False)
    if not isinstance(sandbox, bool) or (kinds != ["function"] and "sandbox" in entry):
        raise TaskConfigError(
            f"{where}: 'sandbox' is true or false, on a 'function' tool only ('code' and "
            f"'command' tools always run in the sandbox); got {sandbox!r}."
        )
    if kinds == ["function"]:
        function = entry["function"]
        function = function.resolve() if hasattr(function, "resolve") else function
        if not callable(function):
            raise TaskConfigError(f"{where}: 'function' must be a !function, got {function!r}.")
        return function_tool(
            function, name=entry.get("name"), description=description, parameters=parameters,
            sandbox=sandbox, timeout_s=float(timeout),
        )  # fmt: skip
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise TaskConfigError(f"{where}: a '{kinds[0]}' tool needs a 'name'.")
    if kinds == ["code"]:
        if not isinstance(entry["code"], str):
            raise TaskConfigError(f"{where}: 'code' must be Python source defining run().")
        return sandboxed_tool(
            name, entry["code"], description=description or "", parameters=parameters,
            timeout_s=float(timeout),
        )  # fmt: skip
    argv = entry["command"]
    if not isinstance(argv, list) or not argv or not all(isinstance(w, str) for w in argv):
        raise TaskConfigError(f"{where}: 'command' must be a non-empty list of strings.")
    return command_tool(
        name, argv, description=description or "", parameters=parameters,
        timeout_s=float(timeout),
    )  # fmt: skip
