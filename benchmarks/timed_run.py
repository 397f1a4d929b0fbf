"""Run assay or lm-eval with light counters: where a run's time goes, and what it computes.

    python benchmarks/timed_run.py TIMINGS.json assay|lm-eval [--floor] -- ARGS...

Runs the tool's command line (`assay ARGS` or `lm_eval ARGS`) in this process and writes, at
exit, a JSON of events (seconds since this script started) and counters:

- `load`: [start, end] of building the model (in assay a background thread by default);
  `waited`: how long requests waited for it.
- `first_request`, `last_request_end`; `requests`: seconds inside the backend's request methods
  (loglikelihood, loglikelihood_rolling, generate_until); `encode`: assay's tokenization within
  them; `forward`: inside the model's forward during requests; `forward_calls`.
- `tokens_padded` / `tokens_real`: token positions of those forward calls' input ids (rows times
  width), and the real ones (assay's rows before padding; lm-eval: not known, so padded).
- `write`: seconds writing the results and samples files; `end`: when the tool's command
  returned (what follows is its exit: atexit handlers, interpreter teardown).
- `floor` (with --floor, assay only): after the run, in the same process and with the torch
  thread count each call ran with, bare `model(input_ids)` passes over the very input ids of
  every forward call the requests made, without masks, caches or pruning: the raw-forward time
  for the tokens assay computed. Best of 2 repeats.

The patches are installed when the patched modules are first imported (an import hook), so
nothing is imported earlier than the tool itself imports it. Counting costs a clock read per
call; the floor replay keeps the input ids, so it runs in an extra, untimed run.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

START = time.perf_counter()
EVENTS: dict[str, Any] = {
    "requests": 0.0,
    "encode": 0.0,
    "forward": 0.0,
    "forward_calls": 0,
    "tokens_padded": 0,
    "tokens_real": 0,
    "write": 0.0,
    "waited": 0.0,
}
_LOCAL = threading.local()
"""`depth`: request methods running in this thread (planning may run in another meanwhile)."""
_REPLAY: list[tuple[Any, int]] = []
_MODELS: list[Any] = []


def _now() -> float:
    return time.perf_counter() - START


def _add(key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, adding its duration to EVENTS[key]."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            EVENTS[key] += time.perf_counter() - began

    return timed


def _depth() -> int:
    return getattr(_LOCAL, "depth", 0)


def _request(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A backend request method: first/last request times and time inside requests."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        EVENTS.setdefault("first_request", _now())
        _LOCAL.depth = _depth() + 1
        try:
            return _add("requests", fn)(*args, **kwargs)
        finally:
            _LOCAL.depth -= 1
            EVENTS["last_request_end"] = _now()

    return timed


def _loading(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The backend's constructor: the load's start and end, and its model's forward counted."""

    def timed(self: Any, *args: Any, **kwargs: Any) -> None:
        began = _now()
        fn(self, *args, **kwargs)
        EVENTS["load"] = [began, _now()]
        model = self.model
        _MODELS.append(model)
        inner = model.forward

        def forward(*f_args: Any, **f_kwargs: Any) -> Any:
            if not _depth():
                return inner(*f_args, **f_kwargs)
            import torch

            ids = f_kwargs.get("input_ids", f_args[0] if f_args else None)
            if ids is not None:
                EVENTS["tokens_padded"] += int(ids.numel())
                if _FLOOR:
                    _REPLAY.append((ids.detach().clone(), torch.get_num_threads()))
            EVENTS["forward_calls"] += 1
            return _add("forward", inner)(*f_args, **f_kwargs)

        model.forward = forward

    return timed


def _patch_assay_model(module: Any) -> None:
    cls = module.HuggingFaceLM
    cls.__init__ = _loading(cls.__init__)
    for name in ("loglikelihood", "loglikelihood_rolling", "generate_until"):
        setattr(cls, name, _request(getattr(cls, name)))


