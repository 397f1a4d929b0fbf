"""Config fingerprints: every setting at any depth, user functions' code, stable across processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from langchain_text_splitters import RecursiveCharacterTextSplitter

from assay.pipelines import ModelConfig, RagSpec
from assay.pipelines.configs.fingerprint import fingerprint

THRESHOLD = 0.5


def config(**rag: Any) -> dict[str, Any]:
    spec = {"search_cfg": {"type": "similarity", "k": 3}, **rag}
    return {"pipeline": ModelConfig("dummy", {}, {"max_tokens": 8}, rag=RagSpec(**spec))}


def test_settings_nested_at_any_depth_change_the_fingerprint() -> None:
    base = fingerprint(config())
    assert fingerprint(config()) == base
    assert fingerprint(config(search_cfg={"type": "similarity", "k": 1})) != base
    assert fingerprint(config(reranker_cfg={"top_n": 1})) != fingerprint(
        config(reranker_cfg={"top_n": 2})
    )
    deep = {"a": {"b": {"c": {"d": {"e": {"f": {"g": 1}}}}}}}
    deeper = {"a": {"b": {"c": {"d": {"e": {"f": {"g": 2}}}}}}}
    assert fingerprint(deep) != fingerprint(deeper)
    splitters = [RecursiveCharacterTextSplitter(chunk_size=s, chunk_overlap=0) for s in (64, 65)]
    assert fingerprint(config(text_splitter=splitters[0])) != fingerprint(
        config(text_splitter=splitters[1])
    )
    # Kinds stay apart: 1, 1.0, True and "1" are different settings.
    assert len({fingerprint({"x": v}) for v in (1, 1.0, True, "1", [1], (1,), {1})}) == 6


def helper_a(x: float) -> float:
    return x + 1


def helper_b(x: float) -> float:
    return x + 2


def test_user_functions_are_identified_by_what_they_run() -> None:
    def calls_a(batch: dict) -> float:
        return helper_a(batch["x"])

    def calls_b(batch: dict) -> float:
        return helper_b(batch["x"])

    assert fingerprint(calls_a) != fingerprint(calls_b)  # same bytecode, another function called

    def make(limit: float) -> Any:
        def over(batch: dict) -> bool:
            return batch["x"] > limit

        return over

    assert fingerprint(make(1.0)) == fingerprint(make(1.0))
    assert fingerprint(make(1.0)) != fingerprint(make(2.0))  # closed-over value

    def with_default(batch: dict, k: int = 3) -> int:
        return k

    def with_other_default(batch: dict, k: int = 4) -> int:
        return k

    assert fingerprint(with_default) != fingerprint(with_other_default)

    def reads_threshold(batch: dict) -> bool:
        return batch["score"] > THRESHOLD

    before = fingerprint(reads_threshold)
    globals()["THRESHOLD"] = 0.7
    try:
        assert fingerprint(reads_threshold) != before  # a module constant the function reads
    finally:
        globals()["THRESHOLD"] = 0.5
    assert fingerprint(reads_threshold) == before


def test_helpers_from_the_users_own_modules_are_identified_by_their_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    module = tmp_path / "my_helpers.py"
    monkeypatch.syspath_prepend(str(tmp_path))

    def load(body: str) -> Any:
        module.write_text(f"def score(x):\n    return {body}\n")
        sys.modules.pop("my_helpers", None)
        importlib.invalidate_caches()
        return importlib.import_module("my_helpers")

    helpers = load("x + 1")
    namespace: dict[str, Any] = {"__name__": "__main__", "helpers": helpers}
    namespace["score"] = helpers.score
    exec("def via_module(b):\n    return helpers.score(b)\n", namespace)
    exec("def via_name(b):\n    return score(b)\n", namespace)
    before = [fingerprint(namespace["via_module"]), fingerprint(namespace["via_name"])]
    helpers = load("x + 2")  # the user edits their helper module
    namespace.update(helpers=helpers, score=helpers.score)
    after = [fingerprint(namespace["via_module"]), fingerprint(namespace["via_name"])]
    assert before[0] != after[0] and before[1] != after[1]
    # Library code is named, not read: numpy's functions keep the fingerprint of a config stable.
    import numpy as np

    namespace["np"] = np
    exec("def uses_numpy(b):\n    return np.mean(b)\n", namespace)
    assert fingerprint(namespace["uses_numpy"]) == fingerprint(namespace["uses_numpy"])


def test_cycles_and_uninspectable_objects_are_handled() -> None:
    import threading

    a: dict[str, Any] = {"name": "a"}
    a["self"] = a
    assert fingerprint(a) == fingerprint(a)
    assert fingerprint({"lock": threading.Lock()}) == fingerprint({"lock": threading.Lock()})


SCRIPT = textwrap.dedent(
    """
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from assay.pipelines import ModelConfig, RagSpec
    from assay.pipelines.configs.fingerprint import fingerprint

    def keep(batch):
        return {k: v for k, v in batch.items() if k in {"query", "answer", "id", "context"}}

    rag = RagSpec(
        text_splitter=RecursiveCharacterTextSplitter(chunk_size=64, chunk_overlap=0),
        search_cfg={"type": "similarity", "k": 3},
        reranker_cfg={"top_n": 2, "tags": {"x", "y", "z"}},
    )
    print(fingerprint({"pipeline": ModelConfig("dummy", rag=rag), "preprocess_fn": keep}))
    """
)


def test_fingerprint_is_the_same_in_another_process(tmp_path: Path) -> None:
    script = tmp_path / "fp.py"
    script.write_text(SCRIPT)
    # Set and frozenset order follows the hash seed: another seed in the other process.
    here = os.environ.get("PYTHONHASHSEED")
    env = {"PYTHONHASHSEED": "1" if here != "1" else "2", "PYTHONPATH": ":".join(sys.path)}
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, check=True
    )
    namespace: dict[str, Any] = {"__name__": "__main__"}
    code = SCRIPT.replace("print(fingerprint(", "result = (fingerprint(")
    # dont_inherit: this file's `from __future__ import annotations` would flag the code.
    exec(compile(code, str(script), "exec", dont_inherit=True), namespace)
    assert out.stdout.strip() == namespace["result"]
    assert len(namespace["result"]) == 16


def test_identities_are_those_stores_were_written_with_before_the_package_split() -> None:
    """Stores match configs by fingerprint; classes moved into sub-packages keep their identity."""
    from assay.pipelines import (
        HFModelConfig,
        List,
        OpenAIAPIModelConfig,
        VLLMModelConfig,
        exact_match_per_row,
    )
    from assay.pipelines.configs.fingerprint import identity_value

    leaf = {
        "pipeline": ModelConfig(
            "dummy",
            {},
            {"temperature": List([0.0, 0.5])},
            rag=RagSpec(search_cfg={"type": "similarity", "k": 3}),
        ),
        "others": [
            VLLMModelConfig({"model": "m"}, {"max_tokens": 3}),
            HFModelConfig({"pretrained": "x"}),
            OpenAIAPIModelConfig({"api_key": "k"}, {"model": "m"}),
        ],
        "batch_size": 2,
    }
    # Computed by the flat package (assay.pipelines.model_configs, assay.pipelines.rag, ...).
    assert fingerprint(leaf) == "dbf92ad0ef7f7b81"
    # The default normaliser's closure names its function as it was named then.
    assert "assay.pipelines.metrics.exact_match.<locals>.<lambda>" in str(
        identity_value(exact_match_per_row())
    )
