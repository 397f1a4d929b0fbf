"""BFCL v4's multi-turn categories as agent tasks over bfcl-eval's simulated APIs.

`bfcl_fc_multi_turn_<category>` (base, miss_func, miss_param, long_context) runs each entry
as bfcl-eval's generation runner runs a function-calling model (`inference_multi_turn_FC`):
the first user turn with the entry's functions as tools; each model turn's calls executed by
bfcl-eval against the conversation's own instances of its API classes, their results given
back as tool messages; a model turn that calls nothing (or whose calls do not decode) closes
the user turn and the next one is asked; at a turn where miss_func held functions out, they
are added to the tools with bfcl-eval's "I have updated some more functions" message; more
than bfcl-eval's step limit of model turns within one user turn ends the conversation.
Every model turn goes through assay's response cache (`run.agents`). The conversation is
scored by bfcl-eval's own evaluation (`assay.metrics.bfcl_multi_turn`).

`bfcl_prompt_multi_turn_<category>` runs it as bfcl-eval runs a prompting model
(`inference_multi_turn_prompting`): bfcl-eval's system prompt lists the functions, no tools
are offered, each model turn's text is decoded by its `default_decode_execute_prompting`,
the results go back in one user message (`format_execution_results_prompting`), and a
miss_func turn lists the added functions in its user message.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

from assay.agents import AgentSpec
from assay.agents.episode import Reply
from assay.agents.tools import ToolOutcome
from assay.catalog.bfcl import OFFLINE, fc_tools, leaderboard_group
from assay.doc import Doc, OutputType
from assay.metrics.bfcl import fc_model_result
from assay.metrics.bfcl_checker import bfcl_eval_module
from assay.metrics.bfcl_multi_turn import (
    MULTI_TURN,
    REFUSED_CALL,
    SimulatedAPIs,
    decode_prompt_step,
    decode_step,
    entries,
    prompt_refusal,
    refusal,
)
from assay.requests.tools import ToolCall, ToolSpec, Turn
from assay.requests.types import Generation
from assay.tasks.config import MetricSpec, TaskConfig
from assay.tasks.lm_eval_yaml import GroupConfig

STEP_LIMIT = 20
"""bfcl-eval 2026.3.23's MAXIMUM_STEP_LIMIT: a user turn whose model turns called tools more
than this many times ends the conversation (force-quit)."""
LOOP_BOUND = (STEP_LIMIT + 1) * 8
"""The agent loop's own bound on model turns: never reached before the step limit, as no
entry has more than 8 user turns."""
_ERROR = "Error during execution"


class BfclEpisode:
    """One multi-turn entry's conversation (`agents.episode.Episode`), in function-calling
    mode (calls as tool calls, results as tool messages) or prompt mode (calls written in the
    text, results sent back in one user message, as bfcl-eval's prompting handler does)."""

    def __init__(self, specific: dict[str, Any]) -> None:
        category, entry_id = str(specific["category"]), str(specific["id"])
        self.prompt_mode = specific.get("mode") == "prompt"
        entry = entries(category)[entry_id]["asked"]
        self.turns: list[list[dict[str, Any]]] = entry["question"]
        self.held_out: dict[str, list[dict[str, Any]]] = entry.get("missed_function", {})
        self.functions = copy.deepcopy(entry["function"])
        self.offered = () if self.prompt_mode else fc_tools(self.functions)
        self.turn = self.steps = 0
        self.apis = SimulatedAPIs(entry, category)

    def tools(self) -> tuple[ToolSpec, ...]:
        return self.offered

    def reply(self, answer: Generation) -> Reply:
        try:
            if self.prompt_mode:
                calls = decode_prompt_step(answer.text)
            else:
                calls = decode_step(
                    fc_model_result(answer.tool_calls, answer.text), self.apis.methods
                )
        except Exception:  # an answer that does not decode closes the turn, as in bfcl-eval
            return self._next_turn()
        empty = bfcl_eval_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils")
        if empty.is_empty_execute_response(calls):
            return self._next_turn()
        self.steps += 1
        stop = "max_steps" if self.steps > STEP_LIMIT else None
        if self.prompt_mode:
            results = [
                (ToolCall(call.split("(", 1)[0], None, call), self._run_written(call))
                for call in calls
            ]
            utils = bfcl_eval_module("bfcl_eval.model_handler.utils")
            sent = utils.format_execution_results_prompting(
                {}, [outcome.content for _, outcome in results], {"model_responses_decoded": calls}
            )
            return Reply(results, results_message=Turn("user", sent), stop=stop)
        results = [
            (call, self._run(call, text))
            for call, text in zip(answer.tool_calls, calls, strict=True)
        ]
        return Reply(results, stop=stop)

    def _run(self, call: ToolCall, text: str) -> ToolOutcome:
        if text == REFUSED_CALL:
            arguments = call.arguments if call.arguments is not None else json.loads(call.raw)
            return self._refused(refusal(call.name, arguments, self.apis.methods))
        return self._execute(text)

    def _run_written(self, text: str) -> ToolOutcome:
        reason = prompt_refusal(text, self.apis.methods)
        return self._refused(reason) if reason is not None else self._execute(text)

    @staticmethod
    def _refused(reason: str | None) -> ToolOutcome:
        return ToolOutcome(f"{_ERROR}: assay does not run this call: {reason}.", True, 0.0)

    def _execute(self, text: str) -> ToolOutcome:
        started = time.perf_counter()
        (result,) = self.apis.run([text])
        return ToolOutcome(result, result.startswith(_ERROR), time.perf_counter() - started)

    def _next_turn(self) -> Reply:
        self.turn += 1
        self.steps = 0
        if self.turn >= len(self.turns):
            return Reply(stop="answer")
        messages = self.turns[self.turn]
        added: tuple[str, ...] = ()
        if str(self.turn) in self.held_out:
            prompts = bfcl_eval_module("bfcl_eval.constants.default_prompts")
            new = self.held_out[str(self.turn)]
            known = {f["name"] for f in self.functions}
            added = tuple(f["name"] for f in new if f["name"] not in known)
            self.functions.extend(copy.deepcopy(new))
            if self.prompt_mode:
                text = prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(
                    functions=new
                )
            else:
                before = {tool.name for tool in self.offered}
                self.offered = fc_tools(self.functions)
                added = tuple(tool.name for tool in self.offered if tool.name not in before)
                text = prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
            messages = [{"role": "user", "content": text}]
        return Reply(user=tuple(Turn(m["role"], m["content"]) for m in messages), tools_added=added)

    def close(self) -> None:
        self.apis.close()


def _loader(category: str) -> Any:
    def load(**_: Any) -> dict[str, list[dict[str, Any]]]:
        rows = [
            {"id": entry_id, "question": entry["asked"]["question"]}
            for entry_id, entry in entries(category).items()
        ]
        return {"test": rows}

    return load


def _prompt(mode: str, category: str) -> Any:
    def prompt(row: dict[str, Any], task_name: str) -> Doc:
        entry = entries(category)[row["id"]]
        messages = copy.deepcopy(row["question"][0])
        if mode == "prompt":
            # bfcl-eval's prompting handler: its system prompt listing the functions first.
            utils = bfcl_eval_module("bfcl_eval.model_handler.utils")
            messages = utils.system_prompt_pre_processing_chat_model(
                messages, entry["asked"]["function"], row["id"]
            )
        first = tuple(Turn(m["role"], m["content"]) for m in messages)
        users = [turn.content for turn in first if turn.role == "user"]
        return Doc(
            query=users[-1] if users else "",
            choices=[json.dumps(entry["ground_truth"])],
            gold_index=0,
            conversation=first,
            tools=fc_tools(entry["asked"]["function"]) if mode == "fc" else (),
            specific={"category": category, "mode": mode, "id": row["id"]},
        )

    return prompt


def _check_installed() -> None:
    bfcl_eval_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker")


EXAMPLE_ROW: dict[str, Any] = {
    "id": "multi_turn_base_example",
    "question": [
        [{"role": "user", "content": "Create a folder named 'temp' in the current directory."}],
        [{"role": "user", "content": "Now list what is in it."}],
    ],
}
"""A BFCL-shaped row of our own, for `assay tasks show` (the real ones come from bfcl-eval)."""


def _task(mode: str, category: str) -> TaskConfig:
    return TaskConfig(
        name=f"bfcl_{mode}_{category}",
        prompt_function=_prompt(mode, category),
        dataset_loader=_loader(category),
        evaluation_splits=("test",),
        metrics=[MetricSpec("bfcl_accuracy")],
        output_type=OutputType.GENERATE_UNTIL,
        generation_kwargs={
            "until": [],
            "do_sample": False,
            "temperature": 0.0,
            "max_gen_toks": 4096,
        },
        num_fewshots=0,
        num_fewshots_fixed=True,
        version=4.0,
        validate_hook=_check_installed,
        example_rows=[EXAMPLE_ROW],
        agent=AgentSpec(
            tools=(), max_turns=LOOP_BOUND, episode=BfclEpisode, offers_tools=mode == "fc"
        ),
    )


TASKS_TABLE = [_task(mode, category) for mode in ("fc", "prompt") for category in MULTI_TURN]

GROUPS = [
    group
    for mode in ("fc", "prompt")
    for group in (
        GroupConfig(
            name=f"bfcl_{mode}_multi_turn",
            tasks=[f"bfcl_{mode}_{category}" for category in MULTI_TURN],
            aggregate_metric_list=[{"metric": "bfcl_accuracy", "weight_by_size": False}],
        ),
        leaderboard_group(f"bfcl_{mode}_overall", mode, (*OFFLINE, *MULTI_TURN), "overall"),
    )
]
"""Per mode, BFCL's multi-turn score (the unweighted mean of its four categories, with the
interval √(Σ se²)/4) and its overall score (`bfcl.leaderboard_scores`)."""
