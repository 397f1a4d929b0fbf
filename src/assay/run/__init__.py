"""One benchmark run, top to bottom: read its modules in this order.

`settings` (every setting declared once) -> `plan` (settings checked and applied to each task)
-> `backend` (the model and executor the settings name) -> `evaluation` (the run, shard by
shard: `follow_ups` for multi-turn docs, `judging` for judge metrics, `scoring` for filters and
metrics) -> `header` (what produced the run, for results.json) -> `resume` (whether an output
folder resumes) -> `api` (`evaluate()`); `validate` checks task files without running them.
"""

# Modules, imported by name (from assay.run import <module>): `assay run --help` reads
# `settings` alone, so nothing heavier is imported here.
__all__ = ["api", "backend", "evaluation", "header", "plan", "resume", "scoring", "settings"]
