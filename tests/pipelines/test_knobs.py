"""Knobs and their expansion by grid and random search."""

from __future__ import annotations

import pytest

from assay.errors import ConfigError
from assay.pipelines import GridSearch, List, ModelConfig, RandomSearch, Range
from assay.pipelines.configs.fingerprint import fingerprint
from assay.pipelines.configs.knobs import flatten_knobs, has_knobs


def base(**overrides: object) -> dict:
    config = {
        "pipeline": ModelConfig("dummy", {}, {"temperature": List([0.0, 0.5]), "max_tokens": 8}),
        "batch_size": List([2, 4, 8]),
    }
    config.update(overrides)
    return config


def test_grid_is_the_cartesian_product_at_any_depth() -> None:
    leaves = GridSearch(base()).get_runs()
    assert len(leaves) == 6
    pairs = {(leaf["pipeline"].sampling()["temperature"], leaf["batch_size"]) for leaf in leaves}
    assert pairs == {(t, b) for t in (0.0, 0.5) for b in (2, 4, 8)}
    assert not any(has_knobs(leaf) for leaf in leaves)


def test_grid_over_a_list_of_configs_and_nested_lists() -> None:
    leaves = GridSearch(
        [base(batch_size=1), {"x": [List([1, 2]), "y"], "batch_size": 1}]
    ).get_runs()
    assert len(leaves) == 4
    assert [leaf["x"] for leaf in leaves[2:]] == [[1, "y"], [2, "y"]]


def test_grid_draws_a_range_once_from_the_seed(caplog: pytest.LogCaptureFixture) -> None:
    k = Range(5, 20, step=5)
    config = {"search": {"k": k}, "temperature": List([0.0, 0.5]), "top_n": k}
    with caplog.at_level("INFO", logger="assay.pipelines.configs.knobs"):
        runs = GridSearch(config).get_runs(seed=7)
    assert len(runs) == 2  # the List alone multiplies configs
    drawn = {r["search"]["k"] for r in runs} | {r["top_n"] for r in runs}
    assert len(drawn) == 1 and drawn <= {5, 10, 15, 20}  # one draw, shared, on the step grid
    assert "drawn once" in caplog.text
    again = GridSearch(config).get_runs(seed=7)
    assert [r["top_n"] for r in again] == [r["top_n"] for r in runs]  # seeded
    seen = {GridSearch({"k": Range(0, 1000)}).get_runs(seed=s)[0]["k"] for s in range(5)}
    assert len(seen) > 1  # the seed matters


def test_list_and_range_sample_like_rapidfire() -> None:
    import random

    random.seed(3)
    first = [List([1, 2, 3]).sample() for _ in range(20)] + [Range(0, 9).sample()]
    random.seed(3)
    second = [List([1, 2, 3]).sample() for _ in range(20)] + [Range(0, 9).sample()]
    assert first == second and set(first[:20]) == {1, 2, 3}
    assert Range(0.5, 0.75).sample(random.Random(0)) == random.Random(0).uniform(0.5, 0.75)


def test_random_search_is_seeded_distinct_and_in_range() -> None:
    space = base(
        top_k=Range(1, 50),
        lr=Range(1e-4, 1e-1, log=True),
        step=Range(0, 1, dtype="float", step=0.25),
    )
    first = RandomSearch(space, num_runs=5).get_runs(seed=3)
    again = RandomSearch(space, num_runs=5).get_runs(seed=3)
    other = RandomSearch(space, num_runs=5).get_runs(seed=4)
    assert [fingerprint(x) for x in first] == [fingerprint(x) for x in again]
    assert [fingerprint(x) for x in first] != [fingerprint(x) for x in other]
    assert len({fingerprint(x) for x in first}) == 5
    for leaf in first:
        assert isinstance(leaf["top_k"], int) and 1 <= leaf["top_k"] <= 50
        assert 1e-4 <= leaf["lr"] <= 1e-1
        assert leaf["step"] in (0.0, 0.25, 0.5, 0.75, 1.0)
    small = RandomSearch({"a": List([1, 2])}, num_runs=10).get_runs(seed=0)
    assert sorted(leaf["a"] for leaf in small) == [1, 2]


def test_range_and_list_validation() -> None:
    with pytest.raises(ConfigError):
        Range(5, 1)
    with pytest.raises(ConfigError):
        Range(0, 1, log=True)
    with pytest.raises(ConfigError):
        List([])
    with pytest.raises(ConfigError):
        RandomSearch(base(), num_runs=0)


def test_fingerprint_tracks_function_bodies_and_object_settings() -> None:
    def f(batch: dict) -> dict:
        return batch

    def g(batch: dict) -> dict:
        return {**batch, "x": 1}

    assert fingerprint({"fn": f}) == fingerprint({"fn": f})
    assert fingerprint({"fn": f}) != fingerprint({"fn": g})
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    a = RecursiveCharacterTextSplitter(chunk_size=100, chunk_overlap=0)
    b = RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=0)
    assert fingerprint(a) != fingerprint(b)
    assert fingerprint(a) == fingerprint(
        RecursiveCharacterTextSplitter(chunk_size=100, chunk_overlap=0)
    )


def test_flatten_knobs_gives_dotted_paths() -> None:
    leaf = GridSearch(base()).get_runs()[0]
    flat = flatten_knobs(leaf)
    assert flat["pipeline.sampling_params.temperature"] == 0.0
    assert flat["pipeline.model_name"] == "dummy"
    assert flat["batch_size"] == 2
