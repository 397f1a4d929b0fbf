"""Model-graded metrics: another model (the judge, `--judge-model`) grades each answer.

`judge_score` (single-answer grading, 1-10), `judge_pairwise` (win rate against the doc's
reference answer, both orders), `judge_correct` (reference-guided yes/no) and `judge_rubric`
(HealthBench-style rubric checklists) are registered metrics (`assay.metrics.judges.grading`);
`assay.metrics.judges.stage` builds their prompts and parses the verdicts, given a function
that asks the judge model; `assay.metrics.judges.tally` counts what the task's results report
about its judges. The run's judging stage (`assay.run.judging`) builds the judge models,
sends the prompts through the run's executor and response cache, and files each verdict
under its doc, for the metric to read and the samples file to record.
"""

from assay.metrics.judges.grading import (
    Grader,
    JudgeInput,
    Judgement,
    JudgeMetric,
    RubricItem,
    judge_metrics,
)
from assay.metrics.judges.stage import judge_shard

__all__ = [
    "Grader",
    "JudgeInput",
    "JudgeMetric",
    "Judgement",
    "RubricItem",
    "judge_metrics",
    "judge_shard",
]
