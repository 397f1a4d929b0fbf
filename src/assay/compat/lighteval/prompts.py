"""lighteval's prompt layout (`prompt_layout="lighteval"`, `prompts.manager.PeerLayout`).

As lighteval's PromptManager: plain text is the system prompt, the instruction, each few-shot
`query + " " + gold` and the query, joined by blank lines; chat and API prompts are always
multi-turn, with the instruction opening the first user turn; scored continuations are the
choices as written, with no delimiter (they carry their own leading space). The layout ignores
the task's delimiters and `fewshot_as_multiturn`; its tasks' generations shrink to the room the
prompt leaves (`FIT_CONTEXT`: lighteval's backends keep the prompt whole).
"""

from __future__ import annotations

from collections.abc import Sequence

from assay.doc import Doc
from assay.prompts.manager import PromptManager, Turn, answer_of, query_of

FIT_CONTEXT = True
"""lighteval's generation length (GenParams.fit_context)."""

CONTINUATION_DELIMITER = ""
"""lighteval's choices are scored as written."""


def messages(
    manager: PromptManager, doc: Doc, fewshots: Sequence[Doc], query: str | None = None
) -> list[Turn]:
    """lighteval's chat conversation: [system prompt], a user turn (query without instruction)
    and an assistant turn (the first gold, unstripped) per few-shot, then the final user turn.
    The doc's instruction opens the first user turn; never the system."""
    system = manager.system_instruction
    out = [Turn("system", system)] if system is not None else []
    for shot in fewshots:
        q = query_of(shot, manager.strip_instruction, trim=True)
        out += [Turn("user", q), Turn("assistant", answer_of(shot))]
    out.append(Turn("user", _query(manager, doc, query)))
    first_user = next(t for t in out if t.role == "user")
    first_user.content = (doc.instruction or "") + first_user.content
    return out


def text(
    manager: PromptManager, doc: Doc, fewshots: Sequence[Doc], query: str | None = None
) -> str:
    """lighteval's plain-text prompt: system prompt and instruction when not None (so "" still
    adds a blank line), each few-shot `query + " " + gold.strip()`, then the query, joined by
    blank lines."""
    parts = [p for p in (manager.system_instruction, doc.instruction) if p is not None]
    parts += [
        query_of(shot, manager.strip_instruction, trim=True) + " " + answer_of(shot).strip()
        for shot in fewshots
    ]
    return "\n\n".join([*parts, _query(manager, doc, query)])


def _query(manager: PromptManager, doc: Doc, query: str | None) -> str:
    return query_of(doc, manager.strip_instruction, trim=True) if query is None else query
