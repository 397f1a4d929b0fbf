"""Reasoning models behind `openai-chat` and `openai-completions`: thinking a server returns in
its own field or inline kept apart from the answer, finish reasons and token counts read from
the answer, the reasoning request fields sent, and the rates in results.json (online, through
the loopback stub server, and through the batch API's fake) equal to counts made here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai.types import Completion
from openai.types.chat import ChatCompletion

from assay.cli.main import main
from assay.errors import ConfigError
from assay.models.api.openai import OpenAIChatLM, OpenAICompletionsLM
from assay.models.api.openai_answers import AnswerReading, read_choice
from assay.models.thinking import Thinking
from assay.requests.types import GenerateRequest, GenParams

THINK = Thinking("</think>", "<think>")


def chat(
    content: str | None,
    finish: str = "stop",
    usage: dict[str, Any] | None = None,
    **fields: Any,
) -> ChatCompletion:
    """A chat answer as the SDK types it; `fields` go on the message, `stop_reason` on the
    choice."""
    stop_reason = fields.pop("stop_reason", None)
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": finish,
        "message": {"role": "assistant", "content": content, **fields},
    }
    if stop_reason is not None:
        choice["stop_reason"] = stop_reason
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m"}
    return ChatCompletion.model_validate({**body, "choices": [choice], "usage": usage})


def completion(text: str, finish: str = "stop", usage: dict[str, Any] | None = None) -> Completion:
    choice = {"index": 0, "finish_reason": finish, "text": text, "logprobs": None}
    body = {"id": "c", "object": "text_completion", "created": 0, "model": "m"}
    return Completion.model_validate({**body, "choices": [choice], "usage": usage})


def usage(completion_tokens: int, reasoning_tokens: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": 3,
        "completion_tokens": completion_tokens,
        "total_tokens": 3 + completion_tokens,
    }
    if reasoning_tokens is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return out


# -- reading one answer -----------------------------------------------------------------------


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_thinking_in_a_field_of_its_own_is_kept_apart_from_the_answer(field):
    answer = read_choice(
        chat("#### 4\nQuestion: next", usage=usage(12, 9), **{field: "two and two"}),
        ["Question:"],
        AnswerReading(),
    )
    assert answer.text == "#### 4\n"
    assert answer.reasoning == "two and two"
    assert answer.thinking_closed is True
    assert (answer.reasoning_tokens, answer.answer_tokens) == (9, 3)
    # A stop string cut the answer here: it had ended before the server stopped.
    assert answer.finish_reason == "stop_sequence"


def test_a_server_split_cut_by_the_token_cap_is_unclosed_thinking():
    answer = read_choice(
        chat(None, "length", usage(32, 32), reasoning_content="so #### 4 maybe"),
        [],
        AnswerReading(),
    )
    assert (answer.text, answer.finish_reason, answer.thinking_closed) == ("", "length", False)
    assert (answer.reasoning_tokens, answer.answer_tokens) == (32, 0)
    assert str(answer) == ""


def test_hidden_reasoning_counts_as_thinking_whose_text_is_unknown():
    # OpenAI's reasoning models report only how many tokens they thought.
    done = read_choice(chat("42", usage=usage(12, 10)), [], AnswerReading())
    assert (done.reasoning, done.thinking_closed, done.answer_tokens) == (None, True, 2)
    ran_out = read_choice(chat(None, "length", usage(64, 64)), [], AnswerReading())
    assert (ran_out.thinking_closed, ran_out.finish_reason) == (False, "length")


def test_reasoning_tokens_over_the_thinking_budget_count_as_unclosed():
    reading = AnswerReading(budget=8)
    within = read_choice(chat("7", usage=usage(9, 8), reasoning_content="r"), [], reading)
    over = read_choice(chat("7", usage=usage(10, 9), reasoning_content="r"), [], reading)
    assert (within.thinking_closed, over.thinking_closed) == (True, False)


def test_inline_thinking_is_split_by_think_end_token_as_hf_splits_it():
    reading = AnswerReading(THINK)
    raw = "<think>is it #### 3?\n\nQuestion: no</think> #### 4\n\nQuestion: next"
    answer = read_choice(completion(raw, "length"), ["Question:", "\n\n"], reading)
    # Stop strings apply to the answer only; the thinking keeps its "Question:".
    assert answer.text == "#### 4"
    assert answer.reasoning == "<think>is it #### 3?\n\nQuestion: no"
    assert (answer.thinking_closed, answer.finish_reason) == (True, "stop_sequence")
    # No reasoning count from the server: the answer's share of the tokens is unknown.
    assert (answer.reasoning_tokens, answer.answer_tokens) == (None, None)


def test_inline_thinking_cut_off_is_unclosed_and_keeps_lm_evals_text():
    answer = read_choice(
        completion("<think>so #### 3 maybe", "length"), ["\n\n"], AnswerReading(THINK)
    )
    assert (answer.thinking_closed, answer.finish_reason, answer.answer_tokens) == (
        False,
        "length",
        0,
    )
    assert answer.text == "<think>so #### 3 maybe"  # what lm-eval would score
    assert str(answer) == ""  # what the default policy scores


@pytest.mark.parametrize("api", [chat, completion])
def test_inline_thinking_is_split_even_when_the_server_counts_reasoning_tokens(api):
    reading = AnswerReading(Thinking("</think>"))
    counted = usage(20, 14)
    closed = read_choice(api("wait, #### 7?</think>#### 4", usage=counted), [], reading)
    assert (closed.text, closed.reasoning, closed.thinking_closed) == (
        "#### 4",
        "wait, #### 7?",
        True,
    )
    assert (closed.reasoning_tokens, closed.answer_tokens) == (14, 6)
    unclosed = read_choice(api("so #### 4 it is", "length", counted), [], reading)
    assert (unclosed.thinking_closed, str(unclosed), unclosed.answer_tokens) == (False, "", 0)


def test_inline_thinking_past_its_budget_is_unclosed_with_no_answer_tokens():
    reading = AnswerReading(Thinking("</think>", budget=8))
    over = read_choice(completion("long</think>#### 4", usage=usage(20, 12)), [], reading)
    assert (over.thinking_closed, over.answer_tokens, over.reasoning_tokens) == (False, 0, 12)


def test_a_thinking_field_without_a_reasoning_count_leaves_answer_tokens_unknown():
    answer = read_choice(
        chat("#### 4", usage=usage(30), reasoning_content="long"), [], AnswerReading()
    )
    assert (answer.reasoning_tokens, answer.answer_tokens) == (None, None)
    unclosed = read_choice(
        chat(None, "length", usage(30), reasoning_content="x"), [], AnswerReading()
    )
    assert (unclosed.thinking_closed, unclosed.answer_tokens) == (False, 0)


def test_hidden_thinking_in_a_server_that_also_takes_think_end_token_stays_hidden():
    # No marker in the text, reasoning tokens counted: the server hid its thinking.
    answer = read_choice(chat("42", usage=usage(12, 10)), [], AnswerReading(THINK))
    assert (answer.text, answer.thinking_closed, answer.answer_tokens) == ("42", True, 2)


def test_a_prompt_that_opens_the_thinking_makes_the_generation_think():
    answer = read_choice(completion("plan</think>#### 5"), [], AnswerReading(THINK), opened=True)
    assert (answer.text, answer.reasoning, answer.thinking_closed) == ("#### 5", "plan", True)
    plain = read_choice(completion("#### 5"), [], AnswerReading(THINK))
    assert (plain.thinking_closed, plain.reasoning, plain.finish_reason) == (None, None, "stop")


@pytest.mark.parametrize(
    ("stop_reason", "finish"), [("Question:", "stop_sequence"), (2, "stop"), (None, "stop")]
)
def test_the_stop_string_a_server_names_makes_the_finish_reason_stop_sequence(stop_reason, finish):
    answer = read_choice(chat("#### 1", stop_reason=stop_reason), ["Question:"], AnswerReading())
    assert answer.finish_reason == finish


@pytest.mark.parametrize(("given", "read"), [("content_filter", None), ("length", "length")])
def test_other_finish_reasons_are_unknown(given, read):
    assert read_choice(chat("x", given), [], AnswerReading()).finish_reason == read


def test_a_plain_answer_counts_its_completion_tokens_as_answer_tokens():
    answer = read_choice(chat("#### 1", usage=usage(5)), [], AnswerReading())
    assert (answer.answer_tokens, answer.reasoning_tokens, answer.thinking_closed) == (
        5,
        None,
        None,
    )


# -- what is sent -------------------------------------------------------------------------------

REQUEST = GenerateRequest("Q: 1+1?", GenParams(until=("Question:",), max_gen_toks=64))


def test_reasoning_effort_and_the_thinking_budget_are_sent_as_request_fields():
    lm = OpenAIChatLM(model="m", reasoning_effort="high", thinking_budget=48)
    args = lm._create_args(lm._prompt(REQUEST), REQUEST)
    assert args["extra_body"] == {"reasoning_effort": "high", "thinking_token_budget": 48}
    assert args["stop"] == ["Question:"]
    renamed = OpenAICompletionsLM(model="m", thinking_budget=48, thinking_budget_field="budget")
    body = renamed._create_args("Q", REQUEST)["extra_body"]
    assert body == {"budget": 48}


def test_with_inline_thinking_stop_strings_are_not_sent_to_the_server():
    # A "Question:" inside the thinking must not end the generation.
    lm = OpenAICompletionsLM(model="m", think_end_token="</think>")
    assert "stop" not in lm._create_args("Q", REQUEST)


def test_reasoning_settings_enter_the_identity_only_when_given():
    plain = OpenAIChatLM(model="m").identity()["generation_defaults"]
    assert set(plain) == {"seed", "max_stop_sequences", "extra_body", "max_tokens_field"}
    thinking = OpenAIChatLM(model="m", think_end_token="</think>", reasoning_effort="low")
    assert thinking.identity()["generation_defaults"]["think_end_token"] == "</think>"
    assert thinking.identity()["generation_defaults"]["reasoning_effort"] == "low"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            {"reasoning_effort": "low", "extra_body": {"reasoning_effort": "high"}},
            "extra_body sets reasoning_effort",
        ),
        ({"think_start_token": "<think>"}, "think_start_token=<think> needs think_end_token"),
    ],
)
def test_reasoning_args_that_cannot_be_honoured_are_refused(args, fragment):
    with pytest.raises(ConfigError, match=fragment):
        OpenAIChatLM(model="m", **args)


# -- end to end through the CLI ----------------------------------------------------------------

YAML = """\
task: think_api
dataset_path: json
dataset_kwargs:
  data_files:
    test: rows.jsonl
