"""The Ray executor: a pool of model replicas (Ray actors) fed from a queue of request chunks.

Each actor builds one replica from (backend name, model args), on `gpus_per_replica` GPUs. The
driver keeps the plan, the queue and the response cache: an idle replica takes the next chunk
(so fast replicas take more), each chunk's results are committed to the cache as they arrive
(a replica on the driver's node also files an API's answers one by one, as they arrive, so an
interrupt loses only those in flight), and a replica that dies has its chunk put back at the head of the queue for the others; a dead
replica is never used again. Chunks are the local executor's, so results are the same whatever
the number of replicas.

This is the one place that owns Ray actors. `--executor ray` starts a pool of any backend; a
backend whose own model args ask for replicas (vLLM's `data_parallel_size`, declared through
`LM.replica_plan`) gets its pool from `replica_executor`, so that backend stays one engine in
one process and replicas, their scheduling, loss and counters are handled here once.

Over 500 lines and still one job: the actors, the queue and the loss handling share the
driver's state (what is in flight where), which a split would pass between modules.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from assay.errors import AssayError, ConfigError, ModelError
from assay.execution.executor import (
    Progress,
    commit_chunk,
    compute_chunk,
    plan_requests,
    token_measure,
)
from assay.execution.stats import Answers
from assay.models.base import LM, MODELS, ModelProvenance, ReplicaPlan, TokenCounter, load_model
from assay.prompts.chat import ChatTemplate, Message
from assay.requests.cache import ResponseCache, receiving
from assay.requests.types import (
    GenerateRequest,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    Request,
    RequestKind,
    Result,
    RollingRequest,
    RollingResult,
)

log = logging.getLogger(__name__)

Landing = tuple[str, str]
"""Where a replica files answers as they arrive: (response cache path, the driver's node id)."""


def import_ray(needed_by: str = "--executor ray", otherwise: str = "use --executor local") -> Any:
    """The ray module, or a ConfigError saying what needs it and how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            f"{needed_by} needs Ray, which is not installed. Install it with "
            f"`pip install 'assay[ray]'` (on every node of the cluster), or {otherwise}."
        ) from None
    return ray


@contextmanager
def _portable_errors() -> Iterator[None]:
    """Ray pickles a replica's errors to the driver: keep an error's class when it survives the
    trip, else send its message as the plain ConfigError or ModelError it derives from."""
    try:
        yield
    except AssayError as exc:
        try:
            pickle.loads(pickle.dumps(exc))
        except Exception:
            base = ConfigError if isinstance(exc, ConfigError) else ModelError
            raise base(str(exc)) from None
        raise


class Replica:
    """One model replica, living in a Ray actor (the class is wrapped by ray.remote).

    The model is built by `load`, not in the constructor, so a bad model argument reaches the
    driver as the backend's own error rather than as a dead actor.
    """

    def __init__(self, model_name: str, model_args: dict[str, Any]) -> None:
        self.spec = (model_name, model_args)
        self.model: LM
        self._cache: ResponseCache | None = None

    def load(self) -> dict[str, Any]:
        """Build the model; what the driver needs to know of it (prompts, cache key)."""
        name, args = self.spec
        with _portable_errors():
            self.model = load_model(name, args)
        model = self.model
        return {
            "identity": model.identity(),
            "provenance": model.provenance(),
            "batch_size": model.batch_size,
            "max_length": model.max_length,
            "accepts_messages": model.accepts_messages,
            "thinking_controls": model.thinking_controls,
            "chat_template": model.chat_template() is not None,
            "token_counter": model.token_counter() is not None,
        }

    def run(
        self, kind: RequestKind, requests: Sequence[Request], landing: Landing | None = None
    ) -> list[Result]:
        """One chunk's results. With `landing`, answers that arrive one by one (an API's) enter
        the driver's response cache as they arrive, where this replica shares its disk."""
        with _portable_errors(), receiving(self._landing(landing)):
            return compute_chunk(self.model, kind, requests)

    def _landing(self, landing: Landing | None) -> ResponseCache | None:
        """The driver's response cache, opened once, when this replica runs on the driver's
        node (elsewhere the same path would be another file: answers then wait for their
        chunk, which the driver commits)."""
        if landing is None:
            return None
        import ray

        path, node = landing
        if node != ray.get_runtime_context().get_node_id():
            return None
        if self._cache is None or str(self._cache.path) != path:
            self._cache = ResponseCache(path, self.model.identity())
        return self._cache

    def count_tokens(self, texts: list[str]) -> list[int]:
        with _portable_errors():
            return token_measure(self.model)(texts)

    def render_chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        with _portable_errors():
            template = self.model.chat_template()
            assert template is not None, "load() reported a chat template"
            return str(template(messages, **options))

    def batch_sizes(self) -> list[int]:
        return list(self.model.batch_sizes)

    def prefix_cache_stats(self) -> dict[str, int] | None:
        return self.model.prefix_cache_stats()


