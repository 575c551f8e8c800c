"""The background side of budgets and rate limits: one task per replica that, every
`SYNC_S` or at once when a request is short, syncs every slice that holds, owes or wants
something in one PostgreSQL transaction (`db.leases`), and reloads the budgets every
`BUDGETS_REFRESH_S` (a change reaches every replica within that plus one sync).

The database work runs in a thread; the event loop only starts rounds and applies their
results. A failed round changes nothing in the store and is undone locally (slices keep
what they hold; requests short of it are refused until a round succeeds).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable
from decimal import Decimal

from sqlalchemy import Connection, Engine

from db.budgets import load_budgets
from db.leases import (
    BucketState,
    BudgetLeaseState,
    ledger_spent,
    prune_leases,
    sync_budget_lease,
    take_from_bucket,
)
from gateway.concurrency.waits import cancel_until_done, wait_event
from gateway.domain.budgets import Budget
from gateway.quota.budget_cache import BudgetCache
from gateway.quota.budget_slice import BudgetAsk
from gateway.quota.guard import QuotaGuard
from gateway.routing.rate_limits import BucketSlice

log = logging.getLogger("costgate.quota")

SYNC_S = 1.0
BUDGETS_REFRESH_S = 2.0
# a hold not renewed for this long lapses: a dead replica's slice comes back by itself
LEASE_TTL_S = 15.0
# how often a replica drops the leases of ended periods (one DELETE, in a sync)
PRUNE_EVERY_S = 3600.0


@dataclasses.dataclass(frozen=True, slots=True)
class BudgetSync:
    budget_id: int
    start: dt.datetime
    end: dt.datetime
    ask: BudgetAsk
    subject: str = ""  # the end user of an each-user budget


@dataclasses.dataclass(frozen=True, slots=True)
class BucketSync:
    name: str
    capacity: int
    give_back: int
    want: int


class PostgresQuotaStore:
    """The shared store: one transaction per round, locks taken in a fixed order."""

    def __init__(
        self, engine: Engine, holder: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.engine = engine
        self.holder = holder
        self._clock = clock
        self._pruned_at = clock()
        self.budgets: dict[int, Budget] = {}  # as last loaded: for the ledger's scopes

    def load_budgets(self) -> list[Budget]:
        found = load_budgets(self.engine)
        self.budgets = {b.id: b for b in found}
        return found

    def sync(
        self, budgets: list[BudgetSync], buckets: list[BucketSync]
    ) -> tuple[list[BudgetLeaseState | None], list[BucketState]]:
        budget_out: dict[int, BudgetLeaseState | None] = {}
        bucket_out: dict[int, BucketState] = {}
        with self.engine.begin() as conn:
            # the ledger's figures first, before any lock is held (its scans are the slow
            # part); then ascending budget ids, then bucket names: two replicas never wait
            # on each other in a cycle
            ledgers = [self._ledger(conn, b) for b in budgets]
            order = sorted(
                enumerate(budgets), key=lambda p: (p[1].budget_id, p[1].subject, p[1].start)
            )
            for i, b in order:
                budget_out[i] = sync_budget_lease(
                    conn,
                    b.budget_id,
                    b.start,
                    b.end,
                    self.holder,
                    settled_delta=b.ask.settled_delta,
                    returned_usd=b.ask.returned_usd,
                    in_use_usd=b.ask.in_use_usd,
                    want_free_usd=b.ask.want_free_usd,
                    min_free_usd=b.ask.min_free_usd,
                    ttl_s=LEASE_TTL_S,
                    ledger=ledgers[i],
                    subject=b.subject,
                )
            for i, k in sorted(enumerate(buckets), key=lambda p: p[1].name):
                bucket_out[i] = take_from_bucket(
                    conn, k.name, k.capacity, give_back=k.give_back, want=k.want
                )
            if self._clock() - self._pruned_at >= PRUNE_EVERY_S:
                self._pruned_at = self._clock()
                prune_leases(conn)
        return [budget_out[i] for i in range(len(budgets))], [
            bucket_out[i] for i in range(len(buckets))
        ]

    def _ledger(self, conn: Connection, b: BudgetSync) -> tuple[Decimal, Decimal] | None:
        budget = self.budgets.get(b.budget_id)
        if budget is None:
            return None  # not known here yet: sync_budget_lease reads it itself
        return ledger_spent(
            conn, b.budget_id, budget.scope, budget.scope_value, b.start, b.end, b.subject
        )


class QuotaSyncer:
    def __init__(
        self,
        guard: QuotaGuard,
        store: PostgresQuotaStore,
        *,
        clock: Callable[[], float] = time.monotonic,
        cache: BudgetCache | None = None,
    ) -> None:
        self.guard = guard
        self.store = store
        self.cache = cache
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._budgets_at = float("-inf")
        self.rounds = 0
        self.failures = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop, and hand back every free part held (what is in flight stays held until
        its lease lapses)."""
        if self._task is not None:
            await cancel_until_done(self._task)
            self._task = None
        for s in self.guard.budget_slices.values():
            s.largest = s.rate = s.reserved_since = Decimal(0)
        for b in self._buckets():
            b.demand = b.used = 0.0
        with contextlib.suppress(Exception):
            await self.round()

    async def load_budgets(self) -> None:
        try:
            budgets = await asyncio.to_thread(self.store.load_budgets)
        except Exception:
            # a start during an outage: the last set known on disk, so that callers under
            # no budget are served (those under one wait for the store), never none
            cached = None if self.guard.loaded or self.cache is None else self.cache.load()
            if cached is not None:
                log.warning("budgets from the local cache: PostgreSQL unreachable")
                self.guard.replace_budgets(cached)
            raise
        self.guard.replace_budgets(budgets)
        if self.cache is not None:
            self.cache.save(budgets)
        self._budgets_at = self._clock()

    async def _loop(self) -> None:
        while True:
            await wait_event(self.guard.kick, SYNC_S)
            waiting = self.guard.take_round()
            try:
                if self._clock() - self._budgets_at >= BUDGETS_REFRESH_S:
                    await self.load_budgets()
                await self.round()
                self.guard.store_down = False
            except Exception as err:  # noqa: BLE001 - keep what is held; try again later
                self.failures += 1
                self.guard.store_down = True
                log.warning("budget and rate-limit sync failed: %s", type(err).__name__)
            finally:
                if waiting is not None and not waiting.done():
                    waiting.set_result(None)

    def _buckets(self) -> list[BucketSlice]:
        guard = self.guard
        return [
            *guard.buckets.values(),
            *guard.user_buckets.values(),
            *guard.model_limits.slices(),
        ]

    async def round(self) -> None:
        """One sync of every slice that has something to say."""
        guard = self.guard
        slices = [s for s in guard.budget_slices.values() if not s.idle()]
        buckets = [b for b in self._buckets() if not b.idle()]
        if not slices and not buckets:
            return
        now = self._clock()
        budget_asks = [
            BudgetSync(s.budget.id, s.start, s.end, s.begin_sync(now), s.subject) for s in slices
        ]
        bucket_asks = []
        for b in buckets:
            give_back, want = b.begin_sync()
            bucket_asks.append(BucketSync(b.name, b.capacity, give_back, want))
        try:
            budget_states, bucket_states = await asyncio.to_thread(
                self.store.sync, budget_asks, bucket_asks
            )
        except BaseException:
            for s in slices:
                s.abort_sync()
            for b, ask in zip(buckets, bucket_asks, strict=True):
                b.abort_sync(ask.give_back)
            raise
        self.rounds += 1
        for s, state in zip(slices, budget_states, strict=True):
            if state is None:  # the budget was removed: nothing more to sync
                s.abort_sync()
                guard.budget_slices.pop(s.key, None)
                continue
            s.end_sync(state.held_usd, state.granted_usd, state.renewed, state.remaining_usd)
        for b, bstate in zip(buckets, bucket_states, strict=True):
            b.end_sync(bstate.granted, float(bstate.level))
        wall = dt.datetime.now(dt.UTC)
        for key, s in list(guard.budget_slices.items()):
            if s.end <= wall and s.idle():  # a past period with nothing in flight
                del guard.budget_slices[key]
        guard.prune()  # end users' idle slices and buckets: memory follows who is active
