"""lm-eval task YAML -> TaskConfig, rendering prompts exactly as lm-eval 0.4.13 does."""

from __future__ import annotations

import ast
import functools
import logging
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.doc import Doc, OutputType
from assay.errors import DataError, TaskConfigError
from assay.metrics.base import metric_role
from assay.tasks._yaml_io import FunctionRef
from assay.tasks.config import MetricSpec, TaskConfig

if TYPE_CHECKING:
    import jinja2

log = logging.getLogger(__name__)

DEFAULT_METRICS = {
    OutputType.LOGLIKELIHOOD: ["perplexity", "acc"],
    OutputType.MULTIPLE_CHOICE: ["acc", "acc_norm"],
    OutputType.LOGLIKELIHOOD_ROLLING: ["word_perplexity", "byte_perplexity", "bits_per_byte"],
    OutputType.GENERATE_UNTIL: ["exact_match"],
}

TASK_KEYS = {
    "task", "task_alias", "tag", "class", "dataset_path", "dataset_name", "dataset_kwargs",
    "custom_dataset", "training_split", "validation_split", "test_split", "fewshot_split",
    "process_docs", "doc_to_text", "doc_to_target", "doc_to_choice", "gen_prefix", "description",
    "target_delimiter", "fewshot_delimiter", "fewshot_config", "num_fewshot", "output_type",
    "generation_kwargs", "repeats", "filter_list", "metric_list", "process_results", "metadata",
    "unsafe_code", "should_decontaminate", "doc_to_decontamination_query", "use_prompt",
    "doc_to_image", "doc_to_audio", "group", "group_alias", "aggregate_metric_list",
}  # fmt: skip
IGNORED_WITH_WARNING = {"should_decontaminate", "doc_to_decontamination_query"}
UNSUPPORTED = {
    "use_prompt": "promptsource prompts need the promptsource package and the network; write doc_to_text/doc_to_target instead",
    "doc_to_audio": "no assay backend takes audio (hf-multimodal, openai-chat and vllm take images); evaluate audio tasks with lm-eval's hf-audiolm, or drop doc_to_audio for a text-only variant",
}
FEWSHOT_KEYS = {
    "sampler", "split", "samples", "fewshot_indices", "process_docs", "doc_to_text",
    "doc_to_choice", "doc_to_target", "gen_prefix", "target_delimiter", "fewshot_delimiter",
}  # fmt: skip


def _regex_replace(string: str, pattern: str, repl: str, count: int = 0) -> str:
    return re.sub(pattern, repl, string, count=count)


_MAX_BUILT = 10_000_000
"""The most characters (or items) a template's `*` may build."""
_MAX_POWER = 10_000
"""The largest exponent a template's `**` may take."""
_MAX_RANGE_ITEMS = 1_000_000
"""The most items all of one render's `range()` calls may yield together (nested loops over
`range(100000)` would spin for hours; lm-eval's templates count a few choices)."""
_RANGE_USED = threading.local()


