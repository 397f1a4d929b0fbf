"""Text measurements shared by the IFEval checkers: words, sentences, capitalised tokens.

Each is a pure function of the text and is memoised: loose scoring looks at up to eight
variants of a response, and several checkers of one prompt measure the same text.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from assay.metrics.ifeval._resources import punkt_tokenizer

if TYPE_CHECKING:
    from nltk.tokenize import NLTKWordTokenizer

_WORD = re.compile(r"\w+")
"""The official count_words is nltk's RegexpTokenizer(r"\\w+"), which in nltk 3.10.2 is exactly
this pattern's findall."""


def count_words(text: str) -> int:
    """Number of maximal runs of word characters."""
    return len(_WORD.findall(text))


@functools.lru_cache(maxsize=1024)
def count_sentences(text: str) -> int:
    """Number of sentences NLTK's English Punkt tokenizer finds."""
    return len(punkt_tokenizer().tokenize(text))


@functools.lru_cache(maxsize=1024)
def count_capital_words(text: str) -> int:
    """Number of `nltk.word_tokenize(text)` tokens that are all upper case (str.isupper)."""
    return sum(map(_capital_tokens, punkt_tokenizer().tokenize(text)))


@functools.lru_cache(maxsize=8192)
def _capital_tokens(sentence: str) -> int:
    # Per sentence: the loose variants of a response share most of their sentences.
    return sum(token.isupper() for token in _treebank_tokenizer().tokenize(sentence))


@functools.cache
def _treebank_tokenizer() -> NLTKWordTokenizer:
    # nltk.word_tokenize is Punkt sentence splitting, then this tokenizer on each sentence.
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer()
