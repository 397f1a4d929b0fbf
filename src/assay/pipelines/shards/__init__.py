"""Running configs over a dataset shard by shard.

The seeded split into shards (`split`), the fair scheduler (`scheduler`), the loaded engines
(`engines`), one batch of rows through the user's functions (`batch`), the experiment's SQLite
store (`store`), each config's live estimates (`live_metrics`) and early stopping (`early_stop`).
"""

__all__: list[str] = []
"""Nothing at this level: users import from assay.pipelines, modules from their own files."""
