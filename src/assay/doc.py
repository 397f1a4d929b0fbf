"""The Doc: one evaluation sample, with the fields Python task formats give it, plus the raw row
lm-eval tasks need."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assay.requests.tools import ToolSpec, Turn


class OutputType(StrEnum):
    """lm-eval's output types: how a task turns docs into requests and scores them."""

    LOGLIKELIHOOD = "loglikelihood"
    LOGLIKELIHOOD_ROLLING = "loglikelihood_rolling"
    MULTIPLE_CHOICE = "multiple_choice"
    GENERATE_UNTIL = "generate_until"


class SamplingMethod(StrEnum):
    """How the model is queried for a doc."""

    GENERATIVE = "GENERATIVE"
    """Generate text until a stop sequence or the generation budget."""
    LOGPROBS = "LOGPROBS"
    """Sum of log-probabilities of each choice given the prompt."""
    PERPLEXITY = "PERPLEXITY"
    """Rolling log-likelihood of the whole text."""


@dataclass(slots=True)
class Doc:
    """One evaluation sample.

    Fields left at None are "unset": the task's defaults fill them, while a value set by the
    prompt function always wins over the task default.
    """

    query: str
    """Prompt text without few-shot examples (may start with `instruction`)."""
    choices: list[str] = field(default_factory=list)
    """Continuations scored for LOGPROBS; gold references for GENERATIVE."""
    gold_index: int | list[int] = 0
    """Index (or indices) of the correct entries of `choices`."""
    instruction: str | None = None
    """Task instruction placed once before the few-shot examples (lm-eval's description)."""
    images: list[Any] | None = None
    """Images for multimodal backends."""
    specific: dict[str, Any] | None = None
    """Free-form data for metrics (IFEval keeps instruction ids and kwargs here)."""
    unconditioned_query: str | None = None
    """Query for the unconditioned loglikelihood of PMI scoring (acc_mutual_info)."""
    original_query: str | None = None
    """The query before any templating, kept for reference."""
    id: str = ""
    """Stable id: the row index within its split, as a string."""
    task_name: str = ""
    """Name of the task this doc belongs to."""
    fewshot_samples: list[Doc] = field(default_factory=list)
    """Few-shot example docs chosen for this doc."""
    sampling_methods: list[SamplingMethod] = field(default_factory=list)
    """How the model is queried for this doc; empty means the task's methods."""
    fewshot_sorting_class: str | None = None
    """Class label used by the balanced few-shot sampler (default: the first gold)."""
    generation_size: int | None = None
    """Maximum new tokens for GENERATIVE; None means the task default."""
    stop_sequences: list[str] | None = None
    """Stop strings for GENERATIVE; None means the task default."""
    use_logits: bool = False
    """Return generation logits as well (partitions generation batches)."""
    num_samples: int | None = None
    """Generations per doc; None means the task default (1)."""
    shared_continuation: str | None = None
    """lm-eval "multiple input" tasks (winogrande): choices are alternative contexts, all
    scored with this one continuation."""
    row: dict[str, Any] | None = None
    """The dataset row this doc came from (lm-eval's `doc`), for filters, metrics and samples."""
    follow_ups: list[str] | None = None
    """Multi-turn chat (MT-Bench's second turn): user turns asked one after another once the
    model has answered `query`, each in the conversation so far; the doc's response is the
    answer to the last one, and the earlier exchanges are kept (DocResult.history)."""
    conversation: tuple[Turn, ...] | None = None
    """A doc whose prompt is a conversation of its own (BFCL's system and user turns): it is
    sent as these turns, never rendered from `query` and few-shot examples."""
    tools: tuple[ToolSpec, ...] = ()
    """Functions the model may call when answering this doc (backends with `accepts_tools`)."""

    def get_golds(self) -> list[str]:
        """The gold strings (the continuation for multiple-input docs)."""
        if self.shared_continuation is not None:
            return [self.shared_continuation]
        indices = self.gold_index if isinstance(self.gold_index, list) else [self.gold_index]
        return [self.choices[i] for i in indices]

    @property
    def gold_indices(self) -> list[int]:
        """`gold_index` as a list."""
        return self.gold_index if isinstance(self.gold_index, list) else [self.gold_index]
