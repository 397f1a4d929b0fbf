"""The Ray executor on a local 2-CPU Ray instance: same outputs as one process, replica loss."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from fixtures.waiting import cached_when, wait_for

from assay.cli.main import main
from assay.errors import ConfigError
from assay.execution.executor import Executor
from assay.run.backend import build_executor
from assay.run.evaluation import Evaluation
from assay.run.settings import RunSettings
from assay.tasks.registry import Registry

TASKS_DIR = Path(__file__).parents[1] / "data" / "lm_eval_parity" / "tasks"
TIMINGS = ("Processing Time", "Samples Per Second")
"""run_evals metrics that measure the clock, not the answers."""
TASKS = ["parity_mc_same_split", "parity_gen_regex", "parity_loglikelihood", "parity_rolling"]
FAKE_VLLM = Path(__file__).parents[1] / "fixtures" / "fake_vllm"
"""Holds a stand-in `vllm` package, which the replicas import (see its docstring)."""


@pytest.fixture(scope="module")
def ray_instance():
    import ray

    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        # The replicas import the sources the driver runs (a PYTHONPATH given to the tests).
        runtime_env={
            "env_vars": {
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(FAKE_VLLM), os.environ.get("PYTHONPATH")])
                )
            }
        },
    )
    yield ray
    ray.shutdown()


@pytest.fixture
def fake_vllm(monkeypatch):
    """The stand-in `vllm` package, importable in this process for one test."""
    monkeypatch.syspath_prepend(str(FAKE_VLLM))
    yield
    sys.modules.pop("vllm", None)


def evaluate_to(
    out: Path, pool: Executor | None = None, tasks: list[str] = TASKS, **settings: Any
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Results and samples files (name -> bytes) of one run over the parity tasks.

    `pool` is an executor the caller owns; without it the settings say which one to build.
    """
    run = RunSettings(output_dir=out, log_samples=True, show_progress=False, **settings)
    results = Evaluation(Registry([TASKS_DIR]).resolve(tasks), run).run(executor=pool)
    samples = {p.name: p.read_bytes() for p in sorted(out.glob("samples_*.jsonl"))}
    assert len(samples) == len(tasks)
    return results, samples


def _number(value: Any) -> float | None:
    """A float, or a float written as a string (samples files keep responses as strings)."""
    if isinstance(value, float):
        return value
    if isinstance(value, str) and "." in value:
        try:
            return float(value)
        except ValueError:
            return None
    return None


def close(a: Any, b: Any, tol: float = 1e-5) -> bool:
    """Equal structures whose floats differ by at most `tol`."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    x, y = _number(a), _number(b)
    if x is not None and y is not None:
        return abs(x - y) <= tol
    return bool(a == b)


def same_up_to_float_noise(a: dict[str, bytes], b: dict[str, bytes]) -> bool:
    """Two runs' samples files: the same records, floats within 1e-5."""
    assert a.keys() == b.keys()
    for name in a:
        lines_a, lines_b = a[name].splitlines(), b[name].splitlines()
        assert len(lines_a) == len(lines_b), name
        for x, y in zip(lines_a, lines_b):
            assert close(json.loads(x), json.loads(y)), (name, x[:200])
    return True


@pytest.mark.slow
def test_dummy_on_two_replicas_matches_the_local_executor(ray_instance, tmp_path):
    dummy = {"model": "dummy", "model_args": {"batch_size": 2, "seed": 5}}
    local, local_samples = evaluate_to(tmp_path / "local", **dummy)
    remote, remote_samples = evaluate_to(tmp_path / "ray", executor="ray", replicas=2, **dummy)
    assert remote_samples == local_samples
    assert remote["results"] == local["results"]
    executor = remote["assay"]["executor"]
    assert executor["name"] == "ray"
    assert executor["replicas"] == 2
    # Both replicas took chunks from the queue.
    assert all(n > 0 for n in executor["chunks_per_replica"])
    assert local["assay"]["executor"] == {"name": "local"}


