"""The evaluator: generation settings precedence, repeats, validation before the model,
prompt settings, streaming shards, few-shot truncation, results written per task."""

from __future__ import annotations

import json

import pytest

import assay.run.evaluation as evaluator_module
from assay.doc import Doc
from assay.errors import AssayError, ConfigError, TaskConfigError
from assay.models.base import LM, MODELS
from assay.requests.types import LoglikelihoodResult, RollingResult
from assay.run.api import evaluate
from assay.run.evaluation import Evaluation
from assay.run.settings import RunSettings
from assay.tasks.config import TaskConfig
from assay.tasks.registry import Registry, Resolved, TaskRequest

ROWS = [{"q": f"q{i}", "a": f"a{i}", "label": i % 2} for i in range(7)]


class RecordingLM(LM):
    """Answers with the target when the prompt ends with its question; records requests."""

    def __init__(self):
        self.generate, self.loglik = [], []

    def loglikelihood(self, requests):
        self.loglik += list(requests)
        return [LoglikelihoodResult(-float(len(r.continuation)), False) for r in requests]

    def loglikelihood_rolling(self, requests):
        return [RollingResult(-1.0, 1) for _ in requests]

    def generate_until(self, requests):
        self.generate += list(requests)
        return [f"a{r.prompt[-1]}" if isinstance(r.prompt, str) else "?" for r in requests]

    def identity(self):
        return {"backend": "recording"}


def gen_prompt(row, task_name):
    doc = Doc(row["q"], choices=[row["a"]], gold_index=0)
    if row["label"] == 1:
        doc.generation_size, doc.stop_sequences = 3, ["STOP"]
    return doc


def gen_task(**kwargs):
    return TaskConfig(
        **{
            "name": "gen",
            "prompt_function": gen_prompt,
            "dataset_loader": lambda **_: {"validation": ROWS},
            "metrics": ["exact_match"],
            "generation_size": 50,
            "stop_sequence": ["\n"],
            **kwargs,
        }
    )


def run(configs, model=None, **settings):
    resolved = Resolved([TaskRequest(c) for c in configs])
    model = model or RecordingLM()
    settings.setdefault("show_progress", False)
    return Evaluation(resolved, RunSettings(model=model, **settings)).run(), model


def test_per_doc_generation_values_win_over_the_task_and_the_cli_wins_over_both():
    results, lm = run([gen_task()])
    by_prompt = {r.prompt: r.params for r in lm.generate}
    assert by_prompt["q0"].max_gen_toks == 50 and by_prompt["q0"].until == ("\n",)
    assert by_prompt["q1"].max_gen_toks == 3 and by_prompt["q1"].until == ("STOP",)
    assert results["results"]["gen"]["exact_match,none"] == 1.0
    _, lm = run([gen_task()], gen_kwargs={"max_gen_toks": 9, "until": ["END"]})
    assert {(r.params.max_gen_toks, r.params.until) for r in lm.generate} == {(9, ("END",))}


@pytest.mark.parametrize("alias", ["max_new_tokens", "max_tokens", "max_gen_toks"])
def test_gen_kwargs_max_new_tokens_replaces_the_tasks_max_gen_toks(alias, tmp_path):
    task = gen_task(generation_size=None, generation_kwargs={"max_gen_toks": 40, "until": ["\n"]})
    _, lm = run([task], gen_kwargs={alias: 7}, output_dir=tmp_path, log_samples=True)
    assert {r.params.max_gen_toks for r in lm.generate} == {7}
    records = [json.loads(x) for x in (tmp_path / "samples_gen.jsonl").read_text().splitlines()]
    recorded = {json.dumps(r["arguments"]["gen_args_0"]["arg_1"], sort_keys=True) for r in records}
    assert all(alias == "max_gen_toks" or alias not in text for text in recorded)


def test_greedy_repeats_are_computed_once_and_sampled_ones_each():
    results, lm = run([gen_task(num_samples=3)])
    counts = results["assay"]["requests"]["gen"]
    assert (counts["requests"], counts["unique_requests"]) == (21, 7)
    assert len(lm.generate) == 7
    sampled = gen_task(num_samples=3, generation_kwargs={"temperature": 0.5})
    results, lm = run([sampled], seed=11)
    counts = results["assay"]["requests"]["gen"]
    assert (counts["requests"], counts["unique_requests"]) == (21, 21)
    assert {r.sample_index for r in lm.generate} == {0, 1, 2}
    assert {r.params.seed for r in lm.generate} == {11}


