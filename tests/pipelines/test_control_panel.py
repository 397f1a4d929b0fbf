"""The loopback control endpoint and the notebook panel, used while run_evals runs."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from pipeline_fakes import arithmetic_rows
from test_experiment import experiment, gsm8k_config

from assay.pipelines import GridSearch


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_panel_requests_are_applied_between_shards(tmp_path: Path) -> None:
    exp = experiment(tmp_path)
    server = exp.control_server()
    answers: list[tuple[int, dict]] = []

    def browser(e: Any, config_id: int, shard: int) -> None:
        # What the panel's buttons send, mid-run (the kernel is busy in run_evals).
        if config_id == 2 and shard == 0:
            base, token = server.url, server.token
            answers.append(post(f"{base}/stop?token={token}", {"config_id": 2}))
            answers.append(
                post(
                    f"{base}/clone?token={token}",
                    {"config_id": 1, "changes": {"batch_size": 2}},
                )
            )
            answers.append(post(f"{base}/stop?token=wrong", {"config_id": 1}))
            answers.append(post(f"{base}/delete?token={token}", {"config_id": 99}))

    results = exp.run_evals(
        GridSearch(gsm8k_config()), arithmetic_rows(12), num_shards=3, on_shard_complete=browser
    )
    (stop, clone, forbidden, unknown) = answers
    assert stop == (200, {"ok": True})
    assert clone[0] == 200 and clone[1]["clone_id"] == 3
    assert forbidden[0] == 403
    assert unknown[0] == 400 and "no config 99" in unknown[1]["error"]
    assert results[2][1]["Samples Processed"]["value"] == 4  # stopped after its first shard
    assert results[3][1]["Samples Processed"]["value"] == 12  # the clone ran in full
    with urllib.request.urlopen(f"{server.url}/status?token={server.token}") as reply:
        rows = json.loads(reply.read())["configs"]
    assert {r["config_id"]: r["status"] for r in rows} == {
        1: "completed",
        2: "stopped",
        3: "completed",
    }
    html = exp.control_panel().data
    assert server.url in html and server.token in html and 'data-action="clone"' in html
    exp.end()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{server.url}/status?token={server.token}", timeout=2)
