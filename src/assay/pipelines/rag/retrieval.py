"""A FAISS vector store and a cross-encoder reranker behind LangChain's interfaces.

`FaissVectorStore` is a LangChain `VectorStore` (so ``as_retriever()`` and LangChain's example
selectors work with it) over cosine similarity: vectors are L2-normalised and searched by inner
product, exactly (``index="flat"``, the default) or approximately (``index="hnsw"``). It also
answers a batch of query vectors in one call, which is what RAG specs use per batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance
from pydantic import ConfigDict, Field, PrivateAttr

from assay.errors import ConfigError

SEARCH_TYPES = ("similarity", "similarity_score_threshold", "mmr")


def _normalise(vectors: Any) -> Any:
    import numpy as np

    array = np.asarray(vectors, dtype="float32")
    if array.ndim == 1:
        array = array[None, :]
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1.0, norms)


class FaissVectorStore(VectorStore):
    """Documents and their normalised embeddings in a FAISS inner-product index."""

    def __init__(
        self, embedding: Embeddings, index: str = "flat", hnsw_m: int = 16, ef_search: int = 64
    ) -> None:
        if index not in ("flat", "hnsw"):
            raise ConfigError(f"vector_store_cfg: index must be 'flat' or 'hnsw', got {index!r}")
        self._embedding = embedding
        self._kind, self._hnsw_m, self._ef_search = index, hnsw_m, ef_search
        self._index: Any = None
        self._vectors: Any = None
        self.documents: list[Document] = []
        self._query_vectors: dict[str, list[float]] = {}

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    def embed_queries(self, queries: Sequence[str]) -> list[list[float]]:
        """Query vectors, each distinct query embedded once for every config sharing the index."""
        missing = list(dict.fromkeys(q for q in queries if q not in self._query_vectors))
        if missing:
            vectors = self._embedding.embed_documents(missing)
            self._query_vectors.update(zip(missing, vectors, strict=True))
        return [self._query_vectors[q] for q in queries]

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        texts = list(texts)
        metadatas = metadatas or [{} for _ in texts]
        start = len(self.documents)
        ids = ids or [str(start + i) for i in range(len(texts))]
        docs = [
            Document(page_content=t, metadata=dict(m), id=i)
            for t, m, i in zip(texts, metadatas, ids, strict=True)
        ]
        self.add_vectors(self._embedding.embed_documents(texts), docs)
        return ids

    def add_vectors(
        self, vectors: Sequence[Sequence[float]], documents: Sequence[Document]
    ) -> None:
        """Add precomputed embeddings with their documents."""
        import faiss
        import numpy as np

        if not documents:
            return
        array = _normalise(vectors)
        if self._index is None:
            dim = array.shape[1]
            if self._kind == "hnsw":
                self._index = faiss.IndexHNSWFlat(dim, self._hnsw_m, faiss.METRIC_INNER_PRODUCT)
                self._index.hnsw.efSearch = self._ef_search
            else:
                self._index = faiss.IndexFlatIP(dim)
        self._index.add(array)
        self._vectors = array if self._vectors is None else np.vstack([self._vectors, array])
        self.documents.extend(documents)

    def to_gpu(self) -> bool:
        """Move the index to every GPU (exact search, same results); False when FAISS has no
        GPU support or sees no GPU, and the index stays on the CPU."""
        import faiss

        if self._index is None or not hasattr(faiss, "index_cpu_to_all_gpus"):
            return False
        if faiss.get_num_gpus() < 1:
            return False
        self._index = faiss.index_cpu_to_all_gpus(self._index)
        return True

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> FaissVectorStore:
        store = cls(embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    def _search(self, vectors: Any, k: int) -> list[list[tuple[int, float]]]:
        if self._index is None or k <= 0:
            return [[] for _ in range(len(vectors))]
        scores, indices = self._index.search(_normalise(vectors), min(k, len(self.documents)))
        return [
            [(int(i), float(s)) for i, s in zip(row_i, row_s) if i >= 0]
            for row_i, row_s in zip(indices, scores)
        ]

    def similarity_search_with_score_by_vector(
        self, embedding: Sequence[float], k: int = 4
    ) -> list[tuple[Document, float]]:
        """The k nearest documents with their cosine similarity."""
        return [(self.documents[i], s) for i, s in self._search([embedding], k)[0]]

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[Document]:
        return [d for d, _ in self.similarity_search_with_score_by_vector(embedding, k)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        return self.similarity_search_with_score_by_vector(self._embedding.embed_query(query), k)

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [d for d, _ in self.similarity_search_with_score(query, k)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # Scores are cosine similarities already; LangChain expects higher = more relevant.
        return lambda score: score

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        **kwargs: Any,
    ) -> list[Document]:
        return self._mmr(embedding, self._search([embedding], max(k, fetch_k))[0], k, lambda_mult)

    def max_marginal_relevance_search(
        self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5, **kwargs: Any
    ) -> list[Document]:
        vector = self._embedding.embed_query(query)
        return self.max_marginal_relevance_search_by_vector(vector, k, fetch_k, lambda_mult)

    def _mmr(
        self, query: Any, hits: list[tuple[int, float]], k: int, lambda_mult: float
    ) -> list[Document]:
        if not hits:
            return []
        candidates = [i for i, _ in hits]
        chosen = maximal_marginal_relevance(
            _normalise(query)[0], self._vectors[candidates], lambda_mult=lambda_mult, k=k
        )
        return [self.documents[candidates[j]] for j in chosen]

    def search_batch(
        self, query_vectors: Sequence[Sequence[float]], search_type: str, **search_kwargs: Any
    ) -> list[list[Document]]:
        """Documents for many queries at once.

        search_kwargs: ``k`` (default 5); ``score_threshold`` for similarity_score_threshold;
        ``fetch_k`` (20) and ``lambda_mult`` (0.5) for mmr.
        """
        k = int(search_kwargs.get("k", 5))
        if search_type == "mmr":
            fetch_k = max(k, int(search_kwargs.get("fetch_k", 20)))
            lambda_mult = float(search_kwargs.get("lambda_mult", 0.5))
            hits = self._search(query_vectors, fetch_k)
            return [self._mmr(q, h, k, lambda_mult) for q, h in zip(query_vectors, hits)]
        hits = self._search(query_vectors, k)
        if search_type == "similarity_score_threshold":
            threshold = float(search_kwargs.get("score_threshold", 0.5))
            hits = [[(i, s) for i, s in row if s >= threshold] for row in hits]
        elif search_type != "similarity":
            raise ConfigError(f"search_cfg type must be one of {SEARCH_TYPES}, got {search_type!r}")
        return [[self.documents[i] for i, _ in row] for row in hits]


class CrossEncoderReranker(BaseDocumentCompressor):
    """Reorders retrieved documents by a sentence-transformers cross-encoder and keeps `top_n`.

    Built from ``reranker_cfg = {"class": CrossEncoderReranker, "model_name": ..., "top_n": ...}``.
    Each kept document gets its score in ``metadata["relevance_score"]``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model_name: str = "cross-encoder/ms-marco-MiniLM-L6-v2"
    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    top_n: int = 3
    _model: Any = PrivateAttr(default=None)

    def _load(self) -> Any:
        if self._model is None:
            from sentence_transformers import CrossEncoder

            kwargs = {"device": "cpu", **self.model_kwargs}
            try:
                self._model = CrossEncoder(self.model_name, **kwargs)
            except OSError as exc:
                raise ConfigError(
                    f"reranker_cfg: cannot load cross-encoder {self.model_name!r}: {exc}. "
                    "Give a local model directory."
                ) from None
        return self._model

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Any = None
    ) -> Sequence[Document]:
        if not documents:
            return []
        scores = self._load().predict([(query, d.page_content) for d in documents])
        ranked = sorted(zip(documents, scores), key=lambda pair: -float(pair[1]))[: self.top_n]
        return [
            Document(
                page_content=d.page_content,
                metadata={**d.metadata, "relevance_score": float(s)},
                id=d.id,
            )
            for d, s in ranked
        ]
