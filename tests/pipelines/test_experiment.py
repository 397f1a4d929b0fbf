"""run_evals end to end on a GSM8K-style few-shot use case with a deterministic model."""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from typing import Any

import pytest
from pipeline_fakes import BagOfWordsEmbeddings, arithmetic_rows

from assay.errors import AssayError
from assay.pipelines import (
    EarlyStop,
    Experiment,
    GridSearch,
    HFModelConfig,
    List,
    ModelConfig,
    PipelineError,
    PromptManager,
    exact_match,
    mean_of_rows,
)
from assay.stats.anytime import confidence_sequence, paired_confidence_sequence
from assay.stats.online import OnlineSettings, mean_interval, total_interval

# -- the user functions of the GSM8K use case, written as the source document writes them ------


def sample_preprocess_fn(batch: dict, rag: Any, prompt_manager: Any) -> dict:
    return {
        "prompts": [
            [
                {"role": "system", "content": prompt_manager.get_instructions()},
                {
                    "role": "user",
                    "content": f"Here are some examples: \n{examples}. \n"
                    f"Now answer the following question:\n{question}",
                },
            ]
            for question, examples in zip(
                batch["question"],
                prompt_manager.get_fewshot_examples(user_queries=batch["question"]),
            )
        ],
        **batch,
    }


def extract_solution(answer: str) -> str:
    found = re.search(r"####\s*(-?[0-9.,]+)", answer)
    return found.group(1) if found else "INVALID"


def sample_postprocess_fn(batch: dict) -> dict:
    batch["model_answer"] = [extract_solution(t) for t in batch["generated_text"]]
    batch["ground_truth"] = [extract_solution(a) for a in batch["answer"]]
    return batch


def sample_compute_metrics_fn(batch: dict) -> dict:
    correct = sum(1 for p, g in zip(batch["model_answer"], batch["ground_truth"]) if p == g)
    return {"Correct": {"value": correct}, "Total": {"value": len(batch["model_answer"])}}


def sample_accumulate_metrics_fn(aggregated_metrics: dict) -> dict:
    correct = sum(m.get("value", 0) for m in aggregated_metrics.get("Correct", [{}]))
    total = sum(m.get("value", 0) for m in aggregated_metrics.get("Total", [{}]))
    accuracy = correct / total if total > 0 else 0
    return {
        "Total": {"value": total},
        "Correct": {"value": correct, "is_distributive": True, "value_range": (0, 1)},
        "Accuracy": {"value": accuracy, "is_algebraic": True, "value_range": (0, 1)},
    }


def prompt_manager(k: Any = 2) -> PromptManager:
    examples = [
        {"question": f"What is {a} + {b}?", "answer": f"#### {a + b}"}
        for a, b in [(1, 1), (2, 5), (7, 3), (10, 4)]
    ]
    return PromptManager(
        instructions="Solve the problem. End with #### and the number.",
        examples=examples,
        embedding_cfg={"class": BagOfWordsEmbeddings},
        example_selector_cls="semantic",
        example_prompt_template="Question: {question}\nAnswer: {answer}",
        k=k,
    )


def gsm8k_config(**overrides: Any) -> dict[str, Any]:
    config = {
        "pipeline": ModelConfig(
            "pipelines-calc",
            {},
            {"temperature": List([0.0, 0.8]), "max_tokens": 32},
            prompt_manager=prompt_manager(),
        ),
        "batch_size": 4,
        "preprocess_fn": sample_preprocess_fn,
        "postprocess_fn": sample_postprocess_fn,
        "compute_metrics_fn": sample_compute_metrics_fn,
        "accumulate_metrics_fn": sample_accumulate_metrics_fn,
    }
    config.update(overrides)
    return config


def experiment(tmp_path: Path, name: str = "gsm8k") -> Experiment:
    return Experiment(name, output_dir=tmp_path / name, display="none")


TIMINGS = ("Processing Time", "Samples Per Second")
"""Metrics that measure the clock, not the answers."""


def without_timings(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if k not in TIMINGS}


class Interrupt(Exception):
    """Raised from on_shard_complete to stand for a crash between shards."""


def test_gsm8k_fewshot_grid_with_weighted_accumulate(tmp_path: Path, built_models: list) -> None:
    exp = experiment(tmp_path)
    results = exp.run_evals(GridSearch(gsm8k_config()), arithmetic_rows(24), num_shards=4, seed=7)
    assert sorted(results) == [1, 2]
    greedy, sampled = results[1][1], results[2][1]
    assert greedy["sampling_params"]["value"]["temperature"] == 0.0
    assert greedy["Accuracy"]["value"] == 1.0 and greedy["Correct"]["value"] == 24
    # The sampling config shares the engine but keeps its own temperature: every answer is off.
    assert sampled["Accuracy"]["value"] == 0.0
    assert len(built_models) == 1
    temps = {r.params.temperature for r in built_models[0].seen}
    assert temps == {0.0, 0.8}
    rows, _ = results[1]
    assert len(rows["generated_text"]) == 24 and "model_answer" in rows
    first_prompt = rows["prompts"][0]
    assert first_prompt[0]["content"].startswith("Solve the problem")
    assert first_prompt[1]["content"].count("Question:") == 2  # k = 2 few-shot examples


