"""Retrieval and few-shot parts of a pipeline, built once and shared by the configs that match.

The RAG spec (`spec`), embeddings and vector stores (`embeddings`, `retrieval`), the few-shot
prompt manager (`fewshot_prompts`) and the cache of built indexes they share (`resources`).
LangChain, FAISS and sentence-transformers are imported only when a part is built.
"""

__all__: list[str] = []
"""Nothing at this level: users import from assay.pipelines, modules from their own files."""
