"""PromptManager: plain text, chat templates, API messages, system prompts, multi-turn."""

from __future__ import annotations

from assay.doc import Doc
from assay.prompts.manager import PromptManager, maybe_delimit

SHOTS = [
    Doc("Q: 1+1?\nA:", choices=["2", "3"], gold_index=0),
    Doc("Q: 2+1?\nA:", choices=["4", "3"], gold_index=1),
]
DOC = Doc("Q: 2+2?\nA:", choices=["4", "5"], gold_index=0, instruction="Add.")


def fake_template(messages, add_generation_prompt=True, continue_final_message=False):
    body = "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)
    return body + ("<assistant>" if add_generation_prompt else "")


def test_plain_prompt_is_lm_evals_layout():
    prompt = PromptManager(strip_instruction=False).render(DOC, SHOTS)
    assert prompt == "Add.Q: 1+1?\nA: 2\n\nQ: 2+1?\nA: 3\n\nQ: 2+2?\nA:"


def test_custom_delimiters_and_fewshot_overrides():
    manager = PromptManager(
        target_delimiter="=",
        fewshot_delimiter="|",
        fewshot_target_delimiter="->",
        fewshot_fewshot_delimiter="##",
    )
    doc = Doc("Q3", choices=["x"])
    assert manager.render(doc, [Doc("Q1", choices=["a"]), Doc("Q2", choices=["b"])]) == (
        "Q1->a##Q2->b##Q3"
    )
    assert manager.continuation_delimiter(doc) == "="


def test_lighteval_instruction_is_stripped_from_queries_and_placed_once():
    doc = Doc("Add. Q: 2+2?", choices=["4"], instruction="Add. ")
    shot = Doc("Add. Q: 1+1?", choices=["2"], instruction="Add. ")
    assert PromptManager().render(doc, [shot]) == "Add. Q: 1+1? 2\n\nQ: 2+2?"


def test_system_instruction_precedes_the_description():
    prompt = PromptManager(system_instruction="Be exact.").render(DOC, [])
    assert prompt == "Be exact.\n\nAdd.Q: 2+2?\nA:"
    assert maybe_delimit("a ", "b", "\n\n") == "a b"
    assert maybe_delimit(None, "b") == "b"


def test_api_messages_single_turn_and_multiturn():
    single = PromptManager(system_instruction="S", api_messages=True).render(DOC, SHOTS)
    assert single == (
        ("system", "S\n\nAdd."),
        ("user", "Q: 1+1?\nA: 2\n\nQ: 2+1?\nA: 3\n\nQ: 2+2?\nA:"),
    )
    multi = PromptManager(api_messages=True, fewshot_as_multiturn=True).render(DOC, SHOTS)
    # Turns carry no delimiters: the chat format separates them.
    assert multi == (
        ("system", "Add."),
        ("user", "Q: 1+1?\nA:"),
        ("assistant", "2"),
        ("user", "Q: 2+1?\nA:"),
        ("assistant", "3"),
        ("user", "Q: 2+2?\nA:"),
    )


def test_chat_template_receives_messages_and_generation_prompt():
    manager = PromptManager(chat_template=fake_template, fewshot_as_multiturn=True)
    prompt = manager.render(DOC, SHOTS[:1])
    assert prompt == (
        "<system>Add.</system><user>Q: 1+1?\nA:</user><assistant>2</assistant>"
        "<user>Q: 2+2?\nA:</user><assistant>"
    )
    # Chat prompts end at the turn boundary: no delimiter before scored continuations.
    assert manager.continuation_delimiter(DOC) == ""


def test_gen_prefix_is_an_assistant_prefill():
    doc = Doc("Q?", choices=["x"], specific={"gen_prefix": "Answer:"})
    assert PromptManager().render(doc, []) == "Q? Answer:"
    manager = PromptManager(chat_template=fake_template)
    assert manager.render(doc, []) == "<user>Q?</user><assistant>Answer:</assistant>"
    assert manager.continuation_delimiter(doc) == " "


def test_prepare_prompt_and_api_names():
    doc = Doc("Q: 2+2?\nA:", choices=["4"], fewshot_samples=SHOTS[:1])
    manager = PromptManager()
    assert manager.prepare_prompt(doc) == "Q: 1+1?\nA: 2\n\nQ: 2+2?\nA:"
    assert manager.prepare_prompt_api(doc) == [
        {"role": "user", "content": "Q: 1+1?\nA: 2\n\nQ: 2+2?\nA:"}
    ]


def test_multiple_input_contexts_use_each_choice_as_the_query():
    doc = Doc("", choices=["The cat", "The dog"], gold_index=1, shared_continuation="sat.")
    shot = Doc("", choices=["A", "B"], gold_index=0, shared_continuation="ran.")
    assert PromptManager().contexts(doc, [shot]) == ["A ran.\n\nThe cat", "A ran.\n\nThe dog"]
