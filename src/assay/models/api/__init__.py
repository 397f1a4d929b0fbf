"""OpenAI-compatible API backends (`--model openai-completions`, `--model openai-chat`)."""
