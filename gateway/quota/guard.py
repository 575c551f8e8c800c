"""Admission against budgets and per-key rate limits, without a database call per request.

`QuotaGuard.admit` reserves a request's worst-case cost on every hard budget that covers
its caller (the app's, its team's, its key's, the gateway's; each period) and one request
plus its worst-case tokens on its key's rpm and tpm buckets, all out of this replica's
slices. Only when a slice is short does the request wait, for the next sync round
(`gateway.quota.syncer`), which the shortage starts at once; many short requests share
one round. The returned `Admission` is settled or released synchronously, exactly once.

Budgets apply per scope: requests of the `anonymous` app or static keys count against the
app (and `all`) budgets too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import time
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from gateway.domain.budgets import Budget, BudgetScope
from gateway.quota.budget_slice import ZERO, BudgetSlice
from gateway.quota.refusals import budget_exceeded, budget_unpriceable, rate_limited
from gateway.quota.worst_case import WorstCase, WorstCasePricer
from gateway.routing.rate_limits import BucketSlice, RateLimiter

# a request waits at most this many sync rounds for a slice before it is refused
MAX_ROUNDS = 6


@dataclasses.dataclass(frozen=True, slots=True)
class Who:
    """The parts of a caller that budgets and key limits look at."""

    app: str
    team: str | None
    key_id: str | None
    rpm: int | None = None
    tpm: int | None = None


class Admission:
    """One admitted request's reservations."""

    __slots__ = ("_budgets", "_tokens", "_tokens_reserved", "done", "headers")

    def __init__(
        self,
        budgets: list[tuple[BudgetSlice, Decimal]],
        tokens: BucketSlice | None,
        tokens_reserved: int,
        headers: dict[str, str],
    ) -> None:
        self._budgets = budgets
        self._tokens = tokens
        self._tokens_reserved = tokens_reserved
        self.done = False
        self.headers = headers

    def settle(self, cost_usd: Decimal | None, tokens: int | None) -> None:
        """The request ended with this actual cost (None: unknown, counted as 0: only
        requests without usage have none) and this many tokens."""
        if self.done:
            return
        self.done = True
        for s, reserved in self._budgets:
            s.settle(reserved, cost_usd or ZERO)
        if self._tokens is not None:
            used = tokens or 0
            if used < self._tokens_reserved:
                self._tokens.give(self._tokens_reserved - used)
            elif used > self._tokens_reserved:
                self._tokens.force_take(used - self._tokens_reserved)

    def release(self) -> None:
        """The request never reached an upstream (or left no record): nothing spent."""
        if self.done:
            return
        self.done = True
        for s, reserved in self._budgets:
            s.release(reserved)
        if self._tokens is not None and self._tokens_reserved:
            self._tokens.give(self._tokens_reserved)


