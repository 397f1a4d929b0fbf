"""lighteval's code metrics, with every program run in assay's sandbox.

lighteval's LiveCodeBench metric (`lcb.main.CodegenMetric`, reported as
`codegen_pass@1:16`) executes each generation in a fork of the process that scores it: in
assay, that would be assay's own process, with its files, network and keys. assay scores it
here instead, the same way up to the execution: lighteval's own functions extract the code
from each generation and prepare it (`extract_code`; `import_string` before call-based code,
`clean_if_name` and `make_function` for standard-input programs: text transformations, no
code runs), each program runs against the doc's tests in the run's `--sandbox`
(`assay.sandbox.io_tests`, LiveCodeBench's checks), and lighteval's
`compute_metrics_from_results` turns the verdicts into pass@1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

EXECUTES_MODEL_CODE = frozenset({"lighteval.tasks.tasks.lcb.main.CodegenMetric"})
"""lighteval's sample functions that run the model's code (LiveCodeBench's tests): their tasks
need --confirm-run-unsafe-code, as assay's own code tasks do, and assay scores them itself,
each program in its sandbox (this module)."""


def sandboxed_sample_function(metric: Any) -> Callable[..., dict[str, Any]] | None:
    """For a lighteval Metric whose sample function runs programs, assay's sandboxed
    equivalent ((doc, model_response) -> {metric name: value}); None for any other."""
    fn = metric.sample_level_fn
    if f"{type(fn).__module__}.{type(fn).__qualname__}" not in EXECUTES_MODEL_CODE:
        return None

    def compute(*, doc: Any, model_response: Any) -> dict[str, Any]:
        return {metric.metric_name: codegen_pass_at_1(doc, model_response)}

    return compute


def codegen_pass_at_1(doc: Any, model_response: Any) -> float:
    """LiveCodeBench's pass@1 of a doc's generations, each program run in the sandbox."""
    from lighteval.tasks.tasks.lcb.codegen_metrics import (
        clean_if_name,
        compute_metrics_from_results,
        extract_code,
        import_string,
        make_function,
    )

    from assay.sandbox.io_tests import run_io_tests

    specific = doc.specific
    fn_name = specific["fn_name"]
    codes = [extract_code(text) for text in model_response.final_text]
    if fn_name is None:
        prepared = [make_function(clean_if_name(code)) for code in codes]
    else:
        prepared = [import_string + "\n\n" + code for code in codes]
    ran = run_io_tests(prepared, fn_name, specific["inputs"], specific["outputs"])
    # lighteval's encoding: a list per generation, passed when every entry is positive.
    results = {0: [[True] * len(specific["inputs"]) if r.passed else [-1] for r in ran]}
    return float(compute_metrics_from_results(results, k_list=[1])["pass@1"])
