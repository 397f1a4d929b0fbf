"""Run built-in tasks on frozen hand-made rows and compare with what lm-eval 0.4.13 produced.

Each tests/tasks/catalog/data/NAME.json holds rows in the dataset's real schema (`splits`) and
runs (task names, few-shot count); `make_reference.py` recorded, per run, lm-eval's samples and
results on those rows. Here assay evaluates its catalog tasks on the same rows with a model that
gives the answers lm-eval's run got, and every request, target, filtered response, per-sample
metric and aggregate must match.

Images (multimodal files): lm-eval names an image in samples by the sha256 of its PNG encoding,
assay by its ImageRef (digest of the decoded pixels, and size). Each image of the file's rows is
named both ways here, so a request must carry the very images lm-eval's did, in its order.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from _rows import splits_for

from assay.models.base import LM
from assay.requests.types import (
    GenerateRequest,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingRequest,
    RollingResult,
    normalize_gen_kwargs,
)
from assay.run.evaluation import Evaluation
from assay.run.settings import RunSettings
from assay.tasks.registry import Registry

DATA = Path(__file__).parent / "data"


def data_files() -> list[str]:
    """Names of the frozen data files."""
    return sorted(p.stem for p in DATA.glob("*.json"))


def load(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))


class RecordedLM(LM):
    """Answers each request with what lm-eval's run answered to the same request (the same
    text and the same images)."""

    accepts_images = True

    def __init__(self, samples: dict[str, list[dict[str, Any]]]) -> None:
        self.ll: dict[tuple[str, str, tuple[str, ...]], LoglikelihoodResult] = {}
        self.rolling: dict[str, float] = {}
        self.gen: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        for records in samples.values():
            for rec in records:
                for i, args in enumerate(rec["arguments"].values()):
                    answers = rec["resps"][i]
                    visual = tuple(args.get("arg_2", {}).get("visual", ()))
                    if "arg_1" not in args:
                        self.rolling[args["arg_0"]] = float(answers[0])
                    elif isinstance(args["arg_1"], dict):
                        self.gen[(args["arg_0"], visual)] = list(answers)
                    else:
                        logprob, greedy = answers[0]
                        self.ll[(args["arg_0"], args["arg_1"], visual)] = LoglikelihoodResult(
                            float(logprob), greedy == "True"
                        )

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[Any]:
        return [
            _recorded(self.ll, (r.context, r.continuation, _png_names(r.images))) for r in requests
        ]

    def loglikelihood_rolling(self, requests: Sequence[RollingRequest]) -> list[Any]:
        return [RollingResult(_recorded(self.rolling, r.text), 0) for r in requests]

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
        return [
            _recorded(self.gen, (r.prompt, _png_names(r.images)))[r.sample_index] for r in requests
        ]

    def identity(self) -> dict[str, Any]:
        return {"backend": "recorded-lm-eval"}


def _png_name(image: Any) -> str:
    """lm-eval's name of an image in samples: the sha256 of its PNG encoding."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def _png_names(images: Sequence[Any]) -> tuple[str, ...]:
    return tuple(_png_name(image.load()) for image in images)


def image_names(spec: dict[str, Any]) -> dict[str, Any]:
    """lm-eval's name (PNG sha256) -> assay's ImageRef, for every image of the file's rows."""
    from PIL import Image

    from assay.images import DocImage

    names: dict[str, Any] = {}
    for dataset in [None, *spec.get("splits_by_dataset", {})]:
        for rows in splits_for(spec, dataset).values():
            for row in rows:
                for value in row.values():
                    if isinstance(value, Image.Image):
                        names[_png_name(value)] = DocImage(value).reference()
    return names


