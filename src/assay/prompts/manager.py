"""PromptManager: turns a doc and its few-shot examples into the model's input.

One assembly serves plain text, chat templates and API messages: a list of turns, each carrying
the delimiter it gets in plain text. This reproduces lm-eval's prompts byte for byte: few-shot
turns are `query + target_delimiter` then `answer + fewshot_delimiter`; the final query has no
delimiter (the target delimiter goes on the continuation instead).

Another harness's layout (`layout=NAME`, a registry entry of `peers.PROMPT_LAYOUTS`) assembles
plain text and chat messages its own way (`PeerLayout`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from assay import peers
from assay.doc import Doc
from assay.prompts.chat import ChatTemplate, render_chat

PromptLayout = str
"""Whose prompt layout: "lm_eval" (assay's own, lm-eval's) or a name of `peers.PROMPT_LAYOUTS`."""
PROMPT_LAYOUTS: tuple[PromptLayout, ...] = ("lm_eval", *peers.PROMPT_LAYOUTS)


class PeerLayout(Protocol):
    """Another harness's prompt layout: a module named in `peers.PROMPT_LAYOUTS`."""

    FIT_CONTEXT: bool
    """Its tasks' generations shrink to the room the prompt leaves (the prompt stays whole)."""
    CONTINUATION_DELIMITER: str
    """What goes between the prompt and a scored continuation."""

    def messages(
        self, manager: PromptManager, doc: Doc, fewshots: Sequence[Doc], query: str | None
    ) -> list[Turn]: ...

    def text(
        self, manager: PromptManager, doc: Doc, fewshots: Sequence[Doc], query: str | None
    ) -> str: ...


def peer_layout(layout: PromptLayout) -> PeerLayout | None:
    """The module of another harness's layout; None for assay's own ("lm_eval")."""
    module = peers.PROMPT_LAYOUTS.get(layout)
    if module is None:
        return None
    [found] = peers.load((module,))
    peer: PeerLayout = found  # a module implements the Protocol with its names
    return peer


def fits_context(layout: PromptLayout) -> bool:
    """Whether a task in `layout` has its generations shrink to the room the prompt leaves."""
    peer = peer_layout(layout)
    return peer is not None and peer.FIT_CONTEXT


@dataclass
class Turn:
    """One message; `delimiter` follows it when rendered as plain text."""

    role: str
    content: str
    delimiter: str = ""

    def text(self) -> str:
        return self.content + self.delimiter


def maybe_delimit(prefix: str | None, suffix: str | None, delimiter: str = " ") -> str:
    """Join two strings, inserting `delimiter` only if neither has whitespace at the seam."""
    if not prefix:
        return suffix or ""
    if not suffix:
        return prefix
    if prefix[-1].isspace() or suffix[0].isspace():
        return prefix + suffix
    return prefix + delimiter + suffix


def _needs_delimiter(prefix: str, suffix: str) -> bool:
    return prefix != "" and not (prefix[-1].isspace() or suffix[0].isspace())


