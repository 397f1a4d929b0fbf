"""`--model vllm` end to end on vLLM's CPU build, against `--model hf` on the same tiny model.

vLLM's CPU wheel pins its own transformers, so it lives in a side virtualenv that `make test`
builds (`make vllm-venv`): ASSAY_VLLM_PYTHON (which `make test` sets, so there it must exist),
else .venv-vllm/bin/python in the clone. Without one the test is skipped with that reason; everything else about the backend (arguments, request
translation, scoring on a fake engine) is tested in test_vllm.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TASKS_DIR = REPO / "tests" / "data" / "lm_eval_parity" / "tasks"
TASKS = "parity_mc_same_split,parity_gen_regex,parity_rolling"
GIVEN = os.environ.get("ASSAY_VLLM_PYTHON")
"""Set by `make test`: then a missing virtualenv is a failure, not a skip."""
VLLM_PYTHON = Path(GIVEN) if GIVEN else REPO / ".venv-vllm" / "bin" / "python"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not GIVEN and not VLLM_PYTHON.exists(),
        reason=f"no vLLM CPU virtualenv at {VLLM_PYTHON} (make vllm-venv builds it)",
    ),
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    from fixtures.tiny_model import build_tiny_model

    # vLLM's CPU attention needs a head size of at least 32.
    return build_tiny_model(tmp_path_factory.mktemp("vllm_tiny"), hidden=64, heads=2, kv_heads=2)


def assay_run(python: Path | str, args: list[str], out: Path) -> dict[str, list[dict]]:
    """`python -m assay run ARGS`, writing to `out`; its samples files by task."""
    env = {
        **os.environ,
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
    }
    command = [str(python), "-m", "assay", "run", *args, "--output-dir", str(out),
               "--log-samples", "--no-progress", "--no-cache"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {
        p.stem.removeprefix("samples_"): [json.loads(line) for line in p.read_text().splitlines()]
        for p in sorted(out.glob("samples_*.jsonl"))
    }


def run(python: Path | str, backend: str, model_args: str, out: Path) -> dict[str, list[dict]]:
    args = ["--model", backend, "--model-args", model_args, "--tasks", TASKS,
            "--include-path", str(TASKS_DIR), "--limit", "8"]  # fmt: skip
    return assay_run(python, args, out)


def test_vllm_matches_the_hf_backend(model_dir, tmp_path):
    vllm_args = (
        f"pretrained={model_dir},dtype=float32,max_model_len=512,gpu_memory_utilization=0.1,"
        "enforce_eager=True"
    )
    vllm = run(VLLM_PYTHON, "vllm", vllm_args, tmp_path / "vllm")
    hf = run(
        sys.executable,
        "hf",
        f"pretrained={model_dir},dtype=float32,max_length=512",
        tmp_path / "hf",
    )
    assert set(vllm) == set(hf) == {"parity_mc_same_split", "parity_gen_regex", "parity_rolling"}
    for task in ("parity_mc_same_split", "parity_rolling"):
        for a, b in zip(hf[task], vllm[task], strict=True):
            assert a["arguments"] == b["arguments"]
            for (x, *_), (y, *_) in zip(a["resps"], b["resps"], strict=True):
                # [loglikelihood, is_greedy] per choice; a bare loglikelihood for rolling.
                x, y = (x[0], y[0]) if isinstance(x, list) else (x, y)
                assert abs(float(x) - float(y)) < 1e-4, (task, a["doc_id"])
    # Greedy generations: the same text, token for token.
    assert [s["resps"] for s in vllm["parity_gen_regex"]] == [
        s["resps"] for s in hf["parity_gen_regex"]
    ]


# -- vLLM as the judge ---------------------------------------------------------------------

JUDGED_TASK = """\
task: judged
dataset_path: json
dataset_kwargs:
  data_files:
    test: {rows}
test_split: test
output_type: generate_until
doc_to_text: "{{{{q}}}}"
doc_to_target: "{{{{a}}}}"
generation_kwargs:
  until: ["\\n"]
