"""LightevalTaskConfig and lighteval Doc to assay's, field by field; few-shot picks and prompts
against lighteval's own LightevalTask and PromptManager on the same rows."""

from __future__ import annotations

import logging
from dataclasses import fields

import pytest
from conftest import prompt, skip_odd
from lighteval.metrics.metrics import Metrics
from lighteval.tasks.lighteval_task import LightevalTask, LightevalTaskConfig
from lighteval.tasks.prompt_manager import PromptManager as LightevalPromptManager
from lighteval.tasks.requests import Doc as LightevalDoc
from lighteval.tasks.requests import SamplingMethod as LightevalSampling

from assay.compat.lighteval.docs import doc_from_lighteval, doc_to_lighteval
from assay.compat.lighteval.files import config_from_lighteval, lighteval_fewshot_split
from assay.doc import Doc, OutputType, SamplingMethod
from assay.errors import TaskConfigError
from assay.prompts.chat import TokenizerChatTemplate
from assay.prompts.manager import PromptManager
from assay.tasks.task import Task, fewshot_count


def keep_all(row: dict) -> bool:
    return True


def lighteval_config(**overrides) -> LightevalTaskConfig:
    values = {
        "name": "legs:sub",
        "prompt_function": prompt,
        "hf_repo": "org/dataset",
        "hf_subset": "sub",
        "metrics": [Metrics.loglikelihood_acc, Metrics.mrr],
        **overrides,
    }
    return LightevalTaskConfig(**values)


def test_config_fields_convert_one_by_one():
    source = lighteval_config(
        hf_revision="abc123",
        hf_filter=keep_all,
        hf_avail_splits=["train", "dev", "test"],
        evaluation_splits=["test"],
        few_shots_select="sequential",
        generation_size=7,
        stop_sequence=["\n", "Question:"],
        version=3,
    )
    converted = config_from_lighteval(source, "my_tasks.py")
    assert converted.name == source.name
    assert converted.hf_repo == source.hf_repo
    assert converted.hf_subset == source.hf_subset
    assert converted.hf_revision == source.hf_revision
    assert converted.hf_filter is source.hf_filter
    assert list(converted.hf_avail_splits) == list(source.hf_avail_splits)
    assert list(converted.evaluation_splits) == list(source.evaluation_splits)
    assert converted.few_shots_select == f"lighteval:{source.few_shots_select}"
    assert converted.generation_size == source.generation_size
    assert list(converted.stop_sequence) == list(source.stop_sequence)
    assert converted.version == source.version
    assert converted.source == "my_tasks.py"
    # What lighteval's native pipeline derives rather than reads:
    assert converted.few_shots_split == LightevalTask(source).fewshot_split == "train"
    assert converted.resolved_output_type == OutputType.MULTIPLE_CHOICE
    assert converted.num_samples is None
    assert converted.prompt_layout == "lighteval" and converted.row_extras
    assert [m.name for m in converted.metrics] == ["acc", "mrr"]
    assert [m.peer.group.metric for m in converted.metrics] == list(source.metrics)
    converted.validate()


@pytest.mark.parametrize(
    ("avail", "evaluation", "given"),
    [
        (["train", "validation", "test"], ["test"], None),
        (["auxiliary_train", "test", "validation", "dev"], ["test"], None),
        (["validation", "test"], ["validation"], None),
        (["test"], ["test"], None),
        (["train"], ["train"], None),
        (["dev_a", "valid_b", "test"], ["test"], None),
        (["train", "test"], ["test"], "test"),
    ],
)
def test_fewshot_split_is_lighteval_s(avail, evaluation, given):
    source = lighteval_config(
        hf_avail_splits=avail, evaluation_splits=evaluation, few_shots_split=given
    )
    expected = LightevalTask(source).fewshot_split
    assert lighteval_fewshot_split(source) == expected
    converted = config_from_lighteval(source, "f.py")
    assert converted.few_shots_split == (expected or evaluation[0])


def test_default_selection_is_balanced_and_sampling_metrics_set_repeats():
    source = lighteval_config(
        metrics=[Metrics.pass_at_k_math(sample_params={"k": 1, "n": 4})], generation_size=16
    )
    converted = config_from_lighteval(source, "f.py")
    assert converted.few_shots_select == "lighteval:balanced"
    assert converted.resolved_output_type == OutputType.GENERATE_UNTIL
    assert converted.num_samples == 4
    assert converted.filters == (("none", [("take_first_k", {"k": 4})]),)


def test_fields_lighteval_ignores_are_not_applied(caplog):
    source = lighteval_config(must_remove_duplicate_docs=True, effective_num_docs=3, num_fewshots=5)
    with caplog.at_level(logging.WARNING):
        converted = config_from_lighteval(source, "f.py")
    assert not converted.must_remove_duplicate_docs
    assert converted.effective_num_docs == -1 and converted.num_fewshots == 0
    for name in ("must_remove_duplicate_docs", "effective_num_docs", "num_fewshots"):
        assert name in caplog.text


