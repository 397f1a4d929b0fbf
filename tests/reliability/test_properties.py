"""Property-based tests: the YAML task loader and the response filters on arbitrary input."""

from __future__ import annotations

import contextlib
import string
import tempfile
from collections import Counter
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.errors import AssayError, TaskConfigError
from assay.filters.extraction import RegexFilter
from assay.filters.selection import MajorityVote, TakeFirst
from assay.filters.transformation import Lowercase, RemoveWhitespace
from assay.run.scoring import build_filters, build_metrics
from assay.tasks._yaml_io import load_with_includes
from assay.tasks.lm_eval_yaml import TASK_KEYS, task_config_from_yaml

METRICS_OF = {
    "multiple_choice": ["acc", "acc_norm"],
    "loglikelihood": ["perplexity", "acc"],
    "loglikelihood_rolling": ["word_perplexity", "byte_perplexity", "bits_per_byte"],
    "generate_until": ["exact_match"],
}

names = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=20).filter(
    lambda s: s[0].isalpha()
)
# Plain text without Jinja syntax: it renders to itself.
plain = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="{}%#"), max_size=40
)


@st.composite
def valid_configs(draw: st.DrawFn) -> dict:
    output_type = draw(st.sampled_from(sorted(METRICS_OF)))
    config = {
        "task": draw(names),
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": "test.jsonl"}},
        "test_split": "test",
        "output_type": output_type,
        "doc_to_text": draw(st.sampled_from(["{{question}}", "question"]) | plain),
        "doc_to_target": draw(st.sampled_from(["{{answer}}", "answer", "0"])),
        "metric_list": [
            {"metric": m}
            for m in draw(
                st.lists(st.sampled_from(METRICS_OF[output_type]), min_size=1, unique=True)
            )
        ],
    }
    if output_type == "multiple_choice":
        config["doc_to_choice"] = draw(st.sampled_from(["choices", "{{choices}}", ["a", "b"]]))
    if draw(st.booleans()):
        config["num_fewshot"] = draw(st.integers(0, 10))
    if draw(st.booleans()):
        config["target_delimiter"] = draw(plain)
    if draw(st.booleans()):
        config["fewshot_delimiter"] = draw(plain)
    if output_type == "generate_until" and draw(st.booleans()):
        config["generation_kwargs"] = {
            "until": draw(st.lists(plain.filter(bool), max_size=3)),
            "max_gen_toks": draw(st.integers(1, 512)),
        }
    return config


def write(folder: Path, text: str | bytes) -> Path:
    path = folder / "task.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def build(path: Path) -> None:
    """Everything a run does with a task file before loading data."""
    config = task_config_from_yaml(load_with_includes(path), path)
    config.validate()
    build_filters(config)
    build_metrics(config)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(valid_configs())
def test_random_valid_configs_load_with_their_values(raw):
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), yaml.safe_dump(raw, allow_unicode=True))
        config = task_config_from_yaml(load_with_includes(path), path)
        config.validate()
        build_filters(config)
        metrics = build_metrics(config)
    assert config.name == raw["task"]
    assert config.resolved_output_type.value == raw["output_type"]
    if "num_fewshot" in raw:
        assert config.num_fewshots == raw["num_fewshot"]
    for key in ("target_delimiter", "fewshot_delimiter"):
        if key in raw:
            assert getattr(config, key) == raw[key]
    wanted = [m["metric"] for m in raw["metric_list"]]
    if wanted:
        assert [m.metric.name for m in metrics] == wanted


@settings(max_examples=100)
@given(st.text(max_size=200) | st.binary(max_size=200))
def test_random_text_is_a_task_or_a_task_config_error(junk):
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), junk)
        with contextlib.suppress(TaskConfigError):
            build(path)


yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | plain,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(plain, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    valid_configs(),
    st.dictionaries(st.sampled_from(sorted(TASK_KEYS)) | names, yaml_values, max_size=4),
)
def test_wrong_values_for_known_keys_give_an_assay_error(raw, changes):
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), yaml.safe_dump({**raw, **changes}, allow_unicode=True))
        # Config, name and template errors are all user errors with a message; nothing else.
        with contextlib.suppress(AssayError):
            build(path)


# ------------------------------------------------------------------ filters
responses = st.lists(st.lists(st.text(max_size=30), min_size=1, max_size=5), max_size=6)


@given(responses)
def test_take_first_keeps_each_docs_first_response(resps):
    out = TakeFirst().apply(resps, [{}] * len(resps))
    assert out == [r[0] for r in resps]


@given(st.lists(st.lists(st.sampled_from("abc"), min_size=1, max_size=7), max_size=6))
def test_majority_vote_picks_a_most_frequent_response_first_seen_on_ties(resps):
    out = MajorityVote().apply(resps, [{}] * len(resps))
    assert len(out) == len(resps)
    for (winner,), responses in zip(out, resps, strict=True):
        counts = Counter(responses)
        top = max(counts.values())
        assert counts[winner] == top
        assert winner == next(r for r in responses if counts[r] == top)


@given(responses)
def test_whitespace_and_case_filters_are_idempotent_and_keep_shape(resps):
    for flt in (RemoveWhitespace(), Lowercase()):
        once = flt.apply(resps, [{}] * len(resps))
        assert [len(r) for r in once] == [len(r) for r in resps]
        assert flt.apply(once, [{}] * len(resps)) == once
    stripped = RemoveWhitespace().apply(resps, [{}] * len(resps))
    for row, original in zip(stripped, resps, strict=True):
        for text, source in zip(row, original, strict=True):
            assert text == text.strip() and text in source
    lowered = Lowercase().apply(resps, [{}] * len(resps))
    assert lowered == [[t.lower() for t in r] for r in resps]


@given(st.text(max_size=40), st.integers(0, 10**6), st.text(max_size=40))
def test_regex_finds_an_embedded_number_or_falls_back(before, number, after):
    flt = RegexFilter(regex_pattern=r"(\d+)", group_select=-1, fallback="[none]")
    text = f"{before} {number} {after.translate(str.maketrans('', '', string.digits))}"
    # The last run of digits is the number we put there unless `after` had digits (removed).
    ((found,),) = flt.apply([[text]], [{}])
    assert found == str(number) or (found != "[none]" and found in text)
    ((none,),) = flt.apply([[before.translate(str.maketrans("", "", "0123456789"))]], [{}])
    if not any(ch.isdigit() for ch in before.translate(str.maketrans("", "", "0123456789"))):
        assert none == "[none]"


@given(st.lists(st.text(max_size=30), max_size=5))
def test_regex_output_is_the_fallback_or_a_stripped_piece_of_the_response(texts):
    flt = RegexFilter(regex_pattern=r"([A-Za-z]+)", fallback="[invalid]")
    (out,) = flt.apply([texts], [{}])
    assert len(out) == len(texts)
    for value, text in zip(out, texts, strict=True):
        assert value == "[invalid]" or (value in text and value == value.strip())
