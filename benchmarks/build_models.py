"""Build the two random-init Llama models of the peer figures into benchmarks/.models/.

    .venv/bin/python benchmarks/build_models.py [--force]

- llama-38m: hidden 512, 6 layers, 8 heads, MLP 3072, untied embeddings, BPE vocab 4096 (38.8M);
- llama-2m:  hidden 128, 4 layers, 4 heads, MLP 352, same tokenizer (1.85M).

The byte-level BPE tokenizer is trained with `tokenizers` on HellaSwag and GSM8K train text from
../shared/data when present (else on the small built-in corpus of the test fixture). Weights are
float32, drawn with a fixed seed, so every build is identical. The directory is gitignored.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "benchmarks" / ".models"
DATA = REPO.parent / "shared" / "data"

sys.path.insert(0, str(REPO / "tests"))
from fixtures.tiny_model import CORPUS, save_llama, train_tokenizer  # noqa: E402

SHAPES = {
    "llama-38m": {"hidden": 512, "layers": 6, "heads": 8, "kv_heads": 8, "intermediate": 3072},
    "llama-2m": {"hidden": 128, "layers": 4, "heads": 4, "kv_heads": 4, "intermediate": 352},
}
VOCAB = 4096
MAX_POSITIONS = 2048


def corpus() -> Iterator[str]:
    """HellaSwag contexts and endings, GSM8K train questions and answers (or the fixture text)."""
    hellaswag = DATA / "hellaswag" / "hellaswag_val.jsonl"
    gsm8k = DATA / "gsm8k" / "train.jsonl"
    if not (hellaswag.exists() and gsm8k.exists()):
        print(f"{DATA} not found: training the tokenizer on the built-in corpus", file=sys.stderr)
        yield from CORPUS.splitlines()
        return
    with hellaswag.open() as lines:
        for line in lines:
            row = json.loads(line)
            yield f"{row['activity_label']}: {row['ctx']}"
            yield from row["endings"]
    with gsm8k.open() as lines:
        for line in lines:
            row = json.loads(line)
            yield f"Question: {row['question']}\nAnswer: {row['answer']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild existing models")
    args = parser.parse_args()
    todo = {
        name: shape for name, shape in SHAPES.items() if args.force or not (MODELS / name).exists()
    }
    if not todo:
        print(f"models already built in {MODELS}")
        return
    tokenizer = train_tokenizer(corpus(), VOCAB, model_max_length=MAX_POSITIONS)
    for seed, (name, shape) in enumerate(todo.items()):
        path = save_llama(MODELS / name, tokenizer, max_positions=MAX_POSITIONS, seed=seed, **shape)
        from safetensors.torch import load_file

        n_params = sum(t.numel() for t in load_file(path / "model.safetensors").values())
        print(f"{name}: {n_params / 1e6:.2f}M parameters -> {path}")


if __name__ == "__main__":
    main()
