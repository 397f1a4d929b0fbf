"""RapidFire's ``tutorial_notebooks/rag-contexteng/rf-tutorial-optuna-rag-fiqa.ipynb``, run on assay.

Every code cell is copied as written (commit 6dd53c1 of RapidFireAI/rapidfireai) into the test
function, in order, each under a ``# cell N`` comment. Lines changed are marked ``# CHANGED``:
the ``rapidfireai`` import lines; ``select(range(256))`` reads the 8 queries of the synthetic
FiQA-format corpus under ``datasets/fiqa``; ``cuda:0`` devices are ``cpu``; the cross-encoder
and the Qwen generator are tiny local models, and vLLM is the conftest's stand-in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def test_optuna_rag_fiqa_notebook(
    tutorial_dir: Path,
    byte_level_tiktoken: None,
    vllm_standin: Any,
    tiny_model_dir: Path,
    tiny_cross_encoder: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for name in ("RF_MLFLOW_ENABLED", "RF_TENSORBOARD_ENABLED", "RF_TRACKIO_ENABLED"):
        monkeypatch.setenv(name, "")  # restored after the test (cell 3 sets them)
    caplog.set_level("INFO", logger="assay.pipelines")
    if True:  # the notebook's cells, indented once
        # cell 3
        import os
        os.environ["RF_MLFLOW_ENABLED"] = "true"
        os.environ["RF_TENSORBOARD_ENABLED"] = "true"
        os.environ["RF_TRACKIO_ENABLED"] = "true"

        # cell 5
        from assay.pipelines import Experiment  # CHANGED: from rapidfireai import Experiment
        from assay.pipelines import (  # CHANGED: from rapidfireai.automl import (
            List,
            Range,
            RFOptuna,
            RFLangChainRagSpec,
            RFvLLMModelConfig,
            RFPromptManager,
        )
        import math
        import pandas as pd
        from pathlib import Path
        from typing import List as listtype, Dict, Any

        # cell 7
        from datasets import load_dataset

        dataset_dir = Path("datasets")

        fiqa_dataset = load_dataset(
            "json", data_files=str(dataset_dir / "fiqa" / "queries.jsonl"), split="train"
        ).select(range(8))  # CHANGED: range(256)
        fiqa_dataset = fiqa_dataset.rename_columns({"text": "query", "_id": "query_id"})

        qrels = pd.read_csv(str(dataset_dir / "fiqa" / "qrels.tsv"), sep="\t")
        qrels = qrels.rename(
            columns={"query-id": "query_id", "corpus-id": "corpus_id", "score": "relevance"}
        )

        # cell 9
        experiment = Experiment(experiment_name="exp-optuna-rag-fiqa", mode="evals")

        # cell 11
        from langchain_community.document_loaders import DirectoryLoader, JSONLoader
        from langchain_text_splitters import RecursiveCharacterTextSplitter
        from langchain_huggingface import HuggingFaceEmbeddings
        from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
        from langchain_community.cross_encoders import HuggingFaceCrossEncoder

        batch_size = 128

        rag_spec = RFLangChainRagSpec(
            document_loader=DirectoryLoader(
                path=str(dataset_dir / "fiqa"),
                glob="corpus.jsonl",
                loader_cls=JSONLoader,
                loader_kwargs={
                    "jq_schema": ".",
                    "content_key": "text",
                    "metadata_func": lambda record, metadata: {
                        "corpus_id": int(record.get("_id"))
                    },
                    "json_lines": True,
                    "text_content": False,
                },
                sample_seed=42,
            ),
            text_splitter=List([
                RecursiveCharacterTextSplitter.from_tiktoken_encoder(
                    encoding_name="gpt2", chunk_size=256, chunk_overlap=32
                ),
                RecursiveCharacterTextSplitter.from_tiktoken_encoder(
                    encoding_name="gpt2", chunk_size=128, chunk_overlap=32
                ),
            ]),
            embedding_cfg={
                "class": HuggingFaceEmbeddings,
                "model_name": "sentence-transformers/all-MiniLM-L6-v2",
                "model_kwargs": {"device": "cpu"},  # CHANGED: "cuda:0"
                "encode_kwargs": {"normalize_embeddings": True, "batch_size": batch_size},
            },
            vector_store_cfg={
                "type": "faiss",
            },
            search_cfg={
                "type": "similarity",
                "k": Range(5, 20, step=5),
            },
            reranker_cfg={
                "class": CrossEncoderReranker,
                "model_name": tiny_cross_encoder,  # CHANGED: "cross-encoder/ms-marco-MiniLM-L6-v2"
                "model_kwargs": {"device": "cpu"},  # CHANGED: "cuda:0"
                "top_n": List([2,5])
            },
            enable_gpu_search=True,
        )

        # cell 13
        def sample_preprocess_fn(
            batch: Dict[str, listtype], rag: RFLangChainRagSpec, prompt_manager: RFPromptManager
        ) -> Dict[str, listtype]:
            """Prepare the final inputs given to the generator model."""
            INSTRUCTIONS = (
                "Utilize your financial knowledge, give your answer or opinion "
                "to the input question or subject matter."
            )

            all_context = rag.get_context(batch_queries=batch["query"], serialize=False)

            retrieved_documents = [
                [doc.metadata["corpus_id"] for doc in docs] for docs in all_context
            ]

            serialized_context = rag.serialize_documents(all_context)
            batch["query_id"] = [int(query_id) for query_id in batch["query_id"]]

            return {
                "prompts": [
                    [
                        {"role": "system", "content": INSTRUCTIONS},
                        {
                            "role": "user",
                            "content": (
                                f"Here is some relevant context:\n{context}. "
                                f"\nNow answer the following question using the "
                                f"context provided earlier:\n{question}"
                            ),
                        },
                    ]
                    for question, context in zip(batch["query"], serialized_context)
                ],
                "retrieved_documents": retrieved_documents,
                **batch,
            }


        def sample_postprocess_fn(batch: Dict[str, listtype]) -> Dict[str, listtype]:
            """Attach ground truth documents for metric computation."""
            batch["ground_truth_documents"] = [
                qrels[qrels["query_id"] == query_id]["corpus_id"].tolist()
                for query_id in batch["query_id"]
            ]
            return batch

        # cell 15
        def compute_ndcg_at_k(retrieved_docs: list, expected_docs: set, k=5):
            """Compute NDCG@k for a single query."""
            relevance = [1 if doc in expected_docs else 0 for doc in retrieved_docs[:k]]
            dcg = sum(rel / math.log2(i + 2) for i, rel in enumerate(relevance))
            ideal_length = min(k, len(expected_docs))
            ideal_relevance = [1] * ideal_length + [0] * (k - ideal_length)
            idcg = sum(rel / math.log2(i + 2) for i, rel in enumerate(ideal_relevance))
            return dcg / idcg if idcg > 0 else 0.0


        def compute_rr(retrieved_docs: list, expected_docs: set):
            """Compute Reciprocal Rank (RR) for a single query."""
            for i, retrieved_doc in enumerate(retrieved_docs):
                if retrieved_doc in expected_docs:
                    return 1 / (i + 1)
            return 0


        def sample_compute_metrics_fn(batch: Dict[str, listtype]) -> Dict[str, Dict[str, Any]]:
            """Compute retrieval metrics per batch."""
            precisions, recalls, f1_scores, ndcgs, rrs = [], [], [], [], []
            total_queries = len(batch["query"])

            for pred, gt in zip(batch["retrieved_documents"], batch["ground_truth_documents"]):
                expected_set = set(gt)
                retrieved_set = set(pred)

                true_positives = len(expected_set.intersection(retrieved_set))
                precision = true_positives / len(retrieved_set) if len(retrieved_set) > 0 else 0
                recall = true_positives / len(expected_set) if len(expected_set) > 0 else 0
                f1 = (
                    2 * precision * recall / (precision + recall)
                    if (precision + recall) > 0
                    else 0
                )

                precisions.append(precision)
                recalls.append(recall)
                f1_scores.append(f1)
                ndcgs.append(compute_ndcg_at_k(pred, expected_set, k=5))
                rrs.append(compute_rr(pred, expected_set))

            return {
                "Total": {"value": total_queries},
                "Precision": {"value": sum(precisions) / total_queries},
                "Recall": {"value": sum(recalls) / total_queries},
                "F1 Score": {"value": sum(f1_scores) / total_queries},
                "NDCG@5": {"value": sum(ndcgs) / total_queries},
                "MRR": {"value": sum(rrs) / total_queries},
            }


        def sample_accumulate_metrics_fn(
            aggregated_metrics: Dict[str, listtype],
        ) -> Dict[str, Dict[str, Any]]:
            """Accumulate metrics across all batches."""
            num_queries_per_batch = [m.get("value", 0) for m in aggregated_metrics.get("Total", [])]
            total_queries = sum(num_queries_per_batch)
            algebraic_metrics = ["Precision", "Recall", "F1 Score", "NDCG@5", "MRR"]

            return {
                "Total": {"value": total_queries},
                **{
                    metric: {
                        "value": sum(
                            m["value"] * queries
                            for m, queries in zip(
                                aggregated_metrics[metric], num_queries_per_batch
                            )
                        )
                        / total_queries,
                        "is_algebraic": True,
                        "value_range": (0, 1),
                    }
                    for metric in algebraic_metrics
                },
            }

        # cell 17
        vllm_config = RFvLLMModelConfig(
            model_config={
                "model": str(tiny_model_dir),  # CHANGED: "Qwen/Qwen2.5-0.5B-Instruct"
                "dtype": "half",
                "gpu_memory_utilization": 0.7,
                "tensor_parallel_size": 1,
                "distributed_executor_backend": "mp",
                "enable_chunked_prefill": False,
                "enable_prefix_caching": True,
                "max_model_len": 4096,
                "disable_log_stats": True,
            },
            sampling_params={
                "temperature": 0.8,
                "top_p": 0.95,
                "max_tokens": 512,
            },
            rag=rag_spec,
            prompt_manager=None,
        )

        config_template = {
            "vllm_config": vllm_config,
            "batch_size": batch_size,
            "preprocess_fn": sample_preprocess_fn,
            "postprocess_fn": sample_postprocess_fn,
            "compute_metrics_fn": sample_compute_metrics_fn,
            "accumulate_metrics_fn": sample_accumulate_metrics_fn,
            "online_strategy_kwargs": {
                "strategy_name": "normal",
                "confidence_level": 0.95,
                "use_fpc": True,
            },
        }

        # cell 19
        config_group = RFOptuna(
            configs=[config_template],
            trainer_type=None,
            n_initial=4,
            budget=6,
            objective="maximize:NDCG@5",
            sampler="tpe",
            pruner="median",
            seed=42,
        )

        # cell 21
        results = experiment.run_evals(
            config_group=config_group,
            dataset=fiqa_dataset,
            num_shards=4,
            seed=42,
        )

        # cell 23
        from optuna.trial import TrialState

        study = config_group._study

        completed = [t for t in study.trials if t.state == TrialState.COMPLETE]
        pruned = [t for t in study.trials if t.state == TrialState.PRUNED]

        print(f"Trials: {len(study.trials)} total, {len(completed)} completed, {len(pruned)} pruned")
        try:
            bt = study.best_trial
            print(f"Best trial: #{bt.number} — NDCG@5 = {bt.value:.4f}")
        except (RuntimeError, ValueError) as exc:
            print(f"No best trial available yet ({exc}).")

        trials_df = pd.DataFrame([
            {
                "trial": t.number,
                "state": t.state.name,
                **{k.split(".")[-1]: v for k, v in t.params.items()},
                "NDCG@5": f"{t.value:.4f}" if t.value is not None else "—",
            }
            for t in study.trials
        ])
        trials_df

        # cell 25
        results_df = pd.DataFrame([
            {
                k: v["value"] if isinstance(v, dict) and "value" in v else v
                for k, v in {**metrics_dict, "run_id": run_id}.items()
            }
            for run_id, (_, metrics_dict) in results.items()
        ])

        results_df

        # cell 27
        experiment.end()

    # -- what the notebook's user expects -----------------------------------------------------
    states = [t.state for t in study.trials]
    n_pruned = sum(s == TrialState.PRUNED for s in states)
    assert len(study.trials) == 4 + min(n_pruned, 2)  # n_initial, plus a replacement per prune
    assert len(study.trials) <= 6  # the budget
    assert all(s in (TrialState.COMPLETE, TrialState.PRUNED) for s in states)
    assert len(completed) >= 1
    # Each trial's parameters are the knobs of the config it ran.
    for trial in study.trials:
        assert trial.params["vllm_config.rag.search_cfg.k"] in (5, 10, 15, 20)
        assert trial.params["vllm_config.rag.reranker_cfg.top_n"] in (2, 5)
    by_id = {run_id: metrics for run_id, (_, metrics) in results.items()}
    assert len(by_id) == len(study.trials)  # pruned configs keep their partial results
    for trial in completed:
        # A completed trial's value is its config's final NDCG@5 on all 8 queries.
        matches = [
            m for m in by_id.values()
            if m["Samples Processed"]["value"] == 8
            and m["search_cfg"]["value"]["k"] == trial.params["vllm_config.rag.search_cfg.k"]
            and m["reranker_cfg"]["value"]["top_n"] == trial.params["vllm_config.rag.reranker_cfg.top_n"]
            and m["NDCG@5"]["value"] == pytest.approx(trial.value)
        ]
        assert matches, trial
    if n_pruned:
        assert "pruned" in caplog.text
    assert len(results_df) == len(by_id)
