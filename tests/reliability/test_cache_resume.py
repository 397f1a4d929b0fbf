"""Response cache and resume: keyed by model identity, committed per batch, safe across SIGKILL."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from fixtures.waiting import cached_rows
from toy_tasks import (
    normalised_results,
    output_files,
    same_samples_but_float_noise,
    write_data,
    write_task,
)

from assay.cli.main import main
from assay.execution.executor import DEFAULT_CHUNK_SIZE, commit_chunk
from assay.execution.local import run_requests
from assay.models.base import LM
from assay.models.dummy import DummyLM, dummy
from assay.requests.cache import ResponseCache, model_key, request_key
from assay.requests.types import (
    GenerateRequest,
    GenParams,
    LoglikelihoodRequest,
    LoglikelihoodResult,
)
from assay.run.api import evaluate

COMPUTED = re.compile(r"from the cache, (\d+) to compute")
CACHED = re.compile(r"(\d+) from the cache")


def run_cli(*args: str) -> int:
    return main(["-v", "run", "--model", "dummy", "--no-progress", "--log-samples", *args])


# ---------------------------------------------------------------- keys
def test_model_key_changes_with_every_identity_field():
    base = {"backend": "hf", "pretrained": "m", "revision": "main", "dtype": "float32"}
    keys = {model_key(base)}
    for field, other in (
        ("backend", "vllm"),
        ("pretrained", "m2"),
        ("revision", "v2"),
        ("dtype", "bfloat16"),
    ):
        keys.add(model_key({**base, field: other}))
    keys.add(model_key({**base, "add_bos_token": True}))
    assert len(keys) == 6
    # Key order does not matter.
    assert model_key(dict(reversed(list(base.items())))) == model_key(base)


def test_request_key_covers_kind_text_params_and_sample_index():
    ll = LoglikelihoodRequest("ctx", " a")
    greedy = GenerateRequest("ctx", GenParams(until=["\n"]), 0)
    keys = {
        request_key(ll),
        request_key(LoglikelihoodRequest("ctx", " b")),
        request_key(LoglikelihoodRequest("ctx ", "a")),
        request_key(greedy),
        request_key(GenerateRequest("ctx", GenParams(until=["\n\n"]), 0)),
        request_key(GenerateRequest("ctx", GenParams(until=["\n"], max_gen_toks=7), 0)),
        request_key(GenerateRequest("ctx", GenParams(do_sample=True, seed=1), 0)),
        request_key(GenerateRequest("ctx", GenParams(do_sample=True, seed=2), 0)),
        request_key(GenerateRequest("ctx", GenParams(do_sample=True, seed=1), 1)),
    }
    assert len(keys) == 9
    # Greedy decoding gives one answer whatever the sample index.
    assert request_key(GenerateRequest("ctx", GenParams(until=["\n"]), 3)) == request_key(greedy)


def test_cache_shared_by_two_identities_keeps_them_apart(tmp_path):
    path = tmp_path / "cache.sqlite"
    first = ResponseCache(path, {"backend": "dummy", "seed": 1})
    first.put_many([("k", LoglikelihoodResult(-1.0, True))])
    first.close()
    second = ResponseCache(path, {"backend": "dummy", "seed": 2})
    assert second.get_many(["k"]) == {}
    second.close()
    again = ResponseCache(path, {"backend": "dummy", "seed": 1})
    assert again.get_many(["k"]) == {"k": LoglikelihoodResult(-1.0, True)}
    again.close()


def test_reusing_a_cache_with_another_dummy_seed_never_returns_the_first_answers(
    task_dir, tmp_path
):
    cache = tmp_path / "shared.sqlite"
    common = ["--tasks", "toy_mc", "--include-path", str(task_dir), "--cache", str(cache)]
    assert run_cli("--model-args", "seed=1", "--output-dir", str(tmp_path / "one"), *common) == 0
    assert run_cli("--model-args", "seed=2", "--output-dir", str(tmp_path / "two"), *common) == 0
    assert run_cli("--model-args", "seed=2", "--output-dir", str(tmp_path / "fresh"), "--no-cache",
                   *common[:4])  == 0  # fmt: skip
    one = (tmp_path / "one" / "samples_toy_mc.jsonl").read_bytes()
    two = (tmp_path / "two" / "samples_toy_mc.jsonl").read_bytes()
    fresh = (tmp_path / "fresh" / "samples_toy_mc.jsonl").read_bytes()
    assert one != two
    assert two == fresh
    # Both models' answers are stored, side by side.
    with sqlite3.connect(cache) as db:
        assert db.execute("SELECT COUNT(DISTINCT model) FROM responses").fetchone()[0] == 2


def test_second_run_is_served_entirely_from_the_cache(task_dir, tmp_path, caplog):
    args = ["--tasks", "toy_mc,toy_gen", "--include-path", str(task_dir), "--num-fewshot", "1"]
    caplog.set_level("INFO", logger="assay.execution.local")
    assert run_cli(*args, "--output-dir", str(tmp_path / "a")) == 0
    first = sum(int(n) for n in COMPUTED.findall(caplog.text))
    assert first > 0
    caplog.clear()
    assert (
        run_cli(
            *args, "--output-dir", str(tmp_path / "b"), "--cache", str(tmp_path / "a/cache.sqlite")
        )
        == 0
    )
    assert sum(int(n) for n in COMPUTED.findall(caplog.text)) == 0
    assert sum(int(n) for n in CACHED.findall(caplog.text)) == first
    assert output_files(tmp_path / "a") == output_files(tmp_path / "b")


@pytest.mark.slow
def test_hf_models_differing_in_dtype_do_not_share_cache_entries(tiny_model_dir, tmp_path):
    from assay.models.base import MODELS

    build = MODELS.get("hf")
    f32 = build(pretrained=str(tiny_model_dir), dtype="float32")
    bf16 = build(pretrained=str(tiny_model_dir), dtype="bfloat16")
    assert model_key(f32.identity()) != model_key(bf16.identity())
    request = LoglikelihoodRequest("The cat", " sat")
    path = tmp_path / "hf.sqlite"
    run_requests(f32, [request], cache=ResponseCache(path, f32.identity()))
    assert ResponseCache(path, bf16.identity()).get_many([request_key(request)]) == {}
    # The same weights loaded again hit the cache.
    again = build(pretrained=str(tiny_model_dir), dtype="float32")
    assert model_key(again.identity()) == model_key(f32.identity())
    assert ResponseCache(path, again.identity()).get_many([request_key(request)])


class AutoBatchLM(DummyLM):
    """DummyLM exposing `batch_sizes` as HF's batch_size=auto does: a size is recorded when a
    computed batch picks one different from the last (64 for scoring, 16 for generation)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.chosen: list[int] = []

    @property
    def batch_sizes(self) -> list[int]:
        return list(self.chosen)

    def _pick(self, size: int) -> None:
        if not self.chosen or self.chosen[-1] != size:
            self.chosen.append(size)

    def loglikelihood(self, requests):
        self._pick(64)
        return super().loglikelihood(requests)

    def generate_until(self, requests):
        self._pick(16)
        return super().generate_until(requests)