@functools.cache
def _environment() -> jinja2.Environment:
    """lm-eval's template environment (StrictUndefined, trailing newlines kept, its
    regex_replace filter, Jinja's default filters and globals), sandboxed: a task file is data,
    so a template may read its row but not reach Python (`cycler.__init__.__globals__.os`) nor
    change the objects it is given."""
    import jinja2  # lazily: listing tasks renders nothing
    from jinja2.compiler import CodeGenerator, Frame
    from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range

    class _BoundedConcat(CodeGenerator):
        """`a ~ b` builds its string through the environment's `concat`, which bounds it."""

        def visit_Concat(self, node: jinja2.nodes.Concat, frame: Frame) -> None:
            self.write("environment.concat((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

    def bounded_range(*args: int) -> range:
        built = safe_range(*args)
        used = getattr(_RANGE_USED, "items", 0) + len(built)
        _RANGE_USED.items = used
        if used > _MAX_RANGE_ITEMS:
            raise jinja2.exceptions.SecurityError(
                f"range() calls yielding more than {_MAX_RANGE_ITEMS:,} items in one render "
                "are refused"
            )
        return built

    class _Bounded(ImmutableSandboxedEnvironment):
        """Jinja's sandbox bounds `range`; this also bounds what `*` and `**` build, so a
        template cannot spell out a gigabyte prompt (`'x' * 10**9`)."""

        intercepted_binops = frozenset({"*", "**", "+"})
        code_generator_class = _BoundedConcat

        def concat(self, parts: Iterable[str]) -> str:
            """Jinja joins a template's output with this too: it bounds the prompt as well."""
            texts = [str(part) for part in parts]
            if sum(map(len, texts)) > _MAX_BUILT:
                raise jinja2.exceptions.SecurityError(
                    f"a concatenation of more than {_MAX_BUILT:,} characters is refused"
                )
            return "".join(texts)

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "**" and isinstance(right, int) and abs(right) > _MAX_POWER:
                raise jinja2.exceptions.SecurityError(f"a power above {_MAX_POWER} is refused")
            if (
                operator == "+"
                and isinstance(left, str | list | tuple)
                and isinstance(right, str | list | tuple)
                and len(left) + len(right) > _MAX_BUILT
            ):
                raise jinja2.exceptions.SecurityError(
                    f"a concatenation of more than {_MAX_BUILT:,} items is refused"
                )
            if operator == "*" and isinstance(left, int) and not isinstance(right, int):
                left, right = right, left
            if (
                operator == "*"
                and isinstance(left, str | list | tuple)
                and isinstance(right, int)
                and len(left) * right > _MAX_BUILT
            ):
                raise jinja2.exceptions.SecurityError(
                    f"a repetition of more than {_MAX_BUILT:,} items is refused"
                )
            return super().call_binop(context, operator, left, right)

    env = _Bounded(
        loader=jinja2.BaseLoader(), undefined=jinja2.StrictUndefined, keep_trailing_newline=True
    )
    env.filters["regex_replace"] = _regex_replace
    env.globals["range"] = bounded_range
    return env


@functools.lru_cache(maxsize=4096)
def _template(source: str) -> jinja2.Template:
    """A compiled template; lm-eval trees repeat the same template across many tasks."""
    return _environment().from_string(source)


_MUTATORS = frozenset(
    {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem",
     "sort", "reverse", "add", "discard", "__setitem__"}
)  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _outside_reach(source: str) -> str | None:
    """What in `source` reaches past the row it renders, read off the template itself (an
    attribute or key starting with `_`, the `attr` filter, a call of a mutating method), so a
    task file is refused when it loads (`assay validate --no-data` included), not only once a
    row renders; None when nothing does. The sandbox still guards every render."""
    from jinja2 import nodes

    for node in _environment().parse(source).find_all((nodes.Getattr, nodes.Getitem, nodes.Filter)):
        if isinstance(node, nodes.Getattr) and node.attr.startswith("_"):
            return f"the attribute {node.attr!r}"
        if (
            isinstance(node, nodes.Getitem)
            and isinstance(node.arg, nodes.Const)
            and isinstance(node.arg.value, str)
            and node.arg.value.startswith("_")
        ):
            return f"the key {node.arg.value!r}"
        if isinstance(node, nodes.Filter) and node.name == "attr":
            return "the attr filter"
        if isinstance(node, nodes.Filter) and (found := _private_attribute(node.kwargs)):
            return found
    for call in _environment().parse(source).find_all(nodes.Call):
        if isinstance(call.node, nodes.Getattr) and call.node.attr in _MUTATORS:
            return f"a call of {call.node.attr}()"
        if found := _private_attribute(call.kwargs):
            return found
    for const in _environment().parse(source).find_all(nodes.Const):
        field = _FORMAT_REACH.search(const.value) if isinstance(const.value, str) else None
        if field is not None:
            return f"the format field {field.group(0)!r}"
    return None


def _private_attribute(kwargs: list[Any]) -> str | None:
    """`attribute='...'` (map, join, sum, sort ...) naming a part that starts with `_`."""
    for kwarg in kwargs:
        value = getattr(kwarg.value, "value", None)
        if (
            kwarg.key == "attribute"
            and isinstance(value, str)
            and any(part.startswith("_") for part in value.split("."))
        ):
            return f"attribute={value!r}"
    return None


_FORMAT_REACH = re.compile(r"\{[^{}]*(\.|\[)_[^{}]*\}")
"""A str.format field that reaches an attribute or key starting with `_` ("{0.__class__}")."""


@dataclass
class GroupConfig:
    """An lm-eval group: subtasks plus how their metrics aggregate."""

    name: str
    tasks: list[Any]
    """Subtask names, tags, or {task: name, ...overrides} / inline group mappings."""
    alias: str | None = None
    aggregate_metric_list: list[dict[str, Any]] = field(default_factory=list)
    version: Any = None
    overrides: dict[str, Any] = field(default_factory=dict)
    """Other keys: task settings pushed down to every child."""
    source: str = ""


_PLAIN_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class _Field:
    """One doc_to_* setting, compiled once: feature name, Jinja template, list, dict or function."""

    def __init__(self, key: str, value: Any, where: str) -> None:
        self.key, self.value, self.where = key, value, where
        self.template: jinja2.Template | None = None
        self.variable: str | None = None
        """The field name of a template that is just `{{ name }}`: Jinja renders it as str()."""
        if isinstance(value, FunctionRef):
            self.value = value.resolve()
        elif isinstance(value, str):
            import jinja2

            try:
                self.template = _template(value)
            except jinja2.TemplateSyntaxError as exc:
                raise TaskConfigError(
                    f"{where}: '{key}' is not a valid Jinja template: {exc.message} (line {exc.lineno})."
                ) from None
            reach = _outside_reach(value)
            if reach is not None:
                raise TaskConfigError(
                    f"{where}: '{key}' template reaches outside the row it renders ({reach}); "
                    "templates render in a sandbox that refuses Python internals and changes to "
                    "the data. Use a `!function` for logic that needs them."
                )
            plain = _PLAIN_VARIABLE.fullmatch(value)
            self.variable = plain.group(1) if plain else None

    def check_column(self, row: dict[str, Any]) -> None:
        """Refuse a value that reads as a column name (an identifier, no template) the row
        lacks, listing the columns: called where the value, taken as literal text, failed."""
        if isinstance(self.value, str) and self.value.isidentifier() and self.value not in row:
            raise DataError(
                f"{self.where}: {self.key} {self.value!r} names no column of the data; its "
                f"columns are {sorted(row)}. Give a column's name, or a template such as "
                f"'{{{{{sorted(row)[0] if row else 'column'}}}}}'."
            )

    def render(self, row: dict[str, Any]) -> Any:
        value = self.value
        if isinstance(value, str):
            if value in row:
                return row[value]
            if self.variable is not None and self.variable in row:
                return str(row[self.variable])
            import jinja2

            _RANGE_USED.items = 0  # each render has its own range() budget
            try:
                return self.template.render(**row)  # type: ignore[union-attr]
            except jinja2.UndefinedError as exc:
                raise DataError(
                    f"{self.where}: '{self.key}' template failed: {exc.message}; row keys: {sorted(row)}"
                ) from None
            except jinja2.exceptions.SecurityError as exc:
                raise TaskConfigError(
                    f"{self.where}: '{self.key}' template was refused by the sandbox it "
                    f"renders in ({exc}); templates may not reach Python internals, change the "
                    "data or build unbounded text or loops. Use a `!function` for logic that "
                    "needs them."
                ) from None
        if callable(value):
            return value(row)
        return value


def _target_value(text: Any, has_choices: bool) -> Any:
    """lm-eval's post-processing of a rendered doc_to_target."""
    if not isinstance(text, str):
        return text
    if text.isdigit() and has_choices:
        # int() gives literal_eval's value for plain ASCII numbers; anything else (leading
        # zeros, other scripts' digits) goes through literal_eval, as lm-eval does.
        if text.isascii() and (text[0] != "0" or text == "0"):
            return int(text)
        return ast.literal_eval(text)
    if len(text) >= 2 and text[0] == "[" and text[-1] == "]":
        try:
            return ast.literal_eval(text)
        except (SyntaxError, ValueError):
            return text
    return text


class _DocBuilder:
    """The prompt function of a YAML task: row -> Doc, lm-eval semantics."""

    def __init__(
        self, raw: dict[str, Any], output_type: OutputType, where: str, *, fewshot: dict[str, Any]
    ) -> None:
        pick = lambda k: fewshot.get(k, raw.get(k))  # noqa: E731
        self.output_type, self.where = output_type, where
        self.text = (
            _Field("doc_to_text", pick("doc_to_text"), where)
            if pick("doc_to_text") is not None
            else None
        )
        self.target = (
            _Field("doc_to_target", pick("doc_to_target"), where)
            if pick("doc_to_target") is not None
            else None
        )
        choice = pick("doc_to_choice")
        if isinstance(choice, dict):
            choice = list(choice.values())
        self.choice = _Field("doc_to_choice", choice, where) if choice is not None else None
        self.description = (
            _Field("description", raw["description"], where) if raw.get("description") else None
        )
        prefix = pick("gen_prefix")
        self.gen_prefix = _Field("gen_prefix", prefix, where) if prefix is not None else None
        self.image = _image_field(raw.get("doc_to_image"), where)
        if output_type == OutputType.MULTIPLE_CHOICE and self.choice is None:
            raise TaskConfigError(f"{where}: output_type multiple_choice needs 'doc_to_choice'.")

    def __call__(self, row: dict[str, Any], task_name: str) -> Doc:
        choices = None
        if self.choice is not None:
            choices = self.choice.render(row)
            if isinstance(choices, str):
                try:
                    choices = ast.literal_eval(choices)
                except (SyntaxError, ValueError):
                    self.choice.check_column(row)
                    raise DataError(
                        f"{self.where}: doc_to_choice rendered {choices!r}, not a list."
                    ) from None
            if isinstance(choices, dict):
                choices = list(choices.values())
            if not isinstance(choices, list | tuple):
                raise DataError(
                    f"{self.where}: doc_to_choice must give a list, got {type(choices).__name__}."
                )
            choices = [str(c) for c in choices]
        text = self.text.render(row) if self.text else ""
        if (
            isinstance(text, str)
            and text.isdigit()
            and choices is not None
            and self.text
            and self.text.template is not None
            and self.text.value not in row
        ):
            text = ast.literal_eval(text)
        raw_target = self.target.render(row) if self.target else ""
        target = (
            _target_value(raw_target, choices is not None)
            if self.target and self.target.template is not None and self.target.value not in row
            else raw_target
        )
        specific: dict[str, Any] = {"target": str(target)}
        if self.gen_prefix is not None:
            specific["gen_prefix"] = self.gen_prefix.render(row)
        instruction = self.description.render(row) if self.description else None
        common: dict[str, Any] = dict(
            instruction=instruction or None, specific=specific, row=row, original_query=None
        )
        if self.image is not None:
            common["images"] = _images_of(self.image, row)
        out = self.output_type
        if out == OutputType.LOGLIKELIHOOD_ROLLING:
            return Doc(query=str(target), choices=[], **common)
        if out == OutputType.LOGLIKELIHOOD:
            return Doc(query=str(text), choices=[str(target)], gold_index=0, **common)
        if out == OutputType.MULTIPLE_CHOICE:
            assert choices is not None
            if isinstance(text, int):  # multiple input: choices are contexts, target is shared
                return Doc(
                    query="",
                    choices=choices,
                    gold_index=text,
                    shared_continuation=str(target),
                    **common,
                )
            return Doc(
                query=str(text),
                choices=choices,
                gold_index=self._gold(target, choices, row),
                **common,
            )
        # generate_until
        if choices is not None and not isinstance(target, list):
            golds = [choices[self._gold(target, choices, row)]]
        elif isinstance(target, list):
            golds = [str(t) for t in target]
        else:
            golds = [str(target)]
        return Doc(
            query=str(text),
            choices=golds,
            gold_index=list(range(len(golds))) if len(golds) > 1 else 0,
            **common,
        )

    def _gold(self, target: Any, choices: list[str], row: dict[str, Any]) -> int | list[int]:
        if isinstance(target, list):
            bad = [t for t in target if not isinstance(t, int) or t >= len(choices)]
            if not bad:
                return target
        elif isinstance(target, int) and 0 <= target < len(choices):
            return target
        elif isinstance(target, str) and target in choices:
            return choices.index(target)
        if self.target is not None and target == self.target.value:
            self.target.check_column(row)
        # The row itself is printed by the caller (Task.make_doc), once.
        raise DataError(
            f"{self.where}: doc_to_target gave {target!r}, which is not an index into or a member of "
            f"the {len(choices)} choices {choices}."
        )


ImageField = _Field | list["ImageField"]
"""doc_to_image compiled: a feature name, template or function, or a list of them."""


def _image_field(value: Any, where: str) -> ImageField | None:
    """doc_to_image as lm-eval reads it: a feature name, a template that renders a Python
    literal, a !function, or a list of any of these."""
    if value is None:
        return None
    if isinstance(value, list):
        return [f for f in (_image_field(v, where) for v in value) if f is not None]
    if not isinstance(value, str | FunctionRef) and not callable(value):
        raise TaskConfigError(
            f"{where}: 'doc_to_image' must be a feature name, a template, a !function or a "
            f"list of them, got {type(value).__name__} {value!r}."
        )
    return _Field("doc_to_image", value, where)


def _images_of(image: ImageField, row: dict[str, Any]) -> list[Any]:
    """The row's images (lm-eval's Task.doc_to_image): a list field gives one entry per
    element, None entries dropped; a template's text is read as a Python literal."""
    if isinstance(image, list):
        found = [_images_of(f, row) for f in image]
        return [x for sub in found for x in sub]
    value = image.render(row)
    if image.template is not None and not (isinstance(image.value, str) and image.value in row):
        # A template (not a feature name): lm-eval evaluates its text as a Python literal.
        value = ast.literal_eval(value) if isinstance(value, str) else value
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _function_or(value: Any) -> Any:
    return value.resolve() if isinstance(value, FunctionRef) else value


def _metric_specs(raw: dict[str, Any], output_type: OutputType, where: str) -> list[MetricSpec]:
    entries = raw.get("metric_list")
    if entries is None:
        return [MetricSpec(name) for name in DEFAULT_METRICS[output_type]]
    if not isinstance(entries, list):
        raise TaskConfigError(f"{where}: 'metric_list' must be a list of {{metric: ...}} entries.")
    specs = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or "metric" not in entry:
            raise TaskConfigError(
                f"{where}: metric_list[{i}] must be a mapping with a 'metric' key, got {entry!r}."
            )
        entry = dict(entry)
        metric = entry.pop("metric")
        aggregation = _function_or(entry.pop("aggregation", None))
        higher = entry.pop("higher_is_better", None)
        scored_by_name = (
            isinstance(metric, str)
            and output_type != OutputType.GENERATE_UNTIL
            and raw.get("process_results") is None
        )
        if scored_by_name and entry:
            # lm-eval scores these output types by metric name and never reads the options
            # (`weight_by_size` on acc, `average` on f1, hf_evaluate ...): tolerated, said once.
            log.warning(
                "%s: metric_list[%d] (%s): option(s) %s are ignored for %s tasks, as lm-eval "
                "ignores them.",
                where,
                i,
                metric,
                ", ".join(sorted(entry)),
                output_type.value,
            )
            entry = {}
        if (
            isinstance(metric, str)
            and not entry.get("hf_evaluate")
            and output_type == OutputType.GENERATE_UNTIL
            and raw.get("process_results") is None
            and _scores_choices(metric)
        ):
            specs.append(_passthrough_spec(metric, entry, aggregation, higher, where, i))
            continue
        hf_evaluate = bool(entry.pop("hf_evaluate", False))
        if hf_evaluate and not isinstance(metric, str):
            raise TaskConfigError(
                f"{where}: metric_list[{i}] has hf_evaluate: true, so 'metric' must be the name "
                f"of an evaluate metric, got {metric!r}."
            )
        for flag in ("ignore_case", "ignore_punctuation", "ignore_numbers"):
            value = entry.get(flag)
            if isinstance(value, str) and value.strip().lower().startswith("true"):
                # A malformed YAML value lm-eval reads as true (any non-empty string is).
                log.warning(
                    "%s: metric_list[%d] (%s): %s is the string %r, read as true as lm-eval "
                    "reads it; write `%s: true`.",
                    where,
                    i,
                    metric,
                    flag,
                    value,
                    flag,
                )
                entry[flag] = True
        if isinstance(metric, FunctionRef):
            specs.append(
                MetricSpec(
                    metric.dotted.rsplit(".", 1)[-1], entry, aggregation, higher, metric.resolve()
                )
            )
        elif isinstance(metric, str):
            specs.append(MetricSpec(metric, entry, aggregation, higher, hf_evaluate=hf_evaluate))
        else:
            raise TaskConfigError(
                f"{where}: metric_list[{i}].metric must be a name or !function, got {metric!r}."
            )
    return specs


def _scores_choices(metric: str) -> bool:
    """A metric of choices (acc, f1 ...): lm-eval registers these as pass-through functions of
    (gold, prediction) pairs; on generated text it calls them with the pair alone (its keyword
    call fails), so the task's aggregation receives the pairs and every option is dropped."""
    return metric_role(metric).output_type == OutputType.MULTIPLE_CHOICE


def _gold_and_prediction(references: list[Any], predictions: list[Any], **_: Any) -> list[Any]:
    """lm-eval's pass-through metric on a generated answer: [gold, prediction]."""
    return [references[0], predictions[0]]


def _passthrough_spec(
    metric: str, options: dict[str, Any], aggregation: Any, higher: Any, where: str, i: int
) -> MetricSpec:
    if aggregation is None or aggregation == "mean":
        raise TaskConfigError(
            f"{where}: metric_list[{i}] ({metric}) on a generate_until task gives lm-eval's "
            "(gold, prediction) pairs, which only an aggregation function can score; set "
            "'aggregation: !function ...', or use exact_match."
        )
    if options:
        log.warning(
            "%s: metric_list[%d] (%s): option(s) %s are ignored on generate_until tasks, as "
            "lm-eval ignores them; the aggregation receives (gold, prediction) pairs.",
            where,
            i,
            metric,
            ", ".join(sorted(options)),
        )
    return MetricSpec(metric, {}, aggregation, higher, _gold_and_prediction)


def _filter_specs(
    raw: dict[str, Any], where: str
) -> list[tuple[str, list[tuple[Any, dict[str, Any]]]]]:
    entries = raw.get("filter_list")
    if entries is None:
        return [("none", [("take_first", {})])]
    if not isinstance(entries, list):
        raise TaskConfigError(f"{where}: 'filter_list' must be a list of {{name, filter}} entries.")
    out = []
    for i, entry in enumerate(entries):
        if (
            not isinstance(entry, dict)
            or "name" not in entry
            or not isinstance(entry.get("filter"), list)
        ):
            raise TaskConfigError(
                f"{where}: filter_list[{i}] needs 'name' and a 'filter' list, got {entry!r}."
            )
        steps = []
        for j, step in enumerate(entry["filter"]):
            if not isinstance(step, dict) or "function" not in step:
                raise TaskConfigError(
                    f"{where}: filter_list[{i}].filter[{j}] needs a 'function' key, got {step!r}."
                )
            kwargs = {k: _function_or(v) for k, v in step.items() if k != "function"}
            steps.append((_function_or(step["function"]), kwargs))
        out.append((str(entry["name"]), steps))
    return out


def resolve_data_files(files: Any, yaml_dir: Path) -> Any:
    """Relative data file paths made relative to `yaml_dir`, the folder of the task file that
    names them (a path that exists only relative to the working directory is kept)."""

    def fix(p: Any) -> Any:
        if isinstance(p, str) and not Path(p).is_absolute() and "://" not in p:
            local = yaml_dir / p
            if local.exists() or not Path(p).exists():
                return str(local)
        return p

    if isinstance(files, dict):
        return {k: [fix(x) for x in v] if isinstance(v, list) else fix(v) for k, v in files.items()}
    if isinstance(files, list):
        return [fix(x) for x in files]
    return fix(files)


def _cluster_key(metadata: dict[str, Any], where: str) -> str | None:
    key = metadata.get("cluster_key")
    if key is not None and (not isinstance(key, str) or not key):
        raise TaskConfigError(
            f"{where}: 'metadata.cluster_key' must name a dataset field (a string), got {key!r}."
        )
    return key


def _judges(metadata: dict[str, Any]) -> dict[str, Any]:
    """The task's own judge models (`metadata: {judge_model: ..., judge_model_args: {...}}`),
    checked with the rest of the config by TaskConfig.validate()."""
    names = ("judge_model", "judge_model_args", "second_judge_model", "second_judge_model_args")
    return {name: metadata[name] for name in names if name in metadata}


def _agent(metadata: dict[str, Any], where: str) -> Any:
    """The task's agent loop (`metadata: {agent: {tools: [...], max_turns: ...}}`), or None."""
    if "agent" not in metadata:
        return None
    from assay.agents.spec import agent_spec_from_yaml

    return agent_spec_from_yaml(metadata["agent"], where)


def _metadata(raw: dict[str, Any], where: str) -> dict[str, Any]:
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise TaskConfigError(f"{where}: 'metadata' must be a mapping, got {metadata!r}.")
    return dict(metadata)


def task_config_from_yaml(raw: dict[str, Any], path: Path) -> TaskConfig:
    """Build a TaskConfig from a merged (includes resolved) lm-eval task mapping."""
    from assay.tasks.runtime_guard import loading_task

    where = f"task {raw.get('task')!r} ({path})"  # as TaskConfig.where() gives it
    with loading_task(where, bool(raw.get("unsafe_code", False))):
        return _task_config(raw, path)


def _task_config(raw: dict[str, Any], path: Path) -> TaskConfig:
    where = f"{path}"
    name = raw.get("task")
    if not isinstance(name, str) or not name:
        raise TaskConfigError(f"{where}: 'task' must be the task's name (a non-empty string).")
    where = f"{path} (task {name!r})"
    if "class" in raw:  # lm-eval's Python-class task: its own Task API serves it
        from assay.tasks.lm_eval_class import class_task_config

        return class_task_config(raw, path)
    for key in raw:
        if key in UNSUPPORTED:
            raise TaskConfigError(f"{where}: '{key}' is not supported: {UNSUPPORTED[key]}.")
        if key in IGNORED_WITH_WARNING:
            log.warning("%s: '%s' is ignored (assay does not decontaminate).", where, key)
        elif key not in TASK_KEYS:
            import difflib

            valid = sorted(TASK_KEYS - {"group", "group_alias", "aggregate_metric_list"})
            close = difflib.get_close_matches(str(key), valid, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise TaskConfigError(
                f"{where}: unknown key '{key}'.{hint} Valid keys: {', '.join(valid)}."
            )
    try:
        output_type = OutputType(raw.get("output_type", "generate_until"))
    except ValueError:
        raise TaskConfigError(
            f"{where}: output_type {raw.get('output_type')!r} is not one of {[o.value for o in OutputType]}."
        ) from None
    fewshot = raw.get("fewshot_config") or {}
    if not isinstance(fewshot, dict):
        raise TaskConfigError(f"{where}: 'fewshot_config' must be a mapping.")
    for key in fewshot:
        if key not in FEWSHOT_KEYS:
            raise TaskConfigError(
                f"{where}: unknown fewshot_config key '{key}'. Valid: {', '.join(sorted(FEWSHOT_KEYS))}."
            )
    sampler = fewshot.get("sampler", "default")
    selector = (
        {"default": "lm_eval", "first_n": "first_n"}.get(sampler)
        if isinstance(sampler, str)
        else None
    )
    if selector is None:
        raise TaskConfigError(
            f"{where}: fewshot_config.sampler {sampler!r} is not supported; use 'default' or 'first_n'."
        )
    for key in ("target_delimiter", "fewshot_delimiter", "description"):
        if key in raw and raw[key] is not None and not isinstance(raw[key], str):
            raise TaskConfigError(
                f"{where}: '{key}' must be a string, got {type(raw[key]).__name__}."
            )
    yaml_dir = path.parent
    if not isinstance(raw.get("dataset_kwargs") or {}, dict):
        raise TaskConfigError(
            f"{where}: 'dataset_kwargs' must be a mapping (e.g. data_files: {{test: test.jsonl}}), "
            f"got {type(raw['dataset_kwargs']).__name__}."
        )
    dataset_kwargs = dict(raw.get("dataset_kwargs") or {})
    data_files = dataset_kwargs.pop("data_files", None)
    revision = dataset_kwargs.pop("revision", None)
    test, validation, train = (
        raw.get("test_split"),
        raw.get("validation_split"),
        raw.get("training_split"),
    )
    eval_split = test or validation
    if eval_split is None:
        raise TaskConfigError(
            f"{where}: set 'test_split' or 'validation_split' (the split to evaluate)."
        )
    explicit_fewshot_split = fewshot.get("split") or raw.get("fewshot_split")
    fewshot_split = explicit_fewshot_split or train or validation or test
    generation_kwargs = raw.get("generation_kwargs")
    if generation_kwargs is not None and not isinstance(generation_kwargs, dict):
        raise TaskConfigError(f"{where}: 'generation_kwargs' must be a mapping.")
    repeats = raw.get("repeats", 1)
    if not isinstance(repeats, int) or repeats < 1:
        raise TaskConfigError(f"{where}: 'repeats' must be a positive integer, got {repeats!r}.")
    num_fewshot = raw.get("num_fewshot")
    if num_fewshot is not None and (not isinstance(num_fewshot, int) or num_fewshot < 0):
        raise TaskConfigError(
            f"{where}: 'num_fewshot' must be a non-negative integer, got {num_fewshot!r}."
        )
    metadata = _metadata(raw, where)
    samples = fewshot.get("samples")
    indices = fewshot.get("fewshot_indices")
    custom = raw.get("custom_dataset")
    if custom is not None and not isinstance(custom, FunctionRef):
        raise TaskConfigError(f"{where}: 'custom_dataset' must be a !function.")
    tags = raw.get("tag") or []
    config = TaskConfig(
        name=name,
        prompt_function=_DocBuilder(raw, output_type, where, fewshot={}),
        hf_repo=raw.get("dataset_path"),
        hf_subset=raw.get("dataset_name"),
        metrics=_metric_specs(raw, output_type, where),
        hf_data_files=resolve_data_files(data_files, yaml_dir) if data_files is not None else None,
        hf_revision=revision,
        evaluation_splits=(eval_split,),
        few_shots_split=fewshot_split if samples is None else None,
        few_shots_select=selector,
        fewshot_drop_equal=explicit_fewshot_split == test,
        num_samples=repeats,
        version=metadata.get("version", "Yaml"),
        num_fewshots=num_fewshot or 0,
        num_fewshots_fixed=num_fewshot == 0,
        instruction_in_query=False,
        output_type=output_type,
        target_delimiter=raw.get("target_delimiter", " "),
        fewshot_delimiter=raw.get("fewshot_delimiter", "\n\n"),
        fewshot_prompt_function=_DocBuilder(raw, output_type, where, fewshot=fewshot)
        if any(
            k in fewshot for k in ("doc_to_text", "doc_to_target", "doc_to_choice", "gen_prefix")
        )
        else None,
        fewshot_target_delimiter=fewshot.get("target_delimiter"),
        fewshot_fewshot_delimiter=fewshot.get("fewshot_delimiter"),
        fewshot_samples=_function_or(samples),
        generation_kwargs=dict(generation_kwargs) if generation_kwargs is not None else None,
        filters=_filter_specs(raw, where),
        process_docs=_function_or(raw.get("process_docs")),
        fewshot_process_docs=_function_or(fewshot.get("process_docs")),
        process_results=_function_or(raw.get("process_results")),
        dataset_loader=custom.resolve() if custom is not None else None,
        dataset_kwargs=dataset_kwargs,
        alias=raw.get("task_alias"),
        tags=[tags] if isinstance(tags, str) else list(tags),
        metadata=metadata,
        cluster_key=_cluster_key(metadata, where),
        **_judges(metadata),
        agent=_agent(metadata, where),
        unsafe_code=bool(raw.get("unsafe_code", False)),
        source=str(path),
        raw_config=raw,
    )
    if config.agent is not None and config.agent.sandboxed:
        config.unsafe_code = True  # its tools run programs: consent and the sandbox's notice
    if not config.unsafe_code:
        from assay.tasks.code_routes import code_route

        # A task whose metrics run programs through code_eval executes model-written code,
        # whatever its YAML says: it needs the consent flag and gets the sandbox's notice.
        config.unsafe_code = code_route(config).route == "code_eval"
        if config.unsafe_code:
            from assay.tasks.runtime_guard import own_files, trust_files

            trust_files(own_files(config))
    if indices is not None:
        config.fewshot_process_docs = _subset(
            indices, config.fewshot_process_docs or config.process_docs
        )
    for fn_key in ("process_docs", "process_results"):
        value = getattr(config, fn_key)
        if value is not None and not callable(value):
            raise TaskConfigError(f"{where}: '{fn_key}' must be a !function, got {value!r}.")
    return config


def _subset(indices: list[int], process: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    def pick(rows: Any) -> list[dict[str, Any]]:
        rows = process(rows) if process else rows
        return [rows[i] for i in indices]

    return pick


def group_config_from_yaml(raw: dict[str, Any], path: Path) -> GroupConfig:
    """Build a GroupConfig from a group YAML mapping."""
    name = raw.get("group")
    if not isinstance(name, str) or not name:
        raise TaskConfigError(f"{path}: 'group' must be the group's name.")
    tasks = raw.get("task")
    if not isinstance(tasks, list) or not tasks:
        raise TaskConfigError(
            f"{path} (group {name!r}): 'task' must be a non-empty list of subtasks."
        )
    aggregate = raw.get("aggregate_metric_list") or []
    if isinstance(aggregate, dict):
        aggregate = [aggregate]
    aggregate = list(aggregate)
    for i, entry in enumerate(aggregate):
        if not isinstance(entry, dict) or "metric" not in entry:
            raise TaskConfigError(
                f"{path} (group {name!r}): aggregate_metric_list[{i}] needs a 'metric'."
            )
        function = _function_or(entry.get("aggregation", "mean"))
        if callable(function):
            # lm-eval 0.4.13 accepts the function and then reports the mean anyway; assay calls
            # it, as written: fn(metric values, sizes, weight_by_size) of the leaf tasks.
            log.warning(
                "%s (group %r): aggregate_metric_list[%d] aggregates with %s; lm-eval 0.4.13 "
                "ignores such a function and reports the mean, so its number will differ.",
                path,
                name,
                i,
                getattr(function, "__name__", function),
            )
            aggregate[i] = {**entry, "aggregation": function}
        elif function != "mean":
            raise TaskConfigError(
                f"{path} (group {name!r}): aggregate_metric_list[{i}] aggregation is "
                f"{function!r}; a group aggregates with 'mean' or a !function (as in lm-eval)."
            )
    overrides = {
        k: v
        for k, v in raw.items()
        if k not in {"group", "group_alias", "task", "aggregate_metric_list", "metadata"}
    }
    return GroupConfig(
        name=name,
        tasks=list(tasks),
        alias=raw.get("group_alias"),
        aggregate_metric_list=list(aggregate),
        version=_metadata(raw, f"{path} (group {name!r})").get("version"),
        overrides=overrides,
        source=str(path),
    )
