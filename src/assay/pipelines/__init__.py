"""User evaluation pipelines (RapidFire-style ``run_evals``) built on assay's models and aggregation.

    from assay.pipelines import Experiment, List, GridSearch, ModelConfig

    experiment = Experiment("demo")
    results = experiment.run_evals(GridSearch(config), dataset, num_shards=4, seed=42)

RAG and few-shot classes import LangChain, FAISS and sentence-transformers only when used.
"""

from __future__ import annotations

import importlib
from typing import Any

from assay.pipelines.api_models import APIModelConfig, RFAPIModelConfig
from assay.pipelines.batch import PipelineError
from assay.pipelines.early_stop import EarlyStop
from assay.pipelines.experiment import Experiment, run_evals
from assay.pipelines.knobs import List, Range
from assay.pipelines.model_configs import (
    HFModelConfig,
    ModelConfig,
    OpenAIAPIModelConfig,
    RFOpenAIAPIModelConfig,
    RFvLLMModelConfig,
    VLLMModelConfig,
)
from assay.pipelines.optuna_search import OptunaSearch, RFOptuna
from assay.pipelines.search import GridSearch, RandomSearch, RFGridSearch, RFRandomSearch

_LAZY = {
    "RagSpec": "assay.pipelines.rag",
    "LangChainRagSpec": "assay.pipelines.rag",
    "RFLangChainRagSpec": "assay.pipelines.rag",
    "JSONLinesLoader": "assay.pipelines.rag",
    "FewShotPromptManager": "assay.pipelines.prompt_manager",
    # RapidFire's name, kept importable; FewShotPromptManager is the one that cannot be
    # confused with assay.PromptManager (benchmark prompts).
    "PromptManager": "assay.pipelines.prompt_manager",
    "RFPromptManager": "assay.pipelines.prompt_manager",
    "SentenceTransformerEmbeddings": "assay.pipelines.embeddings",
    "HuggingFaceEmbeddings": "assay.pipelines.embeddings",
    "FaissVectorStore": "assay.pipelines.retrieval",
    "CrossEncoderReranker": "assay.pipelines.retrieval",
    "exact_match": "assay.pipelines.metrics",
    "retrieval_metrics": "assay.pipelines.metrics",
    "mean_of_rows": "assay.pipelines.metrics",
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
    "mean_of_rows",
    "retrieval_metrics",
    "run_evals",
]
