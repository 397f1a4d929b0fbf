"""Offline fakes for pipeline tests: a deterministic arithmetic model and cheap embeddings."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Any

from langchain_core.embeddings import Embeddings

from assay.models.base import LM, register_model
from assay.requests.types import GenerateRequest


class CalcLM(LM):
    """Answers the last "a + b" of a prompt with "#### a+b"; sampling (temperature > 0) adds 1.

    "FAIL" in a prompt raises, so tests can exercise generation errors. Every call is logged.
    """

    def __init__(self, **model_args: Any) -> None:
        self.model_args = model_args
        self.seen: list[GenerateRequest] = []

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
        out = []
        for r in requests:
            text = r.prompt if isinstance(r.prompt, str) else r.prompt[-1][1]
            if "FAIL" in text:
                raise RuntimeError("backend refused the prompt")
            self.seen.append(r)
            a, b = map(int, re.findall(r"(\d+) \+ (\d+)", text)[-1])
            out.append(f"The answer is #### {a + b + (1 if r.params.temperature > 0 else 0)}")
        return out

    def loglikelihood(self, requests: Sequence[Any]) -> list[Any]:
        raise NotImplementedError

    def loglikelihood_rolling(self, requests: Sequence[Any]) -> list[Any]:
        raise NotImplementedError

    def identity(self) -> dict[str, Any]:
        return {"backend": "pipelines-calc", **self.model_args}


BUILT: list[CalcLM] = []


@register_model("pipelines-calc")
def _calc(**model_args: Any) -> CalcLM:
    lm = CalcLM(**model_args)
    BUILT.append(lm)
    return lm


class BagOfWordsEmbeddings(Embeddings):
    """Hashed bag-of-words vectors: texts sharing words are close. Instant and deterministic."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * self.dim
            for word in re.findall(r"[a-z]+", text.lower()):
                vec[zlib.crc32(word.encode()) % self.dim] += 1.0
            out.append(vec)
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def arithmetic_rows(n: int) -> list[dict[str, Any]]:
    """GSM8K-shaped rows: a question and a "#### answer" solution."""
    return [
        {"question": f"What is {i} + {2 * i}?", "answer": f"{i} + {2 * i} = {3 * i} #### {3 * i}"}
        for i in range(n)
    ]