def renamed(value: Any, names: dict[str, Any]) -> Any:
    """`value` with every image named as assay names it."""
    if isinstance(value, dict):
        return {k: renamed(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [renamed(v, names) for v in value]
    return names.get(value, value) if isinstance(value, str) else value


def _rows_of(splits: dict[str, list[dict[str, Any]]]) -> Any:
    """A dataset loader answering with `splits`."""
    return lambda **_: splits


def _recorded(table: dict[Any, Any], key: Any) -> Any:
    if key not in table:
        raise AssertionError(f"assay made a request lm-eval did not make: {key!r}")
    return table[key]


def run_assay(
    spec: dict[str, Any], run: dict[str, Any], out: Path, include_path: Sequence[str] = ()
) -> dict[str, Any]:
    """Evaluate the run's tasks on the file's rows with the recorded answers (the built-in
    tasks, or the same names from `include_path`, such as lm-eval's own YAMLs)."""
    resolved = Registry(list(include_path)).resolve(run["tasks"])
    for request in resolved.tasks:
        request.config = replace(
            request.config,
            hf_repo=None,
            dataset_loader=_rows_of(splits_for(spec, request.config.hf_repo)),
            original_num_docs=-1,
        )
    settings = RunSettings(
        model=RecordedLM(run["lm_eval"]["samples"]),
        num_fewshot=run.get("num_fewshot"),
        output_dir=out,
        log_samples=True,
        cache=False,
        show_progress=False,
        bootstrap_iters=run.get("bootstrap_iters", 1000),
        confirm_run_unsafe_code=True,
    )
    return Evaluation(resolved, settings).run()


def _same_number(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) == bool(b)
    if isinstance(a, int | float) and isinstance(b, int | float):
        if math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, int | float) and not isinstance(b, bool):
        try:
            return _same_number(float(a), b)
        except ValueError:
            return False
    return _same_number(a, b)


def _gen_args(args: dict[str, Any]) -> dict[str, Any]:
    """Generation arguments as lm-eval's rules normalise them (defaults filled in)."""
    if args.get("arg_2") == {"visual": []}:
        # lm-eval writes an empty image list for every doc of a task with doc_to_image; assay
        # writes a request's images only when it has some. Either way no image is sent.
        args = {k: v for k, v in args.items() if k != "arg_2"}
    if isinstance(args.get("arg_1"), dict):
        kwargs = {k: v for k, v in args["arg_1"].items() if k != "seed"}
        # assay records the run's sampling seed; lm-eval's arguments never carry one.
        return {**args, "arg_1": normalize_gen_kwargs(kwargs, default_until=["\n\n"])}
    return args


def compare_samples(task: str, expected: list[dict[str, Any]], got: list[dict[str, Any]]) -> None:
    """Every doc: same row, target, requests, filtered responses and per-sample metrics."""
    by_doc: dict[int, dict[str, dict[str, Any]]] = {}
    for rec in got:
        by_doc.setdefault(rec["doc_id"], {})[rec["filter"]] = rec
    assert sorted(by_doc) == [e["doc_id"] for e in expected], f"{task}: doc ids differ"
    for exp in expected:
        where = f"{task} doc {exp['doc_id']}"
        mine = by_doc[exp["doc_id"]]
        assert sorted(mine) == sorted(exp["filtered_resps"]), f"{where}: filter names differ"
        first = next(iter(mine.values()))
        assert first["doc"] == exp["doc"], f"{where}: processed row differs"
        assert first["target"] == exp["target"], f"{where}: target differs"
        exp_args = [_gen_args(a) for a in exp["arguments"].values()]
        got_args = [_gen_args(a) for a in first["arguments"].values()]
        assert got_args == exp_args, f"{where}: requests differ"
        for flt, rec in mine.items():
            assert _same_value(rec["filtered_resps"], exp["filtered_resps"][flt]), (
                f"{where} filter {flt}: filtered responses {rec['filtered_resps']!r} != "
                f"{exp['filtered_resps'][flt]!r}"
            )
            for metric, value in exp["metrics"][flt].items():
                assert metric in rec, f"{where} filter {flt}: metric {metric} missing"
                assert _same_value(rec[metric], value), (
                    f"{where} filter {flt}: {metric} = {rec[metric]!r}, lm-eval {value!r}"
                )


def compare_results(expected: dict[str, Any], got: dict[str, Any]) -> None:
    """Every "metric,filter" number of every task and group, stderr included."""
    for name, entry in expected.items():
        assert name in got, f"{name}: missing from assay's results"
        for key, value in entry.items():
            if "," not in key:
                continue
            assert key in got[name], f"{name}: {key} missing from assay's results"
            mine = got[name][key]
            if value == "N/A" or mine == "N/A":
                assert mine == value, f"{name}: {key} = {mine!r}, lm-eval {value!r}"
                continue
            assert math.isclose(mine, value, rel_tol=1e-6, abs_tol=1e-9), (
                f"{name}: {key} = {mine!r}, lm-eval {value!r}"
            )


def check_run(
    spec: dict[str, Any], run: dict[str, Any], out: Path, include_path: Sequence[str] = ()
) -> None:
    """Evaluate one run with assay and compare everything lm-eval recorded."""
    reference = run["lm_eval"]
    if not include_path:
        configs = Registry().python_configs()
        for task, load_args in reference["loads"].items():
            config = configs[task]
            assert (config.hf_repo, config.hf_subset) == (load_args["path"], load_args["name"]), (
                task
            )
            assert config.hf_revision == load_args["kwargs"].get("revision"), task
    results = run_assay(spec, run, out, include_path)
    names = image_names(spec) if spec.get("multimodal") else {}
    for task, expected in reference["samples"].items():
        path = out / f"samples_{task}.jsonl"
        got = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        compare_samples(task, renamed(expected, names), got)
    compare_results(reference["results"], results["results"])
    for name, shots in reference["n-shot"].items():
        assert results["n-shot"].get(name) == shots, f"{name}: n-shot differs"
    for group, children in reference["group_subtasks"].items():
        assert sorted(results["group_subtasks"].get(group, [])) == sorted(children), group