def test_live_intervals_follow_the_documented_rules(tmp_path: Path) -> None:
    rows = arithmetic_rows(40)
    for row in rows[::3]:
        row["answer"] = "#### -1"  # 14 of 40 rows can never be right

    snapshots: list[dict] = []

    def record(exp: Experiment, config_id: int, shard: int) -> None:
        snapshots.append(exp.metrics(config_id))

    config = gsm8k_config(
        online_strategy_kwargs={"strategy_name": "wilson", "confidence_level": 0.9}
    )
    config["pipeline"] = config["pipeline"].replace(sampling_params={"temperature": 0.0})
    exp = experiment(tmp_path)
    exp.run_evals(config, rows, num_shards=4, seed=3, on_shard_complete=record)
    first = snapshots[0]
    n = first["Samples Processed"]["value"]
    assert n == 10
    accuracy = first["Accuracy"]
    expected = mean_interval(
        accuracy["value"], n, population=40, settings=OnlineSettings("wilson", 0.9)
    )
    assert (accuracy["lower_bound"], accuracy["upper_bound"]) == pytest.approx(
        (expected.lower, expected.upper)
    )
    # 10 rows hold fewer than 10 at one end: the wilson strategy gives way to the exact interval
    assert accuracy["ci_method"] == expected.method and accuracy["confidence_level"] == 0.9
    correct = first["Correct"]
    projected = total_interval(
        correct["observed_value"], n, population=40, settings=OnlineSettings("wilson", 0.9)
    )
    assert correct["value"] == pytest.approx(correct["observed_value"] * 4)
    assert correct["upper_bound"] == pytest.approx(projected.upper)
    last = snapshots[-1]["Accuracy"]
    assert last["value"] == pytest.approx(26 / 40)
    assert last["lower_bound"] == pytest.approx(last["upper_bound"])  # all rows scored
    widths = [s["Accuracy"]["upper_bound"] - s["Accuracy"]["lower_bound"] for s in snapshots]
    assert widths[0] > widths[2] > widths[3]


def test_shards_are_a_seeded_shuffle_recorded_in_the_store(tmp_path: Path) -> None:
    config = gsm8k_config()
    config["pipeline"] = config["pipeline"].replace(sampling_params={})
    orders = []
    for seed in (1, 1, 2):
        exp = experiment(tmp_path, f"shuffle{seed}{len(orders)}")
        exp.run_evals(config, arithmetic_rows(20), num_shards=4, seed=seed)
        table = exp.results_table()
        orders.append([r["row_index"] for r in table])
        assert exp._store.meta()["permutation"] == orders[-1]
    assert orders[0] == orders[1] != orders[2]
    assert orders[0] != sorted(orders[0])  # not contiguous slices
    assert sorted(orders[0]) == list(range(20))


def test_without_accumulate_compute_runs_once_on_everything(tmp_path: Path) -> None:
    calls: list[int] = []

    def compute(batch: dict) -> dict:
        calls.append(len(batch["model_answer"]))
        return sample_compute_metrics_fn(batch)

    config = gsm8k_config(compute_metrics_fn=compute, accumulate_metrics_fn=None)
    config["pipeline"] = config["pipeline"].replace(sampling_params={})
    exp = experiment(tmp_path)
    seen_live: list[dict] = []
    exp.run_evals(
        config,
        arithmetic_rows(12),
        num_shards=3,
        on_shard_complete=lambda e, c, s: seen_live.append(e.status_rows()[0].metrics),
    )
    assert calls == [12]
    assert seen_live[0] == {} and seen_live[-1]["Correct"]["value"] == 12
    assert "lower_bound" not in seen_live[-1]["Correct"]


def test_per_row_scores_give_observed_variance_and_paired_comparison(tmp_path: Path) -> None:
    rows = arithmetic_rows(30)
    for row in rows[::2]:
        row["answer"] = "#### -1"
    config = gsm8k_config(
        compute_metrics_fn=exact_match("model_answer", "ground_truth"),
        accumulate_metrics_fn=mean_of_rows,
    )
    config["pipeline"] = config["pipeline"].replace(
        sampling_params={"temperature": List([0.0, 0.5])}
    )
    exp = experiment(tmp_path)
    results = exp.run_evals(GridSearch(config), rows, num_shards=3, seed=5)
    assert results[1][1]["Accuracy"]["value"] == pytest.approx(15 / 30)
    history = exp.metrics_history(1)
    # The second look (20 rows, 10 right): the first, 5 of 10 right, has fewer than 10 on each
    # side and gets the exact interval (stats.online.FEW_EVENTS).
    first = history[1]["metrics"]["Accuracy"]
    n = first["n"]
    assert n == 20 and history[0]["metrics"]["Accuracy"]["ci_method"].startswith("exact")
    scores = [r["score:Accuracy"] for r in exp.results_table() if r["config_id"] == 1][:n]
    mean = sum(scores) / n
    var = sum((s - mean) ** 2 for s in scores) / (n - 1)
    expected = 1.959964 * math.sqrt(var / n) * math.sqrt((30 - n) / 29)
    assert first["margin_of_error"] == pytest.approx(expected, rel=1e-5)
    assert first["ci_method"] == "normal (observed variance) + fpc"
    diff = exp.compare(1, 2, "Accuracy")
    assert diff.value == pytest.approx(15 / 30) and diff.n == 30
    assert diff.lower == pytest.approx(diff.upper)  # every row compared: no sampling error left


