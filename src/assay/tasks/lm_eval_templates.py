"""The Jinja environment lm-eval task YAMLs render in, and the checks a template passes when
its file loads: what reaches past the row it renders (a `_` attribute or key, the attr filter,
a mutating call, a format field reaching `_` names) is refused before any row renders; the
sandboxed environment still guards every render, and bounds what `*`, `**`, `+` and `~`
build, the rendered text, and the items one render's `range()` calls yield."""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2


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
def template(source: str) -> jinja2.Template:
    """A compiled template; lm-eval trees repeat the same template across many tasks."""
    return _environment().from_string(source)


_MUTATORS = frozenset(
    {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem",
     "sort", "reverse", "add", "discard", "__setitem__"}
)  # fmt: skip


@functools.lru_cache(maxsize=4096)
def outside_reach(source: str) -> str | None:
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


def start_render() -> None:
    """Give the render about to start its own `range()` budget (per thread)."""
    _RANGE_USED.items = 0
