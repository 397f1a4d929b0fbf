"""`OptunaSearch` (RapidFire's ``RFOptuna``): configs proposed by an Optuna study, pruned between
shards, replaced until a budget is spent.

Every `List` and `Range` in the config templates is a search-space parameter named by its dotted
path (``vllm_config.rag.search_cfg.k``): a `Range` becomes ``suggest_int`` / ``suggest_float``
(step and log honoured), a `List` ``suggest_categorical`` (objects are offered under short
labels such as ``RecursiveCharacterTextSplitter(chunk_size=128)``).

``run_evals`` starts ``n_initial`` configs asked from the study. After each shard a config's
objective is reported to its trial at step = shard; the config is pruned (stopped, its trial
told PRUNED, its partial results kept) when Optuna's pruner says so, or, as in RapidFire,
when its best value so far is worse than the median of the other configs' latest values at this
step or before (Optuna's pruners only compare finished trials, and here every trial runs at
once; RapidFire compares the same step only, which never prunes the config that runs first). A
pruned config is replaced by a new trial's config while fewer than ``budget`` trials exist.
Configs that finish tell their trial the final value. The study is ``search._study`` (as in
RapidFire's tutorial). Single objectives only; a study does not outlive the Python process, so
an interrupted Optuna experiment is not resumed.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assay.errors import ConfigError
from assay.pipelines.configs.knobs import Configurable, List, Range, has_knobs

log = logging.getLogger(__name__)

_PRIMITIVES = (type(None), bool, int, float, str)
SearchSpace = list[tuple[str, List | Range]]


def search_space(value: Any, path: str = "") -> SearchSpace:
    """Every `List` / `Range` in `value` with its dotted path (not inside a List's options)."""
    if isinstance(value, List | Range):
        return [(path, value)]
    if isinstance(value, Configurable):
        value = value.knob_params()
    if isinstance(value, Mapping):
        return [
            item
            for k, v in value.items()
            for item in search_space(v, f"{path}.{k}" if path else str(k))
        ]
    return []


def labels(options: Sequence[Any]) -> list[str]:
    """Short distinct labels: primitives as they are, objects by class and differing settings."""
    described = []
    for option in options:
        attrs = option if isinstance(option, Mapping) else getattr(option, "__dict__", None)
        flat = {
            str(k).lstrip("_"): v
            for k, v in (attrs or {}).items()
            if isinstance(v, (*_PRIMITIVES, type))
        }
        prefix = "cfg" if isinstance(option, Mapping) else type(option).__name__
        described.append((prefix, flat if attrs is not None else None))
    keys = {k for _, flat in described if flat for k in flat}
    varying = {k for k in keys if len({repr((f or {}).get(k)) for _, f in described}) > 1}
    out = []
    for option, (prefix, attrs_shown) in zip(options, described, strict=True):
        if attrs_shown is None:
            out.append(repr(option))
            continue
        shown = ", ".join(
            f"{k}={attrs_shown[k]!r}" for k in sorted(varying or keys) if k in attrs_shown
        )
        out.append(f"{prefix}({shown})")
    if len(set(out)) < len(out):
        out = [f"{label}#{i}" for i, label in enumerate(out)]
    return out


def _suggest(trial: Any, name: str, knob: List | Range) -> Any:
    if isinstance(knob, Range):
        options: dict[str, Any] = {"log": knob.log}
        if knob.step is not None:
            options["step"] = knob.step
        if knob.dtype == "int":
            if knob.step is not None:
                options["step"] = int(knob.step)
            return trial.suggest_int(name, int(knob.start), int(knob.end), **options)
        return trial.suggest_float(name, float(knob.start), float(knob.end), **options)
    if all(isinstance(v, _PRIMITIVES) for v in knob.values):
        return trial.suggest_categorical(name, knob.values)
    names = labels(knob.values)
    return knob.values[names.index(trial.suggest_categorical(name, names))]


def substitute(value: Any, chosen: Mapping[str, Any], path: str = "") -> Any:
    """`value` with the knob at each path of `chosen` replaced by its chosen value."""
    if isinstance(value, List | Range):
        return chosen[path]
    if isinstance(value, Configurable):
        params = value.knob_params()
        return type(value)(
            **{k: substitute(v, chosen, f"{path}.{k}" if path else k) for k, v in params.items()}
        )
    if isinstance(value, Mapping) and has_knobs(value):
        return {
            k: substitute(v, chosen, f"{path}.{k}" if path else str(k)) for k, v in value.items()
        }
    return value


@dataclass
class _Trial:
    trial: Any
    values: dict[int, float] = field(default_factory=dict)
    """Objective after each shard (step = shard index)."""


@dataclass(frozen=True)
class ShardDecision:
    """What the search asks of the experiment after a shard."""

    prune: bool = False
    replacement: dict[str, Any] | None = None
    """A new config leaf to start, or None."""


class OptunaSearch:
    """Configs asked from an Optuna study; see the module docstring."""

    def __init__(
        self,
        configs: Any = None,
        trainer_type: str | None = None,
        n_initial: int = 16,
        budget: int = 40,
        objective: str = "minimize:eval_loss",
        sampler: str = "tpe",
        pruner: str | None = "median",
        seed: int = 42,
        granularity: str = "chunk",
    ) -> None:
        if trainer_type is not None:
            raise ConfigError(
                f"RFOptuna trainer_type={trainer_type!r}: assay evaluates; leave trainer_type=None"
            )
        if isinstance(configs, List):
            configs = configs.values
        self.configs = [configs] if isinstance(configs, Mapping) else list(configs or [])
        if not self.configs:
            raise ConfigError("RFOptuna needs configs=[config_template, ...]")
        if isinstance(n_initial, bool) or not isinstance(n_initial, int) or n_initial < 1:
            raise ConfigError(f"RFOptuna n_initial={n_initial!r}: give a positive integer")
        self.n_initial = n_initial
        self.budget = max(int(budget), n_initial)
        parts = [p.strip() for p in objective.split(",")]
        if len(parts) != 1:
            raise ConfigError(
                f"RFOptuna objective={objective!r}: assay optimises one metric; give "
                "'maximize:<metric>' or 'minimize:<metric>'"
            )
        direction, _, metric = parts[0].partition(":")
        if direction not in ("minimize", "maximize") or not metric:
            raise ConfigError(
                f"RFOptuna objective={objective!r}: write 'maximize:<metric>' or "
                "'minimize:<metric>', e.g. 'maximize:NDCG@5'"
            )
        self.direction, self.metric = direction, metric
        if sampler not in ("tpe", "random", "cmaes"):
            raise ConfigError(f"RFOptuna sampler={sampler!r}: choose 'tpe', 'random' or 'cmaes'")
        if pruner not in (None, "median", "hyperband"):
            raise ConfigError(f"RFOptuna pruner={pruner!r}: choose 'median', 'hyperband' or None")
        self.sampler_name, self.pruner_name, self.seed = sampler, pruner, seed
        self.granularity = granularity  # RapidFire's fit-mode setting; shards are the unit here
        self._study: Any = None
        self._spaces: list[SearchSpace] = []
        self._pending: list[Any] = []
        self._trials: dict[int, _Trial] = {}
        self.spawned = 0
        """Trials asked so far (initial and replacements)."""

    # -- proposing configs -----------------------------------------------------------------
    def get_runs(self, seed: int = 42) -> list[dict[str, Any]]:
        """Create the study and the ``n_initial`` first config leaves."""
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        seed = self.seed if self.seed is not None else seed
        samplers = {
            "tpe": optuna.samplers.TPESampler,
            "random": optuna.samplers.RandomSampler,
            "cmaes": optuna.samplers.CmaEsSampler,
        }
        if self.pruner_name == "median":
            pruner: Any = optuna.pruners.MedianPruner(n_startup_trials=max(1, self.n_initial // 2))
        elif self.pruner_name == "hyperband":
            pruner = optuna.pruners.HyperbandPruner()
        else:
            pruner = optuna.pruners.NopPruner()
        self._study = optuna.create_study(
            direction=self.direction, sampler=samplers[self.sampler_name](seed=seed), pruner=pruner
        )
        self._spaces = [search_space(t) for t in self.configs]
        if not any(self._spaces):
            raise ConfigError(
                "RFOptuna: no List or Range in the config templates; put the search space in "
                "them, e.g. search_cfg={'k': Range(5, 20, step=5)}"
            )
        self._trials, self.spawned = {}, 0
        self._pending = []
        runs = []
        for _ in range(self.n_initial):
            trial, leaf = self._ask()
            self._pending.append(trial)
            runs.append(leaf)
        return runs

    def _ask(self) -> tuple[Any, dict[str, Any]]:
        trial = self._study.ask()
        self.spawned += 1
        index = 0
        prefix = ""
        if len(self.configs) > 1:
            index = trial.suggest_categorical(
                "_config_template_idx", list(range(len(self.configs)))
            )
            prefix = f"_t{index}."
        chosen = {path: _suggest(trial, prefix + path, knob) for path, knob in self._spaces[index]}
        leaf = substitute(self.configs[index], chosen)
        if has_knobs(leaf):
            raise ConfigError(
                "RFOptuna: a chosen List option holds more List/Range knobs; give the search "
                "space as separate knobs"
            )
        return trial, dict(leaf)

    def bind(self, config_ids: Sequence[int]) -> None:
        """Attach the initial trials to the experiment's config ids (in get_runs order)."""
        for cid, trial in zip(config_ids, self._pending, strict=True):
            self._trials[cid] = _Trial(trial)
        self._pending = []

    def bind_replacement(self, config_id: int, trial: Any) -> None:
        self._trials[config_id] = _Trial(trial)

    # -- after each shard ------------------------------------------------------------------
    def after_shard(
        self, config_id: int, shard: int, metrics: Mapping[str, Any], last: bool
    ) -> tuple[ShardDecision, Any]:
        """Report the shard's objective; (decision, the replacement's trial or None)."""
        import optuna

        entry = self._trials.get(config_id)
        if entry is None:
            return ShardDecision(), None
        value = _objective(metrics, self.metric, config_id)
        entry.values[shard] = value
        entry.trial.report(value, step=shard)
        if last:
            self._study.tell(entry.trial, value)
            del self._trials[config_id]
            return ShardDecision(), None
        if not (entry.trial.should_prune() or self._below_peers(config_id, shard)):
            return ShardDecision(), None
        self._study.tell(entry.trial, state=optuna.trial.TrialState.PRUNED)
        del self._trials[config_id]
        log.info(
            "RFOptuna: config %d pruned after shard %d (%s = %.4g)",
            config_id,
            shard,
            self.metric,
            value,
        )
        if self.spawned >= self.budget:
            return ShardDecision(prune=True), None
        trial, leaf = self._ask()
        return ShardDecision(prune=True, replacement=leaf), trial

    def _below_peers(self, config_id: int, shard: int) -> bool:
        """Best value so far worse than the median of the other running configs' latest values
        at this shard or before (round-robin order must not shield the config that runs first)."""
        mine = self._trials[config_id].values
        peers = []
        for cid, t in self._trials.items():
            steps = [step for step in t.values if step <= shard]
            if cid != config_id and steps and not math.isnan(t.values[max(steps)]):
                peers.append(t.values[max(steps)])
        if not peers:
            return False
        median = statistics.median(peers)
        if self.direction == "maximize":
            return max(mine.values()) < median
        return min(mine.values()) > median

    def finish(self, config_id: int, metrics: Mapping[str, Any] | None) -> None:
        """Close a trial whose config stopped without finishing (failed, stopped, deleted)."""
        import optuna

        entry = self._trials.pop(config_id, None)
        if entry is None:
            return
        if metrics is None:
            self._study.tell(entry.trial, state=optuna.trial.TrialState.FAIL)
        else:
            self._study.tell(entry.trial, state=optuna.trial.TrialState.PRUNED)


def _objective(metrics: Mapping[str, Any], metric: str, config_id: int) -> float:
    entry = metrics.get(metric)
    value = entry.get("value") if isinstance(entry, Mapping) else entry
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ConfigError(
            f"RFOptuna objective {metric!r}: config {config_id} reports no numeric {metric!r} "
            f"(its metrics: {sorted(metrics)}); name one of them in objective="
        )
    return float(value)


RFOptuna = OptunaSearch
