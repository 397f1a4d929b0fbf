"""One benchmark run, top to bottom: read its modules in this order.

`settings` (every setting declared once) -> `plan` (settings checked and applied to each task,
and the requests each task's docs become) -> `backend` (the model and executor the settings
name) -> `evaluation` (the run, shard by shard: `answering` asks the model, `follow_ups` asks
multi-turn docs' later turns, `judging` has judge models grade answers, `scoring` runs filters
and metrics) -> `header` (what produced the run, for results.json) -> `resume` (whether an
output folder resumes) -> `api` (`evaluate()`); `validate` checks task files without running
them.
"""

# Modules, imported by name (from assay.run import <module>): `assay run --help` reads
# `settings` alone, so nothing heavier is imported here.
__all__ = [
    "answering",
    "api",
    "backend",
    "evaluation",
    "follow_ups",
    "header",
    "judging",
    "plan",
    "resume",
    "scoring",
    "settings",
    "validate",
]