def test_every_task_is_validated_before_the_model_is_built(monkeypatch):
    built = []
    monkeypatch.setitem(MODELS._entries, "built-probe", lambda **kw: built.append(kw))
    bad = gen_task(name="bad", few_shots_select="clever")
    with pytest.raises(TaskConfigError, match="few_shots_select"):
        evaluator_module.Evaluation(
            Resolved([TaskRequest(gen_task()), TaskRequest(bad)]),
            RunSettings(model="built-probe"),
        ).run()
    assert built == []


def test_unknown_metric_fails_before_the_model():
    with pytest.raises(ConfigError, match="no_such_metric"):
        run([gen_task(metrics=["no_such_metric"])])


def test_prompt_settings_need_a_chat_capable_backend():
    with pytest.raises(ConfigError, match="fewshot-as-multiturn"):
        run([gen_task()], fewshot_as_multiturn=True)
    with pytest.raises(ConfigError, match="chat template"):
        run([gen_task()], apply_chat_template=True)


def test_system_instruction_reaches_the_prompt():
    _, lm = run([gen_task()], system_instruction="Be brief.")
    assert lm.generate[0].prompt == "Be brief.q0"


def test_api_backends_get_messages():
    class ChatLM(RecordingLM):
        accepts_messages = True

    _, lm = run([gen_task()], model=ChatLM(), apply_chat_template=True)
    assert lm.generate[0].prompt == (("user", "q0"),)


def test_results_record_the_few_shot_layout_the_prompts_used():
    class ChatLM(RecordingLM):
        accepts_messages = True

    task = gen_task(num_fewshots=1, dataset_loader=lambda **_: {"train": ROWS, "validation": ROWS})
    # lm-eval: with a chat template and no --fewshot-as-multiturn, few-shots are turns (and say so)
    results, lm = run([task], model=ChatLM(), apply_chat_template=True)
    assert [role for role, _ in lm.generate[0].prompt] == ["user", "assistant", "user"]
    assert results["fewshot_as_multiturn"] is True
    results, lm = run([task], model=ChatLM(), apply_chat_template=True, fewshot_as_multiturn=False)
    assert [role for role, _ in lm.generate[0].prompt] == ["user"]
    assert results["fewshot_as_multiturn"] is False
    assert run([task])[0]["fewshot_as_multiturn"] is False


@pytest.mark.parametrize(
    ("asked", "task_string", "own", "fixed"),
    [
        (None, None, 2, 0),  # each task's own count
        (1, None, 1, 0),  # --num_fewshot, except where a YAML fixes 0
        (0, None, 0, 0),  # an explicit 0 is a count
        (1, 3, 3, 0),  # `task|3` beats --num_fewshot
    ],
)
def test_recorded_n_shot_and_prompts_follow_the_few_shot_count(asked, task_string, own, fixed):
    def task(name, mark, **kwargs):
        return gen_task(
            name=name,
            prompt_function=lambda row, _: Doc(f"{mark}{row['q']}", [row["a"]], gold_index=0),
            dataset_loader=lambda **_: {"train": ROWS[1:], "validation": ROWS[:1]},
            **kwargs,
        )

    configs = [
        task("own", "<", num_fewshots=2),
        task("fixed", "[", num_fewshots=0, num_fewshots_fixed=True),
    ]
    lm = RecordingLM()
    settings = RunSettings(model=lm, num_fewshot=asked, show_progress=False)
    resolved = Resolved([TaskRequest(c, task_string) for c in configs])
    results = Evaluation(resolved, settings).run()
    assert results["n-shot"] == {"own": own, "fixed": fixed}
    # Each prompt holds its doc's question and one more per few-shot example.
    counts = sorted((r.prompt.count("<"), r.prompt.count("[")) for r in lm.generate)
    assert counts == sorted([(own + 1, 0), (0, fixed + 1)])


