"""Doc: every lighteval field, gold lookup, multiple-input docs."""

from __future__ import annotations

import dataclasses

from assay.doc import Doc, OutputType, SamplingMethod

LIGHTEVAL_FIELDS = {
    "query", "choices", "gold_index", "instruction", "images", "specific",
    "unconditioned_query", "original_query", "id", "task_name", "fewshot_samples",
    "sampling_methods", "fewshot_sorting_class", "generation_size", "stop_sequences",
    "use_logits", "num_samples",
}  # fmt: skip


def test_doc_has_every_lighteval_field_plus_row_and_shared_continuation():
    names = {f.name for f in dataclasses.fields(Doc)}
    assert names >= LIGHTEVAL_FIELDS
    assert {"row", "shared_continuation"} <= names


def test_unset_defaults_are_none_so_task_defaults_can_fill_them():
    doc = Doc("q")
    assert doc.generation_size is None
    assert doc.stop_sequences is None
    assert doc.num_samples is None
    assert doc.choices == [] and doc.fewshot_samples == [] and doc.sampling_methods == []
    # Mutable defaults are per instance.
    doc.choices.append("x")
    assert Doc("other").choices == []


def test_get_golds_single_and_multiple_indices():
    doc = Doc("q", choices=["a", "b", "c"], gold_index=2)
    assert doc.get_golds() == ["c"]
    assert doc.gold_indices == [2]
    multi = Doc("q", choices=["a", "b", "c"], gold_index=[0, 2])
    assert multi.get_golds() == ["a", "c"]
    assert multi.gold_indices == [0, 2]


def test_get_golds_of_a_multiple_input_doc_is_the_shared_continuation():
    doc = Doc("", choices=["ctx one", "ctx two"], gold_index=1, shared_continuation="ends here")
    assert doc.get_golds() == ["ends here"]
    assert doc.gold_indices == [1]


def test_enums_use_the_peers_spellings():
    assert {o.value for o in OutputType} == {
        "loglikelihood",
        "loglikelihood_rolling",
        "multiple_choice",
        "generate_until",
    }
    assert SamplingMethod("GENERATIVE") is SamplingMethod.GENERATIVE
    assert {m.value for m in SamplingMethod} == {"GENERATIVE", "LOGPROBS", "PERPLEXITY"}
