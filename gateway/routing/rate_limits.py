"""Requests- and tokens-per-minute limits as token buckets, shared across replicas.

A limit of N per minute is a bucket of N units refilled at N per minute (a burst of N,
then N per minute). With a store behind it (PostgreSQL's `limit_buckets`, synced by
`gateway.quota.syncer` from a background task), the bucket is one for the whole cluster:
each replica holds a slice of units (`BucketSlice.balance`) and spends it locally, and
the syncer puts back what it did not use and takes a new slice; no request waits for the
database unless its replica's slice is empty. Without a store (no database) each replica
keeps a bucket of its own, sized at its share of the limit.

Pure and clock-injected. The per-key limits (`gateway.quota.guard`) and the per-model
caps (`RateLimiter`, which the routing policy asks what is at its cap) both use it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping

from gateway.domain.routing_settings import ModelCaps

Clock = Callable[[], float]

WINDOW_S = 60.0
# how much a slice keeps beyond what it used in one sync interval: enough that a steady
# stream of requests is admitted locally between syncs
DEMAND_HEADROOM = 2.0
DEMAND_SMOOTHING = 0.5
HORIZON_S = 1.0  # one sync interval
# use is measured over at least this long: rounds that a shortage starts come close
# together, and a use per round would shrink the slice, which would start more rounds
MIN_SAMPLE_S = 0.25
# room for a burst while the slice is in use: up to this many units, at most this share of
# the capacity (a small limit is not stranded in one replica's slice)
BURST_UNITS = 64
BURST_SHARE = 0.01


class BucketSlice:
    """This replica's share of one token bucket of `capacity` units per minute."""

    def __init__(self, name: str, capacity: int, *, clock: Clock, shared: bool) -> None:
        self.name = name
        self.capacity = capacity
        self.shared = shared
        self._clock = clock
        self._at = clock()
        # units this replica may spend now; below 0 is a debt (forced takes), paid back
        # by the next sync (shared) or by the refill (local)
        self.balance = 0.0 if shared else float(capacity)
        self.level = float(capacity)  # the shared bucket after the last sync
        self._level_at = self._at
        self.used = 0.0  # spent since the rate's last sample
        self.demand = 0.0  # smoothed use per second
        self._sampled_at = self._at - HORIZON_S
        self.wanted = 0.0  # what requests waiting for the next sync need, summed
        # units the last sync brought for requests that waited: kept from the next sync's
        # give-back. The waiters wake a few turns of the loop after the sync ends, and a
        # sync that a newcomer's shortage starts at once would otherwise hand them back
        # first, round after round, until the waiters ran out of rounds and were refused
        self.promised = 0.0
        self._asked_for_waiters = 0

    @property
    def rate_per_s(self) -> float:
        return self.capacity / WINDOW_S

    def resize(self, capacity: int) -> None:
        if not self.shared:  # what was spent stays spent under the new size
            self._refill()
            self.balance = min(float(capacity), self.balance + capacity - self.capacity)
        self.capacity = capacity

    def _refill(self) -> None:
        now = self._clock()
        if not self.shared:
            gained = (now - self._at) * self.rate_per_s
            self.balance = min(float(self.capacity), self.balance + gained)
        self._at = now

    def try_take(self, units: float) -> bool:
        self._refill()
        if self.balance >= units:
            self.balance -= units
            self.used += units
            self.promised = max(0.0, self.promised - units)
            return True
        return False

    def force_take(self, units: float) -> None:
        """Count units that were spent whatever the balance (tokens beyond a reservation,
        an attempt already decided)."""
        self._refill()
        self.balance -= units
        self.used += units

    def give(self, units: float) -> None:
        """Units reserved and not used (a request's tokens below its worst case)."""
        self._refill()
        self.balance += units
        self.used -= units
        if not self.shared:
            self.balance = min(float(self.capacity), self.balance)

    def level_now(self) -> float:
        """The shared bucket's level as of now: the last sync's plus the refill since."""
        gained = (self._clock() - self._level_at) * self.rate_per_s
        return min(float(self.capacity), self.level + gained)

    def remaining(self) -> float:
        """Units left to this caller now: the local balance and what the shared bucket
        had at the last sync (an estimate between syncs)."""
        self._refill()
        if not self.shared:
            return max(0.0, self.balance)
        return max(0.0, min(float(self.capacity), self.balance + self.level_now()))

    def reset_s(self) -> float:
        """Seconds until the bucket is full again (OpenAI's `x-ratelimit-reset-*`)."""
        return (self.capacity - self.remaining()) / self.rate_per_s if self.capacity else 0.0

    def wait_s(self, units: float = 1.0) -> float:
        """0 if `units` may be spent now or a sync can bring them, else the seconds until
        the refill does."""
        self._refill()
        level = self.level_now() if self.shared else 0.0
        if self.balance >= units or (self.shared and level >= units):
            return 0.0
        missing = units - self.balance - level
        return max(0.0, missing) / self.rate_per_s

    # -- the syncer's side ----------------------------------------------------------------

    def begin_sync(self) -> tuple[int, int]:
        """(units to put back, negative for a debt; units wanted) for the next sync; the
        units put back leave the balance now, so none is spent twice meanwhile."""
        self._refill()
        elapsed = self._at - self._sampled_at
        if elapsed >= MIN_SAMPLE_S:
            current = max(0.0, self.used) / elapsed
            self.demand = DEMAND_SMOOTHING * self.demand + (1 - DEMAND_SMOOTHING) * current
            if self.demand < 0.01:
                self.demand = 0.0  # idle: the slice goes back whole and stops syncing
            self.used = 0.0
            self._sampled_at = self._at
        target = math.ceil(self.demand * HORIZON_S * DEMAND_HEADROOM)
        if self.demand > 0:
            target = max(target, min(BURST_UNITS, math.floor(self.capacity * BURST_SHARE)))
        # promised units stay one round at most: a waiter that gave up leaves them to
        # the next give-back
        balance = math.floor(self.balance)
        kept = min(math.ceil(self.promised), max(0, balance))
        self.promised = 0.0
        whole = balance - kept
        give_back = whole - target if whole > target else min(0, whole)
        self.balance -= give_back
        self._asked_for_waiters = math.ceil(self.wanted)
        want = max(0, target - math.floor(self.balance) + kept) + self._asked_for_waiters
        self.wanted = 0.0  # the requests still short after this round ask again
        return give_back, want

    def end_sync(self, granted: int, level: float) -> None:
        self.balance += granted
        self.promised = float(min(granted, self._asked_for_waiters))
        self._asked_for_waiters = 0
        self.level = level
        self._level_at = self._clock()

    def abort_sync(self, give_back: int) -> None:
        """The sync failed: nothing was put back or taken."""
        self.balance += give_back
        self._asked_for_waiters = 0

    def idle(self) -> bool:
        """Nothing held, owed or wanted: the syncer may skip it."""
        return self.balance == 0 and self.wanted == 0 and self.used == 0 and self.demand == 0


