"""RAG specs: load, split, embed and index documents once; retrieve, rerank and serialise per batch.

Knobs split in two stages. *Index* knobs (loaders, text splitter, embedding, vector store) decide
the index: it is built once per distinct combination and shared by every config that uses it.
*Retrieval* knobs (search type, k, threshold, MMR settings, reranker) are applied per call, so a
grid over them, or a clone that changes them, never re-indexes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from assay.errors import ConfigError
from assay.pipelines.configs.knobs import Configurable
from assay.pipelines.rag.resources import SharedResources

log = logging.getLogger(__name__)

DEFAULT_SEARCH = {"type": "similarity", "k": 5}
_SEARCH_KEYS = {"type", "k", "score_threshold", "fetch_k", "lambda_mult"}


def default_document_template(doc: Any) -> str:
    """``key: value; key2: value2:`` (the metadata) on one line, then the text."""
    meta = "; ".join(f"{k}: {v}" for k, v in doc.metadata.items())
    return f"{meta}:\n{doc.page_content}" if meta else doc.page_content


class JSONLinesLoader:
    """A LangChain document loader for a JSON-lines file: one document per line.

    ``content_key`` names the text field; ``metadata_keys`` (default: every other field) are
    copied into the metadata, or ``metadata_func(record) -> dict`` builds it.
    """

    def __init__(
        self,
        path: str | Path,
        content_key: str = "text",
        metadata_keys: Sequence[str] | None = None,
        metadata_func: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.path = str(path)
        self.content_key = content_key
        self.metadata_keys = list(metadata_keys) if metadata_keys is not None else None
        self.metadata_func = metadata_func

    def load(self) -> list[Any]:
        from langchain_core.documents import Document

        docs = []
        with open(self.path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                record = json.loads(line)
                if self.content_key not in record:
                    raise ConfigError(
                        f"{self.path}:{number}: no {self.content_key!r} field; set content_key"
                    )
                if self.metadata_func is not None:
                    metadata = dict(self.metadata_func(record))
                else:
                    keys = self.metadata_keys or [k for k in record if k != self.content_key]
                    metadata = {k: record[k] for k in keys if k in record}
                docs.append(Document(page_content=str(record[self.content_key]), metadata=metadata))
        return docs

    def lazy_load(self) -> Any:
        yield from self.load()


class RagSpec(Configurable):
    """Retrieval for a pipeline; any argument may be a `List` (grid) or `Range` (random search).

    document_loader: a LangChain loader (anything with ``load()``) or a list of them.
    text_splitter: a LangChain ``TextSplitter`` or None (whole documents are indexed).
    embedding_cfg: ``{"class": EmbeddingsClass, **kwargs}``.
    vector_store_cfg: ``{"type": "faiss", "index": "flat" | "hnsw"}`` (FAISS, exact, by default).
    retriever: a LangChain retriever used instead of the vector store.
    search_cfg: ``{"type": "similarity" | "similarity_score_threshold" | "mmr", "k": 5,
        "score_threshold": 0.5, "fetch_k": 20, "lambda_mult": 0.5}``.
    reranker_cfg: ``{"class": CrossEncoderReranker, "model_name": ..., "top_n": 3}``: assay's
        `CrossEncoderReranker` or LangChain's (``model_name``/``model_kwargs`` build its model).
    enable_gpu_search: search the exact index on the GPU (FAISS GPU build and a GPU needed;
        otherwise a warning says the same index is searched on the CPU).
    document_template: ``Document -> str`` used by `serialize_documents`.
    """

    def __init__(
        self,
        document_loader: Any = None,
        text_splitter: Any = None,
        embedding_cfg: Mapping[str, Any] | None = None,
        vector_store_cfg: Mapping[str, Any] | None = None,
        retriever: Any = None,
        search_cfg: Mapping[str, Any] | None = None,
        reranker_cfg: Mapping[str, Any] | None = None,
        enable_gpu_search: bool = False,
        document_template: Callable[[Any], str] | None = None,
    ) -> None:
        self._remember(locals())
        self.document_template = document_template or default_document_template
        self._store: Any = None
        self._reranker: Any = None

    # -- knobs -----------------------------------------------------------------------------
    def search_settings(self) -> dict[str, Any]:
        search = {**DEFAULT_SEARCH, **(self._params.get("search_cfg") or {})}
        unknown = sorted(set(search) - _SEARCH_KEYS)
        if unknown:
            raise ConfigError(
                f"search_cfg: unknown key(s) {unknown}; known: {sorted(_SEARCH_KEYS)}"
            )
        return search

    def index_settings(self) -> dict[str, Any]:
        """Everything that decides the index (and nothing that does not)."""
        return {
            key: self._params.get(key)
            for key in ("document_loader", "text_splitter", "embedding_cfg", "vector_store_cfg")
        }

    def top_n(self) -> int | None:
        cfg = self._params.get("reranker_cfg")
        return int(cfg["top_n"]) if cfg and "top_n" in cfg else None

    def is_consistent(self) -> bool:
        """False when the reranker keeps more documents than retrieval returns."""
        top_n = self.top_n()
        search = self._params.get("search_cfg") or {}
        k = search.get("k", DEFAULT_SEARCH["k"])
        return top_n is None or not isinstance(k, int) or top_n <= k

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        splitter = self._params.get("text_splitter")
        if splitter is not None:
            out["chunk_size"] = getattr(splitter, "_chunk_size", type(splitter).__name__)
            out["chunk_overlap"] = getattr(splitter, "_chunk_overlap", None)
        embedding = self._params.get("embedding_cfg") or {}
        if isinstance(embedding, Mapping):
            out["embedding"] = embedding.get("model_name") or embedding.get("model")
        search = self._params.get("search_cfg") or {}
        out["search"] = search if isinstance(search, Mapping) else str(search)
        reranker = self._params.get("reranker_cfg")
        if reranker:
            out["reranker_top_n"] = reranker.get("top_n") if isinstance(reranker, Mapping) else None
        return out

    # -- building --------------------------------------------------------------------------
    def build(self, resources: SharedResources) -> None:
        """Attach the shared index (building it if no config built it yet) and the reranker."""
        retriever = self._params.get("retriever")
        if retriever is None:
            self._store = resources.get(
                "index", self.index_settings(), self._build_index(resources)
            )
        reranker_cfg = self._params.get("reranker_cfg")
        if reranker_cfg:
            self._reranker = resources.get("reranker", reranker_cfg, lambda: _build(reranker_cfg))
        self.search_settings()

    def _build_index(self, resources: SharedResources) -> Callable[[], Any]:
        from assay.pipelines.rag.embeddings import shared_embeddings
        from assay.pipelines.rag.retrieval import FaissVectorStore

        def build() -> Any:
            loaders = self._params.get("document_loader")
            if loaders is None:
                raise ConfigError("RagSpec needs a document_loader (or a retriever)")
            loaders = loaders if isinstance(loaders, list | tuple) else [loaders]
            docs = [doc for loader in loaders if loader is not None for doc in loader.load()]
            splitter = self._params.get("text_splitter")
            if splitter is not None:
                docs = splitter.split_documents(docs)
            embedding_cfg = self._params.get("embedding_cfg")
            if embedding_cfg is None:
                raise ConfigError("RagSpec needs an embedding_cfg to build its vector store")
            embeddings = shared_embeddings(resources, embedding_cfg, "RagSpec embedding_cfg")
            store_cfg = dict(self._params.get("vector_store_cfg") or {"type": "faiss"})
            if store_cfg.pop("type", "faiss") != "faiss":
                raise ConfigError("vector_store_cfg: only type 'faiss' is available")
            store_cfg.pop("batch_size", None)
            if self._params.get("enable_gpu_search") and store_cfg.get("index", "flat") != "flat":
                raise ConfigError(
                    "RagSpec: enable_gpu_search=True searches an exact (flat) index; drop "
                    f"vector_store_cfg index={store_cfg['index']!r}"
                )
            store = FaissVectorStore(embeddings, **store_cfg)
            vectors = embeddings.embed_documents([d.page_content for d in docs])
            store.add_vectors(vectors, docs)
            if self._params.get("enable_gpu_search") and not store.to_gpu():
                # The same exact (flat) index answers on the CPU: results do not change.
                log.warning(
                    "RagSpec enable_gpu_search=True: this FAISS build has no GPU support or sees "
                    "no GPU; the exact index is searched on the CPU (same results, slower on "
                    "large corpora). Install faiss-gpu on a GPU machine to search on the GPU."
                )
            return store

        return build

    # -- per batch -------------------------------------------------------------------------
    def get_context(
        self, batch_queries: Sequence[str], use_reranker: bool = True, serialize: bool = True
    ) -> list[str] | list[list[Any]]:
        """Retrieved context per query: strings (serialize=True) or lists of Documents."""
        if self._store is None and self._params.get("retriever") is None:
            raise ConfigError("RagSpec.get_context called before the spec was built")
        queries = [str(q) for q in batch_queries]
        search = self.search_settings()
        retriever = self._params.get("retriever")
        if retriever is not None:
            docs = [list(found) for found in retriever.batch(queries)]
        else:
            vectors = self._store.embed_queries(queries)
            search_type = search["type"]
            kwargs = {k: v for k, v in search.items() if k != "type"}
            docs = self._store.search_batch(vectors, search_type, **kwargs)
        if use_reranker and self._reranker is not None:
            docs = [list(self._reranker.compress_documents(d, q)) for d, q in zip(docs, queries)]
        return self.serialize_documents(docs) if serialize else docs

    def serialize_documents(self, batch_docs: Sequence[Sequence[Any]]) -> list[str]:
        """One string per query: its documents through `document_template`, blank-line separated."""
        return ["\n\n".join(self.document_template(d) for d in docs) for docs in batch_docs]


DEFAULT_CROSS_ENCODER = "cross-encoder/ms-marco-MiniLM-L6-v2"
"""The cross-encoder RapidFire gives LangChain's CrossEncoderReranker when none is named."""


