"""lm-eval's four seeds (--seed python,numpy,torch,fewshot): their type, defaults and forms.

A shared type: the run's settings hold them, tasks draw few-shot examples with one, execution
seeds the global generators with them and results record them, so they sit below all of those.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from assay.errors import ConfigError

DEFAULT_FEWSHOT_SEED = 1234
"""lm-eval's default few-shot seed, so few-shot prompts match its runs."""

SEED_FIX = (
    "give one whole number (it seeds all four), or four comma-separated values "
    "python,numpy,torch,fewshot, each a whole number or None (lm-eval's default 0,1234,1234,1234)"
)


class Seeds(NamedTuple):
    """lm-eval's four seeds (its --seed python,numpy,torch,fewshot); None leaves one unset."""

    random: int | None = 0
    """Python's `random` module, seeded before tasks load (lm-eval's random_seed)."""
    numpy: int | None = 1234
    """numpy's global generator (lm-eval's numpy_seed)."""
    torch: int | None = 1234
    """torch's global generator (lm-eval's torch_seed), and the seed of sampled generations and
    sampled judgements (lm-eval's hf backend samples from torch's generator); None: unseeded."""
    fewshot: int | None = DEFAULT_FEWSHOT_SEED
    """Few-shot selection (lm-eval's fewshot_seed); None: unseeded, as lm-eval's
    `random.Random(None)`."""


DEFAULT_SEEDS = Seeds()
"""lm-eval's default --seed 0,1234,1234,1234."""

SEED_KEYS = ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed")
"""The four seeds' keys in results.json's config (lm-eval's names), in Seeds order."""


def parse_seeds(value: Any, flag: str = "--seed") -> Seeds:
    """lm-eval's --seed forms: one integer for all four seeds, or "python,numpy,torch,fewshot"
    (a string, or a list from a YAML config) where "None" leaves that seed unset, and None
    leaves all four unset. Three values take the fewshot seed from the default, as lm-eval does
    (with a note on stderr)."""
    if isinstance(value, Seeds):
        return value
    if value is None:  # lm-eval's `seed: null`: nothing seeded
        return Seeds(None, None, None, None)
    if isinstance(value, bool):
        raise ConfigError(f"{flag} {value!r}: not a seed; {SEED_FIX}.")
    if isinstance(value, int):
        return Seeds(value, value, value, value)
    items = list(value) if isinstance(value, list | tuple) else str(value).split(",")
    parsed = [_seed_value(item, value, flag) for item in items]
    if len(parsed) == 1:
        return Seeds(*(parsed * 4))
    if len(parsed) == 3:
        import sys

        print(
            f"{flag} {_shown(value)}: three seeds given (python, numpy, torch); the fewshot seed "
            f"keeps its default {DEFAULT_FEWSHOT_SEED}, as in lm-eval.",
            file=sys.stderr,
        )
        parsed.append(DEFAULT_FEWSHOT_SEED)
    if len(parsed) != 4:
        raise ConfigError(f"{flag} {_shown(value)}: {len(parsed)} values; {SEED_FIX}.")
    return Seeds(parsed[0], parsed[1], parsed[2], parsed[3])


def _shown(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _seed_value(item: Any, whole: Any, flag: str) -> int | None:
    if item is None:
        return None
    if isinstance(item, int) and not isinstance(item, bool):
        return item
    text = str(item).strip()
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigError(
            f"{flag} {_shown(whole)}: {text!r} is not a whole number or None; {SEED_FIX}."
        ) from None