@pytest.mark.slow
def test_tiny_model_on_two_replicas_matches_the_local_executor(
    ray_instance, tiny_model_dir, tmp_path
):
    hf = {
        "model": "hf",
        "model_args": {"pretrained": str(tiny_model_dir), "max_length": 256},
        "batch_size": 2,
        "limit": 16,  # enough questions that ordering by tokens and by characters differ
        "apply_chat_template": True,  # rendered by a replica's tokenizer, from the driver
    }
    tasks = ["parity_mc_same_split", "parity_gen_regex", "parity_rolling"]
    local, local_samples = evaluate_to(tmp_path / "local", tasks=tasks, **hf)
    remote, remote_samples = evaluate_to(
        tmp_path / "ray", tasks=tasks, executor="ray", replicas=2, **hf
    )
    # A replica batches its chunk's requests by its own tokenizer's lengths; a request padded
    # beside other neighbours than in one process gets log-probabilities that differ in the last
    # float bits (seen: 5e-7). Everything else, every generation and every score, is identical.
    assert same_up_to_float_noise(remote_samples, local_samples)
    assert close(remote["results"], local["results"])
    assert remote["config"]["model_identity"] == local["config"]["model_identity"]
    for task in ("parity_mc_same_split", "parity_gen_regex"):
        assert b"<|assistant|>" in remote_samples[f"samples_{task}.jsonl"]


@pytest.mark.slow
def test_vllm_data_parallel_runs_on_the_ray_executor_as_one_engine(
    ray_instance, fake_vllm, tiny_model_dir, tmp_path
):
    vllm = {"model": "vllm", "limit": 8, "batch_size": 2}
    args = {"pretrained": str(tiny_model_dir), "max_model_len": 256}
    tasks = ["parity_mc_same_split", "parity_gen_regex", "parity_rolling"]
    one, one_samples = evaluate_to(tmp_path / "one", tasks=tasks, model_args=args, **vllm)
    two, two_samples = evaluate_to(
        tmp_path / "two", tasks=tasks, model_args={**args, "data_parallel_size": 2}, **vllm
    )
    # The same chunks as one engine, so the same answers, byte for byte.
    assert two_samples == one_samples
    assert two["results"] == one["results"]
    assert two["config"]["model_identity"] == one["config"]["model_identity"]
    executor = two["assay"]["executor"]
    assert one["assay"]["executor"] == {"name": "local"}
    assert {k: v for k, v in executor.items() if k != "chunks_per_replica"} == {
        "name": "ray",
        "replicas": 2,
        "gpus_per_replica": 0.0,  # tensor_parallel_size GPUs where the cluster has GPUs
        "replicas_lost": 0,
        "replicas_asked_by": "data_parallel_size=2",
    }
    assert all(n > 0 for n in executor["chunks_per_replica"])
    # The replicas' prefix-cache counters are summed: the same prompts read the cache as in one
    # engine; each replica's cache holds only the prefixes it saw, so hits can only be fewer.
    for task in tasks:
        ours = two["assay"]["requests"][task]["prefix_cache"]
        alone = one["assay"]["requests"][task]["prefix_cache"]
        assert ours["queries"] == alone["queries"], task
        assert ours["hits"] <= alone["hits"], task
    generated = one["assay"]["requests"]["parity_gen_regex"]["prefix_cache"]
    assert generated["queries"] > 0 and generated["hits"] > 0


@pytest.mark.slow
def test_run_evals_vllm_data_parallel_spreads_each_batch_over_its_replicas(
    ray_instance, fake_vllm, tiny_model_dir
):
    from assay.execution.ray import RayExecutor
    from assay.pipelines.configs.model_configs import VLLMModelConfig
    from assay.pipelines.shards.engines import local_engine
    from assay.requests.types import GenerateRequest, GenParams

    model = {"model": str(tiny_model_dir), "max_model_len": 256}
    requests = [GenerateRequest(f"Question {i}:", GenParams(max_gen_toks=4)) for i in range(4)]
    one = local_engine(VLLMModelConfig(model))
    pool = local_engine(VLLMModelConfig({**model, "data_parallel_size": 2}))
    try:
        assert isinstance(pool, RayExecutor) and pool.spread
        assert [str(r) for r in pool.run(requests)] == [str(r) for r in one.run(requests)]
        assert pool.describe()["chunks_per_replica"] == [1, 1]
    finally:
        pool.close()


