"""`evaluate`'s `code_eval` metric, with every program run in assay's sandbox.

lm-eval's code tasks (mbpp, humaneval and their variants) score with `code_eval`, loaded by
their own Python (`evaluate.load("code_eval")` in the task's utils.py). The hub's metric runs
each program in a forked copy of the calling process: in assay's process, with its files, its
network and its environment. assay hands such a task `SandboxedCodeEval` instead: the same
inputs (`predictions`: per problem a list of candidate programs; `references`: per problem its
test code; `k`, `num_workers`, `timeout`), the same program (candidate, newline, tests), the
same pass@k estimator and the same result structure, with each program run in the run's
`--sandbox` (`assay.sandbox.programs.run_programs`).

What is substituted, and when: `evaluate.load` answers "code_eval" with `SandboxedCodeEval`
while a task module that names code_eval is imported (`serving_task_module`), and
`hf_evaluate: true` / lm-eval's fallback load it the same way (`assay.metrics.hf_evaluate`).
Programs a module passes while it is imported are its own (lm-eval's modules check that the
metric runs), not a model's: they run with the limits alone (`rlimits`), the trust the module
itself has, so importing a task needs no namespace sandbox.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assay.sandbox import SandboxResult

NAMES = ("code_eval", "evaluate-metric/code_eval")
"""What `evaluate.load` is given for the hub's code_eval metric."""

_IMPORTING: ContextVar[bool] = ContextVar("assay_code_eval_importing", default=False)
_PATCH_LOCK = threading.RLock()


class SandboxedCodeEval:
    """Stands in for `evaluate.load("code_eval")`: `compute` as the hub's metric computes,
    programs run in assay's sandbox."""

    name = "code_eval"

    def compute(
        self,
        *,
        predictions: Sequence[Sequence[str]],
        references: Sequence[str],
        k: Sequence[int] = (1, 10, 100),
        num_workers: int = 4,
        timeout: float = 3.0,
    ) -> tuple[dict[str, Any], dict[int, list[tuple[int, dict[str, Any]]]]]:
        """(pass_at_k, results), as code_eval returns them: {"pass@k": mean over problems of
        the unbiased estimate} for each k no problem has fewer candidates than, and per
        problem index its (completion_id, {task_id, passed, result, completion_id}) in order.

        `num_workers` is accepted and not used: the run's sandbox pool (`--sandbox-workers`)
        bounds how many programs run at once."""
        import numpy as np

        from assay.sandbox import SandboxPolicy
        from assay.sandbox.policy import using
        from assay.sandbox.programs import pass_at_k, run_programs

        _check_inputs(predictions, references)
        del num_workers
        owners = [(i, j) for i, cands in enumerate(predictions) for j in range(len(cands))]
        programs = [predictions[i][j] + "\n" + references[i] for i, j in owners]
        if _IMPORTING.get():
            with using(SandboxPolicy("rlimits")):
                ran = run_programs(programs, timeout)
        else:
            ran = run_programs(programs, timeout)
        results: dict[int, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        for (i, j), result in zip(owners, ran, strict=True):
            entry = {"task_id": i, "passed": result.passed, "result": _verdict(result)}
            results[i].append((j, {**entry, "completion_id": j}))
        total = np.array([len(cands) for cands in predictions])
        correct = np.array([sum(r["passed"] for _, r in results[i]) for i in range(len(total))])
        scores = {
            f"pass@{kk}": np.array(
                [pass_at_k(int(n), int(c), kk) for n, c in zip(total, correct, strict=True)]
            ).mean()
            for kk in k
            if (total >= kk).all()
        }
        return scores, results


def _check_inputs(predictions: Sequence[Sequence[str]], references: Sequence[str]) -> None:
    """Refuse what the hub's metric refuses (its features: a list of strings per problem, one
    test string per problem, as many of each)."""
    if len(predictions) != len(references):
        raise ValueError(
            f"code_eval: {len(predictions)} predictions and {len(references)} references; give "
            "one list of candidate programs and one test string per problem."
        )
    for i, (candidates, test) in enumerate(zip(predictions, references, strict=True)):
        if isinstance(candidates, str) or not all(isinstance(c, str) for c in candidates):
            raise ValueError(
                f"code_eval: predictions[{i}] must be a list of candidate programs (strings), "
                f"got {candidates!r:.80}."
            )
        if not isinstance(test, str):
            raise ValueError(f"code_eval: references[{i}] must be test code (a string).")


def _verdict(result: SandboxResult) -> str:
    """code_eval's `result` string: "passed", "timed out" or "failed: why"."""
    if result.passed:
        return "passed"
    if result.timed_out:
        return "timed out"
    if result.outcome in ("killed_by_limit", "blocked"):
        return f"failed: {result.outcome} ({result.detail})"
    lines = result.stderr.strip().splitlines()
    return f"failed: {lines[-1] if lines else f'exit status {result.returncode}'}"


def names_code_eval(module_file: Path) -> bool:
    """Whether a task module's source names code_eval (the only modules worth patching for)."""
    try:
        return "code_eval" in module_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


@contextmanager
def serving_task_module(module_file: Path) -> Iterator[None]:
    """While the task module `module_file` is imported, `evaluate.load("code_eval")` (and a
    `from evaluate import load` taken then) gives `SandboxedCodeEval`; other names go to
    evaluate. Nothing changes for modules that do not name code_eval."""
    if not names_code_eval(module_file):
        yield
        return
    try:
        import evaluate
    except ImportError:  # the module's own `import evaluate` then says what is missing
        yield
        return
    with _PATCH_LOCK:
        original = evaluate.load

        def load(path: str, *args: Any, **kwargs: Any) -> Any:
            if path in NAMES:
                return SandboxedCodeEval()
            return original(path, *args, **kwargs)

        evaluate.load = load
        token = _IMPORTING.set(True)
        try:
            yield
        finally:
            _IMPORTING.reset(token)
            evaluate.load = original


def holds_code_eval(namespace: dict[str, Any]) -> bool:
    """Whether a module's globals hold the sandboxed code_eval (its programs reach the sandbox)."""
    return any(isinstance(value, SandboxedCodeEval) for value in namespace.values())
