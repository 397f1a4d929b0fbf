"""User evaluation pipelines (RapidFire-style ``run_evals``) built on assay's models and aggregation.

    from assay.pipelines import Experiment, List, GridSearch, ModelConfig

    experiment = Experiment("demo")
    results = experiment.run_evals(GridSearch(config), dataset, num_shards=4, seed=42)

RAG and few-shot classes import LangChain, FAISS and sentence-transformers only when used.
"""

from __future__ import annotations

import importlib
from typing import Any

from assay.pipelines.configs.api_models import APIModelConfig, RFAPIModelConfig
from assay.pipelines.configs.knobs import List, Range
from assay.pipelines.configs.model_configs import (
    HFModelConfig,
    ModelConfig,
    OpenAIAPIModelConfig,
    RFOpenAIAPIModelConfig,
    RFvLLMModelConfig,
    VLLMModelConfig,
)
from assay.pipelines.configs.optuna_search import OptunaSearch, RFOptuna
from assay.pipelines.configs.search import GridSearch, RandomSearch, RFGridSearch, RFRandomSearch
from assay.pipelines.experiment import Experiment, run_evals
from assay.pipelines.shards.batch import PipelineError
from assay.pipelines.shards.early_stop import EarlyStop

_LAZY = {
    "RagSpec": "assay.pipelines.rag.spec",
    "LangChainRagSpec": "assay.pipelines.rag.spec",
    "RFLangChainRagSpec": "assay.pipelines.rag.spec",
    "JSONLinesLoader": "assay.pipelines.rag.spec",
    "FewShotPromptManager": "assay.pipelines.rag.fewshot_prompts",
    # RapidFire's name, kept importable; FewShotPromptManager is the one that cannot be
    # confused with assay.PromptManager (benchmark prompts).
    "PromptManager": "assay.pipelines.rag.fewshot_prompts",
    "RFPromptManager": "assay.pipelines.rag.fewshot_prompts",
    "SentenceTransformerEmbeddings": "assay.pipelines.rag.embeddings",
    "HuggingFaceEmbeddings": "assay.pipelines.rag.embeddings",
    "FaissVectorStore": "assay.pipelines.rag.retrieval",
    "CrossEncoderReranker": "assay.pipelines.rag.retrieval",
    "exact_match_per_row": "assay.pipelines.row_metrics",
    # The short name, kept importable; exact_match_per_row cannot be confused with the
    # benchmark metric exact_match.
    "exact_match": "assay.pipelines.row_metrics",
    "retrieval_metrics": "assay.pipelines.row_metrics",
    "mean_of_rows": "assay.pipelines.row_metrics",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'assay.pipelines' has no attribute {name!r}")


__all__ = [
    "APIModelConfig",
    "CrossEncoderReranker",
    "EarlyStop",
    "Experiment",
    "FaissVectorStore",
    "FewShotPromptManager",
    "GridSearch",
    "HFModelConfig",
    "HuggingFaceEmbeddings",
    "JSONLinesLoader",
    "LangChainRagSpec",
    "List",
    "ModelConfig",
    "OpenAIAPIModelConfig",
    "OptunaSearch",
    "PipelineError",
    "RFAPIModelConfig",
    "RFGridSearch",
    "RFLangChainRagSpec",
    "RFOpenAIAPIModelConfig",
    "RFOptuna",
    "RFPromptManager",
    "RFRandomSearch",
    "RFvLLMModelConfig",
    "RagSpec",
    "RandomSearch",
    "Range",
    "SentenceTransformerEmbeddings",
    "VLLMModelConfig",
    "exact_match",
    "exact_match_per_row",
    "mean_of_rows",
    "retrieval_metrics",
    "run_evals",
]
