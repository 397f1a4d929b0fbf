"""The vLLM backend (`--model vllm`); vllm itself is imported only when an engine starts."""

from assay.models.vllm.engine import Engine
from assay.models.vllm.model import VLLMLM
from assay.models.vllm.requests import VLLMArgs, parse_vllm_args

__all__ = ["VLLMLM", "Engine", "VLLMArgs", "parse_vllm_args"]
