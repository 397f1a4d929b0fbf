"""The agent stage: docs of a task with tools (`TaskConfig.agent`) are asked turn by turn, the
whole shard at once, until each answers without calling a tool or reaches a limit.

Each round asks every unfinished doc's conversation so far through the executor and the
response cache, runs the tools each answer calls (in the order called) and appends their
results. A turn's time (from the round's start until its answer arrived) is noted in the
cache in the transaction that stores its answer, and a tool call's time beside it once the
call has run, so a resumed run (kill -9, then the same command) reads every cached answer with
its time and writes the same transcripts, and no turn is asked twice. Tools run again on a
resumed run: they must be deterministic functions of their arguments and the sample's state.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

from assay.agents.spec import AgentSpec
from assay.agents.tools import ToolOutcome
from assay.agents.transcript import Transcript
from assay.errors import DataError, FailedRequests, ModelError
from assay.execution.stats import RunStats
from assay.requests.cache import ResponseCache, request_key
from assay.requests.doc_result import AskedDoc, DocAnswers, DocResult
from assay.requests.tools import ToolCall, Turn, conversation_of
from assay.requests.types import GenerateRequest, Generation
from assay.run.answering import Answering, name_failed_docs
from assay.run.plan import TaskPlan


class _Loop:
    """One doc's loop: its conversation, state and transcript."""

    def __init__(self, asked: AskedDoc, first: GenerateRequest, spec: AgentSpec) -> None:
        self.asked, self.first, self.spec = asked, first, spec
        self.conversation = conversation_of(first.prompt)
        row = asked.doc.row or {}
        initial = row.get(spec.state_field) if spec.state_field else None
        self.state: dict[str, Any] = copy.deepcopy(initial) if isinstance(initial, dict) else {}
        self.transcript = Transcript()
        self.transcript.turns.append({"role": "prompt", "messages": _prompt_record(first)})
        self.final = ""
        self.last: Generation | None = None
        self.episode = spec.episode(asked.doc.specific or {}) if spec.episode else None

    def request(self) -> GenerateRequest:
        return GenerateRequest(
            self.conversation,
            self.first.params,
            self.first.sample_index,
            self.first.images,
            tools=self.episode.tools() if self.episode else self.spec.specs,
            tool_choice=self.spec.tool_choice,
        )

    def take(self, answer: Generation, seconds: float, clock: _Clock, key: str) -> None:
        """The model's turn (asked under cache key `key`): record it, run its calls (their
        times as first noted under `key`); sets `stopped_by` when the loop ends."""
        spec, transcript = self.spec, self.transcript
        transcript.add_answer(answer, seconds)
        self.conversation = (*self.conversation, Turn("assistant", answer.text, answer.tool_calls))
        self.final, self.last = answer.text, answer
        if self.episode is not None:
            self._episode_turn(answer, clock, key)
            if transcript.stopped_by is not None:
                return
        elif not answer.tool_calls:
            transcript.stopped_by = "answer"
            return
        else:
            tools = {tool.spec.name: tool for tool in spec.tools}
            for k, call in enumerate(answer.tool_calls):
                tool = tools.get(call.name)
                if tool is None:
                    outcome = ToolOutcome(
                        f"error: there is no tool named {call.name!r}; the tools are "
                        f"{', '.join(sorted(tools))}",
                        True,
                        0.0,
                    )
                else:
                    outcome = tool.call(call, self.state)
                self._add_result(k, call, outcome, clock, key)
        if transcript.model_turns >= spec.max_turns:
            transcript.stopped_by = "max_turns"
        elif spec.max_tokens is not None and transcript.tokens >= spec.max_tokens:
            transcript.stopped_by = "max_tokens"
        elif spec.max_seconds is not None and transcript.seconds >= spec.max_seconds:
            transcript.stopped_by = "max_seconds"

    def _add_result(
        self,
        k: int,
        call: ToolCall,
        outcome: ToolOutcome,
        clock: _Clock,
        key: str,
        as_tool_message: bool = True,
    ) -> None:
        """The result of the turn's `k`-th call (asked under `key`), timed as first noted;
        sent back as a `tool` message unless the episode sends the results itself."""
        call_id = call.id or f"call_{self.transcript.model_turns}_{k}"
        measured = STOPWATCH.tool(outcome.seconds) if outcome.seconds else 0.0
        took = clock.seconds(f"{key}:tool:{k}", measured) if measured else 0.0
        self.transcript.add_result(call, call_id, outcome.content, outcome.error, took)
        if as_tool_message:
            self.conversation = (
                *self.conversation,
                Turn("tool", outcome.content, (), call_id, call.name),
            )

    def _episode_turn(self, answer: Generation, clock: _Clock, key: str) -> None:
        """The episode runs the turn's calls and may open the next user turn or end."""
        assert self.episode is not None
        reply = self.episode.reply(answer)
        own = reply.results_message is None
        for k, (call, outcome) in enumerate(reply.results):
            self._add_result(k, call, outcome, clock, key, as_tool_message=own)
        if reply.results_message is not None:
            self.transcript.add_user((reply.results_message,), results=True)
            self.conversation = (*self.conversation, reply.results_message)
        if reply.user:
            self.transcript.add_user(reply.user, reply.tools_added)
            self.conversation = (*self.conversation, *reply.user)
        if reply.stop is not None:
            self.transcript.stopped_by = reply.stop