def test_grammar_and_mixed_categories_are_refused():
    from huggingface_hub import TextGenerationInputGrammarType

    grammar = TextGenerationInputGrammarType(type="json", value={"type": "object"})
    with pytest.raises(TaskConfigError, match="generation_grammar"):
        config_from_lighteval(lighteval_config(generation_grammar=grammar), "f.py")
    mixed = lighteval_config(metrics=[Metrics.loglikelihood_acc, Metrics.exact_match])
    with pytest.raises(TaskConfigError, match="GENERATIVE, LOGPROBS"):
        config_from_lighteval(mixed, "f.py")


def test_doc_fields_convert_both_ways():
    shot = LightevalDoc(query="Q1", choices=[" a"], gold_index=0)
    source = LightevalDoc(
        query="Instr. Q",
        choices=[" a", " b"],
        gold_index=[0, 1],
        instruction="Instr. ",
        specific={"k": [1, 2]},
        unconditioned_query="Answer:",
        original_query="Q",
        id="7",
        task_name="t|0",
        fewshot_samples=[shot],
        sampling_methods=[LightevalSampling.LOGPROBS],
        fewshot_sorting_class="b",
        generation_size=5,
        stop_sequences=["\n"],
        use_logits=False,
        num_samples=1,
    )
    ours = doc_from_lighteval(source, "here")
    for name in ("query", "choices", "gold_index", "instruction", "specific", "id"):
        assert getattr(ours, name) == getattr(source, name), name
    for name in ("unconditioned_query", "original_query", "fewshot_sorting_class", "use_logits"):
        assert getattr(ours, name) == getattr(source, name), name
    assert ours.sampling_methods == [SamplingMethod.LOGPROBS]
    assert [d.query for d in ours.fewshot_samples] == ["Q1"]
    # lighteval overwrites these from the task config after the prompt function; so does assay.
    assert ours.generation_size is None and ours.stop_sequences is None
    assert ours.num_samples is None and ours.task_name == ""
    back = doc_to_lighteval(ours, "t|0")
    for name in [f.name for f in fields(LightevalDoc)]:
        if name not in ("generation_size", "stop_sequences", "fewshot_samples"):
            assert getattr(back, name) == getattr(source, name), name
    assert isinstance(ours, Doc)


SELECTORS = ["balanced", "sequential", "random", "random_sampling_from_train", "random_sampling"]


def lighteval_docs(source: LightevalTaskConfig, shots: int) -> dict[str, LightevalDoc]:
    source.num_fewshots = shots
    source.full_name = f"{source.name}|{shots}"
    return {doc.id: doc for doc in LightevalTask(source).get_docs()}


def assay_docs(source: LightevalTaskConfig, shots: int) -> dict[str, Doc]:
    config = config_from_lighteval(source, "f.py")
    return {
        doc.id: doc for doc in Task(config, num_fewshot=fewshot_count(config, shots)).eval_docs()
    }


@pytest.mark.parametrize("selector", SELECTORS)
@pytest.mark.parametrize("function", [prompt, skip_odd])
def test_fewshots_and_prompts_are_lighteval_s(data_dir, selector, function):
    def source() -> LightevalTaskConfig:
        return lighteval_config(
            name="legs",
            prompt_function=function,
            hf_repo=str(data_dir),
            hf_subset="default",
            hf_avail_splits=["train", "test"],
            evaluation_splits=["test"],
            few_shots_select=selector,
        )

    theirs = lighteval_docs(source(), 3)
    ours = assay_docs(source(), 3)
    assert sorted(ours) == sorted(theirs)
    plain = PromptManager(layout="lighteval", system_instruction="Be brief.")
    lighteval_plain = LightevalPromptManager(system_prompt="Be brief.")
    for doc_id, doc in ours.items():
        their = theirs[doc_id]
        assert [d.query for d in doc.fewshot_samples] == [d.query for d in their.fewshot_samples]
        assert plain.render(doc, doc.fewshot_samples) == lighteval_plain.prepare_prompt(their)
        assert plain.prepare_prompt_api(doc) == lighteval_plain.prepare_prompt_api(their)


def test_chat_prompts_are_lighteval_s(data_dir, tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)

    def source() -> LightevalTaskConfig:
        return lighteval_config(
            name="legs",
            hf_repo=str(data_dir),
            hf_subset="default",
            hf_avail_splits=["train", "test"],
            evaluation_splits=["test"],
        )

    theirs = lighteval_docs(source(), 2)
    ours = assay_docs(source(), 2)
    for system in (None, "Be brief."):
        manager = PromptManager(
            layout="lighteval",
            system_instruction=system,
            chat_template=TokenizerChatTemplate(tokenizer, "no template"),
        )
        lighteval_chat = LightevalPromptManager(True, tokenizer, system)
        for doc_id, doc in ours.items():
            expected = lighteval_chat.prepare_prompt(theirs[doc_id])
            assert manager.render(doc, doc.fewshot_samples) == expected
            assert "<|user|>\nAnswer the question.\nQuestion: Which colour" in expected
