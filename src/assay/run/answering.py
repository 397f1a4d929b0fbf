"""The model's answers to a shard: requests to the executor, answers filed under their docs.

A `Generation` (an answer with its reasoning, finish reason and token counts) is filed as the
answer filters see (`--unclosed-thinking` decides what that is when the thinking never
closed), its metadata kept with the doc's answers and counted in the task's `GenerationTally`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from assay.errors import DataError, FailedRequests, ModelError
from assay.execution.executor import Executor
from assay.execution.progress import LiveProgress
from assay.execution.stats import RunStats
from assay.requests.build import repeated
from assay.requests.cache import ResponseCache
from assay.requests.doc_result import AskedDoc, DocAnswers
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
        asked: Sequence[AskedDoc],
        cache: ResponseCache | None,
        progress: LiveProgress,
    ) -> tuple[list[DocAnswers], RunStats]:
        """Have the executor answer every request of a shard (a doc's repeats included); returns
        each doc's answers, in order, and the requests' statistics."""
        flat = [
            (k, i, request)
            for k, doc in enumerate(asked)
            for i, inst in enumerate(doc.instances)
            for request in repeated(inst.request, doc.doc.num_samples or 1)
        ]
        progress.start_shard(len(asked), len(flat))
        try:
            answers = self.executor.run(
                [r for _, _, r in flat], cache=cache, progress=progress.advance
            )
        except FailedRequests as exc:
            owners = [(asked[k].doc_id, i) for k, i, _ in flat]
            raise name_failed_docs(task, exc, owners) from None
        resps: list[list[list[Any]]] = [[[] for _ in doc.instances] for doc in asked]
        generations: list[dict[tuple[int, int], Generation]] = [{} for _ in asked]
        for (k, i, request), answer in zip(flat, answers, strict=True):
            seen, kept = self.filed(task, answer, request)
            if kept is not None:
                generations[k][(i, len(resps[k][i]))] = kept
            resps[k][i].append(seen)
        out = [DocAnswers(resps=r, generations=g) for r, g in zip(resps, generations, strict=True)]
        self.refuse_unclosed(
            task, [(doc.doc_id, a.generations.values()) for doc, a in zip(asked, out, strict=True)]
        )
        return out, answers.stats

    def filed(self, task: str, answer: Any, request: Any) -> tuple[Any, Generation | None]:
        """`answer` as filters see it (a Generation's answer under --unclosed-thinking), and the
        Generation to keep with the doc when it carries metadata (counted in the task's tally)."""
        if not isinstance(answer, Generation):
            return answer, None
        kept = None
        if answer.has_metadata:
            kept = answer
            self.tallies[task].add(answer, request)
        return answer_seen(answer, self.unclosed_thinking), kept

    def refuse_unclosed(self, task: str, docs: Iterable[tuple[int, Iterable[Generation]]]) -> None:
        """--unclosed-thinking fail: a task with a generation whose thinking never closed fails,
        naming its docs (`docs`: each doc's id and the generations it keeps)."""
        if self.unclosed_thinking != "fail":
            return
        unclosed = [
            doc_id
            for doc_id, generations in docs
            if any(g.thinking_closed is False for g in generations)
        ]
        if unclosed:
            shown = ", ".join(str(d) for d in unclosed[:10]) + (
                " ..." if len(unclosed) > 10 else ""
            )
            raise DataError(
                f"task {task}: {len(unclosed)} doc(s) have a generation whose thinking never "
                f"closed (docs {shown}), and --unclosed-thinking fail refuses to score them. "
                f"Raise max_gen_toks (--gen-kwargs max_gen_toks=N) or the thinking budget, or "
                f"score them as empty answers (--unclosed-thinking empty); see {DOCS_PAGE}."
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
