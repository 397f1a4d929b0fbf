"""RapidFire's ``tutorial_notebooks/rag-contexteng/rf-tutorial-scifact-full-evaluation.ipynb``, on assay.

Every code cell is copied as written (commit 6dd53c1 of RapidFireAI/rapidfireai) into the test
function, in order, each under a ``# cell N`` comment. Lines changed are marked ``# CHANGED``:
cell 2's ``getpass`` prompts are fixed keys; the ``rapidfireai`` import lines;
``select(range(256))`` keeps the 8 claims of the synthetic SciFact-format files the fixture
writes under ``datasets/scifact``; the OpenAI embeddings and both generators (OpenAI, Gemini)
are served by the loopback server (one ``base_url`` / ``api_base_url`` line each); the
cross-encoder is a tiny local model. The ``response_format`` dict reaches the server as written.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def test_scifact_full_evaluation_notebook(
    tutorial_dir: Path, byte_level_tiktoken: None, api_server: Any, tiny_cross_encoder: str
) -> None:
    already = len(api_server.chat_bodies)
    if True:  # the notebook's cells, indented once
        # cell 2
        import getpass

        OPENAI_API_KEY = "test-openai-key-0123456789"  # CHANGED: getpass.getpass("Enter your OpenAI API key: ")
        GOOGLE_API_KEY = "test-google-key-9876543210"  # CHANGED: getpass.getpass("Enter your Google API key: ")

        # cell 3
        from assay.pipelines import Experiment  # CHANGED: from rapidfireai import Experiment
        from assay.pipelines import (  # CHANGED: from rapidfireai.automl import (
            List,
            RFLangChainRagSpec,
            RFAPIModelConfig,
            RFPromptManager,
            RFGridSearch,
        )
        import json
        from typing import List as listtype, Dict, Any

        # cell 6
        import pandas as pd
        from datasets import Dataset

        # Dataset directory is now in tutorial_notebooks/evals/datasets
        data = []
        with open("datasets/scifact/queries.jsonl", "r") as f:
            for line in f:
                data.append(json.loads(line))

        for d in data:
            if d["metadata"]:
                for info in d["metadata"].values():
                    tags = set([meta["label"] for meta in info])
                    assert len(tags) == 1
                    d["label"] = tags.pop()  # SUPPORT or CONTRADICT
            else:
                d["label"] = "NOINFO"

        scifact_dataset = {
            "query": [d["text"] for d in data],
            "query_id": [d["_id"] for d in data],
            "label": [d["label"] for d in data],
        }
        scifact_dataset = Dataset.from_dict(scifact_dataset).shuffle(seed=42).select(range(8))  # CHANGED: range(256)

        qrels = pd.read_csv("datasets/scifact/qrels.tsv", sep="\t")
        qrels = qrels.rename(
            columns={"query-id": "query_id", "corpus-id": "corpus_id", "score": "relevance"}
        )
        qrels.head()

        # cell 8
        experiment = Experiment(experiment_name="exp1-scifact-full-evaluation", mode="evals", num_gpus=0)

        # cell 10
        from langchain_community.document_loaders import DirectoryLoader, JSONLoader
        from langchain_core.documents import Document
        from langchain_text_splitters import RecursiveCharacterTextSplitter
        from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
        from langchain_openai import OpenAIEmbeddings
        from langchain_google_genai import GoogleGenerativeAIEmbeddings
        from typing import Dict

        batch_size = 32


        def metadata_func(record: Dict, metadata: Dict):
            metadata["corpus_id"] = int(record.get("_id"))
            metadata["title"] = record.get("title")
            return metadata


        def custom_template(doc: Document) -> str:
            return f"{doc.metadata['title']}: {doc.page_content}"


        # CPU-based RAG
        rag_cpu = RFLangChainRagSpec(
            document_loader=DirectoryLoader(
                path="datasets/scifact/",
                glob="corpus.jsonl",
                loader_cls=JSONLoader,
                loader_kwargs={
                    "jq_schema": ".",
                    "content_key": "text",
                    "metadata_func": metadata_func,  # store the document id
                    "json_lines": True,
                    "text_content": False,
                },
                sample_seed=1337,
            ),
            text_splitter=RecursiveCharacterTextSplitter.from_tiktoken_encoder(
                encoding_name="gpt2", chunk_size=512, chunk_overlap=32
            ),
            embedding_cfg=List([
                {
                    "class": OpenAIEmbeddings,
                    "model": List(["text-embedding-3-small", "text-embedding-3-large"]),
                    "api_key": OPENAI_API_KEY,
                    "base_url": api_server.base_url,  # CHANGED: added (the loopback server)
                },
                # You can also use Google Generative AI embeddings
                # {
                #     "class": GoogleGenerativeAIEmbeddings,
                #     "model": "gemini-embedding-001",
                #     "google_api_key": GOOGLE_API_KEY
                # }
            ]), # 2 different embedding models
            # FAISS is an in-memory store and only works in create mode.
            vector_store_cfg={
                "type": "faiss",
            }, # if not set, uses FAISS by default
            search_cfg=List([{"type": "similarity", "k": 10}, {"type": "mmr", "k": 10}]), # 2 different search types
            reranker_cfg={
                "class": CrossEncoderReranker,
                "model_name": tiny_cross_encoder,  # CHANGED: "cross-encoder/ms-marco-MiniLM-L6-v2"
                "model_kwargs": {"device": "cpu"},
                "top_n": 5,
            },
            enable_gpu_search=False,
            document_template=custom_template,
        )

        # cell 12
        INSTRUCTIONS = """
        You are a helpful assistant that can verify scientific claims. You will be given a scientific claim and a list of documents that are potentially relevant to the claim. Your job is to determine whether the claim is supported, contradicted, or not addressed by the evidence. You will do so by responding with one of the following options:

        - SUPPORT: If the evidence supports the claim.
        - CONTRADICT: If the evidence contradicts the claim.
        - NOINFO: If the evidence does not provide enough information to determine whether the claim is supported or contradicted.

        Reply with a single JSON object and nothing else: no markdown fences, no prose before or after it. The object has exactly two keys:

        - "reasoning": a string working through how the evidence bears on the claim.
        - "verdict": a string that is exactly one of "SUPPORT", "CONTRADICT", or "NOINFO".

        Here is an example:

        claim: High cardiopulmonary fitness causes increased mortality rate.

        evidence:
        One consequence of inactivity, low cardiorespiratory fitness, is an established risk factor for cardiovascular disease (CVD) morbidity and mortality, but the prevalence of cardiorespiratory fitness has not been quantified in representative US population samples.

        Cardiosphere-derived cells transplanted into chick embryos migrated to the truncus arteriosus and cardiac outflow tract and contributed to dorsal root ganglia, spinal nerves, and aortic smooth muscle cells. Lineage studies using double transgenic mice encoding protein 0\u2013Cre/Floxed-EGFP revealed undifferentiated and differentiated neural crest-derived cells in the fetal myocardium

        Patients undergoing dialysis have a substantially increased risk of cardiovascular mortality and morbidity. Although several trials have shown the cardiovascular benefits of lowering blood pressure in the general population, there is uncertainty about the efficacy and tolerability of reducing blood pressure in patients on dialysis

        Response:
        {"reasoning": "The evidence suggests that low cardiorespiratory fitness is a known risk factor for cardiovascular disease and therefore the claim is contradicted.", "verdict": "CONTRADICT"}
        """

        # Constrained-decoding schema handed to the generators alongside INSTRUCTIONS.
        # "reasoning" is listed before "verdict" because both OpenAI strict mode and
        # Gemini emit keys in schema order, so this keeps the chain of thought ahead of
        # the answer. "strict"/"additionalProperties" are what OpenAI requires to
        # guarantee adherence; the gateway rewrites the inner schema for Gemini and
        # Anthropic on its own.
        VERDICT_RESPONSE_FORMAT = {
            "type": "json_schema",
            "json_schema": {
                "name": "scifact_verdict",
                "strict": True,
                "schema": {
                    "type": "object",
                    "properties": {
                        "reasoning": {
                            "type": "string",
                            "description": "How the evidence bears on the claim.",
                        },
                        "verdict": {
                            "type": "string",
                            "enum": ["SUPPORT", "CONTRADICT", "NOINFO"],
                        },
                    },
                    "required": ["reasoning", "verdict"],
                    "additionalProperties": False,
                },
            },
        }

        # cell 13
        def sample_preprocess_fn(
            batch: Dict[str, listtype], rag: RFLangChainRagSpec, prompt_manager: RFPromptManager
        ) -> Dict[str, listtype]:
            """Function to prepare the final inputs given to the generator model"""

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
                            "content": f"\nClaim:\n{question}. \nEvidence:\n{context}. \nYour response:",
                        },
                    ]
                    for question, context in zip(batch["query"], serialized_context)
                ],
                "retrieved_documents": retrieved_documents,
                **batch,
            }

        VALID_VERDICTS = {"SUPPORT", "CONTRADICT", "NOINFO"}


        def extract_solution(answer):
            """Return the verdict from the generator's JSON reply, or INVALID.

            The response schema is part of the instructions, so a reply that does not
            parse as JSON or whose verdict is not one of the three labels is a failed
            answer and is scored as one.
            """
            try:
                parsed = json.loads(answer)
            except (TypeError, json.JSONDecodeError):
                return "INVALID"

            if not isinstance(parsed, dict):
                return "INVALID"

            verdict = parsed.get("verdict")
            if isinstance(verdict, str) and verdict.strip().upper() in VALID_VERDICTS:
                return verdict.strip().upper()
            return "INVALID"


        def sample_postprocess_fn(batch: Dict[str, listtype]) -> Dict[str, listtype]:
            """Function to postprocess outputs produced by generator model"""
            # Get ground truth documents for each query; can be done in preprocess_fn too but done here for clarity
            batch["ground_truth_documents"] = [
                qrels[qrels["query_id"] == query_id]["corpus_id"].tolist()
                for query_id in batch["query_id"]
            ]
            batch["answer"] = [extract_solution(answer) for answer in batch["generated_text"]]
            return batch

        # cell 15
        import math


        def compute_ndcg_at_k(retrieved_docs: list, expected_docs: set, k=3):
            """Utility function to compute NDCG@k"""
            relevance = [1 if doc in expected_docs else 0 for doc in retrieved_docs[:k]]
            dcg = sum(rel / math.log2(i + 2) for i, rel in enumerate(relevance))

            # IDCG: perfect ranking limited by min(k, len(expected_docs))
            ideal_length = min(k, len(expected_docs))
            ideal_relevance = [1] * ideal_length + [0] * (k - ideal_length)
            idcg = sum(rel / math.log2(i + 2) for i, rel in enumerate(ideal_relevance))

            return dcg / idcg if idcg > 0 else 0.0


        def compute_rr(retrieved_docs: list, expected_docs: set):
            """Utility function to compute Reciprocal Rank (RR) for a single query"""
            rr = 0
            for i, retrieved_doc in enumerate(retrieved_docs):
                if retrieved_doc in expected_docs:
                    rr = 1 / (i + 1)
                    break
            return rr

        def compute_accuracy(predictions, ground_truth):
            """Label prediction accuracy: SUPPORT, CONTRADICT, NOINFO"""
            return sum(1 for pred, gt in zip(predictions, ground_truth) if pred == gt) / len(predictions)

        def sample_compute_metrics_fn(batch: Dict[str, listtype]) -> Dict[str, Dict[str, Any]]:
            """Function to compute all eval metrics based on retrievals and/or generations"""

            true_positives, precisions, recalls, f1_scores, ndcgs, rrs, acc = 0, [], [], [], [], [], []
            total_queries = len(batch["query"])

            for pred, gt in zip(batch["retrieved_documents"], batch["ground_truth_documents"]):
                expected_set = set(gt)
                retrieved_set = set(pred[:3])

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
                ndcgs.append(compute_ndcg_at_k(pred[:3], expected_set, k=3))
                rrs.append(compute_rr(pred[:3], expected_set))

            accuracy = compute_accuracy(batch["answer"], batch["label"])


            return {
                "Total": {"value": total_queries},
                "Precision": {"value": sum(precisions) / total_queries},
                "Recall": {"value": sum(recalls) / total_queries},
                "F1 Score": {"value": sum(f1_scores) / total_queries},
                "NDCG@3": {"value": sum(ndcgs) / total_queries},
                "MRR": {"value": sum(rrs) / total_queries},
                "Accuracy": {"value": accuracy}
            }


        def sample_accumulate_metrics_fn(
            aggregated_metrics: Dict[str, listtype],
        ) -> Dict[str, Dict[str, Any]]:
            """Function to accumulate eval metrics across all batches"""

            num_queries_per_batch = [m["value"] for m in aggregated_metrics["Total"]]
            total_queries = sum(num_queries_per_batch)
            algebraic_metrics = ["Precision", "Recall", "F1 Score", "NDCG@3", "MRR", "Accuracy"]

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
        # 2 generator configs: OpenAI and Gemini, each routed through MLflow Gateway
        openai_config = RFAPIModelConfig(
            client_config={"max_retries": 2},
            endpoint_config={
                "provider": "openai",
                "api_key_name": "my_openai_key",
                "api_key": OPENAI_API_KEY,
                "api_base_url": api_server.base_url,  # CHANGED: added (the loopback server)
                "endpoint": {
                    "model": "gpt-5.4-nano",
                    "name": "gpt-5.4-nano",
                    "usage_tracking": True,
                },
            },
            model_config={
                "max_completion_tokens": 2048,
                "response_format": VERDICT_RESPONSE_FORMAT,
            },
            rpm_limit=30_000,
            tpm_limit=180_000_000,
            rag=rag_cpu,
            prompt_manager=None,
        )

        gemini_config = RFAPIModelConfig(
            client_config={"max_retries": 2},
            endpoint_config={
                "provider": "gemini",
                "api_key_name": "my_gemini_key",
                "api_key": GOOGLE_API_KEY,
                "api_base_url": api_server.base_url,  # CHANGED: added (the loopback server)
                "endpoint": {
                    "model": "gemini-2.5-flash-lite",
                    "name": "gemini-2.5-flash-lite",
                    "usage_tracking": True,
                },
            },
            model_config={
                "max_completion_tokens": 2048,
                "response_format": VERDICT_RESPONSE_FORMAT,
            },
            rpm_limit=30_000,
            tpm_limit=30_000_000,
            rag=rag_cpu,
            prompt_manager=None,
        )

        config_set = {
            "api_config": List([openai_config, gemini_config]),
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
        # Simple grid search across all sets of config knob values = 8 combinations in total (2 × 2 × 2 across api_config × embedding_cfg × search_cfg)
        config_group = RFGridSearch(config_set)

        # cell 21
        # Launch evals of all RAG configs in the config_group with swap granularity of 4 chunks
        results = experiment.run_evals(
            config_group=config_group,
            dataset=scifact_dataset,
            num_shards=4,
            seed=42,
        )

        # cell 23
        # Convert results dict to DataFrame
        results_df = pd.DataFrame([
            {k: v['value'] if isinstance(v, dict) and 'value' in v else v for k, v in {**metrics_dict, 'run_id': run_id}.items()}
            for run_id, (_, metrics_dict) in results.items()
        ])

        results_df

        # cell 25
        experiment.end()

        # cell 27
        # Get the experiment-specific log file
        log_file = experiment.get_log_file_path()

        print(f"📄 Log File: {log_file}")
        print()

        if log_file.exists():
            print("=" * 80)
            print(f"Last 30 lines of {log_file.name}:")
            print("=" * 80)
            with open(log_file, 'r', encoding='utf-8') as f:
                lines = f.readlines()
                for line in lines[-30:]:
                    print(line.rstrip())
        else:
            print(f"❌ Log file not found: {log_file}")

    # -- what the notebook's user expects -----------------------------------------------------
    assert len(results) == 8 == len(results_df)  # 2 generators x 2 embeddings x 2 search types
    bodies = api_server.chat_bodies[already:]
    # Each distinct (model, prompt) is asked once: configs whose retrieval ends with the same
    # reranked documents share their answers through the response cache.
    distinct = {
        (m["model_name"]["value"], json.dumps(p))
        for columns, m in results.values()
        for p in columns["prompts"]
    }
    assert len(bodies) == len(distinct) >= 2 * 8
    for body in bodies:
        # Exactly the model_config of the notebook, dict value included, nothing added.
        assert set(body) == {"model", "messages", "max_completion_tokens", "response_format"}
        assert body["response_format"] == VERDICT_RESPONSE_FORMAT
    assert {b["model"] for b in bodies} == {"gpt-5.4-nano", "gemini-2.5-flash-lite"}
    headers = [m for _, m in results.values()]
    assert {h["embedding_cfg"]["value"]["model"] for h in headers} == {
        "text-embedding-3-small", "text-embedding-3-large",
    }  # fmt: skip
    assert {h["search_cfg"]["value"]["type"] for h in headers} == {"similarity", "mmr"}
    assert {h["reranker_cfg"]["value"]["top_n"] for h in headers} == {5}
    assert {h["text_splitter_cfg"]["value"]["type"] for h in headers} == {
        "RecursiveCharacterTextSplitter(tiktoken:gpt2)"
    }
    labels = dict(zip(scifact_dataset["query_id"], scifact_dataset["label"]))
    for columns, metrics in results.values():
        assert all(len(docs) == 5 for docs in columns["retrieved_documents"])  # top_n
        # The tiny model writes no JSON verdict: every answer is INVALID, accuracy 0.
        expected = [extract_solution(text) for text in columns["generated_text"]]
        assert columns["answer"] == expected
        accuracy = sum(a == labels[str(q)] for a, q in zip(expected, columns["query_id"])) / 8
        assert metrics["Accuracy"]["value"] == pytest.approx(accuracy)
        mrr = []
        for docs, q in zip(columns["retrieved_documents"], columns["query_id"]):
            relevant = set(qrels[qrels["query_id"] == q]["corpus_id"])
            mrr.append(next((1 / (i + 1) for i, d in enumerate(docs[:3]) if d in relevant), 0))
        assert metrics["MRR"]["value"] == pytest.approx(sum(mrr) / 8)
    # No key in any file the experiment wrote or in the results table.
    written = [p for p in tutorial_dir.rglob("*") if p.is_file()]
    for key in (OPENAI_API_KEY, GOOGLE_API_KEY):
        assert all(key.encode() not in p.read_bytes() for p in written)
        assert key not in results_df.to_string()
