"""Data parallel under a launcher's environment (RANK/WORLD_SIZE): outputs of one process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.waiting import cached_when, wait_for

from assay.cli.main import main
from assay.execution.distributed import LaunchRank, launch_rank

TASKS_DIR = Path(__file__).parents[1] / "data" / "lm_eval_parity" / "tasks"
RUN = ["run", "-t", "parity_mc_same_split,parity_gen_regex,parity_rolling", "--limit", "4"]
RUN += ["--include-path", str(TASKS_DIR), "--log-samples", "--no-progress"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(out: Path, model: list[str], rank: int, world_size: int, port: int):
    """`python -m assay run` as rank `rank` of `world_size`."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    env.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    return subprocess.Popen(
        [sys.executable, "-m", "assay", *RUN, *model, "--output-dir", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def outputs(out: Path) -> tuple[dict, dict[str, bytes]]:
    results = json.loads((out / "results.json").read_text())
    return results, {p.name: p.read_bytes() for p in sorted(out.glob("samples_*.jsonl"))}


def test_launch_rank_reads_the_launcher_environment(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert launch_rank() is None
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert launch_rank() is None
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert launch_rank() == LaunchRank(rank=3, world_size=4, local_rank=1)


@pytest.mark.slow
def test_two_ranks_write_what_one_process_writes(tmp_path):
    # The executor is the same for every backend; dummy keeps the two launched processes light.
    model = ["--model", "dummy", "--model-args", "seed=3", "--batch-size", "2"]
    port = free_port()
    ranks = [launch(tmp_path / f"rank{r}", model, r, 2, port) for r in (0, 1)]
    # The single-process reference runs here, while the ranks work.
    assert main([*RUN, *model, "--output-dir", str(tmp_path / "single")]) == 0
    for process in ranks:
        _, err = process.communicate(timeout=240)
        assert process.returncode == 0, err[-2000:]
    results, samples = outputs(tmp_path / "rank0")
    expected_results, expected_samples = outputs(tmp_path / "single")
    assert len(samples) == 3
    assert samples == expected_samples
    assert results["results"] == expected_results["results"]
    executor = results["assay"]["executor"]
    assert executor["name"] == "data-parallel"
    assert executor["world_size"] == 2
    # Chunks of 2 requests: both ranks took a share.
    assert all(n > 0 for n in executor["chunks_per_rank"])
    # Rank 1 computed its share but wrote nothing.
    assert not (tmp_path / "rank1").exists() or not any((tmp_path / "rank1").iterdir())


def test_world_size_without_a_launcher_is_a_config_error(monkeypatch):
    from assay.errors import ConfigError
    from assay.run.backend import build_executor
    from assay.run.settings import RunSettings

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match="WORLD_SIZE=2 asks for a data-parallel run"):
        build_executor(RunSettings(model="dummy"))


def test_api_answers_enter_the_cache_as_they_arrive_on_rank_0(monkeypatch, tmp_path):
    import threading

    from fixtures.limited_server import LimitedServer

    from assay.execution.distributed import DataParallelExecutor
    from assay.models.api.openai import OpenAIChatLM
    from assay.requests.cache import ResponseCache, request_key
    from assay.requests.types import GenerateRequest, GenParams

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    requests = [GenerateRequest(f"what is item {i}", GenParams(max_gen_toks=8)) for i in range(10)]
    keys = [request_key(r) for r in requests]
    with LimitedServer(hold_after=6, max_seconds=120) as server:
        lm = OpenAIChatLM(model="m", base_url=server.base_url, num_concurrent=1)
        cache = ResponseCache(tmp_path / "cache.sqlite", lm.identity())
        executor = DataParallelExecutor(lm, LaunchRank(0, 1, 0))
        out: dict = {}
        worker = threading.Thread(target=lambda: out.update(a=executor.run(requests, cache=cache)))
        try:
            worker.start()
            wait_for(server.held, within=120)
            seen = cached_when(tmp_path / "cache.sqlite", lm.identity(), keys, 6)
        finally:
            server.hold_after = None
            server.release()
            worker.join(120)
            executor.close()
    assert len(seen) == 6  # while the round was still running
    results = dict(zip(keys, out["a"], strict=True))
    assert all(result == results[key] for key, result in seen.items())


def test_other_ranks_file_arrivals_only_when_every_rank_shares_the_machine(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from assay.execution.distributed import DataParallelExecutor
    from assay.requests.cache import ResponseCache

    cache = ResponseCache(tmp_path / "c.sqlite", {"m": 1})
    rank = SimpleNamespace(
        world_size=2, _cache=None, model=SimpleNamespace(identity=lambda: {"m": 1})
    )
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")  # two machines
    assert DataParallelExecutor._landing(rank, cache) is None
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    landing = DataParallelExecutor._landing(rank, cache)
    assert landing is not None and landing.path == cache.path and landing.model == cache.model
    assert DataParallelExecutor._landing(rank, None) is None