def test_missing_or_wrongly_sized_prompts_name_config_and_batch(tmp_path: Path) -> None:
    def no_prompts(batch: dict, rag: Any, pm: Any) -> dict:
        return dict(batch)

    def short_prompts(batch: dict, rag: Any, pm: Any) -> dict:
        return {"prompts": batch["question"][:-1], **batch}

    for fn, message in [(no_prompts, "no 'prompts' key"), (short_prompts, "one prompt per row")]:
        config = gsm8k_config(preprocess_fn=fn)
        config["pipeline"] = config["pipeline"].replace(sampling_params={})
        with pytest.raises(PipelineError, match=rf"config 1, shard 0, batch 0: .*{message}"):
            experiment(tmp_path, fn.__name__).run_evals(config, arithmetic_rows(8), num_shards=2)
    assert issubclass(PipelineError, AssayError)


def test_one_failing_config_does_not_stop_the_others(tmp_path: Path) -> None:
    def broken(batch: dict) -> dict:
        raise KeyError("answer_text")

    config = gsm8k_config(postprocess_fn=List([sample_postprocess_fn, broken]))
    config["pipeline"] = config["pipeline"].replace(sampling_params={})
    exp = experiment(tmp_path)
    results = exp.run_evals(GridSearch(config), arithmetic_rows(8), num_shards=2)
    assert list(results) == [1]
    assert "postprocess_fn raised KeyError" in exp.errors()[2]
    assert [r.status for r in exp.status_rows()] == ["completed", "failed"]


def test_generation_errors_are_counted_not_scored(tmp_path: Path) -> None:
    rows = arithmetic_rows(10)
    rows[3]["question"] = "FAIL " + rows[3]["question"]
    rows[7]["question"] = "FAIL " + rows[7]["question"]
    config = gsm8k_config()
    config["pipeline"] = config["pipeline"].replace(sampling_params={})
    exp = experiment(tmp_path)
    results = exp.run_evals(config, rows, num_shards=2)
    columns, metrics = results[1]
    assert metrics["Generation Errors"]["value"] == 2
    assert metrics["Samples Processed"]["value"] == 8
    assert metrics["Total"]["value"] == 8 and metrics["Correct"]["observed_value"] == 8
    assert len(columns["generated_text"]) == 8
    failed = [r for r in exp.results_table() if r["error"]]
    assert sorted(r["row_index"] for r in failed) == [3, 7]
    assert all("backend refused" in r["error"] and r["generated_text"] is None for r in failed)


def test_interrupted_experiment_resumes_from_completed_shards(
    tmp_path: Path, built_models: list
) -> None:
    config = gsm8k_config()
    config["pipeline"] = config["pipeline"].replace(sampling_params={})

    def crash_after_two(exp: Experiment, config_id: int, shard: int) -> None:
        if shard == 1:
            raise Interrupt

    with pytest.raises(Interrupt):
        experiment(tmp_path).run_evals(
            config, arithmetic_rows(16), num_shards=4, on_shard_complete=crash_after_two
        )
    calls_before = sum(len(m.seen) for m in built_models)
    assert calls_before == 8
    exp = experiment(tmp_path)
    results = exp.run_evals(config, arithmetic_rows(16), num_shards=4)
    assert sum(len(m.seen) for m in built_models) == 16  # only the missing 8 rows ran
    assert results[1][1]["Correct"]["value"] == 16
    assert len(results[1][0]["generated_text"]) == 16
    with pytest.raises(AssayError, match="num_shards"):
        experiment(tmp_path).run_evals(config, arithmetic_rows(16), num_shards=2)


def test_interactive_control_between_shards(tmp_path: Path) -> None:
    config = gsm8k_config()
    exp = experiment(tmp_path)
    clones: list[int] = []

    def control(e: Experiment, config_id: int, shard: int) -> None:
        if config_id == 2 and shard == 0:
            e.stop(2)
            clones.append(
                e.clone_modify(1, {"pipeline": {"sampling_params": {"temperature": 0.3}}})
            )
            e.delete(1)

    results = exp.run_evals(
        GridSearch(config), arithmetic_rows(12), num_shards=3, on_shard_complete=control
    )
    assert 1 not in results
    assert results[2][1]["Samples Processed"]["value"] == 4  # stopped after its first shard
    clone = results[clones[0]][1]
    assert clone["sampling_params"]["value"]["temperature"] == 0.3
    assert clone["Samples Processed"]["value"] == 12
    assert {r.config_id: r.status for r in exp.status_rows()} == {2: "stopped", 3: "completed"}
    exp.resume(2)
    again = exp.continue_evals()
    assert again[2][1]["Samples Processed"]["value"] == 12