def test_prefix_cache_counters_sum_the_replicas_and_a_death_voids_one_reading():
    from types import SimpleNamespace

    from assay.execution.ray import RayExecutor

    class ActorDied(Exception):
        pass

    counts = [{"queries": 10, "hits": 4}, {"queries": 6, "hits": 1}]

    def actor(replica):
        def read():
            if counts[replica] is None:
                raise ActorDied
            return dict(counts[replica])

        return SimpleNamespace(prefix_cache_stats=SimpleNamespace(remote=read))

    errors = SimpleNamespace(RayActorError=ActorDied, RayError=RuntimeError)
    pool = object.__new__(RayExecutor)
    pool._ray = SimpleNamespace(get=lambda value: value, exceptions=errors)
    pool.actors, pool.alive, pool.lost = [actor(0), actor(1)], [0, 1], 0
    pool._counts, pool._lost_when_counted = {}, 0
    assert pool.prefix_cache_counts() == {"queries": 16, "hits": 5}
    counts[0] = {"queries": 30, "hits": 9}
    counts[1] = None  # replica 1 dies, after work since its last reading
    # Its lookups since the last reading are unknown: no total spanning its death.
    assert pool.prefix_cache_counts() is None
    assert pool.alive == [0] and pool.lost == 1
    # From then on, its last reading stays in the sum, so differences stay right.
    counts[0] = {"queries": 40, "hits": 10}
    assert pool.prefix_cache_counts() == {"queries": 46, "hits": 11}


class _KillOnSecondChunk(list):
    """A RayExecutor's `chunks_done` that kills replica 1 as the driver records the run's
    second chunk: the kill lands mid-run whatever the machine's load (a thread watching the
    counts could wake only after the run's end)."""

    def __init__(self, counts: list[int], kill: Any) -> None:
        super().__init__(counts)
        self.kill, self.fired = kill, False

    def __setitem__(self, index: Any, value: Any) -> None:
        super().__setitem__(index, value)
        if not self.fired and sum(self) >= 2:
            self.fired = True
            self.kill()


def _kill_a_replica_mid_run(ray, tmp_path, model: str, args: dict[str, Any], **settings: Any):
    """A run on two replicas whose second dies once work flows, next to a local run."""
    from assay.execution.ray import RayExecutor

    local, local_samples = evaluate_to(tmp_path / "local", model=model, model_args=args, **settings)
    executor = RayExecutor(model, args, replicas=2)
    counts = _KillOnSecondChunk(executor.chunks_done, lambda: ray.kill(executor.actors[1]))
    executor.chunks_done = counts
    try:
        remote, remote_samples = evaluate_to(
            tmp_path / "ray", pool=executor, model=model, model_args=args, **settings
        )
        assert counts.fired and executor.alive == [0]
    finally:
        executor.close()
    assert executor.lost == 1
    assert executor.requeued >= 1
    assert remote_samples == local_samples
    assert remote["results"] == local["results"]
    # The dead replica took no chunk after it was killed; the live one finished the run.
    assert executor.chunks_done[0] > executor.chunks_done[1]


@pytest.mark.slow
def test_a_replica_killed_mid_run_has_its_chunk_requeued_and_results_match(ray_instance, tmp_path):
    _kill_a_replica_mid_run(ray_instance, tmp_path, "dummy", {"batch_size": 2, "delay": 0.02})


@pytest.mark.slow
def test_a_tiny_model_replica_killed_mid_run_changes_no_byte(
    ray_instance, tiny_model_dir, tmp_path
):
    # One question per chunk, so the run is still going when the kill lands; the chunks left
    # are re-cut exactly as the local run cut them, so every float is the same.
    args = {"pretrained": str(tiny_model_dir), "max_length": 256, "batch_size": 1}
    _kill_a_replica_mid_run(ray_instance, tmp_path, "hf", args, limit=12)


@pytest.mark.slow
def test_api_requests_fan_out_over_replicas_with_results_of_one_process(
    ray_instance, tiny_model_dir, tmp_path
):
    from fixtures.openai_server import OpenAIStubServer

    tasks = ["parity_mc_same_split", "parity_gen_regex"]
    with OpenAIStubServer(tiny_model_dir) as server:
        api = {
            "model": "openai-completions",
            "model_args": {
                "model": "tiny",
                "base_url": server.base_url,
                "tokenizer": str(tiny_model_dir),
                "max_length": 256,
                "batch_size": 2,
            },
            "limit": 6,
        }
        local, local_samples = evaluate_to(tmp_path / "local", tasks=tasks, **api)
        sent_locally = server.requests
        remote, remote_samples = evaluate_to(
            tmp_path / "ray", tasks=tasks, executor="ray", replicas=2, **api
        )
    assert remote_samples == local_samples
    assert remote["results"] == local["results"]
    # Each replica's own client sent part of the same requests.
    assert all(n > 0 for n in remote["assay"]["executor"]["chunks_per_replica"])
    assert server.requests == 2 * sent_locally