test_split: test
output_type: generate_until
doc_to_text: "Question: {{q}}\\nAnswer:"
doc_to_target: "{{a}}"
generation_kwargs:
  until: ["Question:"]
  max_gen_toks: 32
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "#### (\\\\-?[0-9]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    regexes_to_ignore: ["(?s).*#### "]
"""


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    folder = tmp_path / "tasks"
    folder.mkdir()
    rows = [{"q": f"q{i}", "a": f"#### {i}"} for i in range(6)]
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "think_api.yaml").write_text(YAML)
    return folder


def doc_of(body: dict[str, Any]) -> int:
    prompt = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
    return int(prompt.split("Question: q", 1)[1][0])


def run_cli(tasks: Path, out: Path, model: str, model_args: str, *flags: str) -> tuple[dict, list]:
    args = ["run", "--model", model, "--model-args", model_args, "--tasks", "think_api"]
    args += ["--include-path", str(tasks), "--output-dir", str(out), "--log-samples"]
    code = main([*args, "--no-progress", *flags])
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    samples = [json.loads(x) for x in (out / "samples_think_api.jsonl").read_text().splitlines()]
    return results, sorted(samples, key=lambda r: r["doc_id"])


@pytest.mark.slow
def test_chat_server_reasoning_rates_in_results_json_match_the_replies(
    tiny_model_dir, tasks, tmp_path, capsys
):
    from fixtures.openai_server import OpenAIStubServer, Scripted

    replies = {
        0: Scripted("#### 0", reasoning_content="zero", reasoning_tokens=3),
        1: Scripted("#### 1", reasoning_content="one", reasoning_tokens=3),
        2: Scripted(None, "length", reasoning_content="so #### 2 or", reasoning_tokens=32),
        3: Scripted("#### 9", reasoning_content="three?", reasoning_tokens=4),
        4: Scripted("#### 4 and on and", "length"),  # no thinking, truncated
        5: Scripted("#### 5", stop_reason="Question:"),
    }
    with OpenAIStubServer(tiny_model_dir, chat_script=lambda b: replies[doc_of(b)]) as server:
        args = f"model=tiny,base_url={server.base_url},reasoning_effort=medium"
        results, samples = run_cli(tasks, tmp_path / "out", "openai-chat", args)
        assert all(b["reasoning_effort"] == "medium" for b in server.chat_bodies)
    entry = results["assay"]["generations"]["think_api"]
    truncated = sum(r.finish_reason == "length" for r in replies.values())
    unclosed = sum(r.finish_reason == "length" and r.content is None for r in replies.values())
    assert (entry["generations"], entry["truncated"], entry["unclosed_thinking"]) == (
        len(replies),
        truncated,
        unclosed,
    )
    assert entry["truncated_rate"] == pytest.approx(truncated / len(replies))
    assert entry["unclosed_thinking_rate"] == pytest.approx(unclosed / len(replies))
    thought = [r.reasoning_tokens for r in replies.values() if r.reasoning_tokens is not None]
    assert entry["reasoning_tokens_mean"] == pytest.approx(sum(thought) / len(thought))
    ended = [s["generations"][0][0] for s in samples]
    assert [g["finish_reason"] for g in ended] == [
        "stop", "stop", "length", "stop", "length", "stop_sequence",
    ]  # fmt: skip
    assert [g.get("reasoning") for g in ended][:4] == ["zero", "one", "so #### 2 or", "three?"]
    # The unfinished thought mentions the right answer; it is scored as an empty answer.
    assert [s["exact_match"] for s in samples] == [1, 1, 0, 0, 1, 1]
    assert "hit the token cap" in capsys.readouterr().err


@pytest.mark.slow
def test_completions_inline_thinking_rates_match_and_keep_reproduces_lm_eval(
    tiny_model_dir, tasks, tmp_path
):
    from fixtures.openai_server import OpenAIStubServer, Scripted

    replies = {
        0: Scripted("<think>easy\n\nQuestion: hm</think> #### 0"),
        1: Scripted("<think>so #### 1 I think", "length"),
        2: Scripted("#### 2\nQuestion: q3", "length"),  # no thinking; a stop string ends it
        3: Scripted("<think>three</think>#### 3"),
        4: Scripted("<think>four is #### 4 unless", "length"),
        5: Scripted("#### 5"),
    }
    with OpenAIStubServer(tiny_model_dir, completion_script=lambda b: replies[doc_of(b)]) as s:
        args = (
            f"model=tiny,base_url={s.base_url},think_end_token=</think>,think_start_token=<think>"
        )
        results, samples = run_cli(tasks, tmp_path / "empty", "openai-completions", args)
        assert not any("stop" in body for body in s.completion_bodies)
        kept, _ = run_cli(
            tasks, tmp_path / "keep", "openai-completions", args, "--unclosed-thinking", "keep"
        )
    entry = results["assay"]["generations"]["think_api"]
    texts = [r.content or "" for r in replies.values()]
    unclosed = sum(t.startswith("<think>") and "</think>" not in t for t in texts)
    # Doc 2 came back as "length" but its answer ended at a stop string: not truncated.
    truncated = sum(
        r.finish_reason == "length"
        and not ("Question:" in r.content and "<think>" not in r.content)
        for r in replies.values()
    )
    assert (entry["unclosed_thinking"], entry["truncated"]) == (unclosed, truncated) == (2, 2)
    assert entry["unclosed_thinking_rate"] == pytest.approx(2 / 6)
    assert [s["exact_match"] for s in samples] == [1, 0, 1, 1, 0, 1]
    # lm-eval's rule scores the unfinished thoughts on the numbers they mention.
    assert kept["results"]["think_api"]["exact_match,strict-match"] == pytest.approx(1.0)
    assert results["results"]["think_api"]["exact_match,strict-match"] == pytest.approx(4 / 6)


@pytest.mark.slow
def test_batch_api_answers_are_read_by_the_same_function(tasks, tmp_path):
    from fixtures.provider_fakes import FakeProviders

    def reply(body: dict[str, Any]) -> tuple[str, str | None]:
        doc = doc_of(body)
        return f"#### {doc}", (f"thinking about {doc}" if doc % 2 else None)

    with FakeProviders(reply=reply) as fake:
        args = f"model=gpt-test,base_url={fake.openai_url},batch_poll_interval=0.05"
        results, samples = run_cli(tasks, tmp_path / "out", "openai-chat", args, "--batch-api")
        assert fake.creates == 1 and not fake.bodies  # every answer came through the batch
    entry = results["assay"]["generations"]["think_api"]
    assert (entry["generations"], entry["truncated"], entry["unclosed_thinking"]) == (6, 0, 0)
    reasoning = [s["generations"][0][0].get("reasoning") for s in samples]
    assert reasoning == [
        None,
        "thinking about 1",
        None,
        "thinking about 3",
        None,
        "thinking about 5",
    ]
    assert [s["exact_match"] for s in samples] == [1] * 6


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["openai-chat", "openai-completions"])
def test_inline_thinking_with_counted_reasoning_tokens_is_scored_on_the_answer(
    tiny_model_dir, tmp_path, backend
):
    """Closed thoughts hold a wrong number and the right answer follows; unclosed thoughts
    hold the right number. The server counts reasoning tokens and leaves the thinking inline."""
    import re

    from fixtures.openai_server import OpenAIStubServer, Scripted

    folder = tmp_path / "tasks"
    folder.mkdir()
    rows = [{"q": f"q{i}", "a": f"#### {i}"} for i in range(20)]
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "think_api.yaml").write_text(YAML)

    def reply(body: dict[str, Any]) -> Scripted:
        prompt = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
        doc = int(re.findall(r"Question: q(\d+)", prompt)[-1])
        if doc % 2:
            return Scripted(f"<think>it is #### {doc} surely", "length", reasoning_tokens=32)
        wrong = f"<think>maybe #### {doc + 1}?</think> #### {doc}"
        return Scripted(wrong, reasoning_tokens=5, completion_tokens=8)

    script = {"chat_script" if backend == "openai-chat" else "completion_script": reply}
    with OpenAIStubServer(tiny_model_dir, **script) as server:  # type: ignore[arg-type]
        args = f"model=tiny,base_url={server.base_url},think_end_token=</think>"
        results, samples = run_cli(folder, tmp_path / "out", backend, args)
    entry = results["assay"]["generations"]["think_api"]
    assert entry["unclosed_thinking_rate"] == pytest.approx(0.5)
    assert entry["answer_tokens_mean"] == pytest.approx(3 / 2)  # 8 - 5 closed, 0 unclosed
    # Each closed doc is right on its answer; each unclosed one is scored as empty.
    assert [s["exact_match"] for s in samples] == [1 - i % 2 for i in range(20)]
    assert results["results"]["think_api"]["exact_match,strict-match"] == pytest.approx(0.5)
