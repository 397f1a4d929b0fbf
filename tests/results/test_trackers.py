"""`assay run --log-to`: a finished run logged to mlflow (a local file store), wandb (offline),
trackio (its local store) and the Hugging Face Hub (its client mocked), read back and compared
with results.json; no secret reaches any logged file; a missing library or a wrong key is
refused before any model loads."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from fixtures.json_tasks import choice_yaml, even_rows, write_task

from assay.cli.main import main
from assay.errors import ConfigError
from assay.results.trackers import check_trackers, log_run

SECRET = "sk-test-0123456789abcdef"


@pytest.fixture(autouse=True)
def mlflow_file_store(monkeypatch):
    """mlflow 3 refuses its file store unless told (it stays the simplest offline store)."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    """wandb offline, writing under tmp_path; its process-wide settings reset afterwards."""
    import wandb

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    yield tmp_path / "wandb"
    wandb.teardown()


@pytest.fixture
def tasks(tmp_path):
    yaml = choice_yaml("track_task", ["acc", "acc_norm"])
    return write_task(tmp_path / "tasks", yaml, even_rows(8), "track.yaml")


def run(tasks: Path, out: Path, *extra: str) -> dict:
    argv = ["run", "-m", "dummy", "-t", "track_task", "--include-path", str(tasks)]
    argv += ["--output-dir", str(out), "--log-samples", "--no-progress", *extra]
    assert main(argv) == 0
    return json.loads((out / "results.json").read_text())


def expected_metrics(results: dict) -> dict[str, float]:
    """results.json's numbers, keyed as the trackers log them (task/metric/filter)."""
    entry = results["results"]["track_task"]
    return {
        f"track_task/{key.split(',')[0]}/{key.split(',')[1]}": float(value)
        for key, value in entry.items()
        if "," in key and isinstance(value, int | float)
    }


def test_mlflow_run_holds_the_metrics_params_results_and_samples_table(tasks, tmp_path, capsys):
    import mlflow

    store = f"file://{tmp_path / 'mlruns'}"
    results = run(
        tasks,
        tmp_path / "out",
        "--log-to",
        "mlflow",
        "--log-to-args",
        f"tracking_uri={store},project=assay-tests",
    )
    assert "logged to mlflow run" in capsys.readouterr().out
    client = mlflow.MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name("assay-tests")
    (logged,) = client.search_runs([experiment.experiment_id])
    assert logged.info.run_name == "out"  # the output dir's name
    want = expected_metrics(results)
    assert {"track_task/acc/none", "track_task/acc_norm/none"} <= set(want)
    assert {k: logged.data.metrics[k] for k in want} == pytest.approx(want)
    assert logged.data.params["config.model"] == "dummy"
    assert logged.data.params["config.limit"] == "null"
    artifacts = Path(client.download_artifacts(logged.info.run_id, "", str(tmp_path / "dl")))
    assert json.loads((artifacts / "results.json").read_text())["results"] == results["results"]
    table = json.loads((artifacts / "samples" / "track_task.json").read_text())
    samples = [json.loads(x) for x in (tmp_path / "out" / "samples_track_task.jsonl").open()]
    doc_ids = table["data"][0][table["columns"].index("doc_id")]
    assert len(table["data"]) == len(samples) == 8
    assert doc_ids == samples[0]["doc_id"]


def wandb_records(path: Path) -> list:
    """The protobuf records of an offline run's .wandb file (a leveldb-style log of 32 KiB
    blocks, each chunk with a 7-byte header: crc, length, type FULL/FIRST/MIDDLE/LAST)."""
    import struct

    from wandb.proto import wandb_internal_pb2

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B"
    pos, chunk, records = 7, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunk)
            records.append(record)
            chunk = b""
    return records


def test_wandb_offline_run_holds_the_summary_config_and_samples_table(
    tasks, tmp_path, wandb_offline
):
    results = run(
        tasks, tmp_path / "out", "--log-to", "wandb", "--log-to-args", "name=my-eval,project=p"
    )
    (run_dir,) = wandb_offline.glob("offline-run-*")
    records = wandb_records(next(run_dir.glob("run-*.wandb")))
    kinds = [r.WhichOneof("record_type") for r in records]
    (info,) = [r.run for r, k in zip(records, kinds) if k == "run"]
    assert info.display_name == "my-eval" and info.project == "p"
    summary = {
        "/".join(item.nested_key) or item.key: json.loads(item.value_json)
        for r, k in zip(records, kinds)
        if k == "summary"
        for item in r.summary.update
    }
    want = expected_metrics(results)
    assert {"track_task/acc/none", "track_task/acc_norm/none"} <= set(want)
    assert {k: summary[k] for k in want} == pytest.approx(want)
    updates = [*info.config.update]
    updates += [item for r, k in zip(records, kinds) if k == "config" for item in r.config.update]
    config = {"/".join(item.nested_key) or item.key: item.value_json for item in updates}
    assert json.loads(config["config.model"]) == "dummy"
    (table_file,) = (run_dir / "files" / "media" / "table").glob("track_task/samples_*.json")
    table = json.loads(table_file.read_text())
    samples = [json.loads(x) for x in (tmp_path / "out" / "samples_track_task.jsonl").open()]
    assert len(table["data"]) == len(samples) == 8
    doc_ids = sorted(row[table["columns"].index("doc_id")] for row in table["data"])
    assert doc_ids == sorted(s["doc_id"] for s in samples)


