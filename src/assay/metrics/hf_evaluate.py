"""Metrics of the Hugging Face `evaluate` library (lm-eval's `hf_evaluate: true`).

lm-eval calls such a metric once per doc, as `compute(references=[gold], predictions=[answer],
**options)`, and keeps the entry of the returned dict named like the metric. The module is
loaded when the task's metrics are built, before any model: offline, a metric that is not in
the `evaluate` cache fails there, with the command that caches it.
"""

from __future__ import annotations

from typing import Any

from assay.errors import ConfigError


def load_evaluate_metric(name: str) -> Any:
    """The `compute` function of `evaluate.load(name)`."""
    try:
        import evaluate
    except ImportError:
        raise ConfigError(
            f"metric {name!r} has hf_evaluate: true, which needs the evaluate package; install "
            "it with pip install 'assay[evaluate]'."
        ) from None
    try:
        return evaluate.load(name).compute
    except Exception as exc:  # the library's own reasons (offline, unknown name) are kept
        raise ConfigError(
            f"metric {name!r} (hf_evaluate): evaluate.load({name!r}) failed: "
            f"{type(exc).__name__}: {exc}. The metric's code comes from the Hugging Face hub; "
            f'on a machine with network, cache it once with python -c "import evaluate; '
            f"evaluate.load('{name}')\" (it lands in ~/.cache/huggingface), then run offline "
            "with HF_EVALUATE_OFFLINE=1."
        ) from None