def test_batch_sizes_survive_a_rerun_and_a_resume_from_the_cache(task_dir, tmp_path):
    def run(tasks: list[str], out: str, cache: Path) -> dict:
        evaluate(AutoBatchLM(seed=3), tasks, include_path=[task_dir], output_dir=tmp_path / out,
                 cache=cache, log_samples=True, show_progress=False)  # fmt: skip
        results = normalised_results(tmp_path / out / "results.json")
        del results["config"]["use_cache"]  # the two scenarios use two cache files
        return results

    both = ["toy_mc", "toy_gen"]
    fresh = run(both, "fresh", tmp_path / "fresh.sqlite")
    assert fresh["config"]["batch_sizes"] == [64, 16]
    # Served entirely from the cache: no batch runs, the sizes come from the cache.
    assert run(both, "rerun", tmp_path / "fresh.sqlite") == fresh
    # Resumed after the first task: its sizes come from the cache, the second task's are new.
    run(["toy_mc"], "partial", tmp_path / "resume.sqlite")
    assert run(both, "resumed", tmp_path / "resume.sqlite") == fresh


# ---------------------------------------------------------------- per-batch commits
class CountingLM(DummyLM):
    """DummyLM that records the size of every backend call and fails on the n-th call."""

    def __init__(self, fail_on_call: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.calls: list[int] = []
        self.fail_on_call = fail_on_call

    def loglikelihood(self, requests):
        self.calls.append(len(requests))
        if self.fail_on_call is not None and len(self.calls) == self.fail_on_call:
            raise KeyboardInterrupt
        return super().loglikelihood(requests)


def test_backend_batch_size_sets_the_commit_granularity():
    assert commit_chunk(DummyLM(batch_size=3)) == 3
    assert commit_chunk(DummyLM()) == DEFAULT_CHUNK_SIZE
    assert commit_chunk(dummy(batch_size="auto")) == DEFAULT_CHUNK_SIZE
    assert commit_chunk(dummy(batch_size=8)) == 8


def test_an_interrupted_call_loses_only_the_batch_in_flight(tmp_path):
    requests = [LoglikelihoodRequest(f"context {i}", f" c{i}") for i in range(10)]
    cache = ResponseCache(tmp_path / "c.sqlite", {"backend": "dummy", "seed": 1})
    model = CountingLM(fail_on_call=3, seed=1, batch_size=3)
    with pytest.raises(KeyboardInterrupt):
        run_requests(model, requests, cache=cache)
    assert cached_rows(tmp_path / "c.sqlite") == 6  # two whole batches of three
    again = CountingLM(seed=1, batch_size=3)
    results = run_requests(again, requests, cache=cache)
    assert again.calls == [3, 1]  # only the four missing requests
    assert results == DummyLM(seed=1).loglikelihood(requests)
    cache.close()


@pytest.mark.slow
@pytest.mark.parametrize("prefix_cache", [False, True])
def test_hf_run_interrupted_between_batches_resumes_to_identical_files(
    task_dir, tmp_path, tiny_model_dir, prefix_cache
):
    from assay.models.base import MODELS

    hf = MODELS.get("hf")(pretrained=str(tiny_model_dir), batch_size=2, prefix_cache=prefix_cache)
    assert commit_chunk(hf) == 2  # committed batch by batch

    class StopsAfterCalls(LM):
        """The hf model, interrupted (as by Ctrl-C) on its fourth call."""

        def __init__(self, calls: int) -> None:
            self.left = calls
            self.batch_size, self.max_length = hf.batch_size, hf.max_length

        def identity(self):
            return hf.identity()

        def provenance(self):
            return hf.provenance()

        def token_counter(self):
            return hf.token_counter()

        def chat_template(self):
            return hf.chat_template()

        @property
        def batch_sizes(self):
            return hf.batch_sizes

        def loglikelihood_rolling(self, requests):
            return hf.loglikelihood_rolling(requests)

        def _call(self, method, requests):
            if self.left == 0:
                raise KeyboardInterrupt
            self.left -= 1
            return getattr(hf, method)(requests)

        def loglikelihood(self, requests):
            return self._call("loglikelihood", requests)

        def generate_until(self, requests):
            return self._call("generate_until", requests)

    settings = {
        "include_path": [task_dir],
        "num_fewshot": 1,
        "log_samples": True,
        "show_progress": False,
    }
    tasks = ["toy_mc", "toy_gen"]
    evaluate(hf, tasks, output_dir=tmp_path / "reference", cache=None, **settings)
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        evaluate(StopsAfterCalls(3), tasks, output_dir=out, **settings)
    kept = cached_rows(out / "cache.sqlite")
    assert kept > 0
    evaluate(hf, tasks, output_dir=out, **settings)
    if prefix_cache:
        # The shared prefixes are found among the requests left, which are fewer than the
        # uninterrupted run's: a continuation scored after another cut rounds differently in
        # the last float bits. Everything else is identical.
        assert same_samples_but_float_noise(out, tmp_path / "reference", tolerance=1e-5)
    else:
        # The requests left are cut into the batches the uninterrupted run used, so every
        # float comes out bit for bit the same.
        assert output_files(out) == output_files(tmp_path / "reference")
    assert normalised_results(out / "results.json") == normalised_results(
        tmp_path / "reference" / "results.json"
    )


# ---------------------------------------------------------------- SIGKILL and resume
def _command(task_dir: Path, out: Path, hold_after: int | None = None) -> list[str]:
    return [
        sys.executable,
        "-m",
        "assay",
        "-v",
        "run",
        "--model",
        "dummy",
        "--model-args",
        "seed=7" if hold_after is None else f"seed=7,hold_after={hold_after}",
        "--batch-size",
        "4",
        "--tasks",
        "toy_mc_b,toy_mc",
        "--include-path",
        str(task_dir),
        "--num-fewshot",
        "2",
        "--output-dir",
        str(out),
        "--log-samples",
        "--no-progress",
    ]


@pytest.fixture(scope="module")
def resume_setup(tmp_path_factory):
    """A task folder and the outputs of an uninterrupted run over it."""
    root = tmp_path_factory.mktemp("resume")
    folder = root / "tasks"
    write_data(folder, n_test=60)
    write_data(folder / "b", prefix="b-")
    write_task(folder, "toy_mc", "mc")
    write_task(folder, "toy_mc_b", "mc", data=folder / "b")
    reference = root / "reference"
    done = subprocess.run(
        _command(folder, reference), capture_output=True, text=True, env=_ENV, check=False
    )
    assert done.returncode == 0, done.stderr
    return folder, reference


_ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


@pytest.mark.slow
# The model answers 16 requests per call (4 docs x 4 choices) and stops answering after
# `kill_after` requests, so the kill lands at a known point however busy the machine is.
@pytest.mark.parametrize("kill_after", [16, 112], ids=["in_first_task", "in_second_task"])
def test_sigkill_mid_run_then_restart_recomputes_nothing_and_matches(
    resume_setup, tmp_path, kill_after
):
    task_dir, reference = resume_setup
    # (24 + 60 docs) x 4 choices = 336 loglikelihood requests, 21 batches of 4 questions.
    total = 336
    out = tmp_path / "resumed"
    cache = out / "cache.sqlite"
    log = tmp_path / "victim.log"
    with log.open("w") as victim_err:
        victim = subprocess.Popen(
            _command(task_dir, out, kill_after),
            stdout=subprocess.DEVNULL,
            stderr=victim_err,
            env=_ENV,
        )
        deadline = time.monotonic() + 600  # only a bound: the run holds until it is killed
        try:
            while time.monotonic() < deadline:
                if cache.exists() and cached_rows(cache) >= kill_after:
                    break
                assert victim.poll() is None, f"the run ended first: {log.read_text()}"
                time.sleep(0.02)
            else:
                pytest.fail(f"{kill_after} answers were not committed in 600 s: {log.read_text()}")
            victim.send_signal(signal.SIGKILL)
            victim.wait(timeout=10)
        finally:
            if victim.poll() is None:
                victim.kill()
    kept = cached_rows(cache)
    assert kill_after <= kept < total, (kept, log.read_text())

    resumed = subprocess.run(
        _command(task_dir, out), capture_output=True, text=True, env=_ENV, check=False
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert sum(int(n) for n in COMPUTED.findall(resumed.stderr)) == total - kept
    assert sum(int(n) for n in CACHED.findall(resumed.stderr)) == kept
    assert cached_rows(cache) == total

    assert output_files(out) == output_files(reference)
    assert set(output_files(out)) == {"samples_toy_mc.jsonl", "samples_toy_mc_b.jsonl"}
    assert normalised_results(out / "results.json") == normalised_results(
        reference / "results.json"
    )
    # No leftovers from the killed run.
    assert not list(out.glob(".*part")) and not list(out.glob(".*.tmp"))
    assert json.loads((out / "results.json").read_text())["results"].keys() == {
        "toy_mc",
        "toy_mc_b",
    }


# ---------------------------------------------------------------- corrupted entries
def _tamper(cache: Path, change) -> int:
    """Rewrite every stored value with `change(value)`; the number of rows changed."""
    with closing(sqlite3.connect(cache)) as db, db:
        rows = db.execute("SELECT model, key, value FROM responses").fetchall()
        db.executemany(
            "UPDATE responses SET value=? WHERE model=? AND key=?",
            [(change(value), model, key) for model, key, value in rows],
        )
    return len(rows)


def _changed_digits(value: str) -> str:
    return re.sub(r"\d(?=\d*[.,\]])", lambda m: str((int(m.group()) + 3) % 10), value, count=2)


@pytest.mark.parametrize(
    "change",
    [
        _changed_digits,
        lambda value: value.split(" ", 1)[0] + ' ["ll", NaN, false]',  # a stored nan
        lambda value: value[: len(value) // 2],  # garbage JSON
        lambda value: value.encode()[:-3] + b"\xff\xfe]",  # flipped bytes, not UTF-8
    ],
    ids=["digits", "nan", "garbage", "bytes"],
)
def test_a_corrupted_entry_is_computed_again_and_said(task_dir, tmp_path, caplog, change):
    args = ["--tasks", "toy_mc,toy_gen", "--include-path", str(task_dir)]
    assert run_cli(*args, "--output-dir", str(tmp_path / "a")) == 0
    cache = tmp_path / "a" / "cache.sqlite"
    stored = _tamper(cache, change)
    caplog.clear()
    assert run_cli(*args, "--output-dir", str(tmp_path / "b"), "--cache", str(cache)) == 0
    # Nothing changed was used: the answers are the first run's, byte for byte.
    assert output_files(tmp_path / "a") == output_files(tmp_path / "b")
    assert f"--cache {cache}: " in caplog.text
    assert "stored response(s) failed their checksum" in caplog.text
    assert "computed again" in caplog.text
    # The recomputed answers replaced the corrupted ones: a third run finds no damage.
    caplog.clear()
    assert run_cli(*args, "--output-dir", str(tmp_path / "c"), "--cache", str(cache)) == 0
    assert "checksum" not in caplog.text
    assert cached_rows(cache) == stored


def test_a_damaged_cache_file_is_refused_naming_it(task_dir, tmp_path, capsys):
    args = ["--tasks", "toy_mc", "--include-path", str(task_dir)]
    assert run_cli(*args, "--output-dir", str(tmp_path / "a")) == 0
    cache = tmp_path / "a" / "cache.sqlite"
    with closing(sqlite3.connect(cache)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(cache.read_bytes())
    page = 4096
    for offset in range(page, len(data), 7):  # every page past the header, scrambled
        data[offset] ^= 0x5A
    cache.write_bytes(bytes(data))
    capsys.readouterr()
    code = run_cli(*args, "--output-dir", str(tmp_path / "b"), "--cache", str(cache))
    err = capsys.readouterr().err
    assert code == 2
    assert f"--cache {cache}" in err and "Traceback" not in err
