"""The run plan: what a run fixes before it loads any data or model, built once.

`plan_run` checks the settings and the tasks, builds every task's filters, metrics and judges
(a bad name fails in seconds, not after a model load), resolves the sandbox code tasks run in,
and fixes the run's identity (`run_key`), where it writes (`place`) and the arguments its
backend is built from (`backend`). Every later stage reads the plan; none changes it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from assay.metrics.judges.grading import JudgeMetric, judge_metrics
from assay.results.layout import OutputPlace, output_place
from assay.run.backend import BackendSource, run_source
from assay.run.judging import JudgeSpec, check_judges
from assay.run.plan import Scorers, check_settings, check_task, check_tasks, configure_task
from assay.run.resume import run_key
from assay.run.settings import RunSettings
from assay.sandbox import SandboxPolicy
from assay.sandbox.policy import notice as sandbox_notice
from assay.sandbox.policy import resolve as resolve_sandbox
from assay.tasks.code_routes import code_route
from assay.tasks.code_routes import describe as describe_code_route
from assay.tasks.registry import Resolved
from assay.tasks.task import Task, fewshot_count
from assay.util.redact import remember_in


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """One run's checked settings and tasks, and what follows from them."""

    settings: RunSettings
    tasks: tuple[Task, ...]
    """Each task with the run's config changes and its few-shot count."""
    scorers: Mapping[str, Scorers]
    """Per task: its filter ensembles and metrics."""
    judged: Mapping[str, list[JudgeMetric]]
    """Per task with judge metrics: those metrics."""
    judges: Mapping[str, list[JudgeSpec]]
    """Per task with judge metrics: the judges that grade it (first, and maybe second)."""
    sandbox: SandboxPolicy
    """Where the run's code tasks run model-written code."""
    run_key: dict[str, Any]
    """What makes two runs the same run (`run.resume.run_key`)."""
    place: OutputPlace | None
    """Where the run writes (None: nowhere)."""
    backend: BackendSource
    """What the run's backend is built from (`run_source`), with the folder where it keeps its
    batch journals and default cache (the run's state folder under --output-path)."""


def plan_run(resolved: Resolved, settings: RunSettings) -> RunPlan:
    """The plan of a run of `resolved` under `settings`; refuses what cannot run."""
    check_settings(settings)
    # Secrets in model args are hidden from every file and line from the start (the run's
    # lock records its command before any backend is built).
    remember_in([settings.model_args, settings.judge_model_args, settings.second_judge_model_args])
    key = run_key(settings, [r.config.name for r in resolved.tasks])
    model = settings.model if isinstance(settings.model, str) else type(settings.model).__name__
    place = output_place(settings.output_path, settings.output_dir, model, settings.model_args, key)
    # A --device or --batch-api that contradicts --model-args is refused before any task is
    # checked.
    backend = _backend_plan(settings, place)
    tasks = tuple(
        Task(
            configure_task(r.config, settings),
            num_fewshot=fewshot_count(r.config, r.num_fewshot, settings.num_fewshot),
            fewshot_seed=settings.seed.fewshot,
            keep_self=settings.fewshot_keep_self,
        )
        for r in resolved.tasks
    )
    check_tasks(settings, tasks)
    # Every task is checked, and its filters and metrics built, before any model is.
    scorers = {
        task.name: check_task(task.config, confirm_run_unsafe_code=settings.confirm_run_unsafe_code)
        for task in tasks
    }
    judged = {name: found for name, s in scorers.items() if (found := judge_metrics(s.metrics))}
    judges = check_judges(settings, {task.name: task.config for task in tasks}, list(judged))
    sandbox = _sandbox_policy(settings, tasks)
    return RunPlan(
        settings=settings,
        tasks=tasks,
        scorers=scorers,
        judged=judged,
        judges=judges,
        sandbox=sandbox,
        run_key=key,
        place=place,
        backend=backend,
    )


def _backend_plan(settings: RunSettings, place: OutputPlace | None) -> BackendSource:
    if place is not None and place.kind != "folder":
        # The backend keeps batch journals (and its default cache) in the run's state folder.
        settings = replace(settings, output_dir=place.state)
    return run_source(settings, announce=True)


def _sandbox_policy(settings: RunSettings, tasks: Sequence[Task]) -> SandboxPolicy:
    """The sandbox the run's code tasks use, checked now (before any model is built), with a
    line on stderr saying what it isolates; the unchecked default when no task runs code."""
    policy = SandboxPolicy(settings.sandbox, settings.sandbox_image, settings.sandbox_workers)
    routes = {task.name: code_route(task.config) for task in tasks if task.config.unsafe_code}
    if routes and settings.predict_only:
        print(
            f"assay: --predict-only: nothing is scored, so no model-written code runs "
            f"({', '.join(routes)}).",
            file=sys.stderr,
        )
        return policy
    if not any(route.sandboxed for route in routes.values()):
        for name, route in routes.items():  # the task's own code runs them, not the sandbox
            print(describe_code_route(name, route, policy.mode), file=sys.stderr)
        return policy
    resolved = resolve_sandbox(policy)
    where = f"docker image {resolved.image}" if resolved.mode == "docker" else resolved.mode
    for name, route in routes.items():
        print(describe_code_route(name, route, where), file=sys.stderr)
    print(sandbox_notice(resolved), file=sys.stderr)
    return resolved
