"""BFCL's multi-turn categories by bfcl-eval's own code: its entries, its simulated APIs
(GorillaFileSystem, TwitterAPI, TradingBot ...) and its evaluation of a conversation.

A conversation is a list of user turns; within a turn the model calls tools step by step,
each step's calls executed by bfcl-eval's `execute_multi_turn_func_call` against the
conversation's own instances of its API classes, until a step calls nothing (or does not
decode). A conversation is judged by bfcl-eval's evaluation runner
(`_evaluate_single_multi_turn_entry`: its force-termination check, then `multi_turn_checker`,
which replays the model's calls and the ground truth on fresh instances and compares their
states and execution results turn by turn), given every step's answer as bfcl-eval's OpenAI
handler records a function-calling model's.

bfcl-eval runs a call by `eval` of the text `name(key=repr(value), ...)`, so a tool name or an
argument name that is not a plain identifier would run whatever the model wrote, and a name
such as `open` would reach Python's builtins. assay passes on only calls whose name is a
function of the conversation's APIs, or a name that nothing answers to (bfcl-eval's own
"not defined" error), with identifiers as argument names; any other call is not run
(docs/bfcl.md, Differences).
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import inspect
import itertools
import json
from collections.abc import Sequence
from typing import Any

from assay.metrics.bfcl_checker import Verdict, bfcl_eval_module, refuse_evaluated_code

MULTI_TURN = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
_UTILS = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils"
REFUSED_CALL = "assay_refused_call()"
"""What the checker replays in place of a call assay does not run: bfcl-eval answers it with
its "not defined" error, as it answers any call to a function that does not exist."""
_names = itertools.count()


@functools.lru_cache(maxsize=4)
def entries(category: str) -> dict[str, dict[str, Any]]:
    """A multi-turn category's entries by id: `asked` as bfcl-eval's generation loads it
    (functions with its language hints, the functions held out per turn), `checked` as its
    evaluation loads it, and the ground truth (per turn, the calls as text)."""
    utils = bfcl_eval_module("bfcl_eval.utils")
    asked = utils.load_dataset_entry(category)
    checked = utils.load_dataset_entry(
        category, include_prereq=False, include_language_specific_hint=False
    )
    truths = utils.load_ground_truth_entry(category)
    return {
        entry["id"]: {"asked": entry, "checked": check, "ground_truth": truth["ground_truth"]}
        for entry, check, truth in zip(asked, checked, truths, strict=True)
    }


def _methods(classes: Sequence[str]) -> frozenset[str]:
    """The public functions of bfcl-eval's API classes: what a model may call."""
    backends = bfcl_eval_module("bfcl_eval.constants.executable_backend_config")
    names: set[str] = set()
    for class_name in classes:
        module = bfcl_eval_module(backends.CLASS_FILE_PATH_MAPPING[class_name])
        cls = getattr(module, class_name)
        names.update(n for n, _ in inspect.getmembers(cls, inspect.isfunction) if n[0] != "_")
    return frozenset(names)


def refusal(name: str, arguments: Any, methods: frozenset[str]) -> str | None:
    """Why assay does not hand a call to bfcl-eval's `eval`, or None when it may (see the
    module): `arguments` as the model's JSON decoded."""
    if not name.isidentifier():
        return f"the function name {name[:80]!r} is not a plain name"
    if name not in methods and (name in vars(builtins) or name in vars(bfcl_eval_module(_UTILS))):
        return f"{name!r} is not a function of this conversation's APIs"
    if isinstance(arguments, dict):
        for key in arguments:
            if not key.isidentifier():
                return f"the argument name {key[:80]!r} is not a plain name"
    return None


def decode_step(model_result: Any, methods: frozenset[str]) -> list[str]:
    """A step's answer (see `assay.metrics.bfcl.fc_model_result`) as the calls bfcl-eval
    executes, by its OpenAI handler's function-calling `decode_execute`; a call assay does not
    run becomes `REFUSED_CALL`. Raises as bfcl-eval does on an answer that does not decode."""
    utils = bfcl_eval_module("bfcl_eval.model_handler.utils")
    calls: list[str] = utils.convert_to_function_call(model_result)
    if not isinstance(model_result, list):
        return calls
    out = []
    for invoked, call in zip(model_result, calls, strict=True):
        name, arguments = next(iter(invoked.items()))
        arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        out.append(REFUSED_CALL if refusal(name, arguments, methods) else call)
    return out