@dataclass
class PromptManager:
    """Assembles prompts for one task and one run's prompt settings."""

    target_delimiter: str = " "
    fewshot_delimiter: str = "\n\n"
    fewshot_target_delimiter: str | None = None
    fewshot_fewshot_delimiter: str | None = None
    system_instruction: str | None = None
    """--system-instruction: placed before the task's description/instruction."""
    chat_template: ChatTemplate | None = None
    """Set with --apply-chat-template: prompts are rendered by the tokenizer's template."""
    fewshot_as_multiturn: bool = False
    """With a chat template: few-shot examples as separate user/assistant turns."""
    api_messages: bool = False
    """Return chat messages (for chat APIs) instead of a rendered string."""
    strip_instruction: bool = True
    """Remove a leading `instruction` from queries (docs may repeat it there)."""
    layout: PromptLayout = "lm_eval"
    """Whose prompt layout to reproduce: lm-eval's (delimiters) or another harness's (see the
    module doc; such a layout may ignore the delimiters and `fewshot_as_multiturn`)."""

    def turns(self, doc: Doc, fewshots: Sequence[Doc], query: str | None = None) -> list[Turn]:
        """The conversation for `doc`: system, few-shot Q/A turns, final query (and prefill)."""
        out: list[Turn] = []
        system = maybe_delimit(self.system_instruction, doc.instruction, self.fewshot_delimiter)
        if system:
            out.append(Turn("system", system))
        shot_tgt = self.fewshot_target_delimiter
        shot_few = self.fewshot_fewshot_delimiter
        for shot in fewshots:
            out += self._qa_turns(
                query_of(shot, self.strip_instruction),
                answer_of(shot),
                shot_tgt if shot_tgt is not None else self.target_delimiter,
                shot_few if shot_few is not None else self.fewshot_delimiter,
                _prefix_of(shot),
            )
        final = query_of(doc, self.strip_instruction) if query is None else query
        prefix = _prefix_of(doc)
        delim = self.target_delimiter if prefix and _needs_delimiter(final, prefix) else ""
        out.append(Turn("user", final, delim))
        if prefix:
            out.append(Turn("assistant", prefix))
        return out

    @staticmethod
    def _qa_turns(
        q: str, answer: str, tgt_delim: str, few_delim: str, prefix: str | None
    ) -> list[Turn]:
        if answer == "":
            turns = [Turn("user", q, tgt_delim if prefix and _needs_delimiter(q, prefix) else "")]
            return turns + ([Turn("assistant", prefix)] if prefix else [])
        user = Turn("user", q, "" if prefix and not _needs_delimiter(q, prefix) else tgt_delim)
        return [user, Turn("assistant", maybe_delimit(prefix, answer, " "), few_delim)]

    def messages(self, doc: Doc, fewshots: Sequence[Doc], query: str | None = None) -> list[Turn]:
        """The prompt as chat messages (for a chat template or a chat API), in this layout."""
        peer = peer_layout(self.layout)
        if peer is not None:
            return peer.messages(self, doc, fewshots, query)
        return self._chat_turns(self.turns(doc, fewshots, query))

    def render_follow_up(
        self, doc: Doc, fewshots: Sequence[Doc], exchanges: Sequence[tuple[str, str]]
    ) -> str | tuple[tuple[str, str], ...]:
        """The prompt of a follow-up turn: the doc's prompt, then for each (answer, next user
        turn) of `exchanges` the model's answer and the next user turn. Chat messages and chat
        templates get them as assistant and user turns; plain text joins them with the task's
        few-shot delimiter (the separator between one exchange and the next)."""
        turns = [(t.role, t.content) for t in self.messages(doc, fewshots)]
        for answer, follow_up in exchanges:
            turns += [("assistant", answer), ("user", follow_up)]
        if self.api_messages:
            return tuple(turns)
        if self.chat_template is not None:
            return render_chat(self.chat_template, [{"role": r, "content": c} for r, c in turns])
        text = self.text(doc, fewshots)
        for answer, follow_up in exchanges:
            text += answer + self.fewshot_delimiter + follow_up
        return text

    def text(self, doc: Doc, fewshots: Sequence[Doc], query: str | None = None) -> str:
        """The prompt as plain text (no chat template), in this layout."""
        peer = peer_layout(self.layout)
        if peer is not None:
            return peer.text(self, doc, fewshots, query)
        return "".join(t.text() for t in self.turns(doc, fewshots, query))

    def render(self, doc: Doc, fewshots: Sequence[Doc], query: str | None = None):
        """The prompt: a string, or chat messages ((role, content), ...) with `api_messages`."""
        if self.api_messages:
            return tuple((t.role, t.content) for t in self.messages(doc, fewshots, query))
        if self.chat_template is None:
            return self.text(doc, fewshots, query)
        turns = self.messages(doc, fewshots, query)
        return render_chat(
            self.chat_template, [{"role": t.role, "content": t.content} for t in turns]
        )

    def prepare_prompt(self, doc: Doc) -> str:
        """The prompt of a doc with its own few-shot examples, as a string (the name another
        harness's prompt manager gives it)."""
        rendered = self.render(doc, doc.fewshot_samples)
        return rendered if isinstance(rendered, str) else "".join(c for _, c in rendered)

    def prepare_prompt_api(self, doc: Doc) -> list[dict[str, str]]:
        """The prompt as chat messages for an API, nothing tokenised (the name another
        harness's prompt manager gives it)."""
        turns = self.messages(doc, doc.fewshot_samples)
        return [{"role": t.role, "content": t.content} for t in turns]

    def contexts(self, doc: Doc, fewshots: Sequence[Doc]) -> list:
        """Multiple-input docs: one prompt per alternative context (the doc's choices)."""
        return [self.render(doc, fewshots, query=choice) for choice in doc.choices]

    def continuation_delimiter(self, doc: Doc) -> str:
        """What goes between the prompt and a scored continuation (another harness's layout
        says its own)."""
        peer = peer_layout(self.layout)
        if peer is not None:
            return peer.CONTINUATION_DELIMITER
        if self.chat_template is None and not self.api_messages:
            return self.target_delimiter
        prefix = _prefix_of(doc)
        return self.target_delimiter if prefix and not prefix[-1].isspace() else ""

    def _chat_turns(self, turns: list[Turn]) -> list[Turn]:
        """Multi-turn as is, or collapsed into one user turn (lm-eval's single-turn rule)."""
        if self.fewshot_as_multiturn:
            return turns
        system = turns[:1] if turns and turns[0].role == "system" else []
        rest = turns[len(system) :]
        tail = rest[-1:] if rest and rest[-1].role == "assistant" else []
        body = rest[: len(rest) - len(tail)]
        if not body:
            return turns
        text = "".join(t.text() for t in body[:-1]) + body[-1].content
        return [*system, Turn("user", text), *tail]


def query_of(doc: Doc, strip_instruction: bool, trim: bool = False) -> str:
    """The query without a leading instruction (queries may start with it).

    With `trim`, what follows a stripped instruction is also `.strip()`ped; an instruction of ""
    counts as present.
    """
    if doc.shared_continuation is not None:
        gold = doc.gold_indices[0]
        return doc.choices[gold] if 0 <= gold < len(doc.choices) else ""
    if strip_instruction and doc.instruction is not None and doc.query.startswith(doc.instruction):
        rest = doc.query[len(doc.instruction) :]
        return rest.strip() if trim else rest
    return doc.query


def answer_of(shot: Doc) -> str:
    """A few-shot example's answer: its first gold ("" when it has none)."""
    return shot.get_golds()[0] if shot.choices or shot.shared_continuation else ""


def _prefix_of(doc: Doc) -> str | None:
    return (doc.specific or {}).get("gen_prefix")
