"""Engines shared by configs, and generation with per-row error capture.

One engine is built per distinct (backend, model args); configs that differ only in sampling
parameters share it, and each request carries its own config's `GenParams`. Requests go through
an executor (deduplication, response cache), so an identical prompt asked twice with the same
parameters costs one call, within a run and across resumed runs. An engine is a local model, or
with `ray_engines` a pool of Ray replicas that every config of that model shares; a model whose
args ask for replicas (vLLM's `data_parallel_size`) gets its pool of Ray replicas either way.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.errors import ConfigError
from assay.execution.executor import Executor
from assay.execution.local import LocalExecutor
from assay.models.base import LM
from assay.pipelines.configs.model_configs import ModelConfig
from assay.requests.types import GenerateRequest, GenParams, Messages

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GenerationFailure:
    """A row whose generation raised: recorded and counted, never scored."""

    message: str


def to_prompt(prompt: Any, where: str) -> str | Messages:
    """A user prompt (text, or chat messages as dicts or (role, content) pairs) as a request prompt."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list | tuple):
        messages = []
        for message in prompt:
            if isinstance(message, Mapping) and "role" in message and "content" in message:
                messages.append((str(message["role"]), str(message["content"])))
            elif isinstance(message, list | tuple) and len(message) == 2:
                messages.append((str(message[0]), str(message[1])))
            else:
                raise ConfigError(
                    f"{where}: a chat prompt must be a list of {{'role': ..., 'content': ...}} "
                    f"messages, got an element {message!r}"
                )
        return tuple(messages)
    raise ConfigError(
        f"{where}: each prompt must be a string or a list of chat messages, "
        f"got {type(prompt).__name__}"
    )


EngineFactory = Callable[[ModelConfig], Executor]
"""Builds the executor that runs a model config's requests."""


def local_engine(config: ModelConfig) -> Executor:
    """The config's model, in this process; or the replicas its model args ask for (vLLM's
    `data_parallel_size`) on Ray, each batch spread over them."""
    from assay.run.backend import replica_plan

    plan = replica_plan(config.backend, config.model_args())
    if plan is not None:
        from assay.execution.ray import replica_executor

        return replica_executor(config.backend, config.model_args(), plan, spread=True)
    return LocalExecutor(config.build())


def ray_engines(
    replicas: int | None = None,
    gpus_per_replica: float | None = None,
    ray_address: str | None = None,
) -> EngineFactory:
    """Engines as pools of Ray replicas (see assay.execution.ray.RayExecutor).

    API configs stay in this process: their backend already sends requests concurrently under
    one rate limit, and their key is handed over through this process's environment. A batch is
    spread over the replicas (about one chunk each), since run_evals hands one batch at a time.
    """
    from assay.execution.ray import import_ray, replica_executor
    from assay.pipelines.configs.model_configs import OpenAIAPIModelConfig
    from assay.run.backend import replica_plan

    import_ray()  # a clear error now rather than at the first shard

    def build(config: ModelConfig) -> Executor:
        if isinstance(config, OpenAIAPIModelConfig):
            return local_engine(config)
        args = config.model_args()
        return replica_executor(
            config.backend,
            args,
            replica_plan(config.backend, args),
            replicas=replicas,
            gpus_per_replica=gpus_per_replica,
            address=ray_address,
            spread=True,
        )

    return build


