"""One context pass per doc gives the log-likelihoods of one row per choice, on every MC task.

The requests are those of every built-in task with frozen rows (tests/tasks/catalog/data: the
arguments lm-eval 0.4.13 sent, which assay's catalog renders identically, see
test_catalog_parity.py) and of every lm-eval YAML the tests carry
(tests/data/lm_eval_parity/expected). Each doc with two or more scored continuations, a few per
task, is scored by the tiny model both ways: log-likelihoods within 1e-5, and the choice each
doc picks (acc, and acc_norm by length-normalised score) identical.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.models.hf.choice_cost import ChoicePacking
from assay.models.hf.model import hf
from assay.requests.types import LoglikelihoodRequest

TESTS = Path(__file__).parents[2]
CATALOG = TESTS / "tasks" / "catalog" / "data"
YAML_RUNS = TESTS / "data" / "lm_eval_parity" / "expected" / "plain"
DOCS_PER_TASK = 2

Doc = list[tuple[str, str]]


def _choice_docs(records: list[dict]) -> list[Doc]:
    """The first docs with two or more loglikelihood requests (no images), as (context,
    continuation) pairs."""
    docs = []
    for record in records:
        args = list(record["arguments"].values())
        pairs = [(a["arg_0"], a["arg_1"]) for a in args if isinstance(a.get("arg_1"), str)]
        if len(pairs) > 1 and not any("arg_2" in a for a in args):
            docs.append(pairs)
    return docs[:DOCS_PER_TASK]


def _sources() -> dict[str, list[Doc]]:
    found: dict[str, list[Doc]] = {}
    for path in sorted(CATALOG.glob("*.json")):
        spec = json.loads(path.read_text(encoding="utf-8"))
        for run in spec["runs"]:
            for task, records in run["lm_eval"]["samples"].items():
                docs = _choice_docs(records)
                if docs:
                    found.setdefault(f"catalog/{task}", docs)
    for path in sorted(YAML_RUNS.glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines()
        docs = _choice_docs([json.loads(line) for line in lines if line.strip()])
        if docs:
            found[f"lm-eval yaml/{path.stem}"] = docs
    return found


SOURCES = _sources()


def test_the_sweep_covers_the_multiple_choice_tasks():
    catalog = {name for name in SOURCES if name.startswith("catalog/")}
    yamls = {name for name in SOURCES if name.startswith("lm-eval yaml/")}
    # The classic MC tasks and the YAMLs' MC shapes must be among them (not silently dropped).
    for task in ("hellaswag", "arc_easy", "piqa", "winogrande", "truthfulqa_mc2"):
        assert f"catalog/{task}" in catalog
    assert len(catalog) >= 20 and len(yamls) >= 8


@pytest.fixture(scope="module")
def lm(tiny_model_dir):
    return hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=8)


def _scores(lm, docs: list[Doc], context_once: bool) -> list[list[float]]:
    lm.scorer.packing = ChoicePacking(context_once, 0, 0.0, 0.0, 0, 0, "cpu", 0)
    flat = [LoglikelihoodRequest(ctx, cont) for doc in docs for ctx, cont in doc]
    got = iter(result.logprob for result in lm.loglikelihood(flat))
    return [[next(got) for _ in doc] for doc in docs]


@pytest.fixture(scope="module")
def scored(lm) -> dict[bool, dict[str, list[list[float]]]]:
    """Every source's docs scored both ways, in one call per way (as a run batches them)."""
    names = sorted(SOURCES)
    docs = [doc for name in names for doc in SOURCES[name]]
    out: dict[bool, dict[str, list[list[float]]]] = {}
    for context_once in (True, False):
        flat = iter(_scores(lm, docs, context_once))
        out[context_once] = {name: [next(flat) for _ in SOURCES[name]] for name in names}
    return out


def _pick(scores: list[float]) -> int:
    return max(range(len(scores)), key=scores.__getitem__)


def _per_char(scores: list[float], lengths: list[int]) -> list[float]:
    """acc_norm's scores: log-likelihood per character of the continuation."""
    return [v / n for v, n in zip(scores, lengths, strict=True)]


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_context_once_matches_one_row_per_choice(scored, name):
    docs = SOURCES[name]
    once, single = scored[True][name], scored[False][name]
    worst = max(abs(a - b) for x, y in zip(once, single) for a, b in zip(x, y, strict=True))
    assert worst <= 1e-5, f"{name}: log-likelihoods differ by {worst:.2e}"
    for doc, x, y in zip(docs, once, single, strict=True):
        assert _pick(x) == _pick(y), f"{name}: acc differs on {doc[0][0][:60]!r}"
        lengths = [len(cont) or 1 for _, cont in doc]
        assert _pick(_per_char(x, lengths)) == _pick(_per_char(y, lengths)), f"{name}: acc_norm"
