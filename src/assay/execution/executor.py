"""What every executor shares: the Executor protocol and the work plan it runs.

A run's requests become one plan whatever executes it: identical requests are computed once,
the response cache serves what it holds, and the rest is cut into chunks of `chunk_size` groups
of one kind, longest first. A group is the loglikelihood requests sharing a context (one
question's choices, which a prefix-sharing backend scores as one row) or any other single
request, so a chunk of a backend's batch size is one batch of rows. The chunk is the unit of
work and of cache commits: a backend receives exactly the same chunks from the local executor
as from any number of Ray replicas, so results never depend on where or in which order chunks
ran.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from assay.errors import FailedRequests, ModelError
from assay.execution.stats import Answers, RunStats, TokenUnit
from assay.models.base import LM
from assay.requests.cache import ResponseCache, request_key
from assay.requests.types import (
    GenerateRequest,
    Generation,
    LoglikelihoodRequest,
    Request,
    RequestKind,
    Result,
    RollingRequest,
    kind_of,
)

DEFAULT_CHUNK_SIZE = 512
"""Groups (a question's choices count once) per unit of work and per cache commit."""

Progress = Callable[[int], None]
"""Called with the number of requests just completed (cached ones included)."""


@runtime_checkable
class Executor(Protocol):
    """Computes a run's requests with one model, here or on many workers.

    `model` is the backend as the driver sees it: its identity keys the cache, and its optional
    capabilities (`chat_template`, `token_counter`, `max_length`, `accepts_messages`; see
    `models.base.LM`) shape prompts.
    `primary` is False in the processes of a data-parallel launch that must not write results.
    """

    model: LM
    primary: bool

    def run(
        self,
        requests: Sequence[Request],
        *,
        cache: ResponseCache | None = None,
        progress: Progress | None = None,
    ) -> Answers:
        """Results of `requests` (any mix of kinds), in order, computing each distinct one once,
        with the statistics of the call (`Answers.stats`: requests, cache hits, tokens,
        batches)."""
        ...

    def describe(self) -> dict[str, Any]:
        """How the work ran (executor name, replicas...), recorded in results.json."""
        ...

    def close(self) -> None:
        """Release workers (idempotent)."""
        ...


Measure = Callable[[list[str]], list[int]]
"""Lengths of texts: the backend's token counts when it has them, else characters."""


def char_lengths(texts: list[str]) -> list[int]:
    """The default Measure: characters."""
    return [len(t) for t in texts]


@dataclass(frozen=True)
class Chunk:
    """Distinct requests of one kind, computed together by one backend call."""

    kind: RequestKind
    keys: tuple[str, ...]
    requests: tuple[Request, ...]


@dataclass
class WorkPlan:
    """The chunks left to compute for a list of requests, and the results gathered so far."""

    keys: list[str]
    done: dict[str, Result]
    chunks: list[Chunk]
    cached: int
    """Caller requests (duplicates counted) answered by the cache."""
    _uses: dict[str, int] = field(default_factory=dict)
    token_unit: TokenUnit = "characters"
    """Unit of `measure`: the backend's tokens, or characters."""
    input_tokens: int = 0
    """Length of the distinct requests' texts, measured once when the plan was made."""
    measure: Measure = field(default=char_lengths, repr=False)
    """How texts were measured (also measures the generations at the end)."""

    def complete(self, chunk: Chunk, results: Sequence[Result], cache: ResponseCache | None) -> int:
        """Record a computed chunk (committing it to the cache); the caller requests it answers."""
        if len(results) != len(chunk.keys):
            raise ModelError(
                f"the model returned {len(results)} results for {len(chunk.keys)} "
                f"{chunk.kind.value} requests."
            )
        fresh = list(zip(chunk.keys, results, strict=True))
        if cache is not None:
            cache.put_many(fresh)
        self.done.update(fresh)
        return sum(self._uses[k] for k in chunk.keys)

    def failed(self, chunk: Chunk, exc: ModelError, cache: ResponseCache | None) -> ModelError:
        """The error to raise for a chunk the backend failed on, after saving what it answered.

        A backend that gives up on some requests (an API after its retries) reports them by
        position in the chunk (`failures`) and may carry the answers that did arrive
        (`partial`): those go to the cache, so a re-run asks only for the rest, and the failures
        are re-indexed to the caller's requests, which the caller can name.
        """
        partial = getattr(exc, "partial", None) or []
        arrived = [(k, r) for k, r in zip(chunk.keys, partial, strict=False) if r is not None]
        if cache is not None and arrived:
            cache.put_many(arrived)
        self.done.update(arrived)
        failures: dict[int, str] | None = getattr(exc, "failures", None)
        if not failures:
            return exc
        reasons = {chunk.keys[p]: reason for p, reason in failures.items()}
        by_caller = {i: reasons[k] for i, k in enumerate(self.keys) if k in reasons}
        return FailedRequests(str(exc), by_caller)

    def results(self) -> list[Result]:
        """One result per caller request, in the caller's order (after every chunk completed)."""
        return [self.done[k] for k in self.keys]

    def answers(self, batch_sizes: Sequence[int] = ()) -> Answers:
        """`results()` with the statistics of this plan's run (after every chunk completed);
        `batch_sizes` are those the backend's automatic batch size picked meanwhile."""
        generated = [
            generated_text(r) for r in self.done.values() if isinstance(r, str | Generation)
        ]
        stats = RunStats(
            requests=len(self.keys),
            unique_requests=len(self._uses),
            from_cache=len(self._uses) - sum(len(c.keys) for c in self.chunks),
            computed=sum(len(c.keys) for c in self.chunks),
            token_unit=self.token_unit,
            input_tokens=self.input_tokens,
            generated_tokens=sum(self.measure(generated)) if generated else 0,
            batches=len(self.chunks),
            batch_sizes=list(batch_sizes),
        )
        return Answers(self.results(), stats)


def generated_text(result: str | Generation) -> str:
    """All a generation produced, its thinking included (what generated token counts count)."""
    if isinstance(result, str):
        return result
    # str(): an unclosed generation's text repeats its thought, which is counted once.
    return (result.reasoning or "") + str(result)


def request_texts(request: Request) -> tuple[str, ...]:
    """The texts a request sends to the model (a loglikelihood's context and continuation)."""
    if isinstance(request, LoglikelihoodRequest):
        return (request.context, request.continuation)
    if isinstance(request, RollingRequest):
        return (request.text,)
    return (request.prompt if isinstance(request.prompt, str) else str(request.prompt),)


def _groups(
    pending: list[str], unique: dict[str, Request], size: dict[str, int]
) -> list[list[str]]:
    """Pending keys in groups that must share a backend call, longest group first.

    A group's length is that of the row a prefix-sharing backend packs it into (one context,
    every ending), from the `size` of each text: ordering by it keeps rows of similar length
    together, so little is padding.
    """
    groups: dict[str, list[str]] = {}
    for key in pending:
        request = unique[key]
        context = request.context if isinstance(request, LoglikelihoodRequest) else key
        groups.setdefault(context, []).append(key)

    # Each key's length, once: the sorts below read it several times per key.
    lengths = {key: sum(size[t] for t in request_texts(unique[key])) for key in pending}

    def packed(group: list[str]) -> int:
        shared = size[unique[group[0]].context] if len(group) > 1 else 0  # type: ignore[union-attr]
        return sum(lengths[k] for k in group) - shared * (len(group) - 1)

    for members in groups.values():
        members.sort(key=lambda k: -lengths[k])
    return sorted(groups.values(), key=lambda g: -packed(g))


def _pack(groups: list[list[str]], size: int) -> list[list[str]]:
    """Consecutive groups, `size` at a time, flattened into the keys of each chunk."""
    return [
        [key for group in groups[start : start + size] for key in group]
        for start in range(0, len(groups), size)
    ]


def _spread(groups: list[list[str]], size: int, min_chunks: int) -> list[list[str]]:
    """`_pack`, with chunks small enough to make at least `min_chunks` of them when possible."""
    return _pack(groups, min(size, max(1, -(-len(groups) // max(1, min_chunks)))))


def token_measure(model: LM) -> Measure:
    """The backend's own token counts, else characters: one measure for every executor, so
    they all cut the same chunks."""
    return model.token_counter() or char_lengths


def commit_chunk(model: LM) -> int:
    """Groups per chunk for `model`: its fixed whole-number batch size, else DEFAULT_CHUNK_SIZE.

    A backend with a fixed batch size is committed batch by batch, so a kill loses at most the
    batch in flight.
    """
    size = model.batch_size
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size
    return DEFAULT_CHUNK_SIZE


def plan_requests(
    requests: Sequence[Request],
    cache: ResponseCache | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    min_chunks: int = 1,
    measure: Measure = char_lengths,
) -> WorkPlan:
    """Deduplicate `requests`, look them up in `cache`, and chunk what is left.

    `measure` orders requests by length; the backend's token count (`token_counter`) makes the
    chunks of a batch-sized plan the batches the backend would have formed itself. Every
    distinct text is measured once, which also gives the plan's input token count.

    `min_chunks` shrinks the chunks of each kind so that there are at least that many (when
    there are that many groups), for a pool of workers handed fewer requests than they could
    share at `chunk_size`.
    """
    keys = [request_key(r) for r in requests]
    unique: dict[str, Request] = {}
    for key, request in zip(keys, requests, strict=True):
        unique.setdefault(key, request)
    done: dict[str, Result] = cache.get_many(list(unique)) if cache is not None else {}
    texts = list(dict.fromkeys(t for r in unique.values() for t in request_texts(r)))
    size = dict(zip(texts, measure(texts) if texts else [], strict=True))
    uses: dict[str, int] = {}
    for key in keys:
        uses[key] = uses.get(key, 0) + 1
    by_kind: dict[RequestKind, list[str]] = {}
    for key, request in unique.items():
        if key not in done:
            by_kind.setdefault(kind_of(request), []).append(key)
    chunks = [
        Chunk(kind, tuple(part), tuple(unique[k] for k in part))
        for kind, pending in by_kind.items()
        for part in _spread(_groups(pending, unique, size), chunk_size, min_chunks)
    ]
    cached = sum(n for k, n in uses.items() if k in done)
    return WorkPlan(
        keys,
        done,
        chunks,
        cached,
        uses,
        token_unit="characters" if measure is char_lengths else "tokens",
        input_tokens=sum(size[t] for r in unique.values() for t in request_texts(r)),
        measure=measure,
    )


def compute_chunk(model: LM, kind: RequestKind, requests: Sequence[Request]) -> list[Result]:
    """Run one chunk through the backend method of its kind."""
    if kind == RequestKind.LOGLIKELIHOOD:
        return list(model.loglikelihood(requests))  # type: ignore[arg-type]
    if kind == RequestKind.LOGLIKELIHOOD_ROLLING:
        return list(model.loglikelihood_rolling(requests))  # type: ignore[arg-type]
    if not model.accepts_tools and any(_offers_tools(r) for r in requests):
        # A backend without tools would answer as if none were offered: refuse instead.
        raise ModelError(
            f"--model {getattr(model, 'name', type(model).__name__)} takes no tools, but "
            "requests offer tools or carry tool calls; use a backend that takes them "
            "(openai-chat, anthropic-chat, hf)."
        )
    return list(model.generate_until(requests))  # type: ignore[arg-type]


def _offers_tools(request: Request) -> bool:
    from assay.requests.tools import is_conversation

    return isinstance(request, GenerateRequest) and (
        bool(request.tools) or request.tool_choice is not None or is_conversation(request.prompt)
    )


__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "Chunk",
    "Executor",
    "Measure",
    "Progress",
    "WorkPlan",
    "char_lengths",
    "commit_chunk",
    "compute_chunk",
    "plan_requests",
    "request_texts",
    "token_measure",
]
