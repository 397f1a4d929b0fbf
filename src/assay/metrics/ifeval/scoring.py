"""Strict and loose IFEval scoring of one response, as Google's `evaluation_lib` does it.

Strict: each instruction's checker sees the response as generated; an empty or blank response
follows nothing. Loose: an instruction is followed if the checker accepts any of eight
variants of the response (as is, without '*', without its first line, without its last line,
without both, and those three without '*'), which forgives a preamble, a sign-off or markdown
emphasis around an otherwise compliant answer.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from assay.errors import DataError
from assay.metrics.ifeval._checker_base import Checker, Draws
from assay.metrics.ifeval._registry import INSTRUCTION_DICT

Mode = Literal["strict", "loose"]

RANDOM_SEED = 17
"""Seed of the draws the official code makes from Python's global, unseeded generator.

The official checkers draw a value at random when an argument is missing or invalid; on the
published data that happens only for `keywords:letter_frequency` with letter '#' (key 1122)
and '!' (key 1129), where a random ASCII letter is counted instead. Strict and loose scoring
each build their own checker, so each draws its own letter, and the official figures for the
GPT-4 responses vary between 76.89-77.08 (prompt-level strict), 83.57-83.69 (instruction-level
strict), 79.30-79.67 (prompt-level loose) and 85.37-85.61 (instruction-level loose) from run to
run. assay draws from `random.Random` seeded by this seed, the scoring mode, the instruction's
position and the prompt (`checker_draws`), so a given response always gets the same verdict.
The seed is the smallest one whose draws reproduce the figures the IFEval paper publishes
(76.89 / 83.57 / 79.30 / 85.37).
"""


@dataclass(frozen=True, slots=True)
class InputExample:
    """One IFEval prompt (a row of input_data.jsonl or google/IFEval)."""

    key: int
    instruction_id_list: list[str]
    prompt: str
    kwargs: list[dict[str, Any]]
    """One dict of checker arguments per instruction, in the order of `instruction_id_list`."""


@dataclass(frozen=True, slots=True)
class OutputExample:
    """The verdict on one response."""

    instruction_id_list: list[str]
    prompt: str
    response: str
    follow_all_instructions: bool
    """Prompt-level: every instruction followed."""
    follow_instruction_list: list[bool]
    """Instruction-level: one verdict per instruction."""


def checker_draws(prompt: str, index: int, mode: Mode) -> Draws:
    """Where the checker of instruction `index` draws missing arguments (see RANDOM_SEED)."""
    return Draws(f"{RANDOM_SEED}:{mode}:{index}:{prompt}")


def build_checker(
    instruction_id: str, kwargs: Mapping[str, Any], prompt: str, rng: Draws
) -> Checker:
    """The checker for one instruction, built from its kwargs as the official code does.

    Arguments with a falsy value (None, empty, 0) are dropped first, as lm-eval's port of the
    official code does: google/IFEval rows carry every argument name of every instruction,
    mostly None. The checker's own default (often a draw) then applies.
    """
    checker_cls = INSTRUCTION_DICT.get(instruction_id)
    if checker_cls is None:
        raise DataError(
            f"unknown IFEval instruction id {instruction_id!r}; known ids: "
            f"{', '.join(INSTRUCTION_DICT)}"
        )
    args = {name: value for name, value in kwargs.items() if value}
    unexpected = sorted(set(args) - set(checker_cls.ARGS))
    if unexpected:
        raise DataError(
            f"IFEval instruction {instruction_id!r} takes the arguments "
            f"{list(checker_cls.ARGS)}, not {unexpected}"
        )
    try:
        checker = checker_cls.build(rng, **args)
        if "prompt" in checker_cls.ARGS:
            # The official harness rebuilds a checker that takes the prompt with the prompt
            # alone (none of the 25 published checkers does).
            checker = checker_cls.build(rng, prompt=prompt)
    except DataError as exc:
        raise DataError(f"IFEval instruction {instruction_id!r}: {exc}") from exc
    return checker


def build_checkers(inp: InputExample, mode: Mode) -> list[Checker]:
    """One checker per instruction of `inp`, drawing as `mode` scoring does."""
    if len(inp.kwargs) != len(inp.instruction_id_list):
        raise DataError(
            f"IFEval prompt {inp.key}: {len(inp.instruction_id_list)} instruction ids but "
            f"{len(inp.kwargs)} kwargs dicts; there must be one kwargs dict per instruction"
        )
    return [
        build_checker(instruction_id, kwargs, inp.prompt, checker_draws(inp.prompt, index, mode))
        for index, (instruction_id, kwargs) in enumerate(zip(inp.instruction_id_list, inp.kwargs))
    ]


def loose_variants(response: str) -> list[str]:
    """The eight texts loose scoring tries, in the official order."""
    lines = response.split("\n")
    without_first = "\n".join(lines[1:]).strip()
    without_last = "\n".join(lines[:-1]).strip()
    without_both = "\n".join(lines[1:-1]).strip()
    return [
        response,
        response.replace("*", ""),
        without_first,
        without_last,
        without_both,
        without_first.replace("*", ""),
        without_last.replace("*", ""),
        without_both.replace("*", ""),
    ]


def _follows(checker: Checker, text: str) -> bool:
    return bool(text.strip()) and checker.check(text)


def _output(inp: InputExample, response: str, follows: list[bool]) -> OutputExample:
    return OutputExample(
        instruction_id_list=inp.instruction_id_list,
        prompt=inp.prompt,
        response=response,
        follow_all_instructions=all(follows),
        follow_instruction_list=follows,
    )


def test_instruction_following_strict(inp: InputExample, response: str) -> OutputExample:
    """Strict verdict: each checker on the response as it is."""
    follows = [_follows(checker, response) for checker in build_checkers(inp, "strict")]
    return _output(inp, response, follows)


def test_instruction_following_loose(inp: InputExample, response: str) -> OutputExample:
    """Loose verdict: each checker on any of the eight variants of the response."""
    # Identical variants (a one-line response, no '*') give identical verdicts.
    variants = list(dict.fromkeys(loose_variants(response)))
    follows = [
        any(_follows(checker, text) for text in variants)
        for checker in build_checkers(inp, "loose")
    ]
    return _output(inp, response, follows)


def score_response(
    prompt: str,
    instruction_id_list: Sequence[str],
    kwargs: Sequence[Mapping[str, Any]],
    response: str,
    key: int = 0,
) -> tuple[OutputExample, OutputExample]:
    """(strict, loose) verdicts on `response`, sharing the work the two have in common."""
    inp = InputExample(
        key=key,
        instruction_id_list=list(instruction_id_list),
        prompt=prompt,
        kwargs=[dict(k) for k in kwargs],
    )
    strict_checkers = build_checkers(inp, "strict")
    strict = [_follows(checker, response) for checker in strict_checkers]
    variants = list(dict.fromkeys(loose_variants(response)))
    loose = []
    for checker, loose_checker, strict_follows in zip(
        strict_checkers, build_checkers(inp, "loose"), strict
    ):
        # The first variant is the response itself: a checker equal to the strict one (any
        # checker that drew nothing) has already been tried on it.
        tried = 1 if loose_checker == checker else 0
        loose.append(
            (tried == 1 and strict_follows)
            or any(_follows(loose_checker, text) for text in variants[tried:])
        )
    return _output(inp, response, strict), _output(inp, response, loose)


# Named like the official functions, which makes pytest take them for tests when imported.
test_instruction_following_strict.__test__ = False  # type: ignore[attr-defined]
test_instruction_following_loose.__test__ = False  # type: ignore[attr-defined]


def specific_from_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """`Doc.specific` for an IFEval dataset row (input_data.jsonl or google/IFEval), validated.

    Raises DataError naming the row's key and the fault (a missing field, an unknown
    instruction id, an argument a checker does not take or cannot use), so that bad data
    fails before anything is generated.
    """
    missing = [
        name for name in ("key", "prompt", "instruction_id_list", "kwargs") if name not in row
    ]
    if missing:
        raise DataError(
            f"IFEval row {row.get('key', '?')}: missing field(s) {missing}; each row needs "
            "key, prompt, instruction_id_list and kwargs"
        )
    inp = InputExample(
        key=row["key"],
        instruction_id_list=list(row["instruction_id_list"]),
        prompt=row["prompt"],
        kwargs=[dict(kwargs or {}) for kwargs in row["kwargs"]],
    )
    try:
        build_checkers(inp, "strict")
        build_checkers(inp, "loose")
    except DataError as exc:
        raise DataError(f"IFEval row {inp.key}: {exc}") from exc
    return {
        "key": inp.key,
        "prompt": inp.prompt,
        "instruction_id_list": inp.instruction_id_list,
        "kwargs": inp.kwargs,
    }


_FrozenKwargs = tuple[tuple[tuple[str, Any], ...], ...]


@functools.lru_cache(maxsize=256)
def _score_cached(
    prompt: str, ids: tuple[str, ...], kwargs: _FrozenKwargs, response: str, key: Any
) -> tuple[OutputExample, OutputExample]:
    return score_response(prompt, ids, [dict(pairs) for pairs in kwargs], response, key)


def _freeze(kwargs: Sequence[Mapping[str, Any]]) -> _FrozenKwargs:
    # Hashable for the cache; list arguments (keywords) become tuples, which checkers accept.
    return tuple(
        tuple(
            (name, tuple(value) if isinstance(value, list) else value) for name, value in k.items()
        )
        for k in kwargs
    )


def score_specific(
    specific: Mapping[str, Any], response: str
) -> tuple[OutputExample, OutputExample]:
    """`score_response` for a doc's `specific` dict, memoised so that the four IFEval metrics
    of one response share one scoring."""
    return _score_cached(
        specific["prompt"],
        tuple(specific["instruction_id_list"]),
        _freeze(specific["kwargs"]),
        response,
        specific.get("key", 0),
    )
