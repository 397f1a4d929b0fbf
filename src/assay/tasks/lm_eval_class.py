"""lm-eval's Python-class tasks (`class: !function module.Class` in a YAML), run through
lm-eval's own Task API.

The class decides everything a YAML would: its docs (`eval_docs`), each doc's prompt
(`fewshot_context`), the requests (`construct_requests`), the per-doc scores
(`process_results`), how they aggregate (`aggregation`) and their direction
(`higher_is_better`). assay keeps the rest: the requests go through assay's executor and model,
the results and samples are written in the usual layout.

The task object is built as lm-eval's task factory builds it (`cls(config=...)` when the
constructor takes a config, else `cls()`), on first use: building loads its data, so listing
and `validate --no-data` only import the class. Its metrics are read from the class without
data (`aggregation`/`higher_is_better` on an unbuilt instance); a class that needs its data for
them is refused with that reason.

Requests the adapter carries: one `generate_until` per doc (its `until` and `max_gen_toks`),
or `loglikelihood` requests sharing one context (scored like multiple choice, whose results
are lm-eval's (logprob, is_greedy) pairs). Anything else is refused, naming what was asked.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assay.doc import Doc, OutputType
from assay.errors import DataError, TaskConfigError
from assay.tasks._yaml_io import FunctionRef
from assay.tasks.config import MetricSpec, TaskConfig

INSTALL = "pip install 'assay[lm-eval-tasks]'"

LM_EVAL_FEWSHOT_SEED = 1234
"""lm-eval's default `fewshot_random_seed` (simple_evaluate)."""

EVAL_SPLIT = "eval_docs"
"""The split name of a class task's docs: lm-eval's `eval_docs` (its test docs when it has
them, else its validation docs), known only once the class is built."""

_OUTPUT_TYPES = {
    "generate_until": OutputType.GENERATE_UNTIL,
    "loglikelihood": OutputType.MULTIPLE_CHOICE,
    "multiple_choice": OutputType.MULTIPLE_CHOICE,
}
"""lm-eval's output type of a class -> how assay asks for it (loglikelihood requests sharing a
context are one multiple-choice doc)."""

_GREEDY = {"do_sample": False, "temperature": 0, "temperature_": 0.0}
"""Generation settings that say what assay does anyway (greedy decoding)."""