class QuotaGuard:
    def __init__(
        self,
        *,
        shared: bool,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.shared = shared  # slices come from a store; without one, buckets are local
        self._clock = clock
        self._now = now
        self._hard: dict[tuple[BudgetScope, str], tuple[Budget, ...]] = {}
        self.budgets: tuple[Budget, ...] = ()
        self.budget_slices: dict[tuple[int, dt.datetime], BudgetSlice] = {}
        self.buckets: dict[str, BucketSlice] = {}
        self.model_limits = RateLimiter(clock=clock, shared=shared)
        self._round: asyncio.Future[None] | None = None
        self.kick = asyncio.Event()

    # -- what applies -------------------------------------------------------------------

    def replace_budgets(self, budgets: Iterable[Budget]) -> None:
        """A new set from the store: swapped whole; slices of removed budgets stay until
        their requests in flight settle, and are then dropped by the syncer."""
        self.budgets = tuple(budgets)
        hard: dict[tuple[BudgetScope, str], list[Budget]] = {}
        for b in self.budgets:
            if b.hard:
                hard.setdefault((b.scope, b.scope_value), []).append(b)
        self._hard = {k: tuple(v) for k, v in hard.items()}
        for s in self.budget_slices.values():
            s.budget = next((b for b in self.budgets if b.id == s.budget.id), s.budget)

    def hard_budgets(self, who: Who) -> list[Budget]:
        if not self._hard:
            return []
        found: list[Budget] = []
        for key in (
            (BudgetScope.APP, who.app),
            (BudgetScope.TEAM, who.team or ""),
            (BudgetScope.KEY, who.key_id or ""),
            (BudgetScope.ALL, ""),
        ):
            found.extend(self._hard.get(key, ()))
        return found

    def applies(self, who: Who) -> bool:
        """Whether `admit` has anything to do for this caller (the fast path's test)."""
        return bool(who.rpm or who.tpm or self.hard_budgets(who))

    def _slice(self, budget: Budget, now: dt.datetime) -> BudgetSlice:
        start, end = budget.window(now)
        s = self.budget_slices.get((budget.id, start))
        if s is None:
            s = self.budget_slices[(budget.id, start)] = BudgetSlice(budget, start, end)
        return s

    def _bucket(self, name: str, capacity: int) -> BucketSlice:
        b = self.buckets.get(name)
        if b is None:
            b = self.buckets[name] = BucketSlice(
                name, capacity, clock=self._clock, shared=self.shared
            )
        elif b.capacity != capacity:
            b.resize(capacity)
        return b

    # -- admission ----------------------------------------------------------------------

    async def reserve(
        self,
        who: Who,
        pricer: WorstCasePricer,
        models: Iterable[str],
        messages: Any,
        *,
        max_tokens: int | None,
        key_cap: int | None,
        count_tokens: bool,
    ) -> tuple[Admission | None, int]:
        """A request's admission: (None, 0) on the fast path (no budget or key limit, no
        token cap to count for), else its worst case priced and, when guarded, admitted;
        with the tokens to reserve on the models' caps."""
        guarded = self.applies(who)
        if not guarded and not count_tokens:
            return None, 0
        worst = pricer.price(models, messages, max_tokens=max_tokens, key_cap=key_cap)
        admission = await self.admit(who, worst) if guarded else None
        return admission, worst.tokens or worst.prompt_tokens

    async def admit(self, who: Who, worst: WorstCase) -> Admission:
        budgets = self.hard_budgets(who)
        if budgets and worst.cost_usd is None:
            raise budget_unpriceable(budgets[0], worst.why_unpriced)
        cost = worst.cost_usd or ZERO
        now = self._now()
        slices = [self._slice(b, now) for b in budgets]
        requests = self._bucket(f"key:{who.key_id}:rpm", who.rpm) if who.rpm else None
        tokens = self._bucket(f"key:{who.key_id}:tpm", who.tpm) if who.tpm else None
        # an unbounded output reserves the prompt only and settles the rest afterwards
        want_tokens = min(worst.tokens or worst.prompt_tokens, who.tpm or 0)
        for round_no in range(MAX_ROUNDS + 1):
            short = False
            for s in slices:
                if s.free < cost:
                    if s.exhausted or round_no == MAX_ROUNDS:
                        raise budget_exceeded(s.budget, s.remaining or ZERO, s.end)
                    s.need(cost)
                    short = True
            for b, units, kind in ((requests, 1, "requests"), (tokens, want_tokens, "tokens")):
                if b is None or b.balance >= units:
                    continue
                if not b.shared or b.level_now() < units or round_no == MAX_ROUNDS:
                    wait = b.wait_s(units) or 60 / max(1, b.capacity)
                    raise rate_limited(kind, b.capacity, wait, requests, tokens)
                b.wanted += units  # summed: every waiting request asks for its own
                short = True
            if not short:
                break
            await self.next_round()
        # every slice has room now: take it all at once, with no await in between
        for s in slices:
            s.try_reserve(cost)
        if requests is not None:
            requests.try_take(1)
        if tokens is not None:
            tokens.try_take(want_tokens)
        return Admission([(s, cost) for s in slices], tokens, want_tokens, {})

    async def next_round(self) -> None:
        """Until the next sync round has ended (it starts now if none is waiting)."""
        if self._round is None or self._round.done():
            self._round = asyncio.get_running_loop().create_future()
        fut = self._round
        self.kick.set()
        # shielded: one waiter's cancellation must not cancel the round for the others
        await asyncio.shield(fut)

    def take_round(self) -> asyncio.Future[None] | None:
        """The syncer's side: the round that waiters wait for, now starting."""
        fut, self._round = self._round, None
        self.kick.clear()
        return fut
