"""results.json of a run, filled in task by task (lm-eval 0.4.13's layout, plus assay's
`provenance` and `assay` blocks; the types are in `results.schema`).

What produced the run (settings, model identity, library versions, git revision) is taken once,
when the run starts (`RunInfo`); each finished task adds its entry (`TaskRecord`), and the groups
whose tasks are all done are aggregated (`summary.add_groups`). `results()` gives the file as it
stands: the run writes it after every task, so an interrupted run keeps what it finished.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assay.execution.stats import RunStats, collapse_repeats
from assay.models.api.usage_totals import api_usage_entry, usage_sum
from assay.results.generations import GenerationTally, generation_entries
from assay.results.provenance import task_provenance
from assay.results.schema import Provenance, ResultsFile, RunConfig, TaskEntry, TaskProvenance
from assay.results.stderr_notes import NOTES_KEY, stderr_notes
from assay.results.summary import add_groups
from assay.results.task_config import config_dump
from assay.tasks.registry import GroupNode
from assay.tasks.task import Task


def git_hash() -> str | None:
    """`git describe --always` of the working directory (None outside a repository)."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always"], capture_output=True, text=True, timeout=5, check=False
        )
    except OSError:
        return None
    return out.stdout.strip() or None


@dataclass(frozen=True, kw_only=True)
class RunInfo:
    """What produced the run, as results.json records it; taken once, when the run starts."""

    config: RunConfig
    """The "config" entry; its "batch_sizes" is filled in as tasks run."""
    git_hash: str | None
    date: float
    """When the run started (seconds since the epoch)."""
    system_instruction: str | None
    fewshot_as_multiturn: bool
    chat_template_applied: bool
    provenance: Provenance
    """Versions, backend, settings and seeds; its "tasks" are filled in as tasks run."""
    run_key: dict[str, Any]
    """What a rerun into the same folder must match (run.resume.run_key)."""
    started: float
    """time.perf_counter() when the run started."""


@dataclass(frozen=True, kw_only=True)
class TaskRecord:
    """What a finished task adds to results.json."""

    task: Task
    entry: TaskEntry
    """Its "results" entry (summary.task_entry)."""
    higher_is_better: dict[str, bool]
    n_docs: int
    """Docs scored (the "effective" sample count)."""
    stats: RunStats
    """How its requests ran (counts, tokens, automatic batch sizes)."""
    task_hash: str | None
    """lm-eval's hash of its samples file (None without --log-samples)."""
    doc_hashes: list[tuple[int, str]]
    """(doc id, doc hash) of every doc scored: the docs' fingerprint."""
    seconds: float
    judges: list[dict[str, Any]] | None = None
    """Tasks with judge metrics: each judge, its identity and its request counts."""
    sandbox: str | None = None
    """Tasks that run model-written code: the sandbox it ran in (bwrap, rlimits, none,
    docker:IMAGE)."""
    generations: GenerationTally | None = None
    """How its generations ended (truncation, unclosed thinking, token counts)."""
    replaced_self: list[int] = field(default_factory=list)
    """Docs whose own row, drawn as a few-shot example, was replaced (`Task.replaced_self`)."""
    stderr_notes: dict[str, str] = field(default_factory=dict)
    """Its measured stderrs that are unreliable, by key, with why (`summary.task_entry`)."""