def test_streaming_in_small_shards_changes_nothing(monkeypatch, tmp_path):
    mc = TaskConfig(
        name="mc",
        prompt_function=lambda row, name: Doc(row["q"], ["x", "yy", "zzz"], row["label"]),
        dataset_loader=lambda **_: {"train": ROWS, "validation": ROWS},
        metrics=["acc", "acc_norm"],
        num_fewshots=2,
    )
    whole, _ = run([mc], output_dir=tmp_path / "a", log_samples=True)
    monkeypatch.setattr(evaluator_module, "SHARD_DOCS", 2)
    sharded, _ = run([mc], output_dir=tmp_path / "b", log_samples=True)
    assert whole["results"] == sharded["results"]
    a = (tmp_path / "a" / "samples_mc.jsonl").read_text()
    b = (tmp_path / "b" / "samples_mc.jsonl").read_text()
    assert a == b and len(a.splitlines()) == len(ROWS)


def test_truncate_fewshots_drops_examples_until_the_prompt_fits():
    class CountingLM(RecordingLM):
        max_length = 20

        def token_counter(self):
            return lambda texts: [len(t.split()) for t in texts]

    cfg = gen_task(
        name="fit",
        truncate_fewshots=True,
        num_fewshots=4,
        generation_size=10,
        prompt_function=lambda row, name: Doc(f"word {row['q']}", [row["a"]]),
        dataset_loader=lambda **_: {"train": ROWS, "validation": ROWS[:1]},
    )
    _, lm = run([cfg], model=CountingLM())
    (request,) = lm.generate
    # The query is 2 words, each example 3 more, 10 are reserved for generation: with a
    # budget of 20, two examples fit (18) and a third would not (21).
    assert len(request.prompt.split()) == 8
    assert request.prompt.count("word") == 2 + 1
    with pytest.raises(ConfigError, match="truncate_fewshots"):
        run([cfg])


def test_results_are_written_after_each_task(tmp_path, monkeypatch):
    writes = []
    original = evaluator_module.OutputDir.write_results

    def spy(self, results):
        writes.append(sorted(results["results"]))
        return original(self, results)

    monkeypatch.setattr(evaluator_module.OutputDir, "write_results", spy)
    results, _ = run([gen_task(), gen_task(name="gen2")], output_dir=tmp_path)
    assert writes[0] == ["gen"] and writes[-1] == ["gen", "gen2"]
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["results"] == results["results"]


def test_evaluate_accepts_an_lm_object_and_custom_task_files(tmp_path):
    path = tmp_path / "custom.py"
    path.write_text(
        "from assay import Doc, TaskConfig\n"
        "TASKS_TABLE = [TaskConfig(name='c', prompt_function=lambda r, n: Doc(r['q'], [r['a']]),"
        " dataset_loader=lambda **_: {'validation': [{'q': 'q1', 'a': 'a1'}]},"
        " metrics=['exact_match'])]\n",
        encoding="utf-8",
    )
    lm = RecordingLM()
    results = evaluate(lm, ["c"], custom_tasks=[path], show_progress=False)
    assert results["results"]["c"]["exact_match,none"] == 1.0
    assert results["config"]["model_identity"] == {"backend": "recording"}
    assert Registry([], [path], builtins=False).get("c").name == "c"


def test_datasets_of_several_tasks_load_in_parallel_before_the_model():
    import threading

    barrier = threading.Barrier(2, timeout=10)
    threads = []

    def loader(**_):
        # Both loaders must be running at once to pass the barrier.
        barrier.wait()
        threads.append(threading.current_thread().name)
        return {"validation": ROWS}

    configs = [gen_task(name=n, dataset_loader=loader) for n in ("p1", "p2")]
    resolved = Resolved([TaskRequest(c) for c in configs])
    evaluation = Evaluation(resolved, RunSettings(dataset_loading_processes=2))
    evaluation.load_data()
    assert len(set(threads)) == 2


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            gen_task(
                name="small_pool",
                num_fewshots=3,
                dataset_loader=lambda **_: {"train": ROWS[:2], "validation": ROWS},
            ),
            "few-shot pool has only 2 rows",
        ),
        (gen_task(name="no_dev", num_fewshots=1, few_shots_split="dev"), "few-shot split 'dev'"),
        (gen_task(name="broken", prompt_function=lambda row, name: Doc(row["nope"])), "row 0"),
        (
            gen_task(name="images", prompt_function=lambda row, name: Doc("q", ["a"], images=[1])),
            "row 0: images: image 0 is a int",
        ),
    ],
)
def test_fewshot_pool_and_first_doc_are_checked_before_the_model(monkeypatch, bad, message):
    built = []
    monkeypatch.setitem(MODELS._entries, "built-probe", lambda **kw: built.append(kw))
    with pytest.raises(AssayError, match=message):
        Evaluation(
            Resolved([TaskRequest(gen_task()), TaskRequest(bad)]),
            RunSettings(model="built-probe", show_progress=False),
        ).run()
    assert built == []