def _resolved(value: Any) -> Any:
    """A YAML value with every `!function` replaced by what it names (as lm-eval loads it)."""
    if isinstance(value, FunctionRef):
        return value.resolve()
    if isinstance(value, dict):
        return {k: _resolved(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolved(v) for v in value]
    return value


class LmEvalClassTask:
    """One class task's lm-eval object, built on first use."""

    def __init__(self, cls: type, raw: dict[str, Any], where: str) -> None:
        self.cls, self.raw, self.where = cls, raw, where
        self._task: Any = None
        self._lock = threading.Lock()

    @property
    def task(self) -> Any:
        """The lm-eval Task object (built, with its data, the first time)."""
        with self._lock:
            if self._task is None:
                self._task = self._build()
            return self._task

    def _build(self) -> Any:
        config = {k: _resolved(v) for k, v in self.raw.items() if k not in ("tag", "group")}
        init = getattr(self.cls, "__init__", None)
        takes_config = bool(init and "config" in inspect.signature(init).parameters)
        try:
            task = self.cls(config=config) if takes_config else self.cls()
        except Exception as exc:  # the class's own reasons (its dataset, its arguments)
            raise DataError(
                f"{self.where}: building lm-eval's {self.cls.__name__} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if hasattr(task, "config") and hasattr(task.config, "task"):
            task.config.task = self.raw["task"]
        # lm-eval's evaluator seeds the few-shot sampler before building requests (its
        # default seed); Task.fewshot_context refuses to run without it.
        task.set_fewshot_seed(seed=LM_EVAL_FEWSHOT_SEED)
        return task

    def splits(self, **_: Any) -> dict[str, list[dict[str, Any]]]:
        """The dataset loader: the docs lm-eval evaluates (`eval_docs`)."""
        return {EVAL_SPLIT: list(self.task.eval_docs)}

    def doc(self, row: dict[str, Any], task_name: str) -> Doc:
        """The prompt function: the doc as lm-eval asks for it."""
        task = self.task
        num_fewshot = getattr(task.config, "num_fewshot", None) or 0
        context = task.fewshot_context(row, num_fewshot, gen_prefix=task.doc_to_prefix(row))
        # The keywords lm-eval's Task.build_all_requests passes (no chat template: assay
        # applies its own to the prompt).
        instances = task.construct_requests(
            doc=row,
            ctx=context,
            metadata=(task_name, 0, 1),
            apply_chat_template=False,
            chat_template=None,
        )
        if not isinstance(instances, list):
            instances = [instances]
        kinds = sorted({inst.request_type for inst in instances})
        if kinds == ["generate_until"] and len(instances) == 1:
            return self._generation(row, *instances[0].arguments)
        contexts = {inst.arguments[0] for inst in instances}
        if kinds == ["loglikelihood"] and len(contexts) == 1:
            return Doc(
                query=str(contexts.pop()),
                choices=[str(inst.arguments[1]) for inst in instances],
                gold_index=0,
                row=row,
            )
        raise DataError(
            f"{self.where}: {type(task).__name__}.construct_requests asks for "
            f"{len(instances)} request(s) of type(s) {', '.join(kinds)}"
            f"{' with different contexts' if len(contexts) > 1 else ''}; assay's adapter for "
            "lm-eval class tasks carries one generate_until request per doc, or loglikelihood "
            "requests sharing one context. Run this task with lm-eval itself."
        )

    def _generation(self, row: dict[str, Any], context: str, settings: dict[str, Any]) -> Doc:
        other = {k: v for k, v in settings.items() if k not in ("until", "max_gen_toks")}
        unsupported = {k: v for k, v in other.items() if _GREEDY.get(k, object()) != v}
        if unsupported:
            raise DataError(
                f"{self.where}: construct_requests asks for generation settings {unsupported}; "
                "assay's adapter for lm-eval class tasks carries until and max_gen_toks "
                "(decoding is greedy). Run this task with lm-eval itself."
            )
        until = settings.get("until")
        return Doc(
            query=str(context),
            choices=[str(self.task.doc_to_target(row))],
            gold_index=0,
            stop_sequences=[until] if isinstance(until, str) else until,
            generation_size=settings.get("max_gen_toks"),
            row=row,
        )

    def process_results(self, row: dict[str, Any], results: list[Any]) -> dict[str, Any]:
        """lm-eval's per-doc scores of the doc's results (one per request, in order)."""
        values: dict[str, Any] = self.task.process_results(row, results)
        return values


def _metrics(cls: type, where: str) -> list[MetricSpec]:
    """The class's metrics, read without data: name, aggregation, higher_is_better."""
    unbuilt: Any = object.__new__(cls)
    try:
        aggregation: dict[str, Callable[..., Any]] = cls.aggregation(unbuilt)  # type: ignore[attr-defined]
        higher: dict[str, bool] = cls.higher_is_better(unbuilt)  # type: ignore[attr-defined]
    except Exception as exc:
        raise TaskConfigError(
            f"{where}: {cls.__name__}.aggregation()/higher_is_better() need the task built with "
            f"its data ({type(exc).__name__}: {exc}); assay reads a class task's metrics before "
            "loading any data, so this class is not supported. Run it with lm-eval itself."
        ) from None
    import lm_eval.api.metrics  # noqa: F401  (fills lm-eval's aggregation registry)
    from lm_eval.api.registry import AGGREGATION_REGISTRY

    # lm-eval's own aggregations (its `mean`) by name: assay's of that name give the same
    # value and lm-eval's standard error; any other function is called as it is.
    registered = {function: name for name, function in AGGREGATION_REGISTRY.items()}
    return [
        MetricSpec(
            name, aggregation=registered.get(function, function), higher_is_better=higher.get(name)
        )
        for name, function in aggregation.items()
    ]


def class_task_config(raw: dict[str, Any], path: Path) -> TaskConfig:
    """The TaskConfig of an lm-eval YAML with `class:`, served by `LmEvalClassTask`."""
    name = raw.get("task")
    where = f"{path} (task {name!r})"
    if not isinstance(name, str) or not name:
        raise TaskConfigError(f"{path}: 'task' must be the task's name (a non-empty string).")
    try:
        from lm_eval.api.task import Task as LmEvalTask
    except ImportError:
        raise TaskConfigError(
            f"{where}: 'class' tasks run through lm-eval's own Task API, which needs the "
            f"lm-eval package; install it with {INSTALL}."
        ) from None
    ref = raw.get("class")
    cls = ref.resolve() if isinstance(ref, FunctionRef) else ref
    if not (isinstance(cls, type) and issubclass(cls, LmEvalTask)):
        raise TaskConfigError(
            f"{where}: 'class' must name an lm-eval Task subclass (class: !function "
            f"module.ClassName), got {cls!r}."
        )
    kind = raw.get("output_type") or getattr(cls, "OUTPUT_TYPE", None) or "generate_until"
    output_type = _OUTPUT_TYPES.get(kind)
    if output_type is None:
        raise TaskConfigError(
            f"{where}: {cls.__name__} asks for {kind} requests; assay's adapter for lm-eval "
            f"class tasks carries {', '.join(_OUTPUT_TYPES)}. Run this task with lm-eval itself."
        )
    adapter = LmEvalClassTask(cls, raw, where)
    tags = raw.get("tag") or []
    return TaskConfig(
        name=name,
        prompt_function=adapter.doc,
        metrics=_metrics(cls, where),
        process_results=adapter.process_results,
        dataset_loader=adapter.splits,
        evaluation_splits=(EVAL_SPLIT,),
        output_type=output_type,
        num_fewshots=0,
        num_fewshots_fixed=True,
        instruction_in_query=False,
        target_delimiter="",
        version=getattr(cls, "VERSION", "Yaml"),
        alias=raw.get("task_alias"),
        tags=[tags] if isinstance(tags, str) else list(tags),
        unsafe_code=bool(raw.get("unsafe_code", getattr(cls, "UNSAFE_CODE", False))),
        source=str(path),
        raw_config=raw,
    )