class ResultsBuilder:
    """results.json of one run, as its tasks finish."""

    def __init__(self, groups: Sequence[GroupNode], info: RunInfo) -> None:
        self.groups, self.info = list(groups), info
        self.sections: dict[str, dict[str, Any]] = {
            "results": {},
            "groups": {},
            "group_subtasks": {},
            "configs": {},
            "versions": {},
            "n-shot": {},
            "higher_is_better": {},
            "n-samples": {},
            "task_hashes": {},
        }
        self.tasks: dict[str, TaskProvenance] = {}
        self.timings: dict[str, float] = {}
        self.requests: dict[str, dict[str, Any]] = {}
        self.judges: dict[str, list[dict[str, Any]]] = {}
        self.batch_sizes: list[int] = []
        self.generations: dict[str, GenerationTally] = {}
        self.measured_notes: dict[str, dict[str, str]] = {}

    def add_task(self, record: TaskRecord, batch_sizes: Sequence[int] = ()) -> None:
        """Record a finished task and the automatic batch sizes it ran with; aggregate the
        groups it completes."""
        s, task = self.sections, record.task
        name = task.name
        s["results"][name] = record.entry
        s["configs"][name] = config_dump(task, self.info.config["gen_kwargs"])
        self.tasks[name] = task_provenance(
            task, s["configs"][name], record.doc_hashes, record.sandbox, record.replaced_self
        )
        s["versions"][name] = task.config.version
        s["n-shot"][name] = task.shots
        s["higher_is_better"][name] = record.higher_is_better
        s["n-samples"][name] = {"original": len(task.eval_rows()), "effective": record.n_docs}
        self.timings[name] = round(record.seconds, 3)
        if record.task_hash:
            s["task_hashes"][name] = record.task_hash
        self.requests[name] = record.stats.counts()
        if record.judges is not None:
            self.judges[name] = record.judges
        self.generations[name] = record.generations or GenerationTally()
        if record.stderr_notes:
            self.measured_notes[name] = dict(record.stderr_notes)
        self.batch_sizes = collapse_repeats([*self.batch_sizes, *batch_sizes])
        add_groups(s, self.groups)

    def results(
        self, executor: Mapping[str, Any], bill: dict[str, Any] | None = None
    ) -> ResultsFile:
        """results.json as it stands; `executor` is how the work ran (Executor.describe());
        `bill` is the run's API bill (`run.bill`), when the usage is metered in this process
        (otherwise the tasks' usage is added up)."""
        info = self.info
        final: dict[str, Any] = {key: dict(value) for key, value in self.sections.items()}
        # Groups are listed first, as lm-eval does.
        for name, entry in self.sections["groups"].items():
            final["results"] = {
                name: entry,
                **{k: v for k, v in final["results"].items() if k != name},
            }
        for key in ("versions", "n-shot", "higher_is_better"):
            final[key] = dict(sorted(final[key].items()))
        final["config"] = {**info.config, "batch_sizes": list(self.batch_sizes)}
        final["git_hash"] = info.git_hash
        final["date"] = info.date
        final["system_instruction"] = info.system_instruction
        final["fewshot_as_multiturn"] = info.fewshot_as_multiturn
        final["chat_template_applied"] = info.chat_template_applied
        final["provenance"] = {**info.provenance, "tasks": dict(self.tasks)}
        final["assay"] = {
            "timings": dict(self.timings),
            "requests": dict(self.requests),
            "executor": dict(executor),
            "run": info.run_key,
        }
        if self.judges:
            final["assay"]["judges"] = dict(self.judges)
        # The run's API usage: the evaluated model's over every task, and every judge's.
        judged = [judge["requests"] for judges in self.judges.values() for judge in judges]
        counts = [*self.requests.values(), *judged]
        usage = usage_sum([c["api"] for c in counts if "api" in c])
        if bill is not None:
            if bill:
                final["assay"]["api_usage"] = bill
        elif usage:
            final["assay"]["api_usage"] = api_usage_entry(usage)
        generations = generation_entries(self.generations, self.sections["group_subtasks"])
        if generations:  # only runs whose backend said how its generations ended
            final["assay"]["generations"] = generations
        final["total_evaluation_time_seconds"] = str(time.perf_counter() - info.started)
        notes = stderr_notes(final)
        for name, measured in self.measured_notes.items():
            notes[name] = {**measured, **notes.get(name, {})}
        if notes:  # stderrs of 0 or "N/A": why (results.stderr_notes); files without are as before
            final[NOTES_KEY] = notes
        return final  # type: ignore[return-value]
