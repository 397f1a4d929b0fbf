"""A task's request plan: what every doc of the task will be asked, fixed once per run.

The plan holds what does not change from doc to doc: the prompt manager (the task's delimiters
and layout, the run's --system-instruction, --apply-chat-template and --fewshot-as-multiturn,
and whether the backend takes chat messages or renders a template) and the generation policy
(the task's generation_kwargs, --gen-kwargs, --seed). `build_requests` applies it to each doc.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from assay.doc import Doc, OutputType
from assay.prompts.chat import ChatTemplate
from assay.prompts.manager import PromptManager
from assay.requests.types import (
    GenParams,
    lm_eval_gen_kwargs,
    merge_gen_kwargs,
    normalize_gen_kwargs,
    set_max_gen_toks,
)

if TYPE_CHECKING:
    # Backends come after requests in the pipeline: only their type is needed here.
    from assay.models.base import LM, TokenCounter


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers that changes what it is asked (nothing, without a model)."""

    backend: str = "no model"
    """The backend's class name, for error messages."""
    chat_template: ChatTemplate | None = None
    """Renders chat messages into the model's prompt text (--apply-chat-template)."""
    accepts_messages: bool = False
    """A chat API: it takes the messages themselves, so nothing is rendered."""
    token_counter: TokenCounter | None = None
    """Tokens of texts as the model encodes a prompt (truncate_fewshots)."""
    max_length: int | None = None
    """The context window in tokens (truncate_fewshots)."""
    accepts_images: bool = True
    """The backend takes doc images (a doc with images is refused otherwise). Without a model
    (`assay tasks show`) nothing is refused."""
    accepts_tools: bool = True
    """The backend takes tools and conversations with tool turns (a doc offering tools is
    refused otherwise). Without a model nothing is refused."""

    @classmethod
    def of(cls, model: LM) -> Capabilities:
        """The capabilities `model` declares (models.base.LM lists them with their defaults)."""
        return cls(
            backend=type(model).__name__,
            chat_template=model.chat_template(),
            accepts_messages=model.accepts_messages,
            token_counter=model.token_counter(),
            max_length=model.max_length,
            accepts_images=model.accepts_images,
            accepts_tools=model.accepts_tools,
        )


@dataclass(frozen=True)
class PromptSettings:
    """The run's prompt flags."""

    apply_chat_template: bool = False
    system_instruction: str | None = None
    fewshot_as_multiturn: bool | None = None
    """None: multi-turn exactly when a chat template is applied (lm-eval's default)."""

    @property
    def multiturn(self) -> bool:
        """Whether few-shot examples become chat turns under these flags."""
        if self.fewshot_as_multiturn is not None:
            return self.fewshot_as_multiturn
        return self.apply_chat_template


@dataclass(frozen=True)
class GenerationPolicy:
    """How a doc's generation settings are chosen: the task's generation_kwargs, then the doc's
    own length and stop strings, then --gen-kwargs; sampling is seeded by --seed's torch seed
    unless the task or the command line sets a seed."""

    task_kwargs: Mapping[str, Any] | None
    """The task's generation_kwargs as written (None: lm-eval's greedy defaults)."""
    fewshot_delimiter: str
    """lm-eval's default stop string."""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    """--gen-kwargs."""
    seed: int | None = 0
    """--seed's torch seed (lm-eval's hf backend samples from torch's generator); None leaves
    sampling unseeded."""
    source: str = "gen_kwargs"
    """Where the settings come from, named in errors."""
    fit_context: bool = False
    """The generation shrinks to the room the prompt leaves (`prompts.manager.fits_context`)."""

    def gen_kwargs(self, doc: Doc) -> dict[str, Any]:
        """The doc's generation settings as samples files record them (lm-eval's dict)."""
        kwargs = lm_eval_gen_kwargs(
            dict(self.task_kwargs) if self.task_kwargs is not None else None,
            self.fewshot_delimiter,
        )
        # Per-doc values win over the task's; the command line wins over both.
        if doc.generation_size is not None:
            set_max_gen_toks(kwargs, doc.generation_size)
        if doc.stop_sequences is not None:
            kwargs["until"] = list(doc.stop_sequences)
        if self.fit_context:
            kwargs["fit_context"] = True
        return merge_gen_kwargs(kwargs, self.overrides)

    def params(self, kwargs: dict[str, Any]) -> GenParams:
        """`kwargs` (from `gen_kwargs`) as the parameters the backend receives."""
        params = normalize_gen_kwargs(
            kwargs, default_until=[self.fewshot_delimiter], source=self.source
        )
        # Sampling is seeded by --seed (torch) unless the task or the command line sets a seed (also when
        # sampling is implied by temperature > 0 rather than do_sample).
        if params.do_sample and params.seed is None:
            params = replace(params, seed=self.seed)
        return params


@dataclass(frozen=True)
class RequestPlan:
    """Everything `build_requests` needs besides the doc, fixed for a task's whole run."""

    task: str
    """The task's name and source (config.where()), named in errors."""
    output_type: OutputType
    prompts: PromptManager
    generation: GenerationPolicy
    with_unconditioned: bool = False
    """Multiple choice: also ask log P(choice | unconditioned query) (a metric needs PMI)."""
    truncate_fewshots: bool = False
    """Drop few-shot examples from the end until the prompt fits the model."""
