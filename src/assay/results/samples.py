"""samples_<task>.jsonl: one record per doc and filter ensemble, in lm-eval 0.4.13's layout.

Records stream to one part file per filter ensemble while a task runs (lm-eval lists every doc
of the first ensemble, then every doc of the second...), and the parts are joined when the task
ends; the join also gives lm-eval's task hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from assay.doc import Doc, OutputType
from assay.images import image_reference
from assay.requests.doc_result import DocResult
from assay.requests.types import Generation, LoglikelihoodResult, RollingResult
from assay.results._indented_json import NotPlain, indented
from assay.results.schema import SampleRecord
from assay.results.strict_json import NOTE_KEY, finite_only
from assay.results.writer import OutputDir
from assay.util.redact import clean_text


def _jsonable(value: Any) -> Any:
    """Per-sample metric values as lm-eval writes them: numpy scalars as numbers, arrays as str."""
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return str(value)
    return value


def _stringify(value: Any) -> Any:
    """lm-eval writes every leaf of resps as a string."""
    if isinstance(value, RollingResult):
        return str(value.logprob)
    if isinstance(value, LoglikelihoodResult):
        return [str(value.logprob), str(value.is_greedy)]
    if isinstance(value, tuple | list):
        return [_stringify(v) for v in value]
    return str(value)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def dumps(value: Any) -> str:
    """JSON as lm-eval writes it (non-ASCII kept, unknown types as strings)."""
    return json.dumps(value, ensure_ascii=False, default=_fallback)


def record_line(record: Mapping[str, Any]) -> str:
    """A samples-file line: lm-eval's JSON (`dumps`), but strict: a value that is not a finite
    number is written as null and the record gains a `non_finite_values` note mapping its path
    (keys joined by "/") to what it was, as results.json does. Lines without one are as before."""
    try:
        return json.dumps(record, ensure_ascii=False, default=_fallback, allow_nan=False)
    except ValueError:
        pass
    found: dict[str, str] = {}
    clean = finite_only(_plain_scalars(dict(record)), "", found)
    clean[NOTE_KEY] = found
    return json.dumps(clean, ensure_ascii=False, default=_fallback, allow_nan=False)


def _plain_scalars(value: Any) -> Any:
    """Library scalars (numpy's) as Python numbers, so that a non-finite one is found by path."""
    if isinstance(value, dict):
        return {k: _plain_scalars(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_scalars(v) for v in value]
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    return value


def _fallback(value: Any) -> Any:
    """Values JSON cannot hold: numpy scalars as numbers, sets as lists, images (PIL, bytes) as
    their ImageRef (a row's pixels never reach a samples file), anything else as str()."""
    ref = image_reference(value)
    if ref is not value:
        return ref
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, set):
        return list(value)
    return str(value)


def target_of(doc: Doc, output_type: OutputType) -> str:
    """lm-eval's `target` field: str(doc_to_target(doc))."""
    if doc.specific and "target" in doc.specific:
        return str(doc.specific["target"])
    if output_type == OutputType.MULTIPLE_CHOICE:
        return str(doc.gold_index)
    golds = doc.get_golds() if doc.choices else [doc.query]
    return golds[0] if len(golds) == 1 else str(golds)


def doc_hash(row: dict[str, Any]) -> str:
    """lm-eval's doc_hash of a dataset row: sha256 of its JSON with indent 2."""
    try:
        text = indented(row)
    except NotPlain:  # a value only json.dumps (with _fallback) writes as lm-eval does
        text = json.dumps(row, indent=2, ensure_ascii=False, default=_fallback)
    return _sha(text)


def generation_record(generation: Generation, reasoning: str = "full") -> dict[str, Any]:
    """A generation's line in a samples record: its thinking (the text with `reasoning`
    "full", its length in characters with "length", nothing with "none"), finish reason,
    whether the thinking closed, token counts, and the tools it called (when it called any)."""
    out: dict[str, Any] = {}
    if reasoning == "full":
        out["reasoning"] = generation.reasoning
    elif reasoning == "length":
        out["reasoning_chars"] = (
            len(generation.reasoning) if generation.reasoning is not None else None
        )
    out["finish_reason"] = generation.finish_reason
    out["thinking_closed"] = generation.thinking_closed
    out["reasoning_tokens"] = generation.reasoning_tokens
    out["answer_tokens"] = generation.answer_tokens
    if generation.tool_calls:
        out["tool_calls"] = [call.as_dict() for call in generation.tool_calls]
    return out


def sample_record(
    result: DocResult,
    filter_name: str,
    output_type: OutputType,
    metric_names: list[str],
    *,
    clustered: bool = False,
    cluster: Any = None,
    row_hash: str | None = None,
    reasoning: str = "full",
) -> SampleRecord:
    """One samples-file line in lm-eval's layout; with `clustered` (the task has a cluster
    key) the doc's `cluster` value follows the hashes. `row_hash`: the row's `doc_hash` when
    the caller has it already (it is the slowest part of a record). Docs answered by
    `Generation`s add `generations` (see `generation_record`; `reasoning` is
    --log-samples-reasoning)."""
    doc, row = result.doc, result.doc.row or {}
    target = target_of(doc, output_type)
    first = result.instances[0].request
    prompt = (
        getattr(first, "context", None)
        or getattr(first, "text", None)
        or getattr(first, "prompt", "")
    )
    values = result.values[filter_name]
    record: SampleRecord = {
        "doc_id": result.doc_id,
        "doc": row,
        "target": target,
        "arguments": {f"gen_args_{i}": inst.arguments() for i, inst in enumerate(result.instances)},
        "resps": [[_stringify(r) for r in resp] for resp in result.resps],
        "filtered_resps": [_stringify(v) for v in result.filtered[filter_name]],
        "filter": filter_name,
        "metrics": metric_names,
        "doc_hash": row_hash if row_hash is not None else doc_hash(row),
        "prompt_hash": _sha(prompt if isinstance(prompt, str) else dumps(prompt)),
        "target_hash": _sha(target),
    }
    if clustered:
        record["cluster"] = cluster
    if result.history:
        # Multi-turn docs: the earlier turns and the model's answers (resps is the last one).
        turns: dict[str, Any] = record  # type: ignore[assignment]
        turns["history"] = [{"user": user, "assistant": answer} for user, answer in result.history]
    if result.generations:
        # How each generation ended and what the model thought (resps hold the answers).
        record["generations"] = [
            [
                generation_record(result.generations[(i, j)], reasoning)
                if (i, j) in result.generations
                else None
                for j in range(len(resp))
            ]
            for i, resp in enumerate(result.resps)
        ]
    if result.transcript is not None:
        # Agent tasks: every turn, call and result of the sample's loop.
        agent: dict[str, Any] = record  # type: ignore[assignment]
        agent["transcript"] = result.transcript.record()
    if result.judged.get(filter_name):
        # Every judge prompt, raw verdict and parsed score, so each judged value is auditable.
        judged: dict[str, Any] = record  # type: ignore[assignment]
        judged["judge"] = {k: j.record() for k, j in result.judged[filter_name].items()}
    if result.executions.get(filter_name):
        record["executions"] = result.executions[filter_name]
    # One key per metric: a TypedDict cannot declare them (see results.schema.SampleRecord).
    extra: dict[str, Any] = record  # type: ignore[assignment]
    for name, value in values.items():
        extra[name] = _jsonable(value)
    return record


class SamplesLog:
    """A task's samples file, written shard by shard while the task runs (nothing when `out`
    is None)."""

    def __init__(
        self,
        out: OutputDir | None,
        task: str,
        filters: Sequence[str],
        output_type: OutputType,
        clustered: bool = False,
        reasoning: str = "full",
    ) -> None:
        self.out, self.task, self.output_type, self.clustered = out, task, output_type, clustered
        self.reasoning = reasoning
        """--log-samples-reasoning: full, length or none (see `generation_record`)."""
        self.parts: dict[str, Path] = {}
        if out is not None:
            self.parts = {name: out.part_path(task, i) for i, name in enumerate(filters)}
        self.handles: dict[str, IO[str]] = {
            name: path.open("w", encoding="utf-8") for name, path in self.parts.items()
        }
        # lm-eval's task hash, taken as the records are written: sha256 over each line's doc,
        # prompt and target hashes, file order. Every part holds the same docs with the same
        # three hashes, so the later parts repeat the first part's text (`_repeat`, kept only
        # when there are later parts).
        self._digest = hashlib.sha256()
        self._repeat: list[bytes] = []

    def write(
        self,
        results: Sequence[DocResult],
        clusters: Mapping[int, Any],
        row_hashes: Sequence[str] | None = None,
    ) -> None:
        """Append the records of a scored shard (`clusters`: each doc's cluster value;
        `row_hashes`: each result's `doc_hash`, when known)."""
        for part, (name, handle) in enumerate(self.handles.items()):
            hashed = []
            for k, result in enumerate(results):
                record = sample_record(
                    result,
                    name,
                    self.output_type,
                    list(result.values[name]),
                    clustered=self.clustered,
                    cluster=clusters[result.doc_id],
                    row_hash=row_hashes[k] if row_hashes is not None else None,
                    reasoning=self.reasoning,
                )
                # A secret the model or server echoed (a key, a URL's password) is hidden.
                handle.write(clean_text(record_line(record)) + "\n")
                if part == 0:
                    hashed.append(
                        record["doc_hash"] + record["prompt_hash"] + record["target_hash"]
                    )
            if part == 0:
                text = "".join(hashed).encode()
                self._digest.update(text)
                if len(self.handles) > 1:
                    self._repeat.append(text)

    def close(self) -> None:
        """Close the part files (idempotent)."""
        for handle in self.handles.values():
            handle.close()

    def discard(self) -> None:
        """Close and delete the part files: the task did not finish (an error, Ctrl-C), and a
        re-run writes them again from the response cache."""
        self.close()
        for path in self.parts.values():
            path.unlink(missing_ok=True)

    def finish(self) -> str | None:
        """Join the parts into samples_<task>.jsonl; lm-eval's task hash (None when off)."""
        self.close()
        if self.out is None:
            return None
        digest = self._digest
        for _ in range(len(self.parts) - 1):
            for text in self._repeat:
                digest.update(text)
        return self.out.write_samples(self.task, list(self.parts.values()), digest.hexdigest())