@pytest.mark.slow
def test_a_bad_model_argument_reaches_the_driver_as_the_backends_error(ray_instance):
    from assay.errors import UnknownNameError
    from assay.execution.ray import RayExecutor

    with pytest.raises(ConfigError, match="delay must be a number of seconds >= 0"):
        RayExecutor("dummy", {"delay": -1}, replicas=2)
    with pytest.raises(UnknownNameError, match="unknown model 'dumy'"):
        RayExecutor("dumy", {}, replicas=1)
    # The failed pools released their CPUs: a new pool of two still fits.
    pool = RayExecutor("dummy", {}, replicas=2)
    pool.close()


def test_ray_executor_without_ray_installed_is_a_config_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'assay\[ray\]'"):
        build_executor(RunSettings(model="dummy", executor="ray"))
    args = ["run", "--model", "dummy", "--executor", "ray", "-t", "parity_rolling"]
    code = main([*args, "--include-path", str(TASKS_DIR), "--no-progress"])
    assert code != 0
    assert "--executor ray needs Ray" in capsys.readouterr().err


def test_ray_executor_needs_a_backend_name_not_a_model_object():
    from assay.models.dummy import DummyLM

    with pytest.raises(ConfigError, match="pass a backend name"):
        build_executor(RunSettings(model=DummyLM(), executor="ray"))


def test_replicas_that_cannot_fit_the_cluster_are_config_errors():
    from assay.execution.ray import RayExecutor

    fits = RayExecutor._check_fits
    fits(2, 0.0, 0.0, 1, 2.0)
    fits(4, 2.0, 8.0, 1, 8.0)
    with pytest.raises(ConfigError, match="needs 4 GPUs; the Ray cluster has 2"):
        fits(2, 2.0, 2.0, 1, 8.0)
    with pytest.raises(ConfigError, match="needs 3 CPUs; the Ray cluster has 2"):
        fits(3, 0.0, 0.0, 1, 2.0)
    with pytest.raises(ConfigError, match="--replicas must be >= 1"):
        fits(0, 0.0, 0.0, 1, 2.0)
    # Replicas a model arg asked for are named by that arg.
    fits(4, 2.0, 8.0, 1, 8.0, "data_parallel_size=4")
    with pytest.raises(ConfigError) as err:
        fits(4, 2.0, 4.0, 1, 8.0, "data_parallel_size=4")
    assert str(err.value) == (
        "--model-args data_parallel_size=4: 4 replicas x 2 GPUs need 8 GPUs; the Ray cluster "
        "has 4. Lower data_parallel_size."
    )
    with pytest.raises(ConfigError, match="4 replicas need 4 CPUs; the Ray cluster has 2"):
        fits(4, 0.0, 0.0, 1, 2.0, "data_parallel_size=4")


@pytest.mark.slow
def test_run_evals_configs_of_one_model_share_its_replicas(ray_instance, tmp_path):
    from assay.execution.ray import RemoteModel
    from assay.pipelines import Experiment, GridSearch, List, ModelConfig

    model = ModelConfig(
        "dummy",
        {"response": "#### 4", "batch_size": 2},
        {"max_tokens": 8, "temperature": List([0.0, 0.5])},
    )
    config = {
        "pipeline": model,
        "batch_size": 4,
        "preprocess_fn": lambda batch, rag, pm: {"prompts": batch["question"], **batch},
        "compute_metrics_fn": lambda batch: {
            "Four": {"value": [float(t.endswith("4")) for t in batch["generated_text"]]}
        },
    }
    rows = [{"question": f"What is {i} + {4 - i}?"} for i in range(10)]

    def without_timings(metrics: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in metrics.items() if k not in TIMINGS}

    def run(name: str, **options: Any) -> tuple[Experiment, Any]:
        exp = Experiment(name, output_dir=tmp_path / name, display="none", **options)
        return exp, exp.run_evals(GridSearch(config), rows, num_shards=2, seed=0)

    _, local = run("local")
    exp, remote = run("ray", executor="ray", replicas=2)
    try:
        assert sorted(remote) == sorted(local) == [1, 2]
        for cid, (rows_out, metrics) in local.items():
            assert remote[cid][0] == rows_out
            assert without_timings(remote[cid][1]) == without_timings(metrics)
        # Both configs ran on the one pool of replicas of their model.
        assert exp.engines.builds == 1
        assert isinstance(exp.engines.get(model)[0], RemoteModel)
    finally:
        exp.engines.close()