def test_pmi_requests_use_the_docs_unconditioned_query():
    def mc_prompt(row, name):
        doc = Doc(f"Q: {row['q']}\nAnswer:", ["x", "yy"], 0)
        doc.unconditioned_query = "Answer:" if row["label"] else None
        return doc

    mc = TaskConfig(
        name="pmi",
        prompt_function=mc_prompt,
        dataset_loader=lambda **_: {"validation": ROWS[:2]},
        metrics=["acc_mutual_info"],
    )
    _, lm = run([mc])
    contexts = [r.context for r in lm.loglik if not r.context.startswith("Q:")]
    assert sorted(contexts) == ["", "", "Answer:", "Answer:"]


def test_a_failing_aggregation_names_the_task_and_metric():
    three_choices = TaskConfig(
        name="three",
        prompt_function=lambda row, name: Doc(row["q"], ["x", "yy", "zzz"], row["label"] + 1),
        dataset_loader=lambda **_: {"validation": ROWS},
        metrics=["f1"],
    )
    with pytest.raises(TaskConfigError, match="task 'three': aggregating metric 'f1'"):
        run([three_choices])


def test_evaluate_takes_the_command_lines_string_forms(tmp_path):
    path = tmp_path / "custom.py"
    path.write_text(
        "from assay import Doc, TaskConfig\n"
        "def make(name):\n"
        "    return TaskConfig(name=name, prompt_function=lambda r, n: Doc(r['q'], [r['a']]),"
        " dataset_loader=lambda **_: {'validation': [{'q': 'q1', 'a': 'a1'}]},"
        " metrics=['exact_match'])\n"
        "TASKS_TABLE = [make('c'), make('d')]\n",
        encoding="utf-8",
    )
    lm = RecordingLM()
    results = evaluate(
        lm, "c,d", custom_tasks=str(path), gen_kwargs="max_gen_toks=5", show_progress=False
    )
    assert sorted(results["results"]) == ["c", "d"]
    assert {r.params.max_gen_toks for r in lm.generate} == {5}
    assert results["config"]["gen_kwargs"] == {"max_gen_toks": 5}


def test_requests_a_backend_gave_up_on_are_named_by_doc_and_arrived_answers_kept(tmp_path):
    from assay.errors import ModelError
    from assay.models.api.runner import APIRequestError

    class FlakyAPI(RecordingLM):
        """Answers every request but the one for doc 3, as an API does after its retries."""

        def generate_until(self, requests):
            answers = super().generate_until(requests)
            failures = {
                i: "HTTP 500 after 5 attempts" for i, r in enumerate(requests) if r.prompt == "q3"
            }
            if not failures:
                return answers
            partial = [None if i in failures else a for i, a in enumerate(answers)]
            raise APIRequestError("2 of 7 generation request(s) failed", failures, [], partial)

    cache_path = tmp_path / "cache.sqlite"
    with pytest.raises(ModelError, match=r"task gen: 1 doc\(s\).*doc 3 request 0: HTTP 500") as err:
        run([gen_task()], model=FlakyAPI(), cache=cache_path)
    assert "re-run" in str(err.value)
    # The six answers that arrived were saved: a re-run asks only for doc 3.
    lm = RecordingLM()
    results, _ = run([gen_task()], model=lm, cache=cache_path)
    assert [r.prompt for r in lm.generate] == ["q3"]
    counts = results["assay"]["requests"]["gen"]
    assert (counts["from_cache"], counts["computed"]) == (len(ROWS) - 1, 1)