def actor_options(
    executor: str,
    num_actors: int | None,
    gpus_per_actor: float | None,
    cpus_per_actor: float | None,
    *,
    num_cpus: float | None,
    num_gpus: float | None,
) -> dict[str, Any]:
    """run_evals' RapidFire actor settings as Ray replica options (none for the local executor,
    which says so), checked against the experiment's CPUs and GPUs."""
    if isinstance(num_actors, bool) or not (num_actors is None or num_actors >= 1):
        raise ConfigError(f"run_evals num_actors={num_actors!r}: give a positive integer")
    if executor == "local":
        if num_actors not in (None, 1) or gpus_per_actor or cpus_per_actor:
            # Same results either way: only the schedule differs, so say it and go on.
            log.warning(
                "run_evals num_actors=%s, gpus_per_actor=%s, cpus_per_actor=%s: the local "
                "executor runs one config's shard at a time in this process (API configs "
                "still send num_concurrent requests at once); results are the same. For "
                "parallel model replicas pass Experiment(..., executor='ray').",
                num_actors,
                gpus_per_actor,
                cpus_per_actor,
            )
        return {}
    actors = num_actors or 1
    for what, per_actor, available in (
        ("GPU", gpus_per_actor, num_gpus),
        ("CPU", cpus_per_actor, num_cpus),
    ):
        if per_actor is not None and available is not None and actors * per_actor > available:
            raise ConfigError(
                f"run_evals: {actors} actors x {per_actor} {what}(s) exceed the experiment's "
                f"{available} {what}(s); lower num_actors or {what.lower()}s_per_actor"
            )
    options: dict[str, Any] = {}
    if num_actors is not None:
        options["replicas"] = num_actors
    if gpus_per_actor is not None:
        options["gpus_per_replica"] = gpus_per_actor
    return options


class EnginePool:
    """Builds each distinct engine once and keeps the most recently used ones loaded."""

    def __init__(
        self,
        cache_dir: Path | None = None,
        max_loaded: int = 2,
        factory: EngineFactory = local_engine,
    ) -> None:
        self.cache_dir = cache_dir
        self.max_loaded = max(1, max_loaded)
        self.factory = factory
        self._engines: OrderedDict[str, tuple[Executor, Any]] = OrderedDict()
        self.builds = 0
        """How many engines were built (tests and benchmarks read it)."""

    @property
    def loaded_keys(self) -> list[str]:
        return list(self._engines)

    def get(self, config: ModelConfig) -> tuple[LM, Any]:
        """The engine of `config` and its response cache (None without a cache directory)."""
        executor, cache = self._executor(config)
        return executor.model, cache

    def _executor(self, config: ModelConfig) -> tuple[Executor, Any]:
        key = config.engine_key()
        if key in self._engines:
            self._engines.move_to_end(key)
            return self._engines[key]
        while len(self._engines) >= self.max_loaded:
            _, (old, old_cache) = self._engines.popitem(last=False)
            old.close()
            if old_cache is not None:
                old_cache.close()
        executor = self.factory(config)
        self.builds += 1
        cache = None
        if self.cache_dir is not None:
            from assay.requests.cache import ResponseCache

            cache = ResponseCache(self.cache_dir / "responses.sqlite", executor.model.identity())
        self._engines[key] = (executor, cache)
        return executor, cache

    def generate(
        self, config: ModelConfig, prompts: Sequence[str | Messages], params: GenParams
    ) -> list[str | GenerationFailure]:
        """One output per prompt; a prompt whose generation fails yields a GenerationFailure."""
        executor, cache = self._executor(config)
        requests = [GenerateRequest(prompt, params) for prompt in prompts]
        try:
            return [str(r) for r in executor.run(requests, cache=cache)]
        except Exception as exc:
            if len(requests) == 1:
                return [_failure_of(exc)]
        # Retry row by row so one bad prompt does not take its batch down with it.
        return [_generate_one(executor, request, cache) for request in requests]

    def close(self) -> None:
        for executor, cache in self._engines.values():
            executor.close()
            if cache is not None:
                cache.close()
        self._engines.clear()


def _failure_of(exc: Exception) -> GenerationFailure:
    return GenerationFailure(f"{type(exc).__name__}: {exc}")


def _generate_one(
    executor: Executor, request: GenerateRequest, cache: Any
) -> str | GenerationFailure:
    try:
        return str(executor.run([request], cache=cache)[0])
    except Exception as exc:
        return _failure_of(exc)
