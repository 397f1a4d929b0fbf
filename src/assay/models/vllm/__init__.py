"""The vLLM backend (`--model vllm`)."""
