"""The model's answers to a shard: requests to the executor, answers filed under their docs.

A `Generation` (an answer with its reasoning, finish reason and token counts) is filed as the
answer filters see (`--unclosed-thinking` decides what that is when the thinking never
closed), its metadata kept on the doc result and counted in the task's `GenerationTally`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from assay.errors import DataError, FailedRequests, ModelError
from assay.execution.executor import Executor
from assay.execution.progress import LiveProgress
from assay.execution.stats import RunStats
from assay.requests.build import repeated
from assay.requests.cache import ResponseCache
from assay.requests.doc_result import DocResult
from assay.requests.types import Generation
from assay.results.generations import DOCS_PAGE, GenerationTally, answer_seen


class Answering:
    """Asks the run's executor and files its answers, for every task of a run."""

    def __init__(self, executor: Executor, unclosed_thinking: str) -> None:
        self.executor, self.unclosed_thinking = executor, unclosed_thinking
        self.tallies: dict[str, GenerationTally] = {}
        """Per task run so far: how its generations ended (results.json's assay.generations)."""

    def start_task(self, task: str) -> GenerationTally:
        """A fresh tally of `task`'s generations."""
        self.tallies[task] = GenerationTally(self.unclosed_thinking)
        return self.tallies[task]

    def answer(
        self,
        task: str,
        results: list[DocResult],
        cache: ResponseCache | None,
        progress: LiveProgress,
    ) -> RunStats:
        """Have the executor answer every request of a shard (a doc's repeats included); file
        the answers under their docs."""
        asked = [
            (result, i, request)
            for result in results
            for i, inst in enumerate(result.instances)
            for request in repeated(inst.request, result.doc.num_samples or 1)
        ]
        progress.start_shard(len(results), len(asked))
        try:
            answers = self.executor.run(
                [r for _, _, r in asked], cache=cache, progress=progress.advance
            )
        except FailedRequests as exc:
            raise name_failed_docs(task, exc, [(res.doc_id, i) for res, i, _ in asked]) from None
        for (result, i, request), answer in zip(asked, answers, strict=True):
            result.resps[i].append(
                self.filed(task, result, (i, len(result.resps[i])), answer, request)
            )
        self.refuse_unclosed(task, results)
        return answers.stats

    def filed(
        self, task: str, result: DocResult, slot: tuple[int, int], answer: Any, request: Any
    ) -> Any:
        """`answer` as filters see it: a Generation's answer under --unclosed-thinking, its
        metadata kept on the doc result (at `slot`: instance, repeat) and counted."""
        if not isinstance(answer, Generation):
            return answer
        if answer.has_metadata:
            result.generations[slot] = answer
            self.tallies[task].add(answer, request)
        return answer_seen(answer, self.unclosed_thinking)

    def refuse_unclosed(self, task: str, results: Sequence[DocResult]) -> None:
        """--unclosed-thinking fail: a task with a generation whose thinking never closed fails,
        naming its docs."""
        if self.unclosed_thinking != "fail":
            return
        docs = [
            r.doc_id
            for r in results
            if any(g.thinking_closed is False for g in r.generations.values())
        ]
        if docs:
            shown = ", ".join(str(d) for d in docs[:10]) + (" ..." if len(docs) > 10 else "")
            raise DataError(
                f"task {task}: {len(docs)} doc(s) have a generation whose thinking never closed "
                f"(docs {shown}), and --unclosed-thinking fail refuses to score them. Raise "
                f"max_gen_toks (--gen-kwargs max_gen_toks=N) or the thinking budget, or score "
                f"them as empty answers (--unclosed-thinking empty); see {DOCS_PAGE}."
            )


def name_failed_docs(task: str, exc: FailedRequests, owners: list[tuple[int, int]]) -> ModelError:
    """`exc` told by doc: which docs of `task` lost a request, and why (the first few);
    `owners` gives each request's (doc id, request number)."""
    failed = sorted(exc.failures.items())
    docs = sorted({owners[i][0] for i, _ in failed})
    shown = "; ".join(
        f"doc {owners[i][0]} request {owners[i][1]}: {reason.rstrip('. ')}"
        for i, reason in failed[:5]
    )
    more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
    return ModelError(
        f"task {task}: {len(docs)} doc(s) could not be scored because their requests failed "
        f"({shown}{more}); the task was not scored. Answers that arrived are in the response "
        f"cache: re-run to ask only for the rest. Backend said: {exc}"
    )
