"""dummy: seeded random answers, for measuring the harness itself."""

from __future__ import annotations

import time
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from assay.errors import ConfigError
from assay.models.args import Arg, AutoOrCount, typed_args
from assay.models.base import LM, register_model
from assay.requests.types import (
    GenerateRequest,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingRequest,
    RollingResult,
)

_HOLD_SECONDS = 600


def _unit(seed: int, *parts: str) -> float:
    """A deterministic number in [0, 1) from the request text: independent of batch order."""
    h = zlib.crc32("\x1f".join(parts).encode("utf-8", "surrogatepass"), seed)
    return (h & 0xFFFFFF) / 0x1000000


class DummyLM(LM):
    """Answers every request with a seeded pseudo-random value derived from the request.

    `delay` (seconds per request) makes it behave like a slow model, for timing the harness.
    `hold_after` (a request count) makes it stop answering once that many requests were
    answered and wait, at most ten minutes, to be killed: a test that interrupts a run kills it
    at a known point, however busy the machine, instead of racing the run to its end. Neither
    ever changes an answer. `batch_size` (requests per call,
    hence per cache commit) never changes an answer either. Requests with images are taken:
    their scores also depend on each image's content hash (text-only scores are unchanged).
    """

    accepts_images = True

    def __init__(
        self,
        seed: int = 1234,
        response: str = "lol",
        delay: float = 0.0,
        batch_size: int | None = None,
        hold_after: int | None = None,
    ) -> None:
        self.seed = int(seed)
        self.response = str(response)
        self.delay = float(delay)
        self.batch_size = batch_size
        self.hold_after = hold_after
        self._answered = 0

    def _wait(self, n: int) -> None:
        if self.delay > 0:
            time.sleep(self.delay * n)
        if self.hold_after is not None and self._answered + n > self.hold_after:
            time.sleep(_HOLD_SECONDS)
            raise RuntimeError(
                f"--model dummy: held after {self.hold_after} requests for {_HOLD_SECONDS} s "
                "and nobody stopped the run (hold_after is for tests that kill a run)."
            )
        self._answered += n

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        self._wait(len(requests))
        out = []
        for r in requests:
            u = _unit(self.seed, r.context, r.continuation, *(i.sha256 for i in r.images))
            out.append(LoglikelihoodResult(-20.0 * u, u < 0.25))
        return out

    def loglikelihood_rolling(self, requests: Sequence[RollingRequest]) -> list[RollingResult]:
        self._wait(len(requests))
        return [
            RollingResult(-2.0 * len(r.text) * (0.5 + _unit(self.seed, r.text)), len(r.text))
            for r in requests
        ]

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
        self._wait(len(requests))
        return [self.response for _ in requests]

    @classmethod
    def unloaded(cls, model_args: Mapping[str, Any]) -> LM:
        """Built at once: it loads nothing."""
        return dummy(**model_args)

    def identity(self) -> dict[str, Any]:
        return {"backend": "dummy", "seed": self.seed, "response": self.response}


DUMMY_ARGS = {
    "seed": Arg(int, 1234),
    "response": Arg(str, "lol"),
    "delay": Arg(float, 0.0, expected="a number of seconds >= 0"),
    "batch_size": Arg(AutoOrCount, "auto"),
    "device": Arg(str, None, nullable=True),
    "hold_after": Arg(int, None, nullable=True, minimum=0),
}


@register_model("dummy")
def dummy(**model_args: Any) -> DummyLM:
    """`--model dummy [--model-args seed=N,response=TEXT,delay=SECONDS,hold_after=N]`.

    --batch-size and --device are accepted so run-level flags work with every backend; answers
    never depend on them (nor on `delay` or `hold_after`), so the identity leaves them out.
    """
    args = typed_args("dummy", model_args, DUMMY_ARGS)
    if args["delay"] < 0:
        raise ConfigError(
            f"--model dummy: delay must be a number of seconds >= 0, got {model_args['delay']!r}."
        )
    batch_size = args["batch_size"]
    return DummyLM(
        seed=args["seed"],
        response=args["response"],
        delay=args["delay"],
        batch_size=None if batch_size == "auto" else batch_size,
        hold_after=args["hold_after"],
    )