def decode_prompt_step(text: str) -> list[str]:
    """A prompt-mode step's answer (the model's text) as the calls bfcl-eval executes, by its
    prompting handler's `default_decode_execute_prompting` (see `prompt_refusal` for the calls
    assay then does not run). Raises as bfcl-eval does on a text that does not decode, and on
    one whose decoding would evaluate more than arithmetic on constants
    (`assay.metrics.bfcl_checker.refuse_evaluated_code`)."""
    refuse_evaluated_code(text)
    utils = bfcl_eval_module("bfcl_eval.model_handler.utils")
    return list(utils.default_decode_execute_prompting(text))


def prompt_refusal(call: str, methods: frozenset[str]) -> str | None:
    """Why assay does not hand a decoded prompt-mode call (`name(key=value, ...)`) to
    bfcl-eval's `eval`, or None when it may: as `refusal`, and also a call written inside an
    argument (`cd(folder=open(...))`), which `eval` would run first."""
    try:
        node = ast.parse(call, mode="eval").body
    except SyntaxError:
        return "the call is not a Python call"
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return f"{call.split('(', 1)[0][:80]!r} is not a plain name"
    inner = (*node.args, *(k.value for k in node.keywords))
    if any(isinstance(n, ast.Call) for value in inner for n in ast.walk(value)):
        return "an argument holds a call"
    return refusal(node.func.id, {k.arg or "**": None for k in node.keywords}, methods)


class SimulatedAPIs:
    """One conversation's instances of bfcl-eval's API classes, which its calls change.

    bfcl-eval keeps the instances in its execution module's globals, named after a model and
    an entry; each `SimulatedAPIs` takes a name of its own, so conversations (and runs in one
    process) never share state, and `close` removes them."""

    def __init__(self, entry: dict[str, Any], category: str) -> None:
        self.entry, self.category = entry, category
        self.name = f"assay_{next(_names)}"
        self.methods = _methods(entry["involved_classes"])
        self.run([])  # builds the instances from the entry's initial state

    def run(self, calls: list[str]) -> list[str]:
        """Each call's result text, by bfcl-eval's `execute_multi_turn_func_call`."""
        results, _ = bfcl_eval_module(_UTILS).execute_multi_turn_func_call(
            calls,
            self.entry.get("initial_config", {}),
            self.entry["involved_classes"],
            self.name,
            self.entry["id"],
            long_context=self.category == "multi_turn_long_context",
            is_evaL_run=False,
        )
        return list(results)

    def close(self) -> None:
        _forget(self.name)


def _forget(name: str) -> None:
    """Drop the instances bfcl-eval keeps under model name `name`."""
    kept = vars(bfcl_eval_module(_UTILS))
    for key in [k for k in kept if k.startswith(f"{name}_")]:
        del kept[key]


def multi_turn_verdict(
    category: str, entry_id: str, turns: list[list[Any]], mode: str = "fc"
) -> Verdict:
    """bfcl-eval's verdict on a conversation: `turns` holds, per user turn reached, each step's
    answer as `assay.metrics.bfcl.fc_model_result` gives it (`mode` "prompt": its text).

    As bfcl-eval's evaluation runner judges an entry (`_evaluate_single_multi_turn_entry`,
    whose module is not imported: it loads every provider's SDK, 40 s on a busy machine): a
    conversation that did not reach every user turn was force-terminated; otherwise each
    step's answer is decoded (steps that do not decode, or call nothing, are left out) and
    `multi_turn_checker` judges the calls. benchmarks/bfcl_multi_turn.py checks the verdicts
    against the runner itself."""
    checker = bfcl_eval_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker")
    execution = bfcl_eval_module(_UTILS)
    entry = entries(category)[entry_id]
    checked, truth = entry["checked"], entry["ground_truth"]
    if len(turns) != len(truth):
        return Verdict(
            False,
            "multi_turn:force_terminated",
            (f"{len(turns)} of {len(truth)} user turns were reached",),
        )
    methods = _methods(checked["involved_classes"])
    decoded: list[list[list[str]]] = []
    for steps in turns:
        kept = []
        for step in steps:
            try:
                if mode == "prompt":
                    calls = [
                        REFUSED_CALL if prompt_refusal(call, methods) else call
                        for call in decode_prompt_step(step)
                    ]
                else:
                    calls = decode_step(copy.deepcopy(step), methods)
            except Exception:  # as bfcl-eval: a step that does not decode is left out
                continue
            if not execution.is_empty_execute_response(calls):
                kept.append(calls)
        decoded.append(kept)
    name = f"assay_check_{next(_names)}"
    try:
        result = checker.multi_turn_checker(
            decoded, copy.deepcopy(truth), copy.deepcopy(checked), category, name
        )
    finally:
        _forget(name)
    if result["valid"]:
        return Verdict(True)
    return Verdict(
        False, str(result.get("error_type", "")), (str(result.get("error_message", "")),)
    )