class RateLimiter:
    """The per-model caps of the routing settings, as bucket slices."""

    def __init__(
        self,
        caps: Mapping[str, ModelCaps] | None = None,
        replicas: int = 1,
        clock: Clock = time.monotonic,
        *,
        shared: bool = False,
    ):
        self._clock = clock
        self.shared = shared
        self._slices: dict[tuple[str, str], BucketSlice] = {}
        self.update_caps(caps or {}, replicas)

    def update_caps(self, caps: Mapping[str, ModelCaps], replicas: int = 1) -> None:
        """New caps from a live routing change; what is held and spent so far is kept.

        A shared bucket holds the cluster's cap; a local one this replica's share of it.
        """
        share = 1 if self.shared else max(1, replicas)
        wanted: dict[tuple[str, str], int] = {}
        for model, c in caps.items():
            for kind, cap in (("rpm", c.rpm), ("tpm", c.tpm)):
                if cap:
                    wanted[(model, kind)] = math.ceil(cap / share)
        for key in list(self._slices):
            if key not in wanted:
                del self._slices[key]
        for (model, kind), capacity in wanted.items():
            existing = self._slices.get((model, kind))
            if existing is None:
                name = f"model:{model}:{kind}"
                self._slices[(model, kind)] = BucketSlice(
                    name, capacity, clock=self._clock, shared=self.shared
                )
            else:
                existing.resize(capacity)

    def record_request(self, model: str, tokens: int = 0) -> None:
        """An attempt on `model`: one request, and the tokens it may use at most."""
        if (s := self._slices.get((model, "rpm"))) is not None:
            s.force_take(1)
        if tokens > 0 and (s := self._slices.get((model, "tpm"))) is not None:
            s.force_take(tokens)

    def record_tokens(self, model: str, tokens: int) -> None:
        if tokens > 0 and (s := self._slices.get((model, "tpm"))) is not None:
            s.force_take(tokens)

    def settle_tokens(self, model: str, reserved: int, used: int) -> None:
        """An attempt that reserved `reserved` tokens used `used`: the difference back."""
        if (s := self._slices.get((model, "tpm"))) is not None and reserved != used:
            if used < reserved:
                s.give(reserved - used)
            else:
                s.force_take(used - reserved)

    def counts_tokens(self, models: tuple[str, ...]) -> bool:
        """Whether any of `models` has a tpm cap (its attempts reserve tokens)."""
        return bool(self._slices) and any((m, "tpm") in self._slices for m in models)

    def wait_time(self, model: str) -> float:
        """0 if `model` may take a request now, else seconds until it may."""
        wait = 0.0
        for kind in ("rpm", "tpm"):
            s = self._slices.get((model, kind))
            if s is not None:
                wait = max(wait, s.wait_s(1.0))
        return wait

    def at_cap(self) -> dict[str, float]:
        """Every capped model that is at its cap now -> seconds until it has room."""
        out: dict[str, float] = {}
        for model, _ in self._slices:
            if model not in out and (wait := self.wait_time(model)) > 0:
                out[model] = wait
        return out

    def slices(self) -> Iterator[BucketSlice]:
        return iter(list(self._slices.values()))