def test_hub_pushes_results_and_samples_to_a_dataset_repo(tasks, tmp_path, monkeypatch):
    import huggingface_hub

    calls: list[tuple[str, dict]] = []
    pushed: dict[str, str] = {}

    def create_repo(self, repo_id, **kwargs):
        calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))

    def upload_folder(self, **kwargs):
        calls.append(("upload_folder", kwargs))
        for path in Path(kwargs["folder_path"]).iterdir():
            pushed[f"{kwargs['path_in_repo']}/{path.name}"] = path.read_text()

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_folder)
    results = run(
        tasks, tmp_path / "out", "--log-to", "hub", "--log-to-args", "repo=org/evals,name=r1"
    )
    assert [c[0] for c in calls] == ["create_repo", "upload_folder"]
    assert calls[0][1]["repo_type"] == "dataset" and calls[0][1]["repo_id"] == "org/evals"
    assert calls[1][1]["repo_id"] == "org/evals" and calls[1][1]["repo_type"] == "dataset"
    assert sorted(pushed) == ["r1/results.json", "r1/samples_track_task.jsonl"]
    assert json.loads(pushed["r1/results.json"])["results"] == results["results"]
    samples = (tmp_path / "out" / "samples_track_task.jsonl").read_text()
    assert pushed["r1/samples_track_task.jsonl"] == samples


def test_trackio_local_run_holds_the_metrics_config_and_samples_table(tasks, tmp_path):
    """trackio keeps its store path in module constants read at import: a fresh process."""
    import sqlite3
    import subprocess

    out, store = tmp_path / "out", tmp_path / "trackio"
    argv = ["-m", "assay", "run", "-m", "dummy", "-t", "track_task", "--include-path"]
    argv += [
        str(tasks),
        "--output-dir",
        str(out),
        "--log-samples",
        "--no-progress",
        "--log-to",
        "trackio",
    ]
    argv += ["--log-to-args", "project=evals,name=t1"]
    import assay

    source = str(Path(assay.__file__).parents[1])  # this checkout's assay, not an installed one
    env = {**os.environ, "PYTHONPATH": source, "TRACKIO_DIR": str(store), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    results = json.loads((out / "results.json").read_text())
    db = sqlite3.connect(store / "evals.db")
    logged: dict = {}
    for (metrics,) in db.execute("SELECT metrics FROM metrics WHERE run_name = 't1'"):
        logged.update(json.loads(metrics))
    want = expected_metrics(results)
    assert {"track_task/acc/none", "track_task/acc_norm/none"} <= set(want)
    assert {k: logged[k] for k in want} == pytest.approx(want)
    assert logged["track_task/samples"]["_type"] == "trackio.table"
    ((config,),) = db.execute("SELECT config FROM configs WHERE run_name = 't1'")
    assert json.loads(config)["config.model"] == "dummy"


def test_hub_needs_a_repo():
    with pytest.raises(ConfigError, match="repo=ORG/NAME"):
        check_trackers(["hub"], {"name": "x"})


def test_a_tracker_that_fails_is_reported_after_the_run_is_written(tasks, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--log-to", "mlflow", "--log-to-args", "tracking_uri=bogus-scheme://nowhere"]
    run_argv = ["run", "-m", "dummy", "-t", "track_task", "--include-path", str(tasks)]
    assert main([*run_argv, "--output-dir", str(out), "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert f"the run finished and its files are in {out}" in err and "mlflow:" in err
    assert (out / "results.json").is_file()


def test_no_secret_reaches_a_logged_file(tasks, tmp_path, wandb_offline):
    """A key in model_args (an API backend's) is redacted in params and results.json, and
    scrubbed from the samples files, in every tracker's files."""
    out = tmp_path / "out"
    results = run(tasks, out)
    results["config"]["model_args"] = {"api_key": SECRET, "base_url": "http://x"}
    samples = out / "samples_track_task.jsonl"
    samples.write_text(samples.read_text().replace('"Is 0 even?', f'"Is {SECRET} even?'))
    assert SECRET in samples.read_text()
    args = {"tracking_uri": f"file://{tmp_path / 'mlruns'}", "name": "secret-run"}
    where = log_run(check_trackers(["mlflow", "wandb"], args), results, out, args)
    assert len(where) == 2
    logged = [
        p for root in ("mlruns", "wandb") for p in (tmp_path / root).rglob("*") if p.is_file()
    ]
    assert len(logged) > 10
    assert not [p for p in logged if SECRET.encode() in p.read_bytes()]
    assert any(b'"api_key": "***"' in p.read_bytes() for p in logged)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--log-to", "neptune"], "--log-to 'neptune': not a tracker; choose from hub, mlflow"),
        (["--log-to", "mlflow", "--log-to-args", "entity=x"], "--log-to-args 'entity'"),
        (["--log-to", "mlflow", "--no-progress"], "needs --output-path"),
    ],
)
def test_bad_log_to_is_refused_before_any_model_loads(tasks, argv, message, capsys, monkeypatch):
    import assay.run.evaluation

    monkeypatch.setattr(
        assay.run.evaluation, "build_executor", lambda *a: pytest.fail("model built")
    )
    base = ["run", "-m", "dummy", "-t", "track_task", "--include-path", str(tasks)]
    assert main(base + argv) == 2
    assert message in capsys.readouterr().err


def test_a_missing_library_names_the_extra(tasks, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "mlflow" else real(n, *a)
    )
    argv = ["run", "-m", "dummy", "-t", "track_task", "--include-path", str(tasks)]
    assert main([*argv, "--output-dir", str(tmp_path / "o"), "--log-to", "wandb,mlflow"]) == 2
    err = capsys.readouterr().err
    assert "--log-to mlflow: the mlflow package is not installed" in err
    assert "pip install 'assay[mlflow]'" in err
    assert not (tmp_path / "o" / "results.json").exists()