def test_background_run_can_be_stopped_from_another_thread(tmp_path: Path) -> None:
    config = gsm8k_config()
    config["pipeline"] = config["pipeline"].replace(sampling_params={})
    exp = experiment(tmp_path)
    import threading

    first_shard = threading.Event()
    proceed = threading.Event()

    def gate(e: Experiment, config_id: int, shard: int) -> None:
        if shard == 0:
            first_shard.set()
            proceed.wait(60)  # a bound only a hang reaches

    exp.start_evals(config, arithmetic_rows(12), num_shards=3, on_shard_complete=gate)
    assert first_shard.wait(60)
    exp.stop(1)
    proceed.set()
    results = exp.wait(60)
    assert results[1][1]["Samples Processed"]["value"] == 4


def test_export_and_tables(tmp_path: Path) -> None:
    config = gsm8k_config()
    exp = experiment(tmp_path)
    exp.run_evals(GridSearch(config), arithmetic_rows(8), num_shards=2)
    path = exp.export(tmp_path / "rows.csv")
    import pandas as pd

    frame = pd.read_csv(path)
    assert len(frame) == 16 and frame.set_index(["config_id", "row_index"]).index.is_unique
    markdown = exp.to_markdown()
    assert "Accuracy" in markdown and "1 [1, 1]" in markdown
    assert "pipeline.sampling_params.temperature" in markdown
    assert "<table>" in exp._repr_html_()


def test_resume_restores_samples_processed_for_weighted_accumulation(tmp_path: Path) -> None:
    rows = arithmetic_rows(16)
    for row in rows[::3]:
        row["answer"] = "#### -1"  # 6 of 16 rows wrong, unevenly spread over the batches

    def batch_accuracy(batch: dict) -> dict:
        pairs = list(zip(batch["model_answer"], batch["ground_truth"]))
        return {"Accuracy": {"value": sum(p == g for p, g in pairs) / len(pairs)}}

    def weighted_by_samples(aggregated: dict) -> dict:
        weights = [m["value"] for m in aggregated["Samples Processed"]]
        accuracy = sum(m["value"] * w for m, w in zip(aggregated["Accuracy"], weights))
        return {
            "Rows": {"value": sum(weights)},
            "Accuracy": {"value": accuracy / sum(weights), "is_algebraic": True},
        }

    config = gsm8k_config(
        batch_size=3,  # shards of 4 rows: batches of 3 and 1, so the weights matter
        compute_metrics_fn=batch_accuracy,
        accumulate_metrics_fn=weighted_by_samples,
    )
    config["pipeline"] = config["pipeline"].replace(sampling_params={})

    def crash_after_two(exp: Experiment, config_id: int, shard: int) -> None:
        if shard == 1:
            raise Interrupt

    whole = experiment(tmp_path, "whole")
    expected = whole.run_evals(config, rows, num_shards=4)[1][1]
    with pytest.raises(Interrupt):
        experiment(tmp_path, "resumed").run_evals(
            config, rows, num_shards=4, on_shard_complete=crash_after_two
        )
    resumed = experiment(tmp_path, "resumed")
    metrics = resumed.run_evals(config, rows, num_shards=4)[1][1]
    assert expected["Accuracy"]["value"] == pytest.approx(10 / 16)
    assert without_timings(metrics) == without_timings(expected)
    assert metrics["Rows"]["value"] == 16
    histories = [
        [without_timings(h["metrics"]) for h in e.metrics_history(1)] for e in (whole, resumed)
    ]
    assert histories[0] == histories[1]


def test_clones_made_before_an_interruption_are_resumed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = gsm8k_config()
    config["pipeline"] = config["pipeline"].replace(sampling_params={})
    rows = arithmetic_rows(16)

    def other_postprocess(batch: dict) -> dict:
        return sample_postprocess_fn(batch)

    def control(exp: Experiment, config_id: int, shard: int) -> None:
        if (config_id, shard) == (1, 0):
            warm = {"pipeline": {"sampling_params": {"temperature": 0.3}}, "batch_size": 2}
            assert exp.clone_modify(1, warm) == 2
            # Functions are not stored: this clone cannot come back after a crash.
            assert exp.clone_modify(1, {"postprocess_fn": other_postprocess}) == 3
        if (config_id, shard) == (2, 0):
            assert exp.clone_modify(2, {"batch_size": 8}) == 4  # a clone of a clone
        if (config_id, shard) == (2, 1):
            raise Interrupt

    with pytest.raises(Interrupt):
        experiment(tmp_path).run_evals(config, rows, num_shards=4, on_shard_complete=control)
    exp = experiment(tmp_path)
    with caplog.at_level(logging.WARNING, logger="assay.pipelines.experiment"):
        results = exp.run_evals(config, rows, num_shards=4)
    assert sorted(results) == [1, 2, 4]
    warm = results[2][1]
    assert warm["sampling_params"]["value"]["temperature"] == 0.3
    assert warm["batch_size"]["value"] == 2
    assert warm["Samples Processed"]["value"] == 16 and warm["Correct"]["observed_value"] == 0
    assert [h["shards_done"] for h in exp.metrics_history(2)] == [1, 2, 3, 4]
    assert results[4][1]["batch_size"]["value"] == 8
    assert results[4][1]["sampling_params"]["value"]["temperature"] == 0.3
    assert {c["config_id"]: c["parent_id"] for c in exp._store.configs()} == {
        1: None,
        2: 1,
        3: 1,
        4: 2,
    }
    assert "clone 3 of config 1 is not resumed" in caplog.text
    assert exp.clone_modify(4, {"batch_size": 4}) == 5  # new ids never reuse stored ones


