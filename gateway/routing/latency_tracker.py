"""Live latency figures per model: exponentially weighted moving averages.

The `high` and `normal` priorities route on these, so they follow what each upstream
does now, not what a static table says. Each replica keeps its own (it measures its
own requests, which are a fair sample of the traffic). Only successful attempts are
measured: a failure's latency says nothing about the next answer, and the circuit
breaker already deals with failing upstreams.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(slots=True)
class _Ewma:
    alpha: float
    value: float | None = None
    samples: int = 0

    def add(self, x: float) -> None:
        self.samples += 1
        # the first samples are averaged plainly so that one early outlier does not
        # dominate for the next 1/alpha requests
        weight = max(self.alpha, 1.0 / self.samples)
        self.value = x if self.value is None else self.value + weight * (x - self.value)


@dataclasses.dataclass(frozen=True, slots=True)
class LatencyFigures:
    latency_s: float | None  # whole upstream call, successful ones only
    ttft_s: float | None  # time to first token, streams only
    samples: int


class LatencyTracker:
    """`alpha` is the weight of the newest sample; 0.2 follows a change within ~10 requests."""

    def __init__(self, alpha: float = 0.2):
        if not 0 < alpha <= 1:
            raise ValueError("alpha must be in (0, 1]")
        self._alpha = alpha
        self._latency: dict[str, _Ewma] = {}
        self._ttft: dict[str, _Ewma] = {}

    def observe(self, model: str, latency_s: float, ttft_s: float | None = None) -> None:
        if latency_s < 0 or (ttft_s is not None and ttft_s < 0):
            raise ValueError("latencies cannot be negative")
        self._latency.setdefault(model, _Ewma(self._alpha)).add(latency_s)
        if ttft_s is not None:
            self._ttft.setdefault(model, _Ewma(self._alpha)).add(ttft_s)

    def figures(self, model: str) -> LatencyFigures:
        lat = self._latency.get(model)
        ttft = self._ttft.get(model)
        return LatencyFigures(
            latency_s=lat.value if lat else None,
            ttft_s=ttft.value if ttft else None,
            samples=lat.samples if lat else 0,
        )

    def latencies(self) -> dict[str, float]:
        """model -> EWMA latency in seconds, for the routing policy (measured models only)."""
        return {m: e.value for m, e in self._latency.items() if e.value is not None}
