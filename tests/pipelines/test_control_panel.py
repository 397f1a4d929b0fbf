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


class _Stops:
    """An experiment that records the configs it was asked to stop."""

    def __init__(self) -> None:
        self.stopped: list[int] = []

    def stop(self, config_id: int) -> None:
        self.stopped.append(config_id)

    def status_rows(self) -> list[Any]:
        return []


def _request(server: Any, headers: dict[str, str], body: bytes = b'{"config_id": 1}') -> tuple:
    import http.client

    port = int(server.url.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.putrequest("POST", f"/stop?token={server.token}", skip_host=True)
    for name, value in {"Content-Length": str(len(body)), **headers}.items():
        connection.putheader(name, value)
    connection.endheaders(body)
    reply = connection.getresponse()
    answer = (reply.status, dict(reply.headers), json.loads(reply.read()))
    connection.close()
    return answer


def test_cross_origin_and_rebound_hosts_are_refused_and_no_page_gets_a_wildcard() -> None:
    from assay.pipelines.experiment.control_panel import ControlServer

    experiment = _Stops()
    server = ControlServer(experiment)
    port = int(server.url.rsplit(":", 1)[1])
    try:
        here = f"127.0.0.1:{port}"
        evil = _request(server, {"Host": here, "Origin": "https://evil.example"})
        rebound = _request(server, {"Host": f"evil.example:{port}"})
        missing_host = _request(server, {})
        assert [evil[0], rebound[0], missing_host[0]] == [403, 403, 403]
        assert "evil.example" in evil[2]["error"] and "Host" in rebound[2]["error"]
        assert experiment.stopped == []
        # A notebook on this machine (its page on localhost) and a plain client are served.
        notebook = _request(server, {"Host": here, "Origin": "http://localhost:8888"})
        assert notebook[0] == 200
        assert notebook[1]["Access-Control-Allow-Origin"] == "http://localhost:8888"
        plain = _request(server, {"Host": f"localhost:{port}"})
        assert plain[0] == 200 and "Access-Control-Allow-Origin" not in plain[1]
        assert experiment.stopped == [1, 1]
        negative = _request(server, {"Host": here, "Content-Length": "-1"}, b"")
        assert negative[0] == 400
    finally:
        server.close()