def _build(cfg: Mapping[str, Any]) -> Any:
    """The reranker of ``{"class": Cls, **kwargs}``.

    LangChain's ``CrossEncoderReranker`` takes a cross-encoder object, not a name: as in
    RapidFire, ``model_name`` (default `DEFAULT_CROSS_ENCODER`) and ``model_kwargs`` build a
    ``HuggingFaceCrossEncoder`` for it, and the other keys (``top_n``) go to the reranker.
    """
    if "class" not in cfg:
        raise ConfigError(f"reranker_cfg needs a 'class' entry, got {dict(cfg)!r}")
    cls = cfg["class"]
    kwargs = {k: v for k, v in cfg.items() if k != "class"}
    if _is_langchain_cross_encoder_reranker(cls) and "model" not in kwargs:
        from langchain_community.cross_encoders import HuggingFaceCrossEncoder

        model = HuggingFaceCrossEncoder(
            model_name=kwargs.pop("model_name", DEFAULT_CROSS_ENCODER),
            model_kwargs=kwargs.pop("model_kwargs", {}),
        )
        kwargs["model"] = model
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"reranker_cfg: cannot build {cls!r} from {kwargs}: {exc}") from None


def _is_langchain_cross_encoder_reranker(cls: Any) -> bool:
    module = getattr(cls, "__module__", "") or ""
    return getattr(cls, "__name__", "") == "CrossEncoderReranker" and module.startswith(
        ("langchain_classic.", "langchain.")
    )


LangChainRagSpec = RagSpec
RFLangChainRagSpec = RagSpec
