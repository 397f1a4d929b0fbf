"""Third-party plugins: entry points of an installed distribution fill the registries, read
only when a name is not found otherwise or when names are listed."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from assay.errors import ConfigError, TaskConfigError, UnknownNameError
from assay.registry import ComponentRegistry


def install(site: Path, name: str, entry_points: str, modules: dict[str, str]) -> None:
    """A distribution as pip leaves it: a dist-info folder beside the plugin's modules."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    for module, code in modules.items():
        (site / f"{module}.py").write_text(textwrap.dedent(code))


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A fresh site-packages folder on sys.path; plugin modules are forgotten afterwards."""
    folder = tmp_path / "site-packages"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    before = set(sys.modules)
    yield folder
    for module in set(sys.modules) - before:
        if module.startswith("shout_"):
            del sys.modules[module]


def test_a_plugin_factory_is_listed_without_import_and_loaded_when_named(site):
    install(
        site,
        "shout-plugin",
        """
        [assay.testkind]
        shout = shout_factories:shout
        """,
        {"shout_factories": "def shout(text):\n    return text.upper() + '!'\n"},
    )
    registry: ComponentRegistry[object] = ComponentRegistry("thing", "assay.testkind")
    registry.register("builtin")(len)
    assert registry.names() == ["builtin", "shout"]
    assert "shout" in registry
    assert "shout_factories" not in sys.modules  # listing imports nothing
    assert registry.get("builtin") is len
    assert "shout_factories" not in sys.modules  # neither does a built-in name
    shout = registry.get("shout")
    assert shout("hi") == "HI!"  # type: ignore[operator]
    with pytest.raises(UnknownNameError, match="shot"):
        registry.get("shot")


def test_a_plugin_module_may_register_its_names_itself(site):
    install(
        site,
        "shout-selfreg",
        """
        [assay.metrics]
        shout_len = shout_metrics
        shout_silent = shout_empty
        """,
        {
            "shout_metrics": """
                from assay.metrics.base import register_metric

                @register_metric("shout_len")
                def shout_len(**kwargs):
                    raise NotImplementedError
            """,
            "shout_empty": "",
        },
    )
    from assay.metrics.base import METRICS

    METRICS._plugins = None  # read this test's site-packages
    try:
        assert "shout_len" in METRICS.names()
        assert METRICS.get("shout_len").__module__ == "shout_metrics"
        with pytest.raises(ConfigError, match="did not register 'shout_silent'"):
            METRICS.get("shout_silent")
    finally:
        METRICS._entries.pop("shout_len", None)
        METRICS._plugins = None


def test_a_built_in_name_wins_over_a_plugin_and_a_broken_plugin_is_named(site):
    install(
        site,
        "shout-clash",
        """
        [assay.filters]
        take_first = shout_clash:never
        shout_broken = shout_broken:factory
        """,
        {"shout_clash": "def never():\n    raise AssertionError\n", "shout_broken": "1 / 0\n"},
    )
    from assay.filters.base import FILTERS

    FILTERS._plugins = None
    try:
        assert FILTERS.get("take_first").__module__.startswith("assay.")
        with pytest.raises(
            ConfigError, match=r"filter plugin 'shout_broken'.*ZeroDivisionError.*shout-clash"
        ):
            FILTERS.get("shout_broken")
    finally:
        FILTERS._plugins = None


def test_a_plugin_backend_runs_through_the_model_registry(site):
    install(
        site,
        "shout-backend",
        """
        [assay.models]
        shout-lm = shout_backend:ShoutLM
        """,
        {
            "shout_backend": """
                from assay.models.base import LM

                class ShoutLM(LM):
                    def loglikelihood(self, requests):
                        raise NotImplementedError

                    def loglikelihood_rolling(self, requests):
                        raise NotImplementedError

                    def generate_until(self, requests):
                        return [r.prompt.upper() for r in requests]

                    def identity(self):
                        return {"backend": "shout-lm"}
            """
        },
    )
    from assay.models.base import MODELS, load_model
    from assay.requests.types import GenerateRequest

    MODELS._plugins = None
    try:
        lm = load_model("shout-lm", {})
        assert lm.generate_until([GenerateRequest("hey")]) == ["HEY"]
        assert lm.provenance() == {"backend": "shout-lm"}
    finally:
        MODELS._entries.pop("shout-lm", None)
        MODELS._plugins = None


def test_a_task_plugin_adds_its_tasks_to_the_task_registry(site):
    install(
        site,
        "shout-tasks",
        """
        [assay.tasks]
        shout = shout_tasks
        """,
        {
            "shout_tasks": """
                from assay import Doc, TaskConfig

                TASKS_TABLE = [
                    TaskConfig(
                        name="shout_task",
                        prompt_function=lambda row, name: Doc(row["q"], [row["a"]]),
                        dataset_loader=lambda **_: {"test": [{"q": "x", "a": "X"}]},
                        metrics=["exact_match"],
                    )
                ]
            """
        },
    )
    from assay.tasks.registry import Registry

    registry = Registry()
    assert "shout_task" in registry.names()
    assert registry.get("shout_task").source.endswith("shout_tasks.py")


def test_a_broken_task_plugin_is_named(site):
    install(site, "shout-badtasks", "[assay.tasks]\nbad = shout_nowhere\n", {})
    from assay.tasks.registry import Registry

    with pytest.raises(TaskConfigError, match=r"task plugin 'bad'.*shout-badtasks"):
        Registry().names()


def test_a_lazy_name_whose_module_fails_to_import_stays_known(site):
    (site / "shout_broken.py").write_text("raise ImportError('needs the shout extra')\n")
    registry: ComponentRegistry[object] = ComponentRegistry("thing")
    registry.lazy("broken", "shout_broken")
    for _ in range(2):  # the second use must say why again, not "unknown thing"
        with pytest.raises(ImportError, match="shout extra"):
            registry.get("broken")
    assert "broken" in registry