def _prompt_record(request: GenerateRequest) -> Any:
    from assay.requests.tools import conversation_record

    return conversation_record(request.prompt)


def run_agents(
    answering: Answering,
    plan: TaskPlan,
    asked: Sequence[AskedDoc],
    cache: ResponseCache | None,
    spec: AgentSpec,
) -> tuple[list[DocAnswers], RunStats]:
    """Run the loop of every doc of the shard (asked nothing before); returns each doc's
    answers (its final answer, the last turn's text, with its transcript) and the requests'
    statistics."""
    model = answering.executor.model
    if spec.offers_tools and not model.accepts_tools:
        raise ModelError(
            f"task {plan.name} is an agent task (it offers tools), but --model "
            f"{getattr(model, 'name', type(model).__name__)} takes no tools; use a backend "
            "that does (openai-chat, anthropic-chat, hf, vllm)."
        )
    loops: list[_Loop] = []
    for doc in asked:
        first = doc.instances[0].request if len(doc.instances) == 1 else None
        if not isinstance(first, GenerateRequest) or (doc.doc.num_samples or 1) != 1:
            raise DataError(
                f"task {plan.name}: doc {doc.doc_id}: an agent task needs exactly one "
                "generation per doc (output_type generate_until, no repeats)."
            )
        loops.append(_Loop(doc, first, spec))
    try:
        stats = _rounds(answering, plan, loops, cache)
    finally:
        for loop in loops:
            if loop.episode is not None:
                loop.episode.close()
    out = []
    for loop in loops:
        last = loop.last
        seen = loop.final if last is None else _seen(answering, last)
        loop.transcript.end_state = loop.state
        # The doc keeps the last turn's generation, when it tells how it ended.
        kept = {(0, 0): last} if last is not None and last.has_metadata else {}
        out.append(DocAnswers(resps=[[seen]], generations=kept, transcript=loop.transcript))
    answering.refuse_unclosed(
        plan.name,
        [(loop.asked.doc_id, a.generations.values()) for loop, a in zip(loops, out, strict=True)],
    )
    return out, stats