class RemoteModel(LM):
    """The backend as the driver sees it: identity and prompt helpers answered by a replica.

    The capabilities are the replica's backend's, so prompt building behaves as in one process.
    """

    def __init__(self, executor: RayExecutor, info: dict[str, Any]) -> None:
        self._executor = executor
        self._identity = info["identity"]
        self._provenance: ModelProvenance = info["provenance"]
        self.accepts_messages = bool(info["accepts_messages"])
        self.thinking_controls = tuple(info["thinking_controls"])
        self.batch_size = info["batch_size"]
        self.max_length = info["max_length"]
        self._has_chat_template: bool = info["chat_template"]
        self._counts_tokens: bool = info["token_counter"]

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def provenance(self) -> ModelProvenance:
        return self._provenance

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        return self._executor.run(requests)  # type: ignore[return-value]

    def loglikelihood_rolling(self, requests: Sequence[RollingRequest]) -> list[RollingResult]:
        return self._executor.run(requests)  # type: ignore[return-value]

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
        return self._executor.run(requests)  # type: ignore[return-value]

    @property
    def batch_sizes(self) -> list[int]:
        return self._executor.call("batch_sizes")

    def chat_template(self) -> ChatTemplate | None:
        return self._render_chat if self._has_chat_template else None

    def token_counter(self) -> TokenCounter | None:
        return self._count_tokens if self._counts_tokens else None

    def prefix_cache_stats(self) -> dict[str, int] | None:
        """The replicas' prefix-cache counters, summed (see RayExecutor.prefix_cache_counts)."""
        return self._executor.prefix_cache_counts()

    def _count_tokens(self, texts: Sequence[str]) -> list[int]:
        # One round trip for a whole plan's texts, not one per text.
        return self._executor.call("count_tokens", list(texts))

    def _render_chat(
        self,
        messages: Sequence[Message],
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
    ) -> str:
        return self._executor.call(
            "render_chat",
            [dict(m) for m in messages],
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
        )