def per_row_correct(batch: dict) -> dict:
    pairs = zip(batch["model_answer"], batch["ground_truth"])
    return {
        "Correct": {"value": [float(p == g) for p, g in pairs]},
        "Total": {"value": len(batch["model_answer"])},
    }


def accuracy_from(source: str | None) -> Any:
    """A RapidFire-style accumulate_metrics_fn whose Accuracy comes from per-row Correct scores."""

    def accumulate(aggregated: dict) -> dict:
        correct = sum(sum(m["per_row"]) for m in aggregated["Correct"])
        total = sum(m["value"] for m in aggregated["Total"])
        accuracy = {"value": correct / total, "is_algebraic": True, "value_range": (0, 1)}
        if source is not None:
            accuracy["per_row_metric"] = source
        return {"Total": {"value": total}, "Accuracy": accuracy}

    return accumulate


def test_per_row_metric_names_the_scores_behind_an_interval(tmp_path: Path) -> None:
    rows = arithmetic_rows(30)
    for row in rows[::2]:
        row["answer"] = "#### -1"
    config = gsm8k_config(
        compute_metrics_fn=per_row_correct, accumulate_metrics_fn=accuracy_from("Correct")
    )
    config["pipeline"] = config["pipeline"].replace(sampling_params={})
    exp = experiment(tmp_path)
    exp.run_evals(config, rows, num_shards=3, seed=5)
    first = exp.metrics_history(1)[1]["metrics"]["Accuracy"]  # 20 rows (see above)
    n = first["n"]
    scores = [r["score:Correct"] for r in exp.results_table()][:n]
    mean = sum(scores) / n
    var = sum((s - mean) ** 2 for s in scores) / (n - 1)
    expected = 1.959964 * math.sqrt(var / n) * math.sqrt((30 - n) / 29)
    assert first["ci_method"] == "normal (observed variance) + fpc"
    assert first["margin_of_error"] == pytest.approx(expected, rel=1e-5)

    config["accumulate_metrics_fn"] = accuracy_from("Corect")
    with pytest.raises(PipelineError, match=r"per_row_metric='Corect'.*\['Correct'\]"):
        experiment(tmp_path, "typo").run_evals(config, rows, num_shards=3, seed=5)


def test_unmatched_metric_falls_back_to_bound_variance_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = gsm8k_config(
        compute_metrics_fn=per_row_correct, accumulate_metrics_fn=accuracy_from(None)
    )
    config["pipeline"] = config["pipeline"].replace(sampling_params={})
    exp = experiment(tmp_path)
    with caplog.at_level(logging.WARNING, logger="assay.pipelines.shards.live_metrics"):
        results = exp.run_evals(config, arithmetic_rows(12), num_shards=3)
    accuracy = results[1][1]["Accuracy"]
    assert accuracy["ci_method"].startswith("normal (bound variance)")
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1  # once, though the metrics were recomputed after every shard
    assert "config 1: metric 'Accuracy' matches no per-row metric (Correct)" in warnings[0]
    assert "per_row_metric" in warnings[0]


