"""`--model hf` known from its files: the stand-in's identity, provenance and capabilities are
those of the loaded model, and what its files cannot tell leaves no stand-in."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from assay.models.base import Unloaded
from assay.models.hf.model import HuggingFaceLM, hf
from assay.prompts.chat import render_chat

pytestmark = pytest.mark.slow


def edited_copy(source: Path, target: Path, **config: Any) -> Path:
    """A copy of the model in `source` whose config.json has `config` (None removes a key)."""
    shutil.copytree(source, target)
    path = target / "config.json"
    data = json.loads(path.read_text())
    for key, value in config.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))
    return target


def tied_model(source: Path, target: Path) -> Path:
    """The model in `source` with its output embedding tied to the input one, saved as
    save_pretrained saves it (the tied weight once)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(source)
    config.tie_word_embeddings = True
    AutoModelForCausalLM.from_config(config).save_pretrained(target)
    AutoTokenizer.from_pretrained(source).save_pretrained(target)
    return target


@pytest.fixture(scope="module")
def models(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny model as saved (float32), a copy whose config says bfloat16, and the model
    with tied embeddings (fewer parameters)."""
    root = tmp_path_factory.mktemp("unloaded")
    return {
        "float32": tiny_model_dir,
        "bfloat16": edited_copy(tiny_model_dir, root / "bf16", dtype="bfloat16"),
        "tied": tied_model(tiny_model_dir, root / "tied"),
    }


def described(args: dict[str, Any]) -> Unloaded:
    stand_in = HuggingFaceLM.unloaded(args)
    assert isinstance(stand_in, Unloaded)
    return stand_in


@pytest.mark.parametrize(
    ("model", "extra"),
    [
        ("float32", {}),
        ("float32", {"dtype": "bfloat16"}),
        ("bfloat16", {}),
        ("bfloat16", {"dtype": "float32"}),
        ("tied", {}),
        ("float32", {"prefix_cache": False}),
        ("float32", {"attn_implementation": "eager"}),
        ("float32", {"max_length": 77, "add_bos_token": False}),
        ("float32", {"think_end_token": "</s>", "think_start_token": "<s>"}),
        ("float32", {"think_end_token": "</s>", "enable_thinking": True, "thinking_budget": 3}),
    ],
)
def test_the_stand_in_is_the_loaded_model_without_its_weights(models, model, extra):
    args = {"pretrained": str(models[model]), **extra}
    stand_in = described(args)
    loaded = hf(**args)
    assert stand_in.identity() == loaded.identity()
    assert stand_in.provenance() == loaded.provenance()
    assert (stand_in.max_length, stand_in.batch_size) == (loaded.max_length, loaded.batch_size)
    texts = ["hello world", "Question: 48 / 2 = ?\nAnswer:", ""]
    assert stand_in.token_counter()(texts) == loaded.token_counter()(texts)
    chat = [{"role": "user", "content": "Say 7."}]
    assert render_chat(stand_in.chat_template(), chat) == render_chat(loaded.chat_template(), chat)


def test_the_dtype_and_attention_follow_the_config_and_the_args(models):
    assert described({"pretrained": str(models["bfloat16"])}).identity()["dtype"] == "bfloat16"
    eager = described({"pretrained": str(models["float32"]), "attn_implementation": "eager"})
    assert eager.identity()["attn_implementation"] == "eager"
    default = described({"pretrained": str(models["float32"])})
    assert default.identity()["attn_implementation"] == "sdpa"


def test_the_stand_in_answers_no_request(models):
    from assay.errors import ModelError
    from assay.requests.types import LoglikelihoodRequest

    stand_in = described({"pretrained": str(models["float32"])})
    with pytest.raises(ModelError, match="holds no weights"):
        stand_in.loglikelihood([LoglikelihoodRequest("a", " b")])


@pytest.mark.parametrize(
    "extra",
    [{"peft": "some/adapter"}, {"load_in_8bit": True}, {"trust_remote_code": True}],
    ids=["peft", "quantized", "remote_code"],
)
def test_what_only_loading_tells_leaves_no_stand_in(models, extra):
    assert HuggingFaceLM.unloaded({"pretrained": str(models["float32"]), **extra}) is None


def test_dtype_auto_without_a_config_dtype_leaves_no_stand_in(models, tmp_path):
    # transformers then reads the dtype from the weights themselves.
    bare = edited_copy(models["float32"], tmp_path / "bare", dtype=None, torch_dtype=None)
    assert HuggingFaceLM.unloaded({"pretrained": str(bare)}) is None
    assert HuggingFaceLM.unloaded({"pretrained": str(bare), "dtype": "float32"}) is not None


def test_a_tied_weight_stored_apart_leaves_no_stand_in(models, tmp_path):
    # transformers ties the two only when their values agree, which only loading tells.
    both = edited_copy(models["float32"], tmp_path / "both", tie_word_embeddings=True)
    assert HuggingFaceLM.unloaded({"pretrained": str(both)}) is None


def test_a_bad_model_arg_is_refused_as_loading_refuses_it(tmp_path):
    from assay.errors import ConfigError, ModelError

    with pytest.raises(ModelError, match="no such directory"):
        HuggingFaceLM.unloaded({"pretrained": str(tmp_path / "missing")})
    with pytest.raises(ConfigError, match="dtype"):
        HuggingFaceLM.unloaded({"pretrained": "x", "dtype": "float8"})
