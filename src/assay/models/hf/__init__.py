"""The Hugging Face transformers backend (`--model hf`)."""