@pytest.mark.slow
def test_gsm8k_use_case_with_a_tiny_local_model(tmp_path: Path, tiny_model_dir: Path) -> None:
    rows = arithmetic_rows(12)
    for row in rows[::3]:
        # No "####" in the reference: these rows count as correct exactly when the model's
        # answer has none either, so accuracy depends on what the random model wrote.
        row["answer"] = "The answer was not recorded."
    config = gsm8k_config(
        pipeline=HFModelConfig(
            {"model": str(tiny_model_dir), "dtype": "float32", "device": "cpu"},
            {"max_tokens": 8, "temperature": List([0.0, 1.0]), "seed": 7},
            prompt_manager=prompt_manager(),
        )
    )
    snapshots: list[dict] = []
    exp = experiment(tmp_path)
    results = exp.run_evals(
        GridSearch(config),
        rows,
        num_shards=3,
        seed=1,
        on_shard_complete=lambda e, c, s: snapshots.append(e.metrics(c)),
    )
    assert sorted(results) == [1, 2] and len(snapshots) == 6
    for cid, (columns, metrics) in results.items():
        stored = exp._store.rows(cid)
        assert sorted(r.row_index for r in stored) == list(range(12))  # every row, once
        assert all(r.error is None and isinstance(r.output, str) for r in stored)
        assert columns["generated_text"] == [r.output for r in stored]
        # Recompute the score from the persisted outputs and the dataset, not the pipeline.
        correct = sum(
            extract_solution(r.output) == extract_solution(rows[r.row_index]["answer"])
            for r in stored
        )
        assert metrics["Samples Processed"]["value"] == metrics["Total"]["value"] == 12
        assert metrics["Correct"]["observed_value"] == correct
        assert metrics["Correct"]["value"] == pytest.approx(correct)
        assert metrics["Accuracy"]["value"] == pytest.approx(correct / 12)
        assert columns["prompts"][0][1]["content"].count("Question:") == 2  # k = 2 shots
    for snapshot in snapshots:
        for name in ("Accuracy", "Correct"):
            entry = snapshot[name]
            assert entry["lower_bound"] <= entry["value"] <= entry["upper_bound"]
    assert [s["Samples Processed"]["value"] for s in snapshots] == [4, 4, 8, 8, 12, 12]


def test_a_store_written_before_clones_were_resumable_still_opens(tmp_path: Path) -> None:
    import sqlite3

    from assay.pipelines.shards.store import ExperimentStore

    path = tmp_path / "experiment.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE configs (config_id INTEGER PRIMARY KEY, fingerprint TEXT, "
            "parent_id INTEGER, knobs TEXT, status TEXT, error TEXT, created REAL)"
        )
        db.execute("INSERT INTO configs VALUES (1, 'abc', NULL, '{}', 'completed', NULL, 0)")
    store = ExperimentStore(path)
    store.add_config(2, "def", {}, 1, {"batch_size": 2})
    assert [(c["config_id"], c["changes"]) for c in store.configs()] == [
        (1, None),
        (2, {"batch_size": 2}),
    ]
    store.close()


def test_a_config_whose_rows_all_fail_fails_with_the_first_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rows = arithmetic_rows(8)
    failing = [dict(r, question="FAIL " + r["question"]) for r in rows]
    config = gsm8k_config()
    config["pipeline"] = config["pipeline"].replace(sampling_params={})
    with pytest.raises(AssayError, match=r"config 1: every row failed .*row \d+: .*refused"):
        experiment(tmp_path, "all").run_evals(config, failing, num_shards=2)
    # Beside a healthy config: it fails loudly (log, status, errors()), the other completes.
    both = GridSearch(
        gsm8k_config(preprocess_fn=List([sample_preprocess_fn, lambda b, r, p: fail_all(b, r, p)]))
    )
    exp = experiment(tmp_path, "one")
    with caplog.at_level(logging.WARNING):
        results = exp.run_evals(both, rows, num_shards=2)
    assert sorted(results) == [1, 3]  # temperature 0.0 and 0.8 of the healthy preprocess
    assert [r.status for r in exp.status_rows()] == ["completed", "failed"] * 2
    assert "every row failed (4 of 4 so far)" in exp.errors()[2]
    assert "config 2: every row failed" in caplog.text
    assert "2 of 4 configs failed (2, 4)" in caplog.text
    stored = {c["config_id"]: c for c in exp._store.configs()}
    assert stored[2]["status"] == "failed" and "backend refused" in stored[2]["error"]
    # Failed rows are still recorded; the failed shard is not marked complete.
    assert exp._store.completed_shards(2) == []
    assert all(r.error for r in exp._store.rows(2))


def fail_all(batch: dict, rag: Any, prompt_manager: Any) -> dict:
    out = sample_preprocess_fn(batch, rag, prompt_manager)
    out["prompts"] = [[*p[:-1], {**p[-1], "content": "FAIL"}] for p in out["prompts"]]
    return out


def test_max_error_rate_fails_a_config_with_too_many_failed_rows(tmp_path: Path) -> None:
    rows = arithmetic_rows(12)
    for i in (1, 4, 7):
        rows[i]["question"] = "FAIL " + rows[i]["question"]
    config = gsm8k_config()
    config["pipeline"] = config["pipeline"].replace(sampling_params={})
    # One shard, so the check after it sees all 12 rows: 3 failed, 25%.
    tolerant = experiment(tmp_path, "tolerant").run_evals(
        config, rows, num_shards=1, max_error_rate=0.3
    )
    assert tolerant[1][1]["Generation Errors"]["value"] == 3
    strict = experiment(tmp_path, "strict")
    with pytest.raises(AssayError, match=r"3 of 12 rows failed so far, more than max_error_rate"):
        strict.run_evals(config, rows, num_shards=1, max_error_rate=0.1)
    assert re.search(r"first error, row [147]: RuntimeError", strict.errors()[1])
    with pytest.raises(AssayError, match=r"max_error_rate=1\.5"):
        strict.run_evals(config, rows, num_shards=1, max_error_rate=1.5)


