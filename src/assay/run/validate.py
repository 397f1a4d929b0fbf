"""`assay validate --no-data`: check task definitions without loading any dataset or model.

For each task: the config (includes merged), `!function` imports, Jinja templates, filters and
metrics are built exactly as a run builds them. A group is checked through every task it runs
(with the settings it pushes down); a tag through its tasks. Hub datasets and `evaluate` metric
scripts are not fetched: they are checked by name and noted as needing a download. Every
failure is reported, not just the first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from assay.errors import AssayError
from assay.hub import needs_hub
from assay.run.scoring import build_filters, build_metrics, evaluate_fallback
from assay.sandbox.code_eval import NAMES as CODE_EVAL_NAMES
from assay.tasks.config import MetricSpec, TaskConfig
from assay.tasks.registry import Registry

log = logging.getLogger(__name__)


@dataclass
class Check:
    """The verdict on one name (one row of `--json`'s `entries`)."""

    name: str | None
    """None for a YAML file that could not be read (its name is unknown)."""
    kind: str
    """'task', 'group' or 'tag'; 'file' for an unreadable YAML."""
    file: str | None
    ok: bool
    error: str | None = None
    members: list[str] | None = None
    """The leaf task names of a group or tag (from the files, whether or not they build)."""
    member_errors: dict[str, str] = field(default_factory=dict)
    """Of a group or tag: each failing member's error, by member name."""
    notes: list[str] = field(default_factory=list)
    """What a run still needs that was not checked offline (downloads)."""

    def as_json(self) -> dict[str, Any]:
        """The `--json` entry."""
        return {
            "name": self.name,
            "kind": self.kind,
            "file": self.file,
            "ok": self.ok,
            "error": self.error,
            "members": self.members,
            "member_errors": self.member_errors,
            "notes": self.notes,
        }


def check_config(config: TaskConfig) -> list[str]:
    """Build what a run builds before loading data; the downloads a run would still need."""
    config.validate()
    build_filters(config)
    # `evaluate` metrics are code on the hub: named, not fetched.
    remote = [
        m
        for m in config.metrics
        if isinstance(m, MetricSpec)
        and (m.hf_evaluate or evaluate_fallback(m, config))
        and m.name not in CODE_EVAL_NAMES  # assay serves code_eval itself, sandboxed
    ]
    local = [m for m in config.metrics if m not in remote]
    build_metrics(replace(config, metrics=local) if remote else config)
    notes = [f"evaluate metric {m.name!r} is loaded from the hub cache at run time" for m in remote]
    if config.dataset_loader is None and needs_hub(config.hf_repo):
        subset = f" ({config.hf_subset})" if config.hf_subset else ""
        notes.append(f"dataset {config.hf_repo}{subset} is downloaded at run time")
    return notes


class _Collect(logging.Handler):
    """Keeps the warnings logged while one name is checked."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _error(exc: BaseException) -> str:
    if isinstance(exc, AssayError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class Validator:
    """Checks names of one registry, each task config once."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._tasks: dict[str, tuple[str | None, list[str]]] = {}

    def _task(self, name: str) -> tuple[str | None, list[str]]:
        """(error or None, notes) of the task called `name`, as named alone."""
        if name not in self._tasks:
            try:
                found = self.registry.get(name)
                assert isinstance(found, TaskConfig)
                self._tasks[name] = (None, check_config(found))
            except (
                Exception,
                SystemExit,
            ) as exc:  # every failure is a finding, reported with its name
                self._tasks[name] = (_error(exc), [])
        return self._tasks[name]

    def check(self, name: str) -> Check:
        """The verdict on a task, group or tag name; its warnings become notes, not log lines."""
        collect = _Collect()
        logger = logging.getLogger("assay")
        logger.addHandler(collect)
        propagate, logger.propagate = logger.propagate, False
        try:
            check = self._check(name)
        finally:
            logger.removeHandler(collect)
            logger.propagate = propagate
        check.notes += [m for m in collect.messages if m not in check.notes]
        return check

    def _check(self, name: str) -> Check:
        reg = self.registry
        kind = reg.kind(name) or "task"
        file = reg.source(name)
        if kind == "task":
            error, notes = self._task(name)
            return Check(name, kind, file, error is None, error, None, notes=notes)
        try:
            members = reg.members(name)
        except (Exception, SystemExit) as exc:
            return Check(name, kind, file, False, _error(exc))
        try:
            resolved = reg.resolve([name])
        except (Exception, SystemExit) as exc:
            # One member that does not build stops the whole resolve: each member is then
            # checked alone, so the others' verdicts and the failing one's reason are known.
            errors = {m: e for m in members if (e := self._member_error(m)) is not None}
            return Check(name, kind, file, False, _error(exc), members, member_errors=errors)
        failures, notes, errors = [], [], {}
        for request in resolved.tasks:
            config = request.config
            if reg.kind(config.name) == "task" and _built_alone(reg, config):
                error, task_notes = self._task(config.name)
            else:  # built with pushed-down settings or inline: checked as the group builds it
                try:
                    error, task_notes = None, check_config(config)
                except (Exception, SystemExit) as exc:
                    error, task_notes = _error(exc), []
            if error is not None:
                failures.append(f"{config.name}: {error}")
                errors[config.name] = error
            notes += [n for n in task_notes if n not in notes]
        error = None
        if failures:
            more = f" (and {len(failures) - 1} more failing members)" if len(failures) > 1 else ""
            error = f"{len(failures)} of {len(resolved.tasks)} tasks fail; {failures[0]}{more}"
        return Check(
            name, kind, file, not failures, error, members, notes=notes, member_errors=errors
        )

    def _member_error(self, member: str) -> str | None:
        """The error of a group's or tag's member checked alone (None when it builds; inline
        members, `group::task`, exist only inside their group and are not checked alone)."""
        if "::" in member:
            return None
        return self._task(member)[0]

    def run(self, names: Iterable[str] | None = None) -> list[Check]:
        """Check `names`, or every name of the include paths plus their unreadable files."""
        if names is not None:
            return [self.check(n) for n in names]
        checks = [
            Check(None, "file", path, False, error)
            for folder in self.registry.folder_indexes()
            for path, error in folder.broken.items()
        ]
        for name in sorted(self.registry.yaml_entries()):
            checks.append(self.check(name))
        return checks


def _built_alone(registry: Registry, config: TaskConfig) -> bool:
    """Whether a group's member is its task as named alone (no settings pushed onto it)."""
    try:
        return registry.get(config.name) is config
    except (Exception, SystemExit):
        return False