metric_list:
  - metric: judge_correct
    judge_max_gen_toks: 16
"""
JUDGED_ROWS = [
    ({"q": "What is 2+2?", "a": "4"}, "4"),
    ({"q": "What is the capital of France?", "a": "Paris"}, "Lyon"),
    ({"q": "What is 3*3?", "a": "9"}, "9"),
]
"""(row, the replayed model's answer)."""


def test_vllm_judges_a_replayed_model_as_the_hf_backend_does(model_dir, tmp_path):
    """`--judge-model vllm` grades a replayed model's answers: every judge prompt reaches the
    engine and its greedy verdict is recorded, token for token what `--judge-model hf` says on
    the same tiny model, with the judge's request counts and the unparsed-verdict count."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row, _ in JUDGED_ROWS))
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(json.dumps({"prompt": row["q"], "response": a}) + "\n" for row, a in JUDGED_ROWS)
    )
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "judged.yaml").write_text(JUDGED_TASK.format(rows=rows))
    common = ["--model", "replay", "--model-args", f"path={answers}", "--tasks", "judged",
              "--include-path", str(tasks)]  # fmt: skip
    vllm_args = (
        f"pretrained={model_dir},dtype=float32,max_model_len=512,gpu_memory_utilization=0.1,"
        "enforce_eager=True"
    )
    vllm = assay_run(
        VLLM_PYTHON, [*common, "--judge-model", "vllm", "--judge-model-args", vllm_args],
        tmp_path / "vllm",
    )["judged"]  # fmt: skip
    hf = assay_run(
        sys.executable,
        [*common, "--judge-model", "hf", "--judge-model-args",
         f"pretrained={model_dir},dtype=float32,max_length=512"],
        tmp_path / "hf",
    )["judged"]  # fmt: skip
    records = [s["judge"]["judge_correct"] for s in sorted(vllm, key=lambda s: s["doc_id"])]
    assert len(records) == len(JUDGED_ROWS)
    for record, (row, answer) in zip(records, JUDGED_ROWS, strict=True):
        (prompt,) = record["prompts"]
        assert f"[Question]\n{row['q']}" in prompt and f"[Reference answer]\n{row['a']}" in prompt
        assert f"[Start of the assistant's answer]\n{answer}\n" in prompt
        assert len(record["verdicts"]) == 1 and record["verdicts"][0]
    by_doc = {s["doc_id"]: s["judge"]["judge_correct"] for s in hf}
    assert [r["verdicts"] for r in records] == [by_doc[i]["verdicts"] for i in range(3)]
    results = json.loads((tmp_path / "vllm" / "results.json").read_text())
    (judge,) = results["assay"]["judges"]["judged"]
    assert judge["model"] == "vllm" and judge["identity"]["backend"] == "vllm"
    assert judge["requests"]["computed"] == len(JUDGED_ROWS)
    assert judge["requests"]["from_cache"] == 0
    # A verdict counts as unparsed unless it holds [[YES]] or [[NO]] (judge_correct's format).
    unparsed = sum(not re.search(r"\[\[(YES|NO)\]\]", r["verdicts"][0], re.I) for r in records)
    assert results["results"]["judged"]["judge_correct_unparsed,none"] == unparsed


# -- images ---------------------------------------------------------------------------------

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 220)}
IMAGE_TASKS = """\
task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {rows}
test_split: test
output_type: {output_type}
doc_to_image: image
doc_to_text: "What colour is the shape?"
doc_to_target: {target}
{extra}
metric_list:
  - metric: {metric}
"""


def _image_tasks(folder: Path) -> list[dict]:
    """A generative and a multiple-choice task over six drawn pictures (given as PNG paths)."""
    from PIL import Image, ImageDraw

    rows = []
    for i, (name, rgb) in enumerate(list(COLOURS.items()) * 2):
        image = Image.new("RGB", (40 + 4 * i, 32), (250, 250, 250))
        ImageDraw.Draw(image).ellipse((6 + i, 6, 30, 26), fill=rgb)
        path = folder / f"shape{i}.png"
        image.save(path)
        rows.append({"image": str(path), "answer": name, "label": list(COLOURS).index(name)})
    data = folder / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "mm_gen.yaml").write_text(
        IMAGE_TASKS.format(
            name="mm_gen", rows=data, output_type="generate_until", target="answer",
            extra="generation_kwargs:\n  until: ['\\n']\n  max_gen_toks: 5\n  do_sample: false",
            metric="exact_match",
        )
    )  # fmt: skip
    (folder / "mm_mc.yaml").write_text(
        IMAGE_TASKS.format(
            name="mm_mc", rows=data, output_type="multiple_choice", target="label",
            extra=f"doc_to_choice: {list(COLOURS)}", metric="acc",
        )
    )  # fmt: skip
    return rows


def test_vllm_takes_images_as_transformers_computes_them(tmp_path_factory, tmp_path):
    """BLIP-2 on vLLM's CPU build through `--model vllm`, against the same model in transformers:
    each image reaches the engine with its prompt (greedy text identical), and choice
    loglikelihoods are read past the image's query tokens (within 1e-4)."""
    import torch
    from fixtures.tiny_blip2 import QUERY_TOKENS, build_tiny_blip2
    from PIL import Image
    from transformers import AutoProcessor, Blip2ForConditionalGeneration

    model_dir = build_tiny_blip2(tmp_path_factory.mktemp("vllm_blip2"))
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    rows = _image_tasks(tasks)
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
    command = [
        str(VLLM_PYTHON), "-m", "assay", "run", "--model", "vllm", "--model-args",
        f"pretrained={model_dir},dtype=float32,max_model_len=256,gpu_memory_utilization=0.1,"
        "enforce_eager=True,max_images=1",
        "--tasks", "mm_gen,mm_mc", "--include-path", str(tasks), "--output-dir",
        str(tmp_path / "out"), "--log-samples", "--no-progress", "--no-cache",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    samples = {
        task: [json.loads(line) for line in (tmp_path / "out" / f"samples_{task}.jsonl").open()]
        for task in ("mm_gen", "mm_mc")
    }

    processor = AutoProcessor.from_pretrained(model_dir)
    model = Blip2ForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).eval()
    tokenizer = processor.tokenizer
    image_ids = [tokenizer.convert_tokens_to_ids("<image>")] * QUERY_TOKENS
    prompt = "What colour is the shape?"
    generated, choices = [], []
    for row in rows:
        pixels = processor.image_processor(Image.open(row["image"]), return_tensors="pt")
        inputs = processor(images=Image.open(row["image"]), text=prompt, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=5, do_sample=False)
        text = tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
        generated.append(text.split("\n")[0])
        context = tokenizer(prompt).input_ids
        per_choice = []
        for choice in COLOURS:
            whole = tokenizer(f"{prompt} {choice}").input_ids
            ids = torch.tensor([image_ids + whole])
            with torch.no_grad():
                logits = model(input_ids=ids, pixel_values=pixels["pixel_values"]).logits[0]
            logprobs = torch.log_softmax(logits.float(), -1)
            n = len(image_ids) + len(context)
            per_choice.append(
                sum(float(logprobs[k - 1, ids[0, k]]) for k in range(n, ids.shape[1]))
            )
        choices.append(per_choice)

    by_doc = {s["doc_id"]: s for s in samples["mm_gen"]}
    assert [by_doc[i]["resps"][0][0] for i in range(len(rows))] == generated
    assert len(set(generated)) > 1  # the pictures change what the model says
    for sample in samples["mm_mc"]:
        got = [float(resp[0][0]) for resp in sample["resps"]]
        assert got == pytest.approx(choices[sample["doc_id"]], abs=1e-4), sample["doc_id"]
        assert len(sample["arguments"]["gen_args_0"]["arg_2"]["visual"]) == 1


# -- prefix-cache statistics ----------------------------------------------------------------

# A generation task whose prompts share far more than one of vLLM's CPU KV blocks (128 tokens):
# a long constant description and the same two first_n examples before every question.
SHARED_PREFIX_TASK = """
task: shared_prefix_gen
dataset_path: json
dataset_kwargs:
  data_files:
    train: {data}/qa_train.jsonl
    test: {data}/qa_test.jsonl
training_split: train
test_split: test
fewshot_split: train
fewshot_config:
  sampler: first_n
num_fewshot: 2
output_type: generate_until
description: "{description}\\n\\n"
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: reasoning
generation_kwargs:
  until: ["\\n\\n", "Question:"]
  max_gen_toks: 8
metric_list:
  - metric: exact_match
"""


# MMLU's layout: a subject's description and the same first_n examples before every question,
# the four letters as choices (" A" is two tokens in the tiny tokenizer) or, in the _text
# variant, the answers' own words (longer continuations).
MMLU_SHAPED_TASK = """
task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    train: {data}/qa_train.jsonl
    test: {data}/qa_test.jsonl
training_split: train
test_split: test
fewshot_split: train
fewshot_config:
  sampler: first_n
num_fewshot: 3
output_type: multiple_choice
description: "{description}\\n\\n"
doc_to_text: "{{{{question.strip()}}}}\\nA. {{{{choices[0]}}}}\\nB. {{{{choices[1]}}}}\\nC. {{{{choices[2]}}}}\\nD. {{{{choices[3]}}}}\\nAnswer:"
doc_to_choice: {choices}
doc_to_target: label
metric_list:
  - metric: acc
"""
RULES = [f"Rule {i}: add the numbers, then check the sum twice." for i in range(12)]
"""A long constant description (12 rules: 385 tokens; MMLU-shaped prompts take 4, then 3
examples of about 70 tokens each: some 340 tokens shared, 2 blocks and more)."""


def write_tasks(folder: Path) -> None:
    """shared_prefix_gen, mmlu_shaped and mmlu_shaped_text in `folder`."""
    data = TASKS_DIR / "data"
    (folder / "shared_prefix_gen.yaml").write_text(
        SHARED_PREFIX_TASK.format(data=data, description=" ".join(RULES)), encoding="utf-8"
    )
    for name, choices in [("mmlu_shaped", '["A", "B", "C", "D"]'), ("mmlu_shaped_text", "choices")]:
        (folder / f"{name}.yaml").write_text(
            MMLU_SHAPED_TASK.format(
                name=name, data=data, description=" ".join(RULES[:4]), choices=choices
            ),
            encoding="utf-8",
        )


def test_vllm_reports_its_prefix_cache_hits_per_task(model_dir, tmp_path):
    write_tasks(tmp_path)
    args = [
        "--model", "vllm", "--model-args",
        f"pretrained={model_dir},dtype=float32,max_model_len=512,gpu_memory_utilization=0.1,"
        "enforce_eager=True",
        "--tasks", "parity_mc_same_split,shared_prefix_gen,mmlu_shaped",
        "--include-path", str(TASKS_DIR), "--include-path", str(tmp_path), "--limit", "8",
    ]  # fmt: skip
    assay_run(VLLM_PYTHON, args, tmp_path / "out")
    requests = json.loads((tmp_path / "out" / "results.json").read_text())["assay"]["requests"]
    # Prompts sharing a long prefix hit the cache in whole 128-token blocks: generations, and
    # loglikelihoods whose continuation no hit can reach (all of mmlu_shaped's but a doc whose
    # context ends on a block boundary). parity_mc_same_split's prompts are shorter than a block.
    for task in ("shared_prefix_gen", "mmlu_shaped"):
        shared = requests[task]["prefix_cache"]
        assert 256 <= shared["hits"] < shared["queries"] and shared["hits"] % 128 == 0, task
        assert shared["hit_rate"] == round(shared["hits"] / shared["queries"], 4)
    short = requests["parity_mc_same_split"]["prefix_cache"]
    assert short["hits"] == 0 < short["queries"]


def test_vllm_scores_with_its_prefix_cache_as_without_it(model_dir, tmp_path):
    """MMLU-shaped tasks scored with vLLM's prefix cache read where that is exact and without
    it elsewhere give the numbers of a run with the prefix cache off. 32-token blocks (the CPU
    build's smallest) put block boundaries inside some continuations and at the end of some
    contexts, so both kinds of span are here."""
    from transformers import AutoTokenizer

    from assay.models.spans import loglikelihood_spans
    from assay.models.tokens import TokenizerView
    from assay.models.vllm.requests import reads_prefix_cache
    from assay.requests.types import LoglikelihoodRequest

    write_tasks(tmp_path)
    common = (
        f"pretrained={model_dir},dtype=float32,max_model_len=512,gpu_memory_utilization=0.1,"
        "enforce_eager=True,engine_args={'block_size': 32}"
    )
    tasks = ["--tasks", "mmlu_shaped,mmlu_shaped_text", "--include-path", str(tmp_path)]
    cached = assay_run(VLLM_PYTHON, ["--model", "vllm", "--model-args", common, *tasks],
                       tmp_path / "cached")  # fmt: skip
    uncached = assay_run(
        VLLM_PYTHON,
        ["--model", "vllm", "--model-args", f"{common},enable_prefix_caching=False", *tasks],
        tmp_path / "uncached",
    )
    worst, spans = 0.0, []
    view = TokenizerView(AutoTokenizer.from_pretrained(model_dir), None)
    for task in ("mmlu_shaped", "mmlu_shaped_text"):
        for a, b in zip(cached[task], uncached[task], strict=True):
            assert a["arguments"] == b["arguments"]
            for (x,), (y,) in zip(a["resps"], b["resps"], strict=True):
                # [loglikelihood, is_greedy] per choice
                worst = max(worst, abs(float(x[0]) - float(y[0])))
                assert x[1] == y[1], (task, a["doc_id"])
            requests = [LoglikelihoodRequest(arg["arg_0"], arg["arg_1"])
                        for arg in a["arguments"].values()]  # fmt: skip
            spans += loglikelihood_spans(view, requests, 511)
    assert worst < 1e-4
    reads = [reads_prefix_cache(span, 32) for span in spans]
    assert any(reads) and not all(reads)
    # Whole prompts (none cut to the window), sharing far more than two blocks.
    assert max(len(s.input_ids) for s in spans) < 450 and min(s.n_context for s in spans) > 300
    results = json.loads((tmp_path / "cached" / "results.json").read_text())
    for task in ("mmlu_shaped", "mmlu_shaped_text"):
        shared = results["assay"]["requests"][task]["prefix_cache"]
        assert 0 < shared["hits"] < shared["queries"], task


# -- a reasoning model ---------------------------------------------------------------------

QUESTIONS = ["think about 1", "say 2", "think about 3", "say 4"]


def test_vllm_splits_thinking_and_reads_how_generations_ended(tmp_path):
    from fixtures.tiny_thinking_model import (
        ANSWER,
        THINKING,
        build_tiny_thinking_model,
        write_task,
    )

    model = build_tiny_thinking_model(tmp_path / "model", hidden=64, heads=2)
    tasks = write_task(tmp_path / "tasks", QUESTIONS)
    model_args = (
        f"pretrained={model},dtype=float32,max_model_len=128,gpu_memory_utilization=0.1,"
        "enforce_eager=True,think_end_token=</think>,think_start_token=<think>"
    )
    thinks = [q.startswith("think") for q in QUESTIONS]
    for cap in (len(THINKING), 16):  # no room to close the thinking, then room for all
        args = ["--model", "vllm", "--model-args", model_args, "--tasks", "tiny_think",
                "--include-path", str(tasks), "--apply-chat-template",
                "--gen-kwargs", f"max_gen_toks={cap}"]  # fmt: skip
        samples = assay_run(VLLM_PYTHON, args, tmp_path / f"cap{cap}")["tiny_think"]
        entry = json.loads((tmp_path / f"cap{cap}" / "results.json").read_text())["assay"][
            "generations"
        ]["tiny_think"]
        cut = sum(thinks) if cap == len(THINKING) else 0
        assert (entry["generations"], entry["truncated"], entry["unclosed_thinking"]) == (
            len(QUESTIONS),
            cut,
            cut,
        )
        ended = [s["generations"][0][0] for s in sorted(samples, key=lambda s: s["doc_id"])]
        assert [g["finish_reason"] for g in ended] == [
            "length" if t and cut else "stop" for t in thinks
        ]
        assert [g["reasoning_tokens"] for g in ended] == [
            len(THINKING) if t else None for t in thinks
        ]
        if not cut:
            assert [g["answer_tokens"] for g in ended] == [len(ANSWER)] * len(QUESTIONS)
            assert [g["thinking_closed"] for g in ended] == [True if t else None for t in thinks]


# -- tools: an agent task through the real engine ---------------------------------------------


def test_an_agent_task_with_tools_runs_through_the_real_engine_as_on_hf(model_dir, tmp_path):
    """A tool-calling agent task on vLLM's CPU engine: the chat template renders the tools and
    the conversation, the Hermes parser reads the answer, and the loop's transcripts, answers
    and scores are those of `--model hf` on the same tiny model (greedy, token for token)."""
    sys.path.insert(0, str(REPO / "tests" / "agents"))
    sys.path.insert(0, str(REPO / "tests" / "models" / "vllm"))
    from calc_agent import write_task
    from test_vllm_tools import TOOL_TEMPLATE

    tools_model = tmp_path / "tools_model"
    shutil.copytree(model_dir, tools_model)
    config_path = tools_model / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = TOOL_TEMPLATE
    config_path.write_text(json.dumps(config))
    (tools_model / "chat_template.jinja").unlink(missing_ok=True)
    tasks = tmp_path / "tasks"
    write_task(tasks, n_docs=2, max_turns=3)
    common = ["--tasks", "calc_agent", "--include-path", str(tasks), "--apply-chat-template",
              "--gen-kwargs", "max_gen_toks=16"]  # fmt: skip
    vllm_args = (
        f"pretrained={tools_model},dtype=float32,max_model_len=512,gpu_memory_utilization=0.1,"
        "enforce_eager=True,tool_parser=hermes"
    )
    vllm = assay_run(VLLM_PYTHON, ["--model", "vllm", "--model-args", vllm_args, *common],
                     tmp_path / "vllm")["calc_agent"]  # fmt: skip
    hf_args = f"pretrained={tools_model},dtype=float32,max_length=512,tool_parser=hermes"
    hf = assay_run(sys.executable, ["--model", "hf", "--model-args", hf_args, *common],
                   tmp_path / "hf")["calc_agent"]  # fmt: skip

    def untimed(record: dict) -> dict:
        turns = [{k: v for k, v in t.items() if k != "seconds"} for t in record["turns"]]
        return {**{k: v for k, v in record.items() if k != "seconds"}, "turns": turns}

    assert len(vllm) == len(hf) == 2
    for a, b in zip(sorted(hf, key=lambda s: s["doc_id"]), sorted(vllm, key=lambda s: s["doc_id"])):
        assert untimed(a["transcript"]) == untimed(b["transcript"]), a["doc_id"]
        assert a["resps"] == b["resps"]
        assert b["transcript"]["model_turns"] >= 1
        assert b["transcript"]["turns"][0]["role"] == "prompt"
    results = json.loads((tmp_path / "vllm" / "results.json").read_text())["results"]
    assert results["calc_agent"]["agent_samples"] == 2
