"""Model backends; each registers itself with @register_model."""
