"""The pipeline prompt manager: instructions, and few-shot examples selected per query."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.example_selectors import (
    MaxMarginalRelevanceExampleSelector,
    SemanticSimilarityExampleSelector,
)
from langchain_core.prompts import PromptTemplate
from pipeline_fakes import BagOfWordsEmbeddings

from assay.errors import ConfigError
from assay.pipelines import PromptManager
from assay.pipelines.rag.resources import SharedResources

EXAMPLES = [
    {"question": "Tom has 3 apples and buys 4 more apples.", "answer": "7"},
    {"question": "Tom has 3 apples and buys 5 more apples.", "answer": "8"},
    {"question": "A train travels 60 miles per hour for 2 hours.", "answer": "120"},
    {"question": "A recipe needs 2 cups of flour for each cake.", "answer": "6"},
]


def manager(**kwargs: object) -> PromptManager:
    args = {
        "instructions": "Answer with a number.",
        "examples": EXAMPLES,
        "embedding_cfg": {"class": BagOfWordsEmbeddings},
        "example_prompt_template": PromptTemplate.from_template("Q: {question}\nA: {answer}"),
        "k": 2,
        **kwargs,
    }
    pm = PromptManager(**args)
    pm.build(SharedResources())
    return pm


def test_semantic_selection_picks_the_nearest_examples() -> None:
    pm = manager(example_selector_cls=SemanticSimilarityExampleSelector)
    block = pm.get_fewshot_examples(["How many miles does a train travel in 3 hours?"])[0]
    assert block.startswith("Q: A train travels 60 miles per hour for 2 hours.\nA: 120")
    assert block.count("Q: ") == 2
    assert pm.get_instructions() == "Answer with a number."


def test_mmr_prefers_diverse_examples() -> None:
    query = ["Tom has 3 apples and buys some more apples."]
    semantic = manager(example_selector_cls="semantic").select_examples(query)[0]
    mmr = manager(example_selector_cls=MaxMarginalRelevanceExampleSelector).select_examples(query)[
        0
    ]
    assert {e["answer"] for e in semantic} == {"7", "8"}  # the two near-duplicates
    assert mmr[0]["question"].startswith("Tom") and not mmr[1]["question"].startswith("Tom")


def test_instructions_file_k_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "instructions.txt"
    path.write_text("Think step by step.")
    pm = manager(
        instructions=None, instructions_file_path=path, k=3, example_prompt_template="{answer}"
    )
    assert pm.get_instructions() == "Think step by step."
    assert len(pm.get_fewshot_examples(["apples"])[0].split("\n\n")) == 3
    assert manager(examples=[]).get_fewshot_examples(["a", "b"]) == ["", ""]
    with pytest.raises(ConfigError, match="not both"):
        manager(instructions_file_path=path)
    with pytest.raises(ConfigError, match="embedding_cfg"):
        manager(embedding_cfg=None)
    with pytest.raises(ConfigError, match="selector"):
        manager(example_selector_cls="random")
    with pytest.raises(ConfigError, match="lack"):
        manager(example_prompt_template="{rationale}").get_fewshot_examples(["x"])


@pytest.mark.slow
def test_semantic_selection_with_minilm(minilm_embeddings: object) -> None:
    pm = manager(embedding_cfg={"class": lambda: minilm_embeddings}, k=1)
    chosen = pm.select_examples(["How much flour do I need for three cakes?", "Speed of a train"])
    assert chosen[0][0]["answer"] == "6" and chosen[1][0]["answer"] == "120"
