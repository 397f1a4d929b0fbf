"""What an experiment runs: model configs, knobs and searches, and leaf eval configs.

Model configs (`model_configs`, `api_models`), RapidFire's knob types and searches (`knobs`,
`search`, `optuna_search`), the identity of a config (`fingerprint`) and the expansion of a
config group into validated leaves (`eval_config`).
"""

__all__: list[str] = []
"""Nothing at this level: users import from assay.pipelines, modules from their own files."""
