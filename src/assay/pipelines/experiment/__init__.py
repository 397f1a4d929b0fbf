"""`Experiment.run_evals` and the collaborators that do its jobs over one run state.

`experiment` is the public face; `shard_runner` gives shards to configs; `control` applies
queued operations (clones made by `cloning`); `persistence` and `restore` keep and reload the
store; `views`, `table`, `headers` and `display` make tables and numbers; `control_panel`
serves the live endpoint; `log` keeps the log file; `state` holds what the run knows about
each config.
"""

from assay.pipelines.experiment.experiment import Experiment, run_evals

__all__ = ["Experiment", "run_evals"]
