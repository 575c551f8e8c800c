"""Circuit breakers per (provider, model): stop sending traffic to an upstream that fails.

Pure and clock-injected, so the state machine is tested without sleeping. Each replica
keeps its own breakers (it sees its own share of the traffic, which is enough to notice
an upstream that is down); they live on one event loop, so no locks.

    closed ──(error rate ≥ threshold over the window, with ≥ min requests)──> open
    open ──(cool-down elapsed)──> half_open: one probe is let through, others refused
    half_open ──probe succeeds──> closed (fresh window)
    half_open ──probe fails──> open (a new cool-down)
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from enum import IntEnum

from gateway.domain.routing_settings import BreakerSettings

Clock = Callable[[], float]

# the window is kept as this many buckets: memory stays constant at any request rate
_BUCKETS = 10


class BreakerState(IntEnum):
    """Values are what the metrics gauge exports."""

    CLOSED = 0
    OPEN = 1
    HALF_OPEN = 2


class CircuitBreaker:
    def __init__(self, settings: BreakerSettings | None = None, clock: Clock = time.monotonic):
        self._settings = settings or BreakerSettings()
        self._clock = clock
        self._state = BreakerState.CLOSED
        self._opened_at = 0.0
        self._probe_started: float | None = None
        # (bucket index, attempts, failures), oldest first
        self._buckets: collections.deque[list[int]] = collections.deque()
        self.opened_count = 0  # how many times it opened, for logs and tests

    @property
    def settings(self) -> BreakerSettings:
        return self._settings

    def update_settings(self, settings: BreakerSettings) -> None:
        """New knobs from a live routing change; the state and window are kept."""
        if settings.window_s != self._settings.window_s:
            self._buckets.clear()  # bucket indices are in units of the old width
        self._settings = settings

    @property
    def state(self) -> BreakerState:
        if (
            self._state is BreakerState.OPEN
            and self._clock() - self._opened_at >= self._settings.cooldown_s
        ):
            self._state = BreakerState.HALF_OPEN
            self._probe_started = None
        return self._state

    def allow(self) -> bool:
        """Whether an attempt may go out now; in half-open, True takes the one probe slot.

        Every True must be followed by exactly one of record_success, record_failure or
        release (the attempt ended without a verdict on the upstream, e.g. a 400 or a
        client that went away).
        """
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.OPEN:
            return False
        now = self._clock()
        if (
            self._probe_started is not None
            and now - self._probe_started < self._settings.probe_timeout_s
        ):
            return False
        self._probe_started = now
        return True

    def would_allow(self) -> bool:
        """Like allow() but takes nothing: for planning a route before the attempt."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.OPEN:
            return False
        return (
            self._probe_started is None
            or self._clock() - self._probe_started >= self._settings.probe_timeout_s
        )

    def retry_in(self) -> float:
        """Seconds until an open breaker lets a probe through (0 if it would now)."""
        if self.state is not BreakerState.OPEN:
            return 0.0
        return max(0.0, self._settings.cooldown_s - (self._clock() - self._opened_at))

    def record_success(self) -> None:
        state = self.state
        if state is BreakerState.HALF_OPEN:
            if self._probe_started is not None:
                self._close()
            return
        if state is BreakerState.CLOSED:
            self._count(failed=False)

    def record_failure(self) -> None:
        state = self.state
        if state is BreakerState.HALF_OPEN:
            if self._probe_started is not None:
                self._open()
            return
        if state is BreakerState.CLOSED:
            self._count(failed=True)
            attempts, failures = self._totals()
            if (
                attempts >= self._settings.min_requests
                and failures >= self._settings.error_rate * attempts
            ):
                self._open()

    def release(self) -> None:
        """The attempt let through ended with no verdict on the upstream's health."""
        if self._state is BreakerState.HALF_OPEN:
            self._probe_started = None

    def _open(self) -> None:
        self._state = BreakerState.OPEN
        self._opened_at = self._clock()
        self._probe_started = None
        self._buckets.clear()
        self.opened_count += 1

    def _close(self) -> None:
        self._state = BreakerState.CLOSED
        self._probe_started = None
        self._buckets.clear()

    def _bucket_width(self) -> float:
        return self._settings.window_s / _BUCKETS

    def _count(self, *, failed: bool) -> None:
        index = int(self._clock() / self._bucket_width())
        self._expire(index)
        if not self._buckets or self._buckets[-1][0] != index:
            self._buckets.append([index, 0, 0])
        bucket = self._buckets[-1]
        bucket[1] += 1
        bucket[2] += int(failed)

    def _expire(self, current_index: int) -> None:
        while self._buckets and self._buckets[0][0] <= current_index - _BUCKETS:
            self._buckets.popleft()

    def _totals(self) -> tuple[int, int]:
        self._expire(int(self._clock() / self._bucket_width()))
        return sum(b[1] for b in self._buckets), sum(b[2] for b in self._buckets)

    def window_counts(self) -> tuple[int, int]:
        """(attempts, failures) in the current window."""
        return self._totals()


class BreakerBoard:
    """Every breaker of one replica, keyed by (provider, model), created on first use."""

    def __init__(self, settings: BreakerSettings | None = None, clock: Clock = time.monotonic):
        self._settings = settings or BreakerSettings()
        self._clock = clock
        self._breakers: dict[tuple[str, str], CircuitBreaker] = {}

    def get(self, provider: str, model: str) -> CircuitBreaker:
        key = (provider, model)
        breaker = self._breakers.get(key)
        if breaker is None:
            breaker = self._breakers[key] = CircuitBreaker(self._settings, self._clock)
        return breaker

    def update_settings(self, settings: BreakerSettings) -> None:
        self._settings = settings
        for breaker in self._breakers.values():
            breaker.update_settings(settings)

    def states(self) -> dict[tuple[str, str], BreakerState]:
        """For the metrics gauge: (provider, model) -> state."""
        return {key: b.state for key, b in self._breakers.items()}

    def unavailable(self) -> dict[tuple[str, str], float]:
        """(provider, model) -> seconds until it may take traffic again, for those refusing."""
        return {key: b.retry_in() for key, b in self._breakers.items() if not b.would_allow()}