def test_a_spread_plan_has_a_chunk_per_worker_in_the_callers_order():
    from assay.execution.executor import plan_requests
    from assay.requests.types import GenerateRequest, GenParams

    requests = [GenerateRequest(f"prompt {i}", GenParams()) for i in range(5)]
    assert len(plan_requests(requests).chunks) == 1  # the local executor's single chunk
    spread = plan_requests(requests, min_chunks=2)
    assert [len(c.requests) for c in spread.chunks] == [3, 2]
    assert sorted(r.prompt for c in spread.chunks for r in c.requests) == sorted(
        r.prompt for r in requests
    )
    for chunk in spread.chunks:
        spread.complete(chunk, [r.prompt.upper() for r in chunk.requests], None)
    assert spread.results() == [r.prompt.upper() for r in requests]
    # A fixed batch size stays the upper bound; more workers than requests: one request each.
    assert [len(c.requests) for c in plan_requests(requests, None, 1, 2).chunks] == [1] * 5
    assert [len(c.requests) for c in plan_requests(requests, min_chunks=9).chunks] == [1] * 5


@pytest.mark.slow
def test_run_evals_spreads_each_batch_over_the_replicas(ray_instance, tmp_path):
    from assay.pipelines import Experiment, ModelConfig

    rows = [{"question": f"What is {i} + {i}?"} for i in range(8)]
    recorded = tmp_path / "responses.jsonl"
    recorded.write_text(
        "".join(
            json.dumps({"prompt": row["question"], "response": f"#### {2 * i}"}) + "\n"
            for i, row in enumerate(rows)
        )
    )
    # replay answers by prompt: each row has its own answer, so order mistakes would show.
    model = ModelConfig("replay", {"path": str(recorded)}, {"max_tokens": 8})
    config = {
        "pipeline": model,
        "batch_size": 4,
        "preprocess_fn": lambda batch, rag, pm: {"prompts": batch["question"], **batch},
        "compute_metrics_fn": lambda batch: {"Answered": {"value": len(batch["generated_text"])}},
    }

    def run(name: str, **options: Any) -> tuple[Experiment, Any]:
        exp = Experiment(name, output_dir=tmp_path / name, display="none", **options)
        return exp, exp.run_evals(config, rows, num_shards=2, seed=0)

    _, local = run("local")
    exp, remote = run("ray", executor="ray", replicas=2)
    try:
        assert remote[1][0] == local[1][0]
        assert {k: v for k, v in remote[1][1].items() if k not in TIMINGS} == {
            k: v for k, v in local[1][1].items() if k not in TIMINGS
        }
        executor, _ = exp.engines._executor(model)
        # Two batches of four rows, each cut into one chunk per replica.
        assert executor.describe()["chunks_per_replica"] == [2, 2]
    finally:
        exp.engines.close()


def _cached_while_held(server, run, keys, cache_path, identity, answered):
    """Start `run()` in a thread; once the server holds a request, what the response cache at
    `cache_path` holds of `keys` (read through a connection of its own) once the `answered`
    answers have entered it (bounded); then the results."""
    out: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: out.update(answers=run()))
    worker.start()
    wait_for(server.held, within=120)
    seen = cached_when(cache_path, identity, keys, answered)
    server.hold_after = None
    server.release()
    worker.join(120)
    return seen, out["answers"]


@pytest.mark.slow
def test_api_answers_enter_the_cache_as_they_arrive_on_a_replica(ray_instance, tmp_path):
    from fixtures.limited_server import LimitedServer

    from assay.execution.ray import RayExecutor
    from assay.requests.cache import ResponseCache, request_key
    from assay.requests.types import GenerateRequest, GenParams

    requests = [GenerateRequest(f"what is item {i}", GenParams(max_gen_toks=8)) for i in range(10)]
    with LimitedServer(hold_after=6, max_seconds=120) as server:
        args = {"model": "m", "base_url": server.base_url, "num_concurrent": 1}
        executor = RayExecutor("openai-chat", args, replicas=1)
        try:
            identity = executor.model.identity()
            cache = ResponseCache(tmp_path / "cache.sqlite", identity)
            seen, answers = _cached_while_held(
                server,
                lambda: executor.run(requests, cache=cache),
                [request_key(r) for r in requests],
                tmp_path / "cache.sqlite",
                identity,
                answered=6,
            )
        finally:
            executor.close()
    # The chunk (all ten) was still running: the six answered were in the cache already.
    assert len(seen) == 6
    results = dict(zip([request_key(r) for r in requests], answers, strict=True))
    assert all(result == results[key] for key, result in seen.items())