def test_anytime_strategy_reads_the_sequence_at_every_shard(tmp_path: Path) -> None:
    """Batch-level Correct/Total (RapidFire's example): the sequence runs over batch accuracies
    weighted by their rows; per-row scores: over the rows; both read at each shard end."""
    rows = arithmetic_rows(40)
    for row in rows[::3]:
        row["answer"] = "#### -1"
    snapshots: list[dict] = []
    config = gsm8k_config(online_strategy_kwargs={"strategy": "anytime"})
    config["pipeline"] = config["pipeline"].replace(sampling_params={})
    exp = experiment(tmp_path, "batches")
    exp.run_evals(
        config,
        rows,
        num_shards=4,
        seed=3,
        on_shard_complete=lambda e, c, s: snapshots.append(e.metrics(c)),
    )
    table = exp.results_table()  # rows in scoring order: 4 shards of 10, batches of 4, 4, 2
    correct = [
        float(
            extract_solution(r["generated_text"])
            == extract_solution(rows[r["row_index"]]["answer"])
        )
        for r in table
    ]
    sizes = [4, 4, 2] * 4
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    means = [sum(correct[s : s + n]) / n for s, n in zip(starts, sizes)]
    for shard, snapshot in enumerate(snapshots):
        batches = 3 * (shard + 1)
        looks = [3 * (k + 1) for k in range(shard + 1)]
        expected = confidence_sequence(
            means[:batches], population=40, counts=sizes[:batches], looks=looks
        )
        accuracy = snapshot["Accuracy"]
        assert accuracy["value"] == pytest.approx(
            sum(correct[: 10 * (shard + 1)]) / (10 * (shard + 1))
        )
        assert accuracy["lower_bound"] == pytest.approx(expected.lower[-1])
        assert accuracy["upper_bound"] == pytest.approx(expected.upper[-1])
        assert accuracy["ci_method"].startswith("anytime (betting")
        # The distributive count: the same sequence, scaled to the 40 rows.
        assert snapshot["Correct"]["upper_bound"] == pytest.approx(40 * expected.upper[-1])
    assert snapshots[-1]["Accuracy"]["lower_bound"] == pytest.approx(26 / 40)

    per_row = gsm8k_config(
        compute_metrics_fn=exact_match("model_answer", "ground_truth"),
        accumulate_metrics_fn=mean_of_rows,
        online_strategy_kwargs={"strategy": "anytime", "confidence_level": 0.9},
    )
    per_row["pipeline"] = per_row["pipeline"].replace(
        sampling_params={"temperature": List([0.0, 0.8])}  # sampling adds one: never right
    )
    exp = experiment(tmp_path, "rows")

    def stop_second(e: Experiment, config_id: int, shard: int) -> None:
        if config_id == 2 and shard == 1:
            e.stop(2)  # half the rows: the comparison is not a census

    exp.run_evals(GridSearch(per_row), rows, num_shards=4, seed=3, on_shard_complete=stop_second)
    first = exp.metrics_history(1)[1]["metrics"]["Accuracy"]  # after two shards
    table = exp.results_table()
    scores = {c: [r["score:Accuracy"] for r in table if r["config_id"] == c] for c in (1, 2)}
    expected = confidence_sequence(
        scores[1][:20], population=40, looks=[10, 20], confidence_level=0.9
    )
    assert (first["lower_bound"], first["upper_bound"]) == pytest.approx(
        (expected.lower[-1], expected.upper[-1])
    )
    # The paired comparison runs over the rows in the order they were scored.
    order = [r["row_index"] for r in table if r["config_id"] == 1]
    assert order != sorted(order)
    diff = exp.compare(1, 2, "Accuracy")
    paired = paired_confidence_sequence(
        scores[1][:20], scores[2], population=40, confidence_level=0.9
    )
    assert diff.method.startswith("anytime") and diff.n == 20
    assert (diff.value, diff.lower, diff.upper) == pytest.approx(
        (sum(scores[1][:20]) / 20, paired.lower[-1], paired.upper[-1])
    )


def test_resumed_anytime_intervals_equal_uninterrupted_ones(tmp_path: Path) -> None:
    config = gsm8k_config(online_strategy_kwargs={"strategy": "anytime"})
    config["pipeline"] = config["pipeline"].replace(sampling_params={})
    rows = arithmetic_rows(24)
    for row in rows[::4]:
        row["answer"] = "#### -1"

    def crash(exp: Experiment, config_id: int, shard: int) -> None:
        if shard == 1:
            raise Interrupt

    whole = experiment(tmp_path, "whole")
    whole.run_evals(config, rows, num_shards=4)
    with pytest.raises(Interrupt):
        experiment(tmp_path, "resumed").run_evals(
            config, rows, num_shards=4, on_shard_complete=crash
        )
    resumed = experiment(tmp_path, "resumed")
    resumed.run_evals(config, rows, num_shards=4)
    histories = [
        [without_timings(h["metrics"]) for h in e.metrics_history(1)] for e in (whole, resumed)
    ]
    assert histories[0] == histories[1]


