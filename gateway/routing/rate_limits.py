"""Requests- and tokens-per-minute caps per model, counted in a sliding window.

Pure and clock-injected. Each replica counts only the traffic it sends, so a cluster
cap is split evenly: with N replicas each one allows ceil(cap / N). Serve spreads
requests across replicas, so the sum stays close to the cap without any shared state
on the request path (a hop per request would cost more than a cap is worth).

Requests are counted when they are admitted, tokens when their usage is known:
a cap is a ceiling on what the upstream sees, and the window catches up within a
minute.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable, Mapping

from gateway.domain.routing_settings import ModelCaps

Clock = Callable[[], float]

WINDOW_S = 60.0
_BUCKET_S = 1.0


class _Window:
    """A sum over the last 60 s, kept as one-second buckets."""

    def __init__(self) -> None:
        self._buckets: collections.deque[list[float]] = collections.deque()  # [second, sum]

    def add(self, now: float, amount: float) -> None:
        second = math.floor(now / _BUCKET_S)
        self._expire(now)
        if not self._buckets or self._buckets[-1][0] != second:
            self._buckets.append([second, 0.0])
        self._buckets[-1][1] += amount

    def total(self, now: float) -> float:
        self._expire(now)
        return sum(b[1] for b in self._buckets)

    def wait_until_below(self, now: float, cap: float) -> float:
        """Seconds until the window's sum drops below `cap` as old buckets expire."""
        self._expire(now)
        total = sum(b[1] for b in self._buckets)
        for second, amount in self._buckets:
            if total < cap:
                break
            total -= amount
            # a bucket stays in the window until a full window after its start
            expires_at = second * _BUCKET_S + WINDOW_S
            wait = expires_at - now
            if total < cap:
                return max(0.0, wait)
        return 0.0

    def _expire(self, now: float) -> None:
        oldest_kept = math.floor(now / _BUCKET_S) - int(WINDOW_S / _BUCKET_S) + 1
        while self._buckets and self._buckets[0][0] < oldest_kept:
            self._buckets.popleft()


class RateLimiter:
    def __init__(
        self,
        caps: Mapping[str, ModelCaps] | None = None,
        replicas: int = 1,
        clock: Clock = time.monotonic,
    ):
        self._clock = clock
        self._requests: dict[str, _Window] = collections.defaultdict(_Window)
        self._tokens: dict[str, _Window] = collections.defaultdict(_Window)
        self._caps: dict[str, tuple[int | None, int | None]] = {}
        self.update_caps(caps or {}, replicas)

    def update_caps(self, caps: Mapping[str, ModelCaps], replicas: int = 1) -> None:
        """New caps from a live routing change; the counts so far are kept."""
        share = max(1, replicas)
        self._caps = {
            model: (
                math.ceil(c.rpm / share) if c.rpm else None,
                math.ceil(c.tpm / share) if c.tpm else None,
            )
            for model, c in caps.items()
        }

    def record_request(self, model: str) -> None:
        self._requests[model].add(self._clock(), 1)

    def record_tokens(self, model: str, tokens: int) -> None:
        if tokens > 0:
            self._tokens[model].add(self._clock(), tokens)

    def wait_time(self, model: str) -> float:
        """0 if `model` may take a request now, else seconds until it may."""
        rpm, tpm = self._caps.get(model, (None, None))
        now = self._clock()
        wait = 0.0
        if rpm is not None and self._requests[model].total(now) >= rpm:
            wait = max(wait, self._requests[model].wait_until_below(now, rpm))
        if tpm is not None and self._tokens[model].total(now) >= tpm:
            wait = max(wait, self._tokens[model].wait_until_below(now, tpm))
        return wait

    def at_cap(self) -> dict[str, float]:
        """Every capped model that is at its cap now -> seconds until it has room."""
        out = {}
        for model in self._caps:
            wait = self.wait_time(model)
            if wait > 0:
                out[model] = wait
        return out

    def usage(self, model: str) -> tuple[int, int]:
        """(requests, tokens) in the last minute on this replica."""
        now = self._clock()
        return int(self._requests[model].total(now)), int(self._tokens[model].total(now))