def _patch_assay_score(module: Any) -> None:
    inner = module.Scorer._run_rows

    def run_rows(self: Any, rows: Any, *args: Any, **kwargs: Any) -> Any:
        EVENTS["tokens_real"] += sum(len(row.tokens) for row in rows)
        return inner(self, rows, *args, **kwargs)

    module.Scorer._run_rows = run_rows


def _in_requests(key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, adding its duration to EVENTS[key] when a request called it (planning also counts
    tokens)."""
    timed = _add(key, fn)
    return lambda *args, **kwargs: (timed if _depth() else fn)(*args, **kwargs)


def _patch_assay_tokens(module: Any) -> None:
    cls = module.TokenizerView
    for name in ("encode", "encode_pairs", "encode_prompts"):
        setattr(cls, name, _in_requests("encode", getattr(cls, name)))


def _patch_assay_writer(module: Any) -> None:
    cls = module.OutputDir
    for name in ("write_results", "write_samples"):
        setattr(cls, name, _add("write", getattr(cls, name)))


def _patch_deferred(module: Any) -> None:
    cls = module.DeferredBackend
    cls._take = _add("waited", cls._take)


def _patch_lmeval_model(module: Any) -> None:
    cls = module.HFLM
    cls.__init__ = _loading(cls.__init__)
    for name in ("loglikelihood", "loglikelihood_rolling", "generate_until"):
        setattr(cls, name, _request(getattr(cls, name)))


def _patch_lmeval_tracker(module: Any) -> None:
    cls = module.EvaluationTracker
    for name in ("save_results_aggregated", "save_results_samples"):
        setattr(cls, name, _add("write", getattr(cls, name)))


PATCHES: dict[str, Callable[[Any], None]] = {
    "assay.models.hf.model": _patch_assay_model,
    "assay.models.hf.score": _patch_assay_score,
    "assay.models.tokens": _patch_assay_tokens,
    "assay.results.writer": _patch_assay_writer,
    "assay.run.deferred": _patch_deferred,
    "lm_eval.models.huggingface": _patch_lmeval_model,
    "lm_eval.loggers.evaluation_tracker": _patch_lmeval_tracker,
}


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Runs PATCHES[name] on a module right after it is first executed."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in PATCHES:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def patched(module: Any) -> None:
            exec_module(module)
            PATCHES[name](module)

        loader.exec_module = patched  # type: ignore[method-assign]
        return spec


def _replay_floor() -> None:
    """Bare forward passes over the recorded input ids (best of 2), in EVENTS['floor']."""
    import torch

    model = _MODELS[-1]
    forward = model.forward
    threads = torch.get_num_threads()
    best = float("inf")
    with torch.inference_mode():
        for _ in range(2):
            began = time.perf_counter()
            for ids, n in _REPLAY:
                torch.set_num_threads(n)
                forward(input_ids=ids, use_cache=False)
            best = min(best, time.perf_counter() - began)
    torch.set_num_threads(threads)
    EVENTS["floor"] = best
    EVENTS["floor_calls"] = len(_REPLAY)


def _write(path: str) -> None:
    EVENTS.setdefault("end", _now())
    if _FLOOR and _REPLAY:
        _LOCAL.depth = 0  # the replay is not a request
        _replay_floor()
    with open(path, "w") as handle:
        json.dump(EVENTS, handle, indent=1)


_FLOOR = False


def main() -> None:
    global _FLOOR
    out, which, *rest = sys.argv[1:]
    _FLOOR = rest[:1] == ["--floor"]
    args = rest[rest.index("--") + 1 :]
    sys.meta_path.insert(0, _PatchOnImport())
    atexit.register(_write, out)
    if which == "assay":
        from assay.cli import main as run

        code = run(args)
        EVENTS["end"] = _now()
        sys.exit(code)
    sys.argv = ["lm_eval", *args]
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()
    EVENTS["end"] = _now()


if __name__ == "__main__":
    main()
