"""Secrets in every argument reach no output: URL user info, secret-looking query parameters
and headers, the API key from the environment, and servers that repeat them in their error
messages (online and batch). A missing key is refused before the first request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.json_tasks import generate_yaml, write_task
from fixtures.provider_fakes import FakeProviders

from assay.util.redact import (
    PLACEHOLDER,
    clean,
    clean_text,
    redact_command,
    redact_url,
    remember_in,
)

ENV_KEY = "sk-planted-env-key-0001"
URL_USER = "planted-user-0002"
URL_PASS = "planted-pass-0003"
URL_QUERY = "planted-urlquery-0004"
QUERY = "planted-query-0005"
HEADER = "planted-header-0006"
SECRETS = (ENV_KEY, URL_USER, URL_PASS, URL_QUERY, QUERY, HEADER)


def test_urls_lose_their_user_info_and_secret_query_values():
    url = "https://me:pw@host.example/v1?api-version=2024&api-key=k1&sig=s2&max_tokens=5"
    assert redact_url(url) == (
        f"https://{PLACEHOLDER}@host.example/v1?api-version=2024&api-key={PLACEHOLDER}"
        f"&sig={PLACEHOLDER}&max_tokens=5"
    )
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"


def test_model_args_are_cleaned_by_name_and_their_secrets_are_hidden_in_any_text():
    args = {
        "model": "m",
        "base_url": f"http://u:{URL_PASS}@h/v1",
        "default_query": {"api-key": QUERY, "api-version": "1"},
        "default_headers": {"Authorization": f"Bearer {HEADER}", "X-Trace": "yes"},
        "max_tokens": 5,
    }
    remember_in(args)
    cleaned = clean(args)
    assert cleaned["default_query"] == {"api-key": PLACEHOLDER, "api-version": "1"}
    assert cleaned["default_headers"] == {"Authorization": PLACEHOLDER, "X-Trace": "yes"}
    assert cleaned["base_url"] == f"http://{PLACEHOLDER}@h/v1" and cleaned["max_tokens"] == 5
    said = clean_text(f"the server said: bad token {HEADER} for {QUERY} ({URL_PASS})")
    assert said == f"the server said: bad token {PLACEHOLDER} for {PLACEHOLDER} ({PLACEHOLDER})"
    # Values that hold no secret come back equal.
    plain = {"results": {"t": {"acc,none": 0.5}}, "url": "http://127.0.0.1:1/v1"}
    assert clean(plain) == plain


@pytest.fixture
def tasks(tmp_path):
    return secret_task(tmp_path / "tasks")


def secret_task(folder: Path) -> Path:
    """The generation task `secret_gen` and its 4 rows, in `folder`."""
    rows = [{"q": f"question {i}", "a": f"answer: question {i}"} for i in range(4)]
    return write_task(folder, generate_yaml("secret_gen"), rows)


def _assay(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assay", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**env, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **extra}


def _leaks(folder: Path, *texts: str) -> list[str]:
    """Each planted secret found in a file under `folder` or in `texts`, with where."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{s} in {path}" for s in SECRETS if s.encode() in data]
    for i, text in enumerate(texts):
        found += [f"{s} in output {i}" for s in SECRETS if s in text]
    return found


def _model_args(
    fake: FakeProviders, *extra: str, userinfo: bool = True, query: bool = False
) -> str:
    # The SDK drops a base_url's query string (it posts to /v1/?...: 404), so a run whose
    # base_url has one fails; its model args still hold the secret.
    url = fake.openai_url + (f"?api-key={URL_QUERY}" if query else "")
    if userinfo:
        url = url.replace("://", f"://{URL_USER}:{URL_PASS}@")
    return ",".join(
        [
            "model=gpt-test",
            f"base_url={url}",
            f'default_query={{"api-key": "{QUERY}", "api-version": "1"}}',
            f'default_headers={{"X-Api-Key": "{HEADER}"}}',
            "max_retries=0",
            *extra,
        ]
    )


