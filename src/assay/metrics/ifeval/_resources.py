"""Data files IFEval scoring needs, all shipped inside the package: nothing is ever downloaded.

Sentence counting (and the word tokenisation of `change_case:capital_word_frequency`) use NLTK's
English Punkt tables (`punkt_tab`), which live in `assay/data/nltk`. Language detection uses the
profiles that the `langdetect` package ships.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from assay.errors import DataError

if TYPE_CHECKING:
    from nltk.tokenize.punkt import PunktSentenceTokenizer

NLTK_DATA_DIR = Path(str(resources.files("assay") / "data" / "nltk"))
"""The folder put on `nltk.data.path`: it holds `tokenizers/punkt_tab/english/`."""
PUNKT_ENGLISH_DIR = NLTK_DATA_DIR / "tokenizers" / "punkt_tab" / "english"
PUNKT_FILES = ("abbrev_types.txt", "collocations.tab", "ortho_context.tab", "sent_starters.txt")
WORD_LIST_FILE = Path(str(resources.files("assay") / "data" / "ifeval" / "word_list.txt"))
"""The official list of keywords drawn when a keyword argument is missing."""

_REINSTALL = "reinstall assay (pip install --force-reinstall assay) to restore its package data"


def ensure_ifeval_resources() -> None:
    """Check and load everything IFEval scoring needs; raise DataError naming what is missing.

    Call it when a task is validated, before any model is loaded or anything is generated, so
    that a broken installation fails in seconds rather than after hours of generation.
    """
    missing = [name for name in PUNKT_FILES if not (PUNKT_ENGLISH_DIR / name).is_file()]
    if missing:
        raise DataError(
            f"IFEval needs NLTK's English punkt_tab tables, but {', '.join(missing)} "
            f"is missing from {PUNKT_ENGLISH_DIR}; {_REINSTALL}."
        )
    if not WORD_LIST_FILE.is_file():
        raise DataError(f"IFEval's keyword list {WORD_LIST_FILE} is missing; {_REINSTALL}.")
    try:
        punkt_tokenizer()
    except (LookupError, OSError, ValueError) as exc:
        raise DataError(
            f"IFEval could not load NLTK's English punkt_tab tables from {PUNKT_ENGLISH_DIR}: "
            f"{exc}. Check that nltk==3.10.2 is installed and {_REINSTALL}."
        ) from exc
    from assay.metrics.ifeval._langdetect import language_profiles

    try:
        language_profiles()
    except Exception as exc:  # langdetect raises its own exception type for broken profiles
        raise DataError(
            f"IFEval could not load langdetect's language profiles: {exc}. "
            "Reinstall langdetect (pip install --force-reinstall langdetect==1.0.9)."
        ) from exc


@functools.cache
def punkt_tokenizer() -> PunktSentenceTokenizer:
    """The English Punkt sentence tokenizer built from the tables shipped with assay."""
    import nltk
    from nltk.tokenize.punkt import PunktTokenizer

    # NLTK only opens data files under a folder on its search path, so the package folder
    # goes first: the shipped tables win over any other copy a user may have installed.
    if str(NLTK_DATA_DIR) not in nltk.data.path:
        nltk.data.path.insert(0, str(NLTK_DATA_DIR))
    return PunktTokenizer("english")


@functools.cache
def word_list() -> tuple[str, ...]:
    """The official IFEval keyword list, in its original order (draws index into it)."""
    return tuple(WORD_LIST_FILE.read_text(encoding="utf-8").split())
