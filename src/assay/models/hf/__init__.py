"""The Hugging Face transformers backend (`--model hf`)."""

from assay.models.hf.args import HFArgs, parse_hf_args
from assay.models.hf.model import HuggingFaceLM

__all__ = ["HFArgs", "HuggingFaceLM", "parse_hf_args"]
