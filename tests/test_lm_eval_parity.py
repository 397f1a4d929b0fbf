"""Prompts, targets and hashes rendered byte for byte as lm-eval 0.4.13 renders them.

tests/data/lm_eval_parity/ holds small lm-eval YAML tasks over local JSONL files and, in
expected/, what lm-eval's own CLI wrote in its samples files for them (frozen once by
regenerate.py). Every run here renders the same tasks through assay and compares every line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.models.base import LM
from assay.prompts.chat import ChatTemplate, TokenizerChatTemplate
from assay.requests.types import LoglikelihoodResult, RollingResult
from assay.run.api import evaluate

PARITY = Path(__file__).parent / "data" / "lm_eval_parity"
RUNS = json.loads((PARITY / "expected" / "runs.json").read_text(encoding="utf-8"))
COMPARED = ("doc_id", "filter", "target", "arguments", "doc_hash", "prompt_hash", "target_hash")

LM_EVAL_SHOWS_DOC_ITS_OWN_ROW = {
    ("plain", "parity_mc_implicit_test_pool", 1),
    ("plain", "parity_mc_implicit_test_pool", 6),
    ("plain", "parity_gen_multi_target", 4),
    ("seed_list", "parity_mc_implicit_test_pool", 6),
    # first_n over the evaluated validation split: lm-eval hands its sampler the eval doc only
    # when the few-shot split is the test split, so docs 0 and 1 get rows 0 and 1.
    ("plain", "parity_mc_first_n_same_validation", 0),
    ("plain", "parity_mc_first_n_same_validation", 1),
}
"""Docs whose lm-eval prompt contains the doc itself as a few-shot example (the pool is the
evaluated split but lm-eval's sampler is not told which doc is evaluated). assay never does
that: it swaps in another example and leaves every other doc's examples as lm-eval's. With
first_n over the test split lm-eval drops the doc itself, and so does assay (no exemption)."""


class ChatFakeLM(LM):
    """Constant answers; prompts rendered with the tiny model's tokenizer chat template."""

    def __init__(self, tokenizer: Any = None) -> None:
        self.tokenizer = tokenizer

    def chat_template(self) -> ChatTemplate | None:
        if self.tokenizer is None:
            return None
        return TokenizerChatTemplate(self.tokenizer, missing="the tiny model has no template")

    def loglikelihood(self, requests):
        return [LoglikelihoodResult(-1.0, False) for _ in requests]

    def loglikelihood_rolling(self, requests):
        return [RollingResult(-1.0, 1) for _ in requests]

    def generate_until(self, requests):
        return ["#### 3" for _ in requests]

    def identity(self):
        return {"backend": "parity-fake"}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _render(run: str, model: ChatFakeLM, out: Path) -> dict[str, list[dict[str, Any]]]:
    spec = RUNS[run]
    evaluate(
        model,
        spec["tasks"],
        include_path=[PARITY / "tasks"],
        output_dir=out,
        log_samples=True,
        apply_chat_template=spec["chat"],
        show_progress=False,
        **spec["assay"],
    )
    return {task: _lines(out / f"samples_{task}.jsonl") for task in spec["tasks"]}


def _compare(run: str, rendered: dict[str, list[dict[str, Any]]]) -> set[tuple[str, str, int]]:
    """Assert every line matches lm-eval's; return the docs exempt as LM_EVAL_SHOWS_DOC_ITS_OWN_ROW."""
    exempt = set()
    for task, ours in rendered.items():
        expected = _lines(PARITY / "expected" / run / f"{task}.jsonl")
        assert len(ours) == len(expected), task
        for mine, theirs in zip(ours, expected, strict=True):
            key = (run, task, theirs["doc_id"])
            prompt = theirs["arguments"]["gen_args_0"]["arg_0"]
            question = mine["doc"]["question"]
            if key in LM_EVAL_SHOWS_DOC_ITS_OWN_ROW:
                assert prompt.count(question) >= 2, key
                assert mine["arguments"]["gen_args_0"]["arg_0"].count(question) == 1, key
                exempt.add(key)
                continue
            for field in COMPARED:
                assert _dump(mine[field]) == _dump(theirs[field]), (task, theirs["doc_id"], field)
    return exempt


def test_plain_prompts_match_lm_eval(tmp_path: Path) -> None:
    rendered = _render("plain", ChatFakeLM(), tmp_path)
    exempt = _compare("plain", rendered)
    assert exempt == {key for key in LM_EVAL_SHOWS_DOC_ITS_OWN_ROW if key[0] == "plain"}


def test_the_four_seed_form_picks_lm_evals_few_shot_examples_and_records_its_seeds(
    tmp_path: Path,
) -> None:
    # `--seed 0,1,2,7` in both harnesses: the fourth seed drives few-shot selection, so every
    # few-shot prompt equals lm-eval's (and differs from the default seed's, checked below).
    rendered = _render("seed_list", ChatFakeLM(), tmp_path)
    exempt = _compare("seed_list", rendered)
    assert exempt == {key for key in LM_EVAL_SHOWS_DOC_ITS_OWN_ROW if key[0] == "seed_list"}
    default = _lines(PARITY / "expected" / "plain" / "parity_gen_regex.jsonl")
    assert [r["arguments"] for r in rendered["parity_gen_regex"]] != [
        r["arguments"] for r in default
    ]
    config = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))["config"]
    expected = json.loads((PARITY / "expected" / "seed_list" / "seeds.json").read_text())
    assert {key: config[key] for key in expected} == expected


@pytest.mark.slow
@pytest.mark.parametrize("run", ["chat_multiturn_system", "chat_singleturn_gen_kwargs"])
def test_chat_template_prompts_match_lm_eval(run: str, tmp_path: Path) -> None:
    from fixtures.tiny_model import CORPUS, train_tokenizer

    # The template only reads bos_token and the messages, so a small tokenizer trained here
    # renders what lm-eval rendered with the full tiny model.
    tokenizer = train_tokenizer(CORPUS.splitlines(), vocab=300, model_max_length=512)
    assert _compare(run, _render(run, ChatFakeLM(tokenizer), tmp_path)) == set()
