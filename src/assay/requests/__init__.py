"""Requests: what a model is asked for each doc (loglikelihood, rolling, generation)."""