@pytest.mark.slow
def test_planted_secrets_reach_no_file_and_no_line_online_and_batch(tasks, tmp_path):
    env = _env(OPENAI_API_KEY=ENV_KEY)
    out = tmp_path / "out"
    common = ["--tasks", "secret_gen", "--include-path", str(tasks), "--no-progress", "-v"]
    outputs: list[str] = []
    with FakeProviders(echo_credentials=True) as fake:
        refused = _assay(
            "run", "--model", "openai-chat", "--model-args", _model_args(fake, query=True),
            "--output-dir", str(tmp_path / "query"), *common, env=env,
        )  # fmt: skip
        outputs += [refused.stdout, refused.stderr]
        assert refused.returncode != 0 and "HTTP 404" in refused.stderr
        # Online: the first request is refused with an error repeating the credentials.
        fake.fail_next = [400]
        failed = _assay(
            "run", "--model", "openai-chat", "--model-args", _model_args(fake),
            "--output-dir", str(out), "--log-samples", *common, env=env,
        )  # fmt: skip
        outputs += [failed.stdout, failed.stderr]
        assert failed.returncode != 0 and "fake 400" in failed.stderr
        # The server was sent them (the URL's user info as basic auth).
        assert QUERY in fake.seen and HEADER in fake.seen and "Basic " in fake.seen
        done = _assay(
            "run", "--model", "openai-chat", "--model-args", _model_args(fake),
            "--output-dir", str(out), "--log-samples", *common, env=env,
        )  # fmt: skip
        outputs += [done.stdout, done.stderr]
        assert done.returncode == 0, done.stderr[-2000:]
        assert "gpt-test" in done.stdout and (out / "samples_secret_gen.jsonl").exists()

        # Batch: every item fails with an error repeating the credentials.
        fake.fate = lambda cid, body, n: "invalid"
        batch = _assay(
            "run", "--model", "openai-chat",
            "--model-args", _model_args(fake, "batch_poll_interval=0.05", userinfo=False),
            "--batch-api", "--output-dir", str(tmp_path / "batch"), *common, env=env,
        )  # fmt: skip
        outputs += [batch.stdout, batch.stderr]
        assert batch.returncode != 0 and "fake invalid" in batch.stderr
        assert f"Bearer {ENV_KEY}" in fake.seen  # without user info, the key is sent
        assert any((tmp_path / "batch" / "batches").glob("*.json"))  # the journal
    results = json.loads((out / "results.json").read_text())
    recorded = results["config"]["model_args"]
    assert recorded["base_url"].startswith(f"http://{PLACEHOLDER}@127.0.0.1:")
    assert recorded["default_query"] == {"api-key": PLACEHOLDER, "api-version": "1"}
    assert recorded["default_headers"] == {"X-Api-Key": PLACEHOLDER}
    assert _leaks(tmp_path, *outputs) == []


def test_a_missing_key_is_refused_before_any_request(tasks, tmp_path):
    done = _assay(
        "run", "--model", "openai-chat",
        "--model-args", "model=gpt-test,base_url=http://192.0.2.1:9/v1,max_retries=0,timeout=2",
        "--tasks", "secret_gen", "--include-path", str(tasks), "--no-progress",
        env=_env(),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "OPENAI_API_KEY is not set" in done.stderr and "api_key_env=" in done.stderr
    assert "connection" not in done.stderr.lower() and "Traceback" not in done.stderr


def test_a_short_secret_typed_in_a_dict_model_arg_is_hidden_from_the_command_line():
    typed = 'model=m,default_query={"api-key": "k1", "api-version": "1"},base_url=http://u:p@h/v1'
    shown = redact_command(["openai-chat", f"({typed})"])
    assert '"api-key": "***"' in shown and '"api-version": "1"' in shown
    assert "k1" not in shown and "u:p" not in shown


def test_tracker_params_hold_no_secret_of_the_model_args():
    from assay.results.trackers import params_of

    args = {
        "base_url": f"http://u:{URL_PASS}@h/v1?key={URL_QUERY}",
        "default_query": {"api-key": QUERY},
        "default_headers": {"X-Api-Key": HEADER},
    }
    params = params_of(
        {"config": {"model_args": args, "model_identity": {"base_url": args["base_url"]}}}
    )
    text = json.dumps(params)
    assert not [s for s in SECRETS if s in text]
    assert params["config.model_args.default_query.api-key"] == PLACEHOLDER
