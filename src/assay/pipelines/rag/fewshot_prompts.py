"""The pipeline prompt manager: instructions plus few-shot examples chosen per query.

Examples are embedded once into a FAISS store shared by every config with the same examples and
embedding; each query then gets its `k` nearest examples (semantic similarity) or k examples
balancing relevance and diversity (maximal marginal relevance), formatted by the example template.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from assay.errors import ConfigError
from assay.pipelines.configs.knobs import Configurable
from assay.pipelines.rag.resources import SharedResources

_SELECTORS = {"semantic": "semantic", "similarity": "semantic", "mmr": "mmr"}


def _selector_kind(selector: Any) -> str:
    """'semantic' or 'mmr' from a LangChain selector class or a name."""
    if selector is None:
        return "semantic"
    if isinstance(selector, str):
        if selector.lower() not in _SELECTORS:
            raise ConfigError(
                f"PromptManager example_selector_cls: unknown selector {selector!r}; "
                "use 'semantic', 'mmr' or a LangChain example selector class"
            )
        return _SELECTORS[selector.lower()]
    from langchain_core.example_selectors import (
        MaxMarginalRelevanceExampleSelector,
        SemanticSimilarityExampleSelector,
    )

    if isinstance(selector, type) and issubclass(selector, MaxMarginalRelevanceExampleSelector):
        return "mmr"
    if isinstance(selector, type) and issubclass(selector, SemanticSimilarityExampleSelector):
        return "semantic"
    raise ConfigError(
        "PromptManager example_selector_cls must be SemanticSimilarityExampleSelector, "
        f"MaxMarginalRelevanceExampleSelector, 'semantic' or 'mmr'; got {selector!r}"
    )


def _format_example(template: Any, example: Mapping[str, Any]) -> str:
    if template is None:
        return "\n".join(f"{k}: {v}" for k, v in example.items())
    if callable(getattr(template, "format", None)) and not isinstance(template, str):
        return template.format(**example)  # a LangChain PromptTemplate
    if isinstance(template, str):
        try:
            return template.format(**example)
        except KeyError as exc:
            raise ConfigError(
                f"PromptManager example_prompt_template uses {exc} which the examples lack; "
                f"example keys: {sorted(example)}"
            ) from None
    if callable(template):
        return str(template(example))
    raise ConfigError(
        f"PromptManager example_prompt_template: unsupported {type(template).__name__}"
    )


class FewShotPromptManager(Configurable):
    """Instructions (text or file) and few-shot examples selected per user query.

    RapidFire calls it `RFPromptManager` (and `PromptManager` without knobs); both names are
    aliases of this class. Not to be confused with `assay.PromptManager`, which assembles
    benchmark prompts.

    examples: list of dicts (e.g. question / answer); embedding_cfg: ``{"class": ..., **kwargs}``;
    example_selector_cls: SemanticSimilarityExampleSelector / MaxMarginalRelevanceExampleSelector
    (or "semantic" / "mmr"); example_prompt_template: a LangChain PromptTemplate, a format
    string or a function of the example; k: examples per query; input_keys: example fields that
    are embedded (default: all, as LangChain's selectors do).
    """

    def __init__(
        self,
        instructions: str | None = None,
        instructions_file_path: str | Path | None = None,
        examples: Sequence[Mapping[str, Any]] | None = None,
        embedding_cfg: Mapping[str, Any] | None = None,
        example_selector_cls: Any = None,
        example_prompt_template: Any = None,
        k: int = 3,
        input_keys: Sequence[str] | None = None,
    ) -> None:
        self._remember(locals())
        self._instructions: str | None = None
        self._store: Any = None

    def describe(self) -> dict[str, Any]:
        selector = self._params.get("example_selector_cls")
        return {
            "k": self._params.get("k"),
            "selector": selector
            if isinstance(selector, str) or selector is None
            else selector.__name__,
            "examples": len(self._params.get("examples") or []),
        }

    def _example_text(self, example: Mapping[str, Any]) -> str:
        keys = self._params.get("input_keys") or sorted(example)
        return " ".join(str(example[key]) for key in keys if key in example)

    def build(self, resources: SharedResources) -> None:
        """Read the instructions and attach the shared example index."""
        instructions = self._params.get("instructions")
        path = self._params.get("instructions_file_path")
        if instructions is not None and path is not None:
            raise ConfigError(
                "PromptManager: give instructions or instructions_file_path, not both"
            )
        if path is not None:
            try:
                instructions = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(
                    f"PromptManager instructions_file_path {str(path)!r}: {exc.strerror}"
                ) from None
        self._instructions = instructions or ""
        _selector_kind(self._params.get("example_selector_cls"))
        k = self._params.get("k")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ConfigError(f"PromptManager k must be a non-negative integer, got {k!r}")
        examples = list(self._params.get("examples") or [])
        if not examples:
            return
        embedding_cfg = self._params.get("embedding_cfg")
        if embedding_cfg is None:
            raise ConfigError("PromptManager: examples need an embedding_cfg to select from")
        settings = {
            "examples": examples,
            "embedding_cfg": embedding_cfg,
            "input_keys": self._params.get("input_keys"),
        }
        self._store = resources.get("examples", settings, self._index_examples(resources, examples))

    def _index_examples(
        self, resources: SharedResources, examples: list[Mapping[str, Any]]
    ) -> Callable[[], Any]:
        from assay.pipelines.rag.embeddings import shared_embeddings
        from assay.pipelines.rag.retrieval import FaissVectorStore

        def build() -> Any:
            embeddings = shared_embeddings(
                resources, self._params["embedding_cfg"], "PromptManager embedding_cfg"
            )
            texts = [self._example_text(e) for e in examples]
            return FaissVectorStore.from_texts(texts, embeddings, [dict(e) for e in examples])

        return build

    def get_instructions(self) -> str:
        """The instructions text."""
        if self._instructions is None:
            raise ConfigError("PromptManager.get_instructions called before the manager was built")
        return self._instructions

    def select_examples(self, user_queries: Sequence[str]) -> list[list[dict[str, Any]]]:
        """The chosen examples per query, most relevant first."""
        k = int(self._params.get("k", 3))
        if self._store is None or k == 0:
            return [[] for _ in user_queries]
        vectors = self._store.embeddings.embed_documents([str(q) for q in user_queries])
        kind = _selector_kind(self._params.get("example_selector_cls"))
        search_type = "mmr" if kind == "mmr" else "similarity"
        docs = self._store.search_batch(vectors, search_type, k=k)
        return [[dict(d.metadata) for d in found] for found in docs]

    def get_fewshot_examples(self, user_queries: Sequence[str]) -> list[str]:
        """One formatted block of few-shot examples per query (blank-line separated)."""
        template = self._params.get("example_prompt_template")
        return [
            "\n\n".join(_format_example(template, example) for example in chosen)
            for chosen in self.select_examples(user_queries)
        ]


RFPromptManager = FewShotPromptManager
PromptManager = FewShotPromptManager
"""RapidFire's names for the same class."""
