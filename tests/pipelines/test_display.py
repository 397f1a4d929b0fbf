"""Status tables and secret redaction in every table and file."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from assay.models.base import LM
from assay.pipelines import Experiment, GridSearch, List, OpenAIAPIModelConfig
from assay.pipelines.experiment.display import ConfigRow, LiveView, to_html, to_markdown
from assay.util.redact import find_secrets, redact, scrub

SECRET = "sk-live-DO-NOT-LEAK-0123456789"


def test_table_cells_and_varying_knobs() -> None:
    metrics = {"Accuracy": {"value": 0.5, "lower_bound": 0.25, "upper_bound": 0.75}}
    rows = [
        ConfigRow(1, "ongoing", 1, 4, 10, 40, 1, 2.0, metrics, {"k": 1, "model": "m"}),
        ConfigRow(2, "stopped", 2, 4, 20, 40, 0, 4.0, {}, {"k": 3, "model": "m"}),
    ]
    md = to_markdown(rows)
    assert "| 1 | ongoing | 1/4 | 10/40 (1 errors) | 0.5 [0.25, 0.75] | 1 | 5.00 |" in md
    assert "model" not in md.splitlines()[0]  # equal across configs: not shown
    assert "<td>0.5 [0.25, 0.75]</td>" in to_html(rows)
    stream = io.StringIO()
    view = LiveView("rich", stream=stream)
    view.update(rows)
    view.close()  # off a terminal, rich renders the final table when the view closes
    assert "0.5 [0.25, 0.75]" in stream.getvalue()


def test_off_a_terminal_each_shard_is_one_line_and_the_table_prints_once() -> None:
    rows = [ConfigRow(1, "ongoing", 1, 4, 10, 40, 0, 2.0, {}, {"k": 1})]
    stream = io.StringIO()  # not a terminal: auto picks text
    view = LiveView("auto", title="experiment e", stream=stream)
    for done in (1, 2, 3):
        view.update([ConfigRow(1, "ongoing", done, 4, 10 * done, 40, 0, 2.0, {}, {"k": 1})])
    assert stream.getvalue().splitlines() == [
        f"experiment e: {done}/4 shards done over 1 config(s)" for done in (1, 2, 3)
    ]
    view.update(rows)
    view.close()
    assert stream.getvalue().count("| 1 | ongoing |") == 1


def test_redaction_helpers() -> None:
    config = {"client_config": {"api_key": SECRET, "max_retries": 2}, "max_tokens": 5}
    assert redact(config)["client_config"]["api_key"] == "***"
    assert redact(config)["max_tokens"] == 5
    assert find_secrets(config) == {SECRET}
    assert scrub(f"401: bad key {SECRET}", {SECRET}) == "401: bad key ***"


class EchoKeyLM(LM):
    """An API stand-in that fails on some prompts with an error quoting its key."""

    def __init__(self, **kwargs: Any) -> None:
        import os

        self.api_key = os.environ[kwargs["api_key_env"]]

    def generate_until(self, requests: list[Any]) -> list[str]:
        if any("bad" in r.prompt for r in requests):
            raise RuntimeError(f"Incorrect API key provided: {self.api_key}")
        return ["ok" for _ in requests]

    def loglikelihood(self, requests: Any) -> list[Any]:
        raise NotImplementedError

    def loglikelihood_rolling(self, requests: Any) -> list[Any]:
        raise NotImplementedError

    def identity(self) -> dict[str, Any]:
        return {"backend": "echo-key"}


def test_api_keys_never_reach_tables_store_or_exports(tmp_path: Path) -> None:
    from assay.models.base import MODELS, register_model

    real_backend = MODELS.get("openai-chat")
    register_model("openai-chat")(lambda **kw: EchoKeyLM(**kw))
    try:
        config = {
            "pipeline": OpenAIAPIModelConfig(
                client_config={"api_key": SECRET, "base_url": "http://127.0.0.1:9"},
                model_config={"model": "m", "temperature": List([0.0, 0.5])},
            ),
            "batch_size": 2,
            "preprocess_fn": lambda batch, rag, pm: {"prompts": batch["text"], **batch},
            "compute_metrics_fn": lambda batch: {"n": {"value": len(batch["text"])}},
        }
        exp = Experiment("secrets", output_dir=tmp_path / "exp", display="none")
        exp.run_evals(GridSearch(config), {"text": ["good", "bad", "good", "fine"]}, num_shards=2)
        assert any(r["error"] for r in exp.results_table())
        exp.export(tmp_path / "rows.jsonl")
        texts = [exp.to_markdown(), exp._repr_html_(), repr(exp.results()), repr(exp.errors())]
        texts += [
            p.read_bytes().decode("utf-8", "replace") for p in tmp_path.rglob("*") if p.is_file()
        ]
        assert all(SECRET not in t for t in texts)
        assert "***" in (tmp_path / "rows.jsonl").read_text()
    finally:
        register_model("openai-chat")(real_backend)
