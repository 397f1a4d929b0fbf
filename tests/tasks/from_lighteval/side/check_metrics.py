"""lighteval's metrics in assay's metric stage: per-doc values, scores and standard errors equal
to what lighteval's own MetricsLogger computes from the same docs and responses."""

from __future__ import annotations

import math
import random

import pytest
from lighteval.logging.info_loggers import MetricsLogger
from lighteval.metrics.dynamic_metrics import LogLikelihoodAccMetric
from lighteval.metrics.metrics import Metrics
from lighteval.metrics.normalizations import LogProbCharNorm, LogProbTokenNorm
from lighteval.models.model_output import ModelResponse
from lighteval.tasks.lighteval_task import LightevalTask, LightevalTaskConfig
from lighteval.tasks.requests import Doc as LightevalDoc

from assay.compat.lighteval.files import config_from_lighteval
from assay.doc import Doc, OutputType
from assay.errors import ConfigError
from assay.metrics.base import SampleInput
from assay.requests.types import LoglikelihoodResult
from assay.results.summary import MetricValues, task_entry
from assay.run.scoring import build_metrics


def noop_prompt(line: dict, task_name: str):
    return None


def multiple_choice_docs(count: int) -> list[tuple[Doc, list[float], list[bool]]]:
    rng = random.Random(7)
    out = []
    for i in range(count):
        choices = [" yes", " no", " maybe so"][: 2 + i % 2]
        lls = [rng.uniform(-6, -0.1) for _ in choices]
        greedy = [rng.random() < 0.3 for _ in choices]
        doc = Doc(query=f"Q{i}", choices=choices, gold_index=i % len(choices), id=str(i))
        out.append((doc, lls, greedy))
    return out


GENERATIONS = [
    ("The answer is 42.", [" 42"]),
    ("I think it is \\boxed{7}", [" 7"]),
    ("<think>maybe 3</think> 5", [" 5"]),
    ("nothing", [" 12", " twelve"]),
    ("The final answer is $\\frac{1}{2}$", [" 1/2"]),
    ("the cat sat on the mat", [" the cat sat on a mat"]),
]


def lighteval_scores(metrics: list, docs: list, responses: list) -> dict:
    """What lighteval's pipeline logs and aggregates for these docs and responses."""
    config = LightevalTaskConfig(
        name="t", prompt_function=noop_prompt, hf_repo="x", hf_subset="y", metrics=metrics
    )
    task = LightevalTask(config)
    logger = MetricsLogger()
    per_doc = []
    for doc, response in zip(docs, responses, strict=True):
        output = {}
        for metric in task.metrics:
            output.update(metric.compute_sample(doc=doc, model_response=response))
        per_doc.append(output)
        logger.log("t|0", output)
    logger.aggregate({"t|0": task}, bootstrap_iters=1000)
    return {"per_doc": per_doc, "aggregated": dict(logger.metric_aggregated["t|0"])}


def assay_scores(metrics: list, output_type: OutputType, samples: list[SampleInput]) -> dict:
    config = LightevalTaskConfig(
        name="t", prompt_function=noop_prompt, hf_repo="x", hf_subset="y", metrics=metrics
    )
    converted = config_from_lighteval(config, "f.py")
    assert converted.resolved_output_type == output_type
    scored = build_metrics(converted)
    per_doc = [{m.metric.name: m.metric.sample_fn(s) for m in scored} for s in samples]
    columns = [
        MetricValues(m.metric.name, "none", m.aggregation, m.higher_is_better, [d[m.metric.name] for d in per_doc])
        for m in scored
    ]  # fmt: skip
    entry = task_entry("t", None, len(samples), columns, bootstrap_iters=100000)
    return {"per_doc": per_doc, "entry": entry, "scored": scored}


