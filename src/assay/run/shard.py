"""One shard of a task through the run's stages, and the collector of what they return.

requests (`requests/build.py`) -> answers (`answering`, or `agents` for tasks with tools)
-> follow-up turns (`follow_ups`) -> filters -> verdicts (`judging`, tasks with judge
metrics) -> metric values (`scoring`). Each stage returns its own values (frozen records of
`requests.doc_result`); `TaskStages.run` assembles them into the shard's `DocResult`s, which
the samples file and the task's aggregates read. No stage changes what an earlier one made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from assay.doc import Doc
from assay.execution.progress import LiveProgress
from assay.execution.stats import RunStats
from assay.requests.build import build_requests
from assay.requests.cache import ResponseCache
from assay.requests.doc_result import AskedDoc, DocResult
from assay.requests.plan import Capabilities
from assay.run.agents import run_agents
from assay.run.answering import Answering
from assay.run.follow_ups import ask_follow_ups
from assay.run.judging import TaskJudging
from assay.run.plan import TaskPlan
from assay.run.scoring import apply_filters, score
from assay.sandbox import SandboxPolicy
from assay.sandbox.policy import using as using_sandbox
from assay.tasks.runtime_guard import scoring_window


@dataclass(frozen=True, kw_only=True)
class TaskStages:
    """What every shard of one task goes through."""

    plan: TaskPlan
    capabilities: Capabilities
    answering: Answering
    cache: ResponseCache | None
    sandbox: SandboxPolicy
    """Where model-written code runs (agents' tools and code metrics)."""
    judging: TaskJudging | None = None
    """The task's judges (tasks with judge metrics)."""
    confirmed_unsafe_code: bool = False
    """--confirm-run-unsafe-code: the runtime guard announces what the task's Python runs
    instead of refusing it."""

    def run(
        self, shard: Sequence[tuple[int, Doc]], progress: LiveProgress
    ) -> tuple[list[DocResult], RunStats]:
        """The shard's docs (id, doc) evaluated, in order, and the model's request statistics."""
        plan, task = self.plan, self.plan.task
        asked = [
            AskedDoc(
                doc_id=doc_id,
                doc=doc,
                instances=build_requests(plan.requests, doc, self.capabilities),
            )
            for doc_id, doc in shard
        ]
        if task.config.agent is not None:
            progress.start_shard(len(asked), len(asked))
            with using_sandbox(self.sandbox):
                answers, stats = run_agents(
                    self.answering, plan, asked, self.cache, task.config.agent
                )
        else:
            answers, stats = self.answering.answer(task.name, asked, self.cache, progress)
        answers, follow_up_stats = ask_follow_ups(self.answering, plan, asked, answers, self.cache)
        stats += follow_up_stats
        results = [DocResult.of(a, b) for a, b in zip(asked, answers, strict=True)]
        filters = plan.scorers.filters
        with scoring_window(task.config, self.confirmed_unsafe_code):  # the task's own Python
            filtered = apply_filters(results, filters)
        results = [replace(r, filtered=f) for r, f in zip(results, filtered, strict=True)]
        if self.judging is not None:
            judged = self.judging.judge(task.name, results, [f.name for f in filters])
            results = [replace(r, judged=j) for r, j in zip(results, judged, strict=True)]
        with using_sandbox(self.sandbox), scoring_window(task.config, self.confirmed_unsafe_code):
            scored = score(results, task.config, plan.scorers.metrics, filters)
        results = [
            replace(r, values=s.values, executions=s.executions)
            for r, s in zip(results, scored, strict=True)
        ]
        return results, stats
