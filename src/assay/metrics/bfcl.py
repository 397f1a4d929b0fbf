"""BFCL's verdict on one answer, by the official `bfcl-eval` package's own checker.

An answer is what a model returned for one BFCL entry: tool calls (function-calling mode) or
text (prompt mode). It is decoded as bfcl-eval decodes an OpenAI model's answer (each call's
arguments text through `json.loads`; text through `default_decode_ast_prompting`), then judged
as bfcl-eval's evaluation runner judges it: relevance and irrelevance by whether a function
call decodes, every other category by `ast_checker` (type coercion, possible-answer matching)
against the entry's functions and ground truth. Nothing of the checker is rewritten here.

bfcl-eval pins numpy 1.26.4 and other packages that clash with assay's environment: it lives
in an environment of its own (`make bfcl-venv`), and this module imports it only when a BFCL
answer is scored.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from assay.errors import ConfigError
from assay.metrics.base import Metric, SampleInput, register_metric
from assay.metrics.bfcl_checker import Verdict, bfcl_eval_module, refuse_evaluated_code
from assay.metrics.bfcl_multi_turn import MULTI_TURN, multi_turn_verdict
from assay.requests.tools import ToolCall

FC_CHECKER_MODEL = "gpt-5-mini-2025-08-07-FC"
"""The bfcl-eval model whose configuration the function-calling checker runs under: an OpenAI
function-calling model, whose tools are sent with "." in names written "_" (as assay sends
them), so the checker reads the model's "_" back as "."."""
PROMPT_CHECKER_MODEL = "gpt-5-mini-2025-08-07"
"""The bfcl-eval model whose configuration the prompt-mode checker runs under (names kept)."""


def fc_model_result(calls: Sequence[ToolCall], text: str) -> list[dict[str, str]] | str:
    """An answer as bfcl-eval's OpenAI handler records a function-calling model's: one
    {name: arguments text} per call, or the text when the model called nothing. A call's
    arguments text is what the model wrote (`raw`), or its parsed arguments when no text
    was kept."""
    if not calls:
        return text
    return [{call.name: call.raw or (call.arguments_json or "")} for call in calls]


def _decode(model_result: Any, mode: str, language: Any) -> Any:
    """bfcl-eval's OpenAI handler's `decode_ast`, for `mode` "fc" or "prompt"."""
    if mode == "prompt":
        utils = bfcl_eval_module("bfcl_eval.model_handler.utils")
        if language.value == "python":
            refuse_evaluated_code(model_result)
        return utils.default_decode_ast_prompting(model_result, language, False)
    decoded = []
    for invoked in model_result:
        name = next(iter(invoked.keys()))
        decoded.append({name: json.loads(invoked[name])})
    return decoded


def verdict(
    category: str,
    mode: str,
    model_result: Any,
    functions: list[dict[str, Any]],
    ground_truth: list[Any] | None,
) -> Verdict:
    """bfcl-eval's verdict on `model_result` (see `fc_model_result`; prompt mode: the text) for
    an entry of `category` offering `functions` (without language hints, as bfcl-eval's
    evaluation loads them), with its `ground_truth` (None for relevance and irrelevance)."""
    enums = bfcl_eval_module("bfcl_eval.constants.enums")
    checker_utils = bfcl_eval_module("bfcl_eval.utils")
    if "relevance" in category:
        try:
            decoded = _decode(model_result, mode, enums.ReturnFormat.PYTHON)
            called = not checker_utils.is_empty_output(decoded)
        except Exception:
            called = False
        if ("irrelevance" in category) != called:
            return Verdict(True)
        if "irrelevance" in category:
            return Verdict(False, "irrelevance_error:decoder_success")
        return Verdict(False, "relevance_error:decoder_failed")
    language, return_format = _language(category, enums)
    try:
        decoded = _decode(model_result, mode, return_format)
    except Exception as exc:
        return Verdict(False, "ast_decoder:decoder_failed", (f"{type(exc).__name__}: {exc}",))
    if not checker_utils.is_function_calling_format_output(decoded):
        return Verdict(False, "ast_decoder:decoder_wrong_output_format")
    ast_checker = bfcl_eval_module("bfcl_eval.eval_checker.ast_eval.ast_checker").ast_checker
    model = FC_CHECKER_MODEL if mode == "fc" else PROMPT_CHECKER_MODEL
    # The checker may change what it is given; the doc's copies stay as the dataset has them.
    result = ast_checker(
        copy.deepcopy(functions), decoded, copy.deepcopy(ground_truth), language, category, model
    )
    if result["valid"]:
        return Verdict(True)
    return Verdict(False, result["error_type"], tuple(str(e) for e in result["error"]))


def _language(category: str, enums: Any) -> tuple[Any, Any]:
    """The checker's language and decoding format of a category (bfcl-eval's ast_file_runner)."""
    if category.endswith("java"):
        return enums.Language.JAVA, enums.ReturnFormat.JAVA
    if category.endswith("javascript"):
        return enums.Language.JAVASCRIPT, enums.ReturnFormat.JAVASCRIPT
    return enums.Language.PYTHON, enums.ReturnFormat.PYTHON


@register_metric("bfcl_accuracy")
def bfcl_accuracy(**unknown: Any) -> Metric:
    """BFCL accuracy: 1.0 when bfcl-eval's checker accepts the answer, else 0.0.

    Reads the doc's `specific` as the BFCL tasks write it: `category`, `mode` ("fc" or
    "prompt"), `functions` and `ground_truth`; for a multi-turn category, `id` (the
    conversation is read from the sample's transcript)."""
    if unknown:
        raise ConfigError(f"bfcl_accuracy takes no arguments, got {sorted(unknown)}.")

    def sample_fn(sample: SampleInput) -> float:
        spec = sample.doc.specific or {}
        mode = spec["mode"]
        if spec["category"] in MULTI_TURN:
            return 1.0 if _multi_turn(spec, sample).valid else 0.0
        text = sample.response if isinstance(sample.response, str) else ""
        model_result = fc_model_result(sample.tool_calls, text) if mode == "fc" else text
        judged = verdict(
            spec["category"], mode, model_result, spec["functions"], spec["ground_truth"]
        )
        return 1.0 if judged.valid else 0.0

    return Metric("bfcl_accuracy", sample_fn, "mean", True)


def _multi_turn(spec: dict[str, Any], sample: SampleInput) -> Verdict:
    """A multi-turn conversation's verdict from its transcript: per user turn, each model
    turn's answer as bfcl-eval's OpenAI handler records it (prompt mode: its text)."""
    if sample.transcript is None:
        raise ConfigError(f"bfcl_accuracy: BFCL's {spec['category']} scores an agent transcript.")
    mode = spec.get("mode", "fc")
    turns = [
        [text if mode == "prompt" else fc_model_result(calls, text) for text, calls in answers]
        for answers in sample.transcript.answers_by_user_turn()
    ]
    return multi_turn_verdict(spec["category"], spec["id"], turns, mode)
