"""The doc builder of an lm-eval task YAML: its doc_to_* fields (feature names, Jinja templates,
lists, dicts or functions), each compiled once, turn a dataset row into a `Doc` exactly as
lm-eval 0.4.13 renders it."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Any

from assay.doc import Doc, OutputType
from assay.errors import DataError, TaskConfigError
from assay.tasks._yaml_io import FunctionRef
from assay.tasks.lm_eval_templates import outside_reach, start_render, template

if TYPE_CHECKING:
    import jinja2


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
                self.template = template(value)
            except jinja2.TemplateSyntaxError as exc:
                raise TaskConfigError(
                    f"{where}: '{key}' is not a valid Jinja template: {exc.message} (line {exc.lineno})."
                ) from None
            reach = outside_reach(value)
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

            start_render()  # each render has its own range() budget
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


class DocBuilder:
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
