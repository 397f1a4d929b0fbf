"""Task specs to docs: TaskConfig, Task, the lm-eval YAML loader, few-shot samplers, registry."""
