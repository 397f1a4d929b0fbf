"""Metrics of the Hugging Face `evaluate` library (lm-eval's `hf_evaluate: true`, and its
fallback for a metric name no registry knows).

lm-eval calls such a metric once per doc, as `compute(references=[gold], predictions=[answer],
**options)`, and keeps the entry of the returned dict named like the metric. The module is
loaded when the task's metrics are built, before any model: offline, a metric that is not in
the `evaluate` cache fails there, with the command that caches it.

lm-eval's fallback (`lm_eval.api.registry.get_metric`): a `metric_list` name that is not in its
registry is handed to `evaluate.load(name)`; when that fails lm-eval logs an error and goes on
without the metric. assay takes the same fallback for lm-eval YAMLs, says so on stderr, and
refuses the task when the load fails.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assay.errors import ConfigError


def load_evaluate_metric(name: str, known: Sequence[str] | None = None) -> Any:
    """The `compute` function of `evaluate.load(name)`.

    `known` is given for lm-eval's fallback (a name no registry has): the refusal then says the
    name may be a typo, with the closest of these metric names."""
    why = (
        f"hf_evaluate: true loads it with evaluate.load({name!r})"
        if known is None
        else f"neither assay's nor lm-eval's, so lm-eval's fallback evaluate.load({name!r}) serves it"
    )
    from assay.sandbox.code_eval import NAMES, SandboxedCodeEval

    if name in NAMES:  # model-written programs run in assay's sandbox, not in this process
        return SandboxedCodeEval().compute
    try:
        import evaluate
    except ImportError:
        raise ConfigError(
            f"{why}, which needs the evaluate package; install it with "
            "pip install 'assay[evaluate]'."
        ) from None
    local = _local_script(name)
    if local is not None:
        print(
            f"assay: metric {name!r}: evaluate.load imports {local} from the directory assay "
            "was started in, as it does for lm-eval: that file is Python, and its top level "
            "runs in this process as it imports, not sandboxed. Start assay elsewhere if you "
            "do not trust it.",
            file=sys.stderr,
        )
    try:
        return evaluate.load(name).compute
    except Exception as exc:  # the library's own reasons (offline, unknown name) are kept
        typo = ""
        if known is not None:
            close = difflib.get_close_matches(name, list(known), n=3)
            typo = (
                "If the name is a typo, use a metric assay knows"
                f"{' (closest: ' + ', '.join(close) + ')' if close else ''}. "
            )
        reason = str(exc).rstrip(".")
        raise ConfigError(
            f"{why}, and evaluate.load({name!r}) failed: {type(exc).__name__}: {reason}. "
            f"{typo}An evaluate metric's code comes from the Hugging Face hub; on a machine "
            f'with network, cache it once with python -c "import evaluate; '
            f"evaluate.load('{name}')\" (it lands in ~/.cache/huggingface), then run offline "
            "with HF_EVALUATE_OFFLINE=1; or put the metric's script in a local folder NAME/NAME.py "
            "(evaluate.load looks there first)."
        ) from None


def _local_script(name: str) -> Path | None:
    """The script `evaluate.load(name)` imports from the current directory, if there is one
    (a NAME.py path, or a folder NAME holding NAME.py: evaluate looks there before the hub)."""
    path = Path(name)
    script = path if name.endswith(".py") else path / f"{path.name}.py"
    return script.resolve() if script.is_file() else None
