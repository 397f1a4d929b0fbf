"""Each run setting is declared once (settings.RunSettings) and reaches everything built from it."""

from __future__ import annotations

import inspect

from assay.cli.main import build_parser
from assay.run.api import evaluate
from assay.run.settings import (
    RECORDED,
    RUN_IDENTITY,
    Effect,
    RunSettings,
    default,
    describe,
    names_changing,
    setting_names,
)


def _run_parser():
    return next(
        choice
        for action in build_parser()._actions
        if getattr(action, "choices", None) and "run" in action.choices
        for name, choice in action.choices.items()
        if name == "run"
    )


def test_every_field_is_declared_with_help_and_an_effect():
    for name in setting_names():
        spec = describe(name)
        assert spec.help.strip(), name
        assert isinstance(spec.effect, Effect), name


def test_every_flagged_setting_is_a_run_flag_with_its_help():
    actions = {a.dest: a for a in _run_parser()._actions}
    for name in setting_names():
        flag = describe(name).flag
        if flag is None:
            assert name not in actions, f"{name} is declared API-only but has a flag"
            continue
        assert name in actions, f"{name} has no `assay run` flag"
        assert set(flag.names) <= set(actions[name].option_strings), name
        assert describe(name).help in (actions[name].help or ""), name


def test_evaluate_takes_every_setting_with_its_default():
    params = inspect.signature(evaluate).parameters
    for name in setting_names():
        assert name in params, f"evaluate() has no keyword {name}"
        if name in ("model",):
            continue  # evaluate's first argument: required there
        given = params[name].default
        # Parsed settings (dicts, lists, samples) take None or their text forms in evaluate().
        assert given is None or given == default(name), (name, given, default(name))


def test_recorded_and_identity_settings_follow_the_effects():
    recorded = set(names_changing(*RECORDED))
    identity = set(names_changing(*RUN_IDENTITY))
    # Batch size and device may move the last digits (recorded), but a run resumed with
    # another one is the same run.
    assert {"batch_size", "device"} <= recorded - identity
    assert {"limit", "num_fewshot", "gen_kwargs", "unclosed_thinking"} <= recorded & identity
    assert {"model", "seed", "log_samples"} <= identity - recorded
    assert not {"output_dir", "cache", "max_cost", "batch_api", "executor"} & (recorded | identity)


def test_the_run_settings_defaults_are_the_declared_ones():
    settings = RunSettings()
    for name in setting_names():
        assert getattr(settings, name) == default(name), name
