"""What the two OpenAI endpoints share on top of `backend._APIBackend`: the `openai` provider,
reasoning models' request fields and inline thinking, and OpenAI's generation body fields."""

from __future__ import annotations

from typing import Any

from assay.errors import ConfigError
from assay.models.api.backend import _APIBackend
from assay.models.api.budget import SpendingLimit
from assay.models.api.openai_answers import AnswerReading, read_choice
from assay.models.api.openai_provider import OpenAIProvider
from assay.models.api.payloads import extra_fields, sampling_fields
from assay.models.api.runner import PermanentFailure
from assay.models.api.settings import APISettings
from assay.models.thinking import thinking_args
from assay.requests.types import GenerateRequest, Generation


class OpenAIBackend(_APIBackend):
    """An OpenAI-compatible endpoint: answers read by `read_choice`, sampling as body fields."""

    provider = OpenAIProvider()

    def __init__(self, settings: APISettings, spending: SpendingLimit | None = None) -> None:
        super().__init__(settings, spending)
        self._reading = AnswerReading(
            thinking_args(
                self.name,
                settings.think_end_token,
                settings.think_start_token,
                settings.thinking_budget if settings.think_end_token else None,
            ),
            settings.thinking_budget,
        )
        """How answers are read: inline thinking markers and the thinking budget."""
        doubled = sorted(set(self._reasoning_fields()) & set(settings.extra_body or {}))
        if doubled:
            raise ConfigError(
                f"--model {self.name}: extra_body sets {', '.join(doubled)}, which the model arg "
                "of that name sets too; give it once."
            )

    def _answer(self, response: Any, request: GenerateRequest, prompt: Any) -> str | Generation:
        if not response.choices:
            raise PermanentFailure("the server answered with no choices")
        opened = (
            isinstance(prompt, str)
            and self._reading.thinking is not None
            and self._reading.thinking.opened_by(prompt)
        )
        return read_choice(response, request.params.until, self._reading, opened=opened)

    def _generation_defaults(self) -> dict[str, Any]:
        s = self.settings
        defaults = {
            "seed": s.seed,
            "max_stop_sequences": s.max_stop_sequences,
            "extra_body": s.extra_body or {},
        }
        # Reasoning settings only when given, so that caches of other runs keep their keys.
        reasoning = ("think_end_token", "think_start_token", "thinking_budget", "reasoning_effort")
        defaults.update({k: getattr(s, k) for k in reasoning if getattr(s, k) is not None})
        defaults.update(self._reasoning_fields())
        return defaults

    def _reasoning_fields(self) -> dict[str, Any]:
        """Request fields that steer a reasoning model's thinking (from the model args)."""
        s = self.settings
        fields: dict[str, Any] = {}
        if s.reasoning_effort is not None:
            fields["reasoning_effort"] = s.reasoning_effort
        if s.thinking_budget is not None and s.thinking_budget_field:
            fields[s.thinking_budget_field] = s.thinking_budget
        return fields

    def _generation_fields(self, request: GenerateRequest, max_tokens_field: str) -> dict[str, Any]:
        """Body fields of one generation besides the model and the prompt."""
        if request.params.as_given:
            # Exactly the user's fields (response_format, max_completion_tokens, ...): the
            # server's defaults stand for everything else.
            return {"extra_body": {**self._body_defaults(), **dict(request.params.extra)}}
        return {max_tokens_field: request.params.max_gen_toks, **self._request_fields(request)}

    def _body_defaults(self) -> dict[str, Any]:
        """Fields added to every generation body: the reasoning fields and `extra_body`."""
        return {**self._reasoning_fields(), **(self.settings.extra_body or {})}

    def _request_fields(self, request: GenerateRequest) -> dict[str, Any]:
        s = self.settings
        # With inline thinking, a stop string the server applied could cut the thinking
        # short ("\n\n", "Question:"): stop strings then apply to the answer only, here.
        stops = 0 if self._reading.thinking is not None else s.max_stop_sequences
        fields = sampling_fields(request, s.seed, stops)
        extra = extra_fields(request, self._body_defaults())
        if extra:
            fields["extra_body"] = extra
        return fields