class RayExecutor:
    """Runs requests on `replicas` Ray actors, each holding one model replica.

    Args:
        model_name: backend name (as --model), built in every actor.
        model_args: backend arguments (as --model-args, with batch_size/device merged in).
        replicas: number of actors; default one per `gpus_per_replica` GPUs of the cluster, or
            one on a cluster without GPUs.
        gpus_per_replica: GPUs reserved by each actor (tensor-parallel vLLM uses K); default 1
            when the cluster has GPUs, else 0.
        address: Ray cluster to join ("auto", "HOST:6379", "ray://HOST:10001"); default
            RAY_ADDRESS, else a private local Ray instance (or the one this process already
            joined).
        num_cpus: CPUs reserved by each actor.
        spread: cut every `run` into at least one chunk per live replica. For callers that hand
            over a few requests at a time (run_evals hands one batch), so that the replicas share
            them; chunks then depend on the number of live replicas, so it is off by default and
            results keep the local executor's chunks.
        gpus_if_any: the default of `gpus_per_replica` on a cluster with GPUs.
        asked_by: the model arg that asked for the replicas ("data_parallel_size=4"), named in
            messages and in `describe`; None when --replicas did.
    """

    name = "ray"
    primary = True

    def __init__(
        self,
        model_name: str,
        model_args: dict[str, Any],
        *,
        replicas: int | None = None,
        gpus_per_replica: float | None = None,
        address: str | None = None,
        num_cpus: float = 1,
        spread: bool = False,
        gpus_if_any: float = 1.0,
        asked_by: str | None = None,
    ) -> None:
        self._ray = ray = import_ray()
        self.spread = spread
        self.asked_by = asked_by
        self._started_ray = False
        if not ray.is_initialized():
            # Without an address (flag or RAY_ADDRESS), a private instance: never a cluster that
            # happens to run on this machine.
            address = address or os.environ.get("RAY_ADDRESS") or "local"
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=True)
            except ConnectionError as exc:
                raise ConfigError(
                    f"--ray-address {address}: cannot connect to a Ray cluster ({exc}). Start one "
                    "with `ray start --head` or pass the address it printed."
                ) from None
            self._started_ray = True
        self._node = str(ray.get_runtime_context().get_node_id())
        """The driver's node: replicas there file answers in its cache as they arrive."""
        self.actors: list[Any] = []
        self.alive: list[int] = []
        """Positions in `actors` of the replicas still usable."""
        self.lost = 0
        """Replicas that died during the run."""
        self.requeued = 0
        """Chunks put back on the queue because their replica died."""
        self._counts: dict[int, dict[str, int]] = {}
        """Each replica's prefix-cache counters when last read (a dead one's stay)."""
        self._lost_when_counted = 0
        try:
            self._start(model_name, model_args, replicas, gpus_per_replica, gpus_if_any, num_cpus)
        except AssayError:
            self.close()
            raise

    def _start(
        self,
        model_name: str,
        model_args: dict[str, Any],
        replicas: int | None,
        gpus_per_replica: float | None,
        gpus_if_any: float,
        num_cpus: float,
    ) -> None:
        ray = self._ray
        resources = ray.cluster_resources()
        gpus = float(resources.get("GPU", 0))
        cpus = float(resources.get("CPU", 0))
        default = gpus_if_any if gpus else 0.0
        per = float(gpus_per_replica) if gpus_per_replica is not None else default
        count = replicas if replicas is not None else (int(gpus // per) if per else 1)
        self._check_fits(count, per, gpus, num_cpus, cpus, self.asked_by)
        MODELS.get(model_name)  # an unknown backend fails here, before any actor starts
        actor = ray.remote(num_gpus=per, num_cpus=num_cpus, max_restarts=0)(Replica)
        self.actors = [actor.remote(model_name, model_args) for _ in range(count)]
        self.alive = list(range(count))
        self.chunks_done = [0] * count
        """Chunks each replica computed (fast replicas take more)."""
        self.gpus_per_replica = per
        infos = self._gather([a.load.remote() for a in self.actors])
        self.model: LM = RemoteModel(self, infos[0])
        log.info("ray: %d replicas of %s, %g GPUs each", count, model_name, per)

    @staticmethod
    def _check_fits(
        count: int,
        per: float,
        gpus: float,
        num_cpus: float,
        cpus: float,
        asked_by: str | None = None,
    ) -> None:
        # Actors that do not fit would wait for resources forever: say so instead.
        if count < 1:
            raise ConfigError(
                f"--replicas must be >= 1 (the cluster has {gpus:g} GPUs for {per:g} per replica)."
            )
        if per < 0:
            raise ConfigError("--gpus-per-replica must be >= 0.")
        if asked_by is not None:
            arg = asked_by.split("=")[0]
            if per * count > gpus:
                raise ConfigError(
                    f"--model-args {asked_by}: {count} replicas x {per:g} GPUs need "
                    f"{per * count:g} GPUs; the Ray cluster has {gpus:g}. Lower {arg}."
                )
            if num_cpus * count > cpus:
                raise ConfigError(
                    f"--model-args {asked_by}: {count} replicas need {num_cpus * count:g} CPUs; "
                    f"the Ray cluster has {cpus:g}. Lower {arg} or add nodes."
                )
            return
        if per * count > gpus:
            raise ConfigError(
                f"--replicas {count} x --gpus-per-replica {per:g} needs {per * count:g} GPUs; the "
                f"Ray cluster has {gpus:g}. Lower --replicas, or pass --gpus-per-replica 0 for CPU."
            )
        if num_cpus * count > cpus:
            raise ConfigError(
                f"--replicas {count} needs {num_cpus * count:g} CPUs; the Ray cluster has {cpus:g}. "
                "Lower --replicas or add nodes."
            )

    def _gather(self, refs: list[Any]) -> list[Any]:
        try:
            return self._ray.get(refs)
        except self._ray.exceptions.RayError as exc:
            raise _unwrap(exc) from None

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call a replica method on the first live replica (prompt helpers, batch sizes)."""
        ray = self._ray
        while self.alive:
            replica = self.alive[0]
            try:
                return ray.get(getattr(self.actors[replica], method).remote(*args, **kwargs))
            except ray.exceptions.RayActorError as exc:
                self._lose(replica, exc)
            except ray.exceptions.RayError as exc:
                raise _unwrap(exc) from None
        raise ModelError("ray: every model replica has died.")

    def run(
        self,
        requests: Sequence[Request],
        *,
        cache: ResponseCache | None = None,
        progress: Progress | None = None,
    ) -> Answers:
        """Results of `requests`, in order: chunks dealt to whichever replica is idle."""
        ray = self._ray
        chosen = len(self.model.batch_sizes)
        min_chunks = len(self.alive) if self.spread else 1
        plan = plan_requests(
            requests, cache, commit_chunk(self.model), min_chunks, token_measure(self.model)
        )
        if progress and plan.cached:
            progress(plan.cached)
        landing = (str(cache.path.resolve()), self._node) if cache is not None else None
        queue = deque(range(len(plan.chunks)))
        idle = list(self.alive)
        in_flight: dict[Any, tuple[Any, int]] = {}
        while queue or in_flight:
            while queue and idle:
                replica, index = idle.pop(0), queue.popleft()
                chunk = plan.chunks[index]
                ref = self.actors[replica].run.remote(chunk.kind, chunk.requests, landing)
                in_flight[ref] = (replica, index)
            if not in_flight:
                raise ModelError(
                    f"ray: every model replica has died; {len(queue)} chunks of requests were not "
                    "computed. Completed ones are in the response cache: re-run to resume."
                )
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            replica, index = in_flight.pop(ready[0])
            try:
                results = ray.get(ready[0])
            except ray.exceptions.RayActorError as exc:
                self._lose(replica, exc)
                queue.appendleft(index)
                self.requeued += 1
                continue
            except ray.exceptions.RayError as exc:
                error = _unwrap(exc)
                if isinstance(error, ModelError):
                    raise plan.failed(plan.chunks[index], error, cache) from None
                raise error from None
            answered = plan.complete(plan.chunks[index], results, cache)
            self.chunks_done[replica] += 1
            if progress:
                progress(answered)
            idle.append(replica)
        return plan.answers(self.model.batch_sizes[chosen:])

    def prefix_cache_counts(self) -> dict[str, int] | None:
        """Every replica's prefix-cache counters, summed over replicas.

        A dead replica counts with its last reading. None when a replica keeps no counters, and
        for the first reading after a replica died: what it did since its last reading is lost,
        so a difference spanning its death would be an undercount.
        """
        ray = self._ray
        for replica in list(self.alive):
            try:
                counts = ray.get(self.actors[replica].prefix_cache_stats.remote())
            except ray.exceptions.RayActorError as exc:
                self._lose(replica, exc)
                continue
            except ray.exceptions.RayError as exc:
                raise _unwrap(exc) from None
            if counts is None:
                return None
            self._counts[replica] = counts
        if self.lost != self._lost_when_counted:
            self._lost_when_counted = self.lost
            return None
        if not self._counts:
            return None
        keys = next(iter(self._counts.values())).keys()
        return {key: sum(counts[key] for counts in self._counts.values()) for key in keys}

    def _lose(self, replica: int, exc: Exception) -> None:
        if replica in self.alive:
            self.alive.remove(replica)
            self.lost += 1
            log.warning(
                "ray: a model replica died (%s); its chunk goes back to the queue, %d replicas left.",
                type(exc).__name__,
                len(self.alive),
            )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "replicas": len(self.actors),
            "gpus_per_replica": self.gpus_per_replica,
            "replicas_lost": self.lost,
            "chunks_per_replica": list(self.chunks_done),
            **({"replicas_asked_by": self.asked_by} if self.asked_by else {}),
        }

    def close(self) -> None:
        for actor in self.actors:
            self._ray.kill(actor)
        self.alive = []
        if self._started_ray:
            self._ray.shutdown()
            self._started_ray = False


def replica_executor(
    model_name: str,
    model_args: dict[str, Any],
    plan: ReplicaPlan | None = None,
    *,
    replicas: int | None = None,
    gpus_per_replica: float | None = None,
    address: str | None = None,
    spread: bool = False,
) -> RayExecutor:
    """The Ray executor of a backend: the replicas its model args ask for (`plan`, from
    `LM.replica_plan`), each built from the plan's one-replica args, or without a plan the
    `replicas` of `--executor ray`. A `replicas` that disagrees with the plan is refused;
    `gpus_per_replica` overrides the plan's share."""
    if plan is None:
        return RayExecutor(
            model_name,
            model_args,
            replicas=replicas,
            gpus_per_replica=gpus_per_replica,
            address=address,
            spread=spread,
        )
    if replicas is not None and replicas != plan.replicas:
        raise ConfigError(
            f"--replicas {replicas} and --model-args {plan.asked_by} disagree; give one of them."
        )
    arg = plan.asked_by.split("=")[0]
    import_ray(f"--model-args {plan.asked_by}", f"use {arg}=1")
    return RayExecutor(
        model_name,
        plan.replica_args,
        replicas=plan.replicas,
        gpus_per_replica=gpus_per_replica,
        address=address,
        spread=spread,
        gpus_if_any=plan.gpus_per_replica,
        asked_by=plan.asked_by,
    )


def _unwrap(exc: Exception) -> Exception:
    """The backend's own error (a ConfigError for bad model args...) when Ray carries one."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, AssayError):
        return cause
    if isinstance(cause, Exception):
        return ModelError(f"ray: a model replica failed: {type(cause).__name__}: {cause}")
    return ModelError(f"ray: a model replica failed: {exc}")


__all__ = ["RayExecutor", "RemoteModel", "Replica", "import_ray", "replica_executor"]