def _rounds(
    answering: Answering,
    plan: TaskPlan,
    loops: list[_Loop],
    cache: ResponseCache | None,
) -> RunStats:
    """Ask every unfinished loop's next turn, round by round, until all have stopped."""
    stats = RunStats()
    clock = _Clock(cache)
    round_number = 0
    while active := [loop for loop in loops if loop.transcript.stopped_by is None]:
        requests = [loop.request() for loop in active]
        keys = [request_key(r) for r in requests]
        seconds = STOPWATCH.round()
        try:
            if cache is None:
                answers = answering.executor.run(requests, cache=cache)
            else:
                with cache.timing(keys, seconds):
                    answers = answering.executor.run(requests, cache=cache)
        except FailedRequests as exc:
            owners = [(loop.asked.doc_id, round_number) for loop in active]
            raise name_failed_docs(plan.name, exc, owners) from None
        stats += answers.stats
        for loop, answer, request, key in zip(active, answers, requests, keys, strict=True):
            generation = answer if isinstance(answer, Generation) else Generation(str(answer))
            answering.filed(plan.name, generation, request)  # counted in the task's tally
            loop.take(generation, clock.seconds(key, seconds(key)), clock, key)
        round_number += 1
    return stats


def _seen(answering: Answering, generation: Generation) -> str:
    from assay.results.generations import answer_seen

    return answer_seen(generation, answering.unclosed_thinking)


class Stopwatch:
    """How the loop times model turns and tool calls: by the wall clock. Tests put one that
    gives deterministic times in `STOPWATCH`'s place."""

    def round(self) -> Callable[[str], float]:
        """Started as a round is asked: the seconds from then until the answer to a request
        (by cache key) arrived, when called as it arrives."""
        started = time.perf_counter()
        return lambda key: time.perf_counter() - started

    def tool(self, measured: float) -> float:
        """A tool call's time, from what the call measured."""
        return measured


STOPWATCH = Stopwatch()
"""The loop's stopwatch (read at each round)."""


class _Clock:
    """Times as first measured: a turn's time is noted in the response cache with its answer
    (`ResponseCache.timing`), a tool call's once it has run, so that a resumed run writes the
    transcript the first run would have (without a cache, as measured). A cached answer whose
    time was never noted (a cache written by an older assay) is noted now."""

    def __init__(self, cache: ResponseCache | None) -> None:
        self.cache = cache

    def seconds(self, key: str, measured: float) -> float:
        if self.cache is None:
            return measured
        noted = self.cache.notes([key])
        if key not in noted:
            self.cache.note([(key, round(measured, 6))])
            noted = self.cache.notes([key])  # another process may have noted it first
        return float(noted[key])


class AgentTally:
    """A task's agent loops counted for results.json: turns, tool calls, failed and
    unparseable calls, tokens, and how the loops ended (the answer or which limit)."""

    def __init__(self) -> None:
        self.samples = self.turns = self.calls = self.errors = self.unparsed = 0
        self.failing = self.tokens = 0
        self.stopped: dict[str, int] = {}

    def add(self, results: Sequence[DocResult]) -> None:
        for result in results:
            transcript: Transcript = result.transcript
            self.samples += 1
            self.turns += transcript.model_turns
            self.calls += transcript.tool_calls
            self.errors += transcript.tool_errors
            self.failing += transcript.tool_errors > 0
            self.unparsed += sum(call.arguments_json is None for call in transcript.calls())
            self.tokens += transcript.tokens
            reason = transcript.stopped_by or "answer"
            self.stopped[reason] = self.stopped.get(reason, 0) + 1

    def entries(self) -> dict[str, Any]:
        """The task entry's keys (means are None for a task with no samples)."""
        n = self.samples

        def mean(total: int) -> float | None:
            return total / n if n else None

        out: dict[str, Any] = {
            "agent_samples": n,
            "agent_model_turns": self.turns,
            "agent_model_turns_mean": mean(self.turns),
            "agent_tool_calls": self.calls,
            "agent_tool_calls_mean": mean(self.calls),
            "agent_tool_errors": self.errors,
            "agent_tool_calls_unparsed": self.unparsed,
            "agent_samples_with_tool_errors": self.failing,
            "agent_tokens_mean": mean(self.tokens),
        }
        usual = ("answer", "max_turns", "max_tokens", "max_seconds")
        # An episode's own limits (BFCL's steps per user turn) are listed when reached.
        for reason in (*usual, *sorted(set(self.stopped) - set(usual))):
            out[f"agent_stopped_by_{reason}"] = self.stopped.get(reason, 0)
        return out