def test_early_stop_stops_a_beaten_config_and_keeps_its_rows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Sampling makes the arithmetic model add one: that config is never right."""
    config = gsm8k_config(
        compute_metrics_fn=exact_match("model_answer", "ground_truth"),
        accumulate_metrics_fn=mean_of_rows,
    )
    exp = experiment(tmp_path)
    with caplog.at_level(logging.INFO, logger="assay.pipelines.experiment"):
        results = exp.run_evals(
            GridSearch(config),
            arithmetic_rows(60),
            num_shards=6,
            early_stop=EarlyStop("Accuracy"),
        )
    [decision] = exp.early_stops
    assert (decision.config_id, decision.best_id, decision.rule) == (2, 1, "paired")
    assert decision.interval[0] > 0  # config 1 better by a guaranteed margin
    assert [r.status for r in exp.status_rows()] == ["completed", "stopped"]
    n = results[2][1]["Samples Processed"]["value"]
    assert n == decision.rows and n < 60 and n % 10 == 0
    assert results[2][1]["Accuracy"]["value"] == 0.0 and results[1][1]["Accuracy"]["value"] == 1.0
    assert decision.message in caplog.text
    # The decision is stored: a re-run resumes with it, and the stopped config stays stopped.
    again = experiment(tmp_path)
    rerun = again.run_evals(
        GridSearch(config), arithmetic_rows(60), num_shards=6, early_stop=EarlyStop("Accuracy")
    )
    assert again.early_stops == [decision]
    assert rerun[2][1]["Samples Processed"]["value"] == n
    # Without early stopping both run to the end.
    full = experiment(tmp_path, "full").run_evals(
        GridSearch(config), arithmetic_rows(60), num_shards=6
    )
    assert full[2][1]["Samples Processed"]["value"] == 60
    with pytest.raises(AssayError, match=r"early_stop metric 'F1': config 1 has no such metric"):
        experiment(tmp_path, "typo").run_evals(
            GridSearch(config), arithmetic_rows(12), num_shards=2, early_stop=EarlyStop("F1")
        )


def test_dict_valued_api_settings_reach_the_server_and_rows_succeed(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """SciFact's response_format: before, every row failed inside assay (unhashable dict)."""
    from fixtures.openai_server import OpenAIStubServer

    from assay.pipelines import OpenAIAPIModelConfig

    class RecordingServer(OpenAIStubServer):
        def chat(self, body: dict) -> dict:
            self.bodies.append(body)
            return super().chat(body)

    def preprocess(batch: dict, rag: Any, prompt_manager: Any) -> dict:
        return {"prompts": [[{"role": "user", "content": q}] for q in batch["question"]], **batch}

    with RecordingServer(tiny_model_dir) as server:
        server.bodies = []
        model_config = {
            "model": str(tiny_model_dir),
            "max_completion_tokens": 4,
            "response_format": {"type": "json_object"},
            "logit_bias": {"7": -100},
        }
        config = {
            "pipeline": OpenAIAPIModelConfig(
                {"base_url": server.base_url, "api_key": "k"}, model_config
            ),
            "batch_size": 4,
            "preprocess_fn": preprocess,
            "compute_metrics_fn": lambda b: {"n": {"value": len(b["generated_text"])}},
        }
        exp = experiment(tmp_path)
        results = exp.run_evals(config, arithmetic_rows(4), num_shards=1)
    metrics = results[1][1]
    assert metrics["Generation Errors"]["value"] == 0 and metrics["Samples Processed"]["value"] == 4
    assert all(r["error"] is None for r in exp.results_table())
    assert len(server.bodies) == 4
    assert all(b["response_format"] == {"type": "json_object"} for b in server.bodies)
    assert all(b["logit_bias"] == {"7": -100} for b in server.bodies)


def test_anytime_strategy_without_accumulate_uses_the_rows_at_the_end(tmp_path: Path) -> None:
    rows = arithmetic_rows(40)
    for row in rows[::3]:
        row["answer"] = "#### -1"
    config = gsm8k_config(
        compute_metrics_fn=exact_match("model_answer", "ground_truth"),
        accumulate_metrics_fn=None,
        online_strategy_kwargs={"strategy": "anytime"},
    )
    config["pipeline"] = config["pipeline"].replace(sampling_params={})
    exp = experiment(tmp_path)

    def stop_half_way(e: Experiment, config_id: int, shard: int) -> None:
        if shard == 1:
            e.stop(config_id)

    results = exp.run_evals(config, rows, num_shards=4, on_shard_complete=stop_half_way)
    accuracy = results[1][1]["Accuracy"]
    scores = [
        float(
            extract_solution(r["generated_text"])
            == extract_solution(rows[r["row_index"]]["answer"])
        )
        for r in exp.results_table()
    ]
    assert len(scores) == 20
    expected = confidence_sequence(scores, population=40)
    assert accuracy["value"] == pytest.approx(sum(scores) / 20)
    assert (accuracy["lower_bound"], accuracy["upper_bound"]) == pytest.approx(
        (expected.lower[-1], expected.upper[-1])
    )
    assert accuracy["ci_method"].startswith("anytime")
