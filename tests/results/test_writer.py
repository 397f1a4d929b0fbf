"""results.json and samples files: atomic writes, file names, lm-eval's task hash."""

from __future__ import annotations

import hashlib
import json

import pytest

from assay.errors import ConfigError
from assay.results.layout import RunFiles
from assay.results.writer import OutputDir, safe_name


def test_results_are_replaced_atomically_with_no_temp_files_left(tmp_path):
    out = OutputDir(RunFiles.one_run_folder(tmp_path / "run"))
    out.write_results({"results": {"a": 1}})
    path = out.write_results({"results": {"a": 2}, "text": "ünï"})
    assert json.loads(path.read_text(encoding="utf-8")) == {"results": {"a": 2}, "text": "ünï"}
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["results.json"]


def test_safe_names_for_task_files():
    assert safe_name("mmlu|5") == "mmlu__5"
    assert safe_name("a/b c") == "a__b__c"


def test_samples_parts_are_concatenated_in_order(tmp_path):
    out = OutputDir(RunFiles.one_run_folder(tmp_path))
    records = [
        [{"doc_hash": "d1", "prompt_hash": "p1", "target_hash": "t1", "filter": "a"}],
        [{"doc_hash": "d2", "prompt_hash": "p2", "target_hash": "t2", "filter": "b"}],
    ]
    parts = []
    for i, lines in enumerate(records):
        part = tmp_path / f".part{i}"
        part.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
        parts.append(part)
    assert out.write_samples("my/task", parts, "hash") == "hash"
    written = out.samples_path("my/task")
    assert written.name == "samples_my__task.jsonl"
    assert [json.loads(x)["filter"] for x in written.read_text().splitlines()] == ["a", "b"]
    assert not any(p.exists() for p in parts)


def test_unwritable_output_dir_is_a_config_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="not writable"):
        OutputDir(RunFiles.one_run_folder(blocker / "sub"))


def test_results_and_samples_honour_the_umask(tmp_path):
    import os

    old = os.umask(0o027)
    try:
        out = OutputDir(RunFiles.one_run_folder(tmp_path))
        results = out.write_results({"results": {}})
        part = tmp_path / ".part"
        part.write_text(json.dumps({"doc_hash": "d", "prompt_hash": "p", "target_hash": "t"}))
        out.write_samples("t", [part], "hash")
    finally:
        os.umask(old)
    assert results.stat().st_mode & 0o777 == 0o640
    assert out.samples_path("t").stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("count", [1, 3])
def test_samples_parts_with_a_known_task_hash_are_joined_unread(tmp_path, count):
    out = OutputDir(RunFiles.one_run_folder(tmp_path))
    parts = []
    for i in range(count):
        part = tmp_path / f".part{i}"
        part.write_text(f'{{"n": {i}, "text": "é\\u2028"}}\n' * 3, encoding="utf-8")
        parts.append(part)
    expected = b"".join(p.read_bytes() for p in parts)
    assert out.write_samples("t", parts, "given") == "given"
    assert out.samples_path("t").read_bytes() == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["samples_t.jsonl"]


@pytest.mark.parametrize("filters", [["none"], ["none", "maj", "first"]])
def test_samples_log_task_hash_is_the_hash_of_the_written_lines(tmp_path, filters):
    from assay.doc import Doc, OutputType
    from assay.requests.doc_result import DocResult
    from assay.requests.instances import Instance
    from assay.requests.types import GenerateRequest
    from assay.results.samples import SamplesLog

    out = OutputDir(RunFiles.one_run_folder(tmp_path))
    log = SamplesLog(out, "t", filters, OutputType.GENERATE_UNTIL)
    for shard in range(2):
        results = []
        for i in range(3):
            doc_id = shard * 3 + i
            doc = Doc(query=f"q{doc_id}", choices=[f"a{doc_id}"], gold_index=0, row={"i": doc_id})
            result = DocResult(
                doc_id=doc_id,
                doc=doc,
                instances=[Instance(0, GenerateRequest(f"prompt {doc_id}"))],
                resps=[[f"answer {doc_id}"]],
                filtered={name: [f"answer {doc_id}"] for name in filters},
                values={name: {"exact_match": 1} for name in filters},
            )
            results.append(result)
        log.write(results, {r.doc_id: None for r in results})
    task_hash = log.finish()
    lines = out.samples_path("t").read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["filter"] for x in lines] == [f for f in filters for _ in range(6)]
    digest = hashlib.sha256()
    for line in lines:
        record = json.loads(line)
        digest.update((record["doc_hash"] + record["prompt_hash"] + record["target_hash"]).encode())
    assert task_hash == digest.hexdigest()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["samples_t.jsonl"]


def test_results_file_is_strict_json_with_non_finite_values_as_null_and_noted(tmp_path):
    out = OutputDir(RunFiles.one_run_folder(tmp_path))
    results = {
        "results": {
            "t": {"acc,none": float("inf"), "acc_stderr,none": float("nan"), "f1,none": 0.5}
        }
    }
    text = out.write_results(results).read_text(encoding="utf-8")
    assert "Infinity" not in text and "NaN" not in text
    data = json.loads(text)
    assert data["results"]["t"] == {"acc,none": None, "acc_stderr,none": None, "f1,none": 0.5}
    assert data["non_finite_values"] == {
        "results/t/acc,none": "inf",
        "results/t/acc_stderr,none": "nan",
    }


def test_results_file_without_non_finite_values_has_no_note(tmp_path):
    out = OutputDir(RunFiles.one_run_folder(tmp_path))
    data = json.loads(out.write_results({"results": {"t": {"acc,none": 1.0}}}).read_text())
    assert data == {"results": {"t": {"acc,none": 1.0}}}