def test_results_say_per_task_what_the_cache_answered_and_what_was_computed(tmp_path):
    cache_path = tmp_path / "cache.sqlite"
    lm = RecordingLM()
    results, _ = run([gen_task()], model=lm, cache=cache_path, limit=4)
    counts = results["assay"]["requests"]["gen"]
    assert (counts["from_cache"], counts["computed"]) == (0, 4) and len(lm.generate) == 4
    # A longer run over the same cache computes only the docs the first one did not reach.
    lm = RecordingLM()
    results, _ = run([gen_task()], model=lm, cache=cache_path)
    counts = results["assay"]["requests"]["gen"]
    assert (counts["from_cache"], counts["computed"]) == (4, len(ROWS) - 4)
    assert sorted(r.prompt for r in lm.generate) == [f"q{i}" for i in range(4, len(ROWS))]
    # Resumed once more: nothing is recomputed, and the results say so.
    lm = RecordingLM()
    results, _ = run([gen_task()], model=lm, cache=cache_path)
    counts = results["assay"]["requests"]["gen"]
    assert (counts["from_cache"], counts["computed"]) == (len(ROWS), 0) and lm.generate == []
    # Without a cache everything distinct is computed.
    results, _ = run([gen_task(num_samples=3)])
    counts = results["assay"]["requests"]["gen"]
    assert (counts["from_cache"], counts["computed"]) == (0, counts["unique_requests"])


def test_results_count_the_tokens_sent_and_generated_per_task():
    results, lm = run([gen_task()])
    counts = results["assay"]["requests"]["gen"]
    # RecordingLM counts no tokens: sizes are in characters.
    assert counts["token_unit"] == "characters"
    assert counts["input_tokens"] == sum(len(r.prompt) for r in lm.generate)
    assert counts["generated_tokens"] == 2 * len(ROWS)  # answers "a0".."a6"

    class WordCountingLM(RecordingLM):
        def token_counter(self):
            return lambda texts: [len(t.split()) + 1 for t in texts]

    results, lm = run([gen_task()], model=WordCountingLM())
    counts = results["assay"]["requests"]["gen"]
    assert counts["token_unit"] == "tokens"
    assert counts["input_tokens"] == sum(len(r.prompt.split()) + 1 for r in lm.generate)
    assert counts["generated_tokens"] == 2 * len(ROWS)


def lighteval_mc(**kwargs):
    def prompt(row, name):
        query = f"Pick. Question: {row['q']}\nAnswer:"
        return Doc(query, [" A", " B"], row["label"], instruction="Pick. ")

    return TaskConfig(
        **{
            "name": "lmc",
            "prompt_function": prompt,
            "dataset_loader": lambda **_: {"train": ROWS[:1], "validation": ROWS[1:2]},
            "metrics": ["acc"],
            "num_fewshots": 1,
            "few_shots_select": "first_n",
            "prompt_layout": "lighteval",
            **kwargs,
        }
    )


def test_lighteval_layout_reaches_the_requests():
    _, lm = run([lighteval_mc()], system_instruction="SYS")
    assert [(r.context, r.continuation) for r in lm.loglik] == [
        ("SYS\n\nPick. \n\nQuestion: q0\nAnswer: A\n\nQuestion: q1\nAnswer:", " A"),
        ("SYS\n\nPick. \n\nQuestion: q0\nAnswer: A\n\nQuestion: q1\nAnswer:", " B"),
    ]

    class ChatLM(RecordingLM):
        accepts_messages = True

    _, lm = run([lighteval_mc()], model=ChatLM(), apply_chat_template=True)
    (request, _) = lm.loglik
    assert request.continuation == " A"


def test_bad_prompt_layout_is_a_task_config_error():
    with pytest.raises(
        TaskConfigError, match="'prompt_layout' is 'helm'; use one of lm_eval, lighteval"
    ):
        run([lighteval_mc(prompt_layout="helm")])
    with pytest.raises(TaskConfigError, match="target delimiters"):
        run([lighteval_mc(target_delimiter="")])


@pytest.mark.parametrize(
    ("model_args", "flag", "ran", "said"),
    [
        ({"batch_size": 4}, 8, 8, True),  # --batch-size wins over the model arg, and says so
        ({"batch_size": "4"}, 4, 4, False),  # the same size, spelled as text: nothing to say
        ({"batch_size": 4}, None, 4, False),  # the model arg alone, as lm-eval's users write it
        ({}, 8, 8, False),
    ],
)
def test_batch_size_flag_wins_over_the_model_arg(model_args, flag, ran, said, capsys):
    settings = RunSettings(
        model="dummy", model_args=model_args, batch_size=flag, show_progress=False
    )
    run = Evaluation(Resolved([TaskRequest(gen_task())]), settings)
    results = run.run()
    assert run.executor.model.batch_size == ran  # what the backend was built with
    assert str(results["config"]["batch_size"]) == str(ran)
    line = f"--batch-size {flag} wins over --model-args batch_size={model_args.get('batch_size')}"
    assert (line in capsys.readouterr().err) is said