def check_same(theirs: dict, ours: dict) -> None:
    assert len(theirs["per_doc"]) == len(ours["per_doc"])
    for a, b in zip(theirs["per_doc"], ours["per_doc"], strict=True):
        assert set(a) == set(b)
        for name in a:
            assert str(a[name]) == str(b[name]) or a[name] == b[name], name
    entry = ours["entry"]
    for key, value in theirs["aggregated"].items():
        name = key.removesuffix("_stderr")
        ours_key = f"{name}_stderr,none" if key.endswith("_stderr") else f"{name},none"
        assert entry[ours_key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
    stderr_keys = [k for k in entry if k.endswith("_stderr,none")]
    assert {k.removesuffix(",none") for k in stderr_keys} <= set(theirs["aggregated"])


MC_METRICS = [
    Metrics.loglikelihood_acc,
    Metrics.mrr,
    Metrics.recall_at_k,
    Metrics.mcc,
    LogLikelihoodAccMetric(normalization=LogProbCharNorm()),
    LogLikelihoodAccMetric(normalization=LogProbCharNorm(ignore_first_space=True)),
]


@pytest.mark.parametrize(
    "metric",
    MC_METRICS,
    ids=lambda m: str(m.value.metric_name if hasattr(m, "value") else m.metric_name),
)
def test_multiple_choice_metrics_match_lighteval(metric):
    metric = metric.value if hasattr(metric, "value") else metric
    data = multiple_choice_docs(24)
    lighteval_docs = [
        LightevalDoc(query=d.query, choices=d.choices, gold_index=d.gold_index, id=d.id)
        for d, _, _ in data
    ]
    responses = [ModelResponse(logprobs=lls, argmax_logits_eq_gold=g) for _, lls, g in data]
    samples = [
        SampleInput(d, OutputType.MULTIPLE_CHOICE, [LoglikelihoodResult(x, y) for x, y in zip(lls, g)])
        for d, lls, g in data
    ]  # fmt: skip
    check_same(
        lighteval_scores([metric], lighteval_docs, responses),
        assay_scores([metric], OutputType.MULTIPLE_CHOICE, samples),
    )


def test_identical_computations_are_served_by_assay_s_metric():
    ours = assay_scores(
        [Metrics.loglikelihood_acc, LogLikelihoodAccMetric(normalization=LogProbCharNorm())],
        OutputType.MULTIPLE_CHOICE,
        [],
    )
    functions = [m.metric.sample_fn.__module__ for m in ours["scored"]]
    assert functions == ["assay.metrics.choice", "assay.metrics.choice"]
    assert [m.aggregation.stderr for m in ours["scored"]] == ["mean", "mean"]


GENERATIVE_METRICS = [
    Metrics.exact_match,
    Metrics.expr_gold_metric,
    Metrics.f1_score,
    Metrics.drop,
    Metrics.chrf,
    Metrics.rouge_t5,
]


@pytest.mark.parametrize("metric", GENERATIVE_METRICS, ids=lambda m: m.name)
def test_generative_metrics_match_lighteval(metric):
    from lighteval.utils.utils import remove_reasoning_tags

    data = GENERATIONS * 2
    # DROP reads its unprocessed golds from `specific`.
    specific = [{"golds_no_preprocessing": [g.strip() for g in golds]} for _, golds in data]
    docs = [
        Doc(query=f"Q{i}", choices=golds, gold_index=0, id=str(i), specific=specific[i])
        for i, (_, golds) in enumerate(data)
    ]
    lighteval_docs = [
        LightevalDoc(query=d.query, choices=d.choices, gold_index=0, specific=d.specific)
        for d in docs
    ]
    responses = [
        ModelResponse(text=[t], text_post_processed=[remove_reasoning_tags(t, [("<think>", "</think>")])])
        for t, _ in data
    ]  # fmt: skip
    samples = [SampleInput(d, OutputType.GENERATE_UNTIL, t) for d, (t, _) in zip(docs, data)]
    check_same(
        lighteval_scores([metric.value], lighteval_docs, responses),
        assay_scores([metric.value], OutputType.GENERATE_UNTIL, samples),
    )


def test_sampling_metrics_read_every_generation():
    metric = Metrics.pass_at_k_math(sample_params={"k": 1, "n": 3})
    texts = [["\\boxed{4}", "5", "\\boxed{4}"], ["1", "2", "3"], ["\\boxed{9}", "\\boxed{9}", "9"]]
    golds = [["4"], ["7"], ["9"]]
    docs = [Doc(query="Q", choices=g, gold_index=0, id=str(i)) for i, g in enumerate(golds)]
    lighteval_docs = [LightevalDoc(query="Q", choices=g, gold_index=0) for g in golds]
    responses = [ModelResponse(text=t, text_post_processed=t) for t in texts]
    samples = [SampleInput(d, OutputType.GENERATE_UNTIL, t) for d, t in zip(docs, texts)]
    theirs = lighteval_scores([metric], lighteval_docs, responses)
    check_same(theirs, assay_scores([metric], OutputType.GENERATE_UNTIL, samples))
    assert [d[metric.metric_name] for d in theirs["per_doc"]] != [0, 0, 0]


def test_bootstrapped_stderr_is_lighteval_s_with_the_correct_one_beside_it():
    """lighteval divides the replicates' standard deviation by sqrt(1000); the corrected key is
    that standard deviation itself."""
    data = multiple_choice_docs(30)
    samples = [
        SampleInput(d, OutputType.MULTIPLE_CHOICE, [LoglikelihoodResult(x, y) for x, y in zip(lls, g)])
        for d, lls, g in data
    ]  # fmt: skip
    entry = assay_scores([Metrics.mcc], OutputType.MULTIPLE_CHOICE, samples)["entry"]
    lighteval_value = entry["mcc_stderr,none"]
    assert entry["mcc_stderr_corrected,none"] == pytest.approx(
        lighteval_value * math.sqrt(1000), rel=1e-9
    )
    assert (
        "acc_stderr_corrected,none"
        not in assay_scores([Metrics.loglikelihood_acc], OutputType.MULTIPLE_CHOICE, samples)[
            "entry"
        ]
    )


def test_metrics_assay_cannot_feed_are_refused():
    token_norm = LogLikelihoodAccMetric(normalization=LogProbTokenNorm())
    with pytest.raises(ConfigError, match="token counts"):
        assay_scores([token_norm], OutputType.MULTIPLE_CHOICE, [])
    with pytest.raises(ConfigError, match="judge model"):
        assay_scores([Metrics.simpleqa_judge.value], OutputType.GENERATE_UNTIL, [])
