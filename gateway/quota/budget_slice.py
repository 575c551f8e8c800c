"""One budget period's slice on this replica: reserve, settle, release, all local and
synchronous (no await: a cancelled request hands its reservation back in its `finally`).

The slice is what the store granted this replica (`held`), of which `in_use` is reserved
by requests in flight. A settled request's actual cost leaves `held` and waits in
`unreported` for the next sync, which tells the store (so it counts as spent before the
ledger's batched write lands). Pure; the syncer (`gateway.quota.syncer`) does the I/O.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

from gateway.domain.budgets import Budget

ZERO = Decimal(0)
# the free part a slice keeps between syncs: this many times what it reserved per
# HORIZON_S lately, and never less than this many of its largest recent reservations
DEMAND_HEADROOM = Decimal(2)
RESERVATIONS_KEPT = Decimal(2)
HORIZON_S = Decimal(1)  # one sync interval
# the reservation rate is measured over at least this long: rounds that a shortage
# starts come close together, and a rate per round would shrink the slice, which would
# start more rounds
MIN_SAMPLE_S = 0.25
SMOOTHING = Decimal("0.5")
# and, while the budget has plenty left, room for a burst: up to this many of its
# largest reservations, at most this share of what is left (so a small budget is not
# stranded in one replica's slice)
BURST_RESERVATIONS = Decimal(64)
BURST_SHARE = Decimal("0.01")
# syncs with no request before an unused slice goes back whole (30 s at one per second)
QUIET_SYNCS_BEFORE_RETURN = 30
# one end user's slice of an each-user budget goes back sooner: there may be 100,000 of
# them, each a lease row synced every second while it holds anything
SUBJECT_QUIET_SYNCS_BEFORE_RETURN = 3


@dataclasses.dataclass(frozen=True, slots=True)
class BudgetAsk:
    """What one sync tells the store about a slice, and asks of it."""

    settled_delta: Decimal
    returned_usd: Decimal
    in_use_usd: Decimal
    want_free_usd: Decimal
    min_free_usd: Decimal


class BudgetSlice:
    def __init__(
        self, budget: Budget, start: dt.datetime, end: dt.datetime, subject: str = ""
    ) -> None:
        self.budget = budget
        self.start, self.end = start, end
        self.subject = subject  # the end user of an each-user budget; "" otherwise
        self._quiet_limit = (
            SUBJECT_QUIET_SYNCS_BEFORE_RETURN if subject else QUIET_SYNCS_BEFORE_RETURN
        )
        self.held = ZERO
        self.in_use = ZERO
        self.unreported = ZERO
        self.reserved_since = ZERO  # reserved since the rate's last sample
        self.rate = ZERO  # USD reserved per second, smoothed
        self._sampled_at: float | None = None
        self.largest = ZERO  # the largest reservation seen lately
        self.wanted = ZERO  # what requests waiting for the next sync need, summed
        self.wanted_one = ZERO  # the largest of those needs
        # the store's figures at the last sync (None before the first): for headers,
        # and to refuse at once while nothing is left
        self.remaining: Decimal | None = None
        self.exhausted = False
        self._asked: BudgetAsk | None = None
        # what the last sync brought for requests that waited, kept from the next sync's
        # return (one sync at most): they wake a few turns of the loop after it, and a
        # sync started at once by another shortage must not hand it back first
        self._asked_wanted = ZERO
        self._promised = ZERO
        self._quiet_syncs = 0
        self._settled_during_sync = ZERO

    @property
    def free(self) -> Decimal:
        return self.held - self.in_use

    def try_reserve(self, amount: Decimal) -> bool:
        if amount > self.largest:
            self.largest = amount
        if self.free >= amount:
            self.in_use += amount
            self.reserved_since += amount
            self._promised = max(ZERO, self._promised - amount)
            return True
        return False

    def settle(self, reserved: Decimal, actual: Decimal) -> None:
        """A request ended: its reservation goes, its actual cost is spent out of the
        slice (more than reserved only if the provider billed beyond the worst case)."""
        self.in_use -= reserved
        self.held -= actual
        self.unreported += actual
        if self._asked is not None:
            self._settled_during_sync += actual

    def release(self, reserved: Decimal) -> None:
        self.in_use -= reserved

    def need(self, amount: Decimal) -> None:
        """A request waits for the next sync to bring `amount` (its worst case)."""
        self.wanted += amount
        self.wanted_one = max(self.wanted_one, amount)

    # -- the syncer's side ----------------------------------------------------------------

    def _sample(self, now: float) -> None:
        if self._sampled_at is None:
            self._sampled_at = now - float(HORIZON_S)
        elapsed = now - self._sampled_at
        if elapsed >= MIN_SAMPLE_S:
            current = self.reserved_since / Decimal(str(round(elapsed, 6)))
            self.rate = SMOOTHING * self.rate + (1 - SMOOTHING) * current
            self.reserved_since = ZERO
            self._sampled_at = now

    def begin_sync(self, now: float) -> BudgetAsk:
        """`now`: monotonic seconds, for the reservation rate."""
        quiet = self.reserved_since == 0 and self.in_use == 0 and self.wanted == 0
        self._quiet_syncs = self._quiet_syncs + 1 if quiet else 0
        if self._quiet_syncs >= self._quiet_limit:
            # unused for a while: everything goes back to the store
            self.largest = self.rate = ZERO
        self._sample(now)
        target = max(self.rate * HORIZON_S * DEMAND_HEADROOM, self.largest * RESERVATIONS_KEPT)
        kept = min(self._promised, max(ZERO, self.free))
        self._promised = ZERO
        returned = max(ZERO, self.free - kept - target) if self.wanted == 0 else ZERO
        self.held -= returned  # gone now, so nothing reserves it while the sync runs
        want = max(ZERO, target - (self.free - kept)) + self.wanted
        ask = BudgetAsk(self.unreported, returned, self.in_use, want, self.wanted_one)
        self.unreported = ZERO
        self._asked_wanted = self.wanted
        self.wanted = self.wanted_one = ZERO  # the requests still short ask again
        self._asked = ask
        self._settled_during_sync = ZERO
        return ask

    def end_sync(self, held: Decimal, granted: Decimal, renewed: bool, remaining: Decimal) -> None:
        ask = self._asked
        assert ask is not None
        self._asked = None
        self._promised = min(granted, self._asked_wanted)
        if renewed:
            self.held += granted
        else:
            # the store restarted the hold at what was in flight then: the free part that
            # had lapsed is gone, what was settled since still leaves it
            self.held = held - self._settled_during_sync
        self.remaining = remaining
        # no room for a request's worst case, here or in the store: refuse at once until
        # a later sync finds room (a raised limit, settled requests, another period)
        need = max(ask.min_free_usd, self.largest)
        self.exhausted = need > 0 and self.free < need and remaining < need

    def abort_sync(self) -> None:
        """The sync failed: the store saw none of it."""
        ask = self._asked
        if ask is None:
            return
        self._asked = None
        self.held += ask.returned_usd
        self.unreported += ask.settled_delta

    @property
    def key(self) -> tuple[int, str, dt.datetime]:
        return self.budget.id, self.subject, self.start

    def idle(self) -> bool:
        """Nothing held, owed or wanted: the syncer may skip it. An exhausted slice is
        never idle: its syncs are how a raised limit reaches it."""
        return (
            not self.exhausted
            and self.held == 0
            and self.in_use == 0
            and self.unreported == 0
            and self.wanted == 0
        )