def test_a_model_arg_batch_size_the_flag_overrides_is_still_checked():
    settings = RunSettings(model="dummy", model_args={"batch_size": "lots"}, batch_size=4)
    with pytest.raises(ConfigError, match="--model-args batch_size 'lots': not a number or 'auto'"):
        Evaluation(Resolved([TaskRequest(gen_task())]), settings)


@pytest.mark.parametrize(
    ("model_args", "batch_size"), [({"batch_size": 4}, None), ({}, 4), ({"batch_size": "4"}, 4)]
)
def test_results_record_the_batch_size_that_ran(model_args, batch_size):
    resolved = Resolved([TaskRequest(gen_task())])
    settings = RunSettings(
        model="dummy", model_args=model_args, batch_size=batch_size, show_progress=False
    )
    results = Evaluation(resolved, settings).run()
    assert str(results["config"]["batch_size"]) == "4"


def test_evaluate_takes_every_run_setting_as_a_typed_keyword_with_its_default():
    import dataclasses
    import inspect

    params = inspect.signature(evaluate).parameters
    assert [p for p in params if params[p].default is inspect.Parameter.empty] == ["model", "tasks"]
    fields = {f.name: f for f in dataclasses.fields(RunSettings)}
    assert set(params) - {"tasks", "include_path", "custom_tasks"} == set(fields)
    for name, spec in fields.items():
        if name in ("model",):
            continue
        expected = spec.default_factory() if spec.default is dataclasses.MISSING else spec.default
        assert params[name].default == expected, name
        assert params[name].annotation == spec.type, name
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name


def test_evaluate_needs_a_model():
    with pytest.raises(TypeError):
        evaluate(tasks=["x"])  # type: ignore[call-arg]


def test_samples_runs_exactly_the_named_docs_in_doc_order(tmp_path):
    results, lm = run(
        [gen_task()], samples={"gen": [5, 1, 5]}, output_dir=tmp_path, log_samples=True
    )
    assert sorted(r.prompt for r in lm.generate) == ["q1", "q5"]
    logged = [
        json.loads(x)["doc_id"] for x in (tmp_path / "samples_gen.jsonl").read_text().splitlines()
    ]
    assert logged == [1, 5]
    assert results["n-samples"]["gen"] == {"original": len(ROWS), "effective": 2}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"samples": {"gen": [0]}, "limit": 2}, "--samples and --limit"),
        ({"samples": {"gne": [0]}}, "'gne' is not a task of this run"),
        ({"samples": {"gen": "0,1"}}, "must map to a list of doc ids"),
        ({"samples": {"gen": [1, 7, 9]}}, "has 7 docs (ids 0 to 6); got id(s) 7, 9"),
        ({"predict_only": True}, "--predict-only needs --output-path"),
    ],
)
def test_bad_samples_and_predict_only_settings_are_refused(settings, message):
    with pytest.raises(ConfigError) as raised:
        run([gen_task()], **settings)
    assert message in str(raised.value)


def test_predict_only_logs_answers_and_runs_no_metric(tmp_path):
    def boom(doc, results):
        raise AssertionError("scoring code ran")

    task = gen_task(process_results=boom)
    results, lm = run([task], predict_only=True, output_dir=tmp_path)
    assert len(lm.generate) == len(ROWS)
    # lm-eval's predict-only output: the bypass metric, 999 for the task, None per sample.
    assert results["results"]["gen"]["bypass,none"] == 999
    records = [json.loads(x) for x in (tmp_path / "samples_gen.jsonl").read_text().splitlines()]
    assert len(records) == len(ROWS) and all(r["bypass"] is None for r in records)
    assert records[0]["resps"] == [["a0"]]


def test_metadata_reaches_the_dataset_loader_and_the_results_config():
    seen = {}

    def loader(**kwargs):
        seen.update(kwargs)
        return {"validation": ROWS}

    results, _ = run([gen_task(dataset_loader=loader)], metadata={"max_seq_lengths": [64]})
    assert seen["max_seq_lengths"] == [64]
    assert results["configs"]["gen"]["metadata"]["max_seq_lengths"] == [64]
