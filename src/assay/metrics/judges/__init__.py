"""Model-graded metrics: another model (the judge, `--judge-model`) grades each answer.

`judge_score` (single-answer grading, 1-10), `judge_pairwise` (win rate against the doc's
reference answer, both orders) and `judge_correct` (reference-guided yes/no) are registered
metrics (`assay.metrics.judges.grading`); the "judge" stage between filters and metrics
(`assay.metrics.judges.stage`) sends their prompts to the judge model through the run's
executor and response cache and files each verdict under its doc, for the metric to read and
the samples file to record.
"""

from assay.metrics.judges.grading import Grader, Judgement, JudgeMetric, judge_metrics
from assay.metrics.judges.stage import run_judges

__all__ = ["Grader", "JudgeMetric", "Judgement", "judge_metrics", "run_judges"]
