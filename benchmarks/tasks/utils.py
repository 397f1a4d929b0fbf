"""Document preparation for the local HellaSwag dump (used by hellaswag.yaml)."""

import re

_SENTENCE_END = re.compile(r"[.!?] ")


def preprocess(text):
    """lm-eval's HellaSwag cleanup: drop WikiHow [title]/[header] artifacts and double spaces."""
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def split_context(ctx):
    """(ctx_a, ctx_b) of a dump context: ctx_b is what follows the last sentence end.

    The dump joined ctx_a and ctx_b with a space, and ctx_b is the unfinished last sentence.
    """
    ends = list(_SENTENCE_END.finditer(ctx))
    if not ends:
        return "", ctx
    cut = ends[-1].end()
    return ctx[: cut - 1], ctx[cut:]


def process_docs(dataset):
    """query / choices / gold as lm-eval's hellaswag, capitalising ctx_b as it does."""

    def _process_doc(doc):
        ctx_a, ctx_b = split_context(doc["ctx"])
        ctx = ctx_a + " " + ctx_b.capitalize() if ctx_a else ctx_b.capitalize()
        return {
            "query": preprocess(doc["activity_label"] + ": " + ctx),
            "choices": [preprocess(ending) for ending in doc["endings"]],
            "gold": int(doc["label"]),
        }

    return dataset.map(_process_doc)
