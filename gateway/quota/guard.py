"""Admission against budgets and per-key rate limits, without a database call per request.

`QuotaGuard.admit` reserves a request's worst-case cost on every hard budget that covers
its caller (the app's, its team's, its key's, the gateway's, its end user's own under the
app's each-user budget, each of its tags'; each period) and one request plus its
worst-case tokens on its key's rpm and tpm buckets and its end user's, all out of this
replica's slices. Only when a slice is short does the request wait, for the next sync round
(`gateway.quota.syncer`), which the shortage starts at once; many short requests share
one round. The returned `Admission` is settled or released synchronously, exactly once.

Budgets apply per scope: requests of the `anonymous` app or static keys count against the
app (and `all`) budgets too. A request without an end user is under no each-user budget
and no per-end-user limit. One end user's slices and buckets are dropped once idle
(`prune`), so memory follows the end users active lately, not all there are.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import time
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from gateway.domain.budgets import Budget, BudgetScope, split_tag
from gateway.quota.budget_slice import ZERO, BudgetSlice
from gateway.quota.refusals import (
    budget_exceeded,
    budget_unpriceable,
    budgets_unavailable,
    rate_headers,
    rate_limited,
)
from gateway.quota.worst_case import NO_EXTRAS, Billed, WorstCase, WorstCasePricer
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
    end_user: str | None = None  # as stored (plain or HMAC); None: no end user named
    tags: Mapping[str, str] | None = None
    user_rpm: int | None = None  # each end user's limits under this key
    user_tpm: int | None = None

    @property
    def user_limited(self) -> bool:
        return self.end_user is not None and bool(self.user_rpm or self.user_tpm)


@dataclasses.dataclass(frozen=True, slots=True)
class _Limit:
    """One caller's rpm and tpm buckets (a key's, or an end user's under it)."""

    requests: BucketSlice | None
    tokens: BucketSlice | None
    want_tokens: int
    whose: str  # for the refusal's words


class Admission:
    """One admitted request's reservations."""

    __slots__ = ("_budgets", "_tokens", "done", "headers")

    def __init__(
        self,
        budgets: list[tuple[BudgetSlice, Decimal]],
        tokens: list[tuple[BucketSlice, int]],
        headers: dict[str, str],
    ) -> None:
        self._budgets = budgets
        self._tokens = tokens  # (a tpm bucket, the tokens reserved on it)
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
        used = tokens or 0
        for bucket, reserved_tokens in self._tokens:
            if used < reserved_tokens:
                bucket.give(reserved_tokens - used)
            elif used > reserved_tokens:
                bucket.force_take(used - reserved_tokens)

    def release(self) -> None:
        """The request never reached an upstream (or left no record): nothing spent."""
        if self.done:
            return
        self.done = True
        for s, reserved in self._budgets:
            s.release(reserved)
        for bucket, reserved_tokens in self._tokens:
            if reserved_tokens:
                bucket.give(reserved_tokens)


# with no database there is no syncer to prune: admission prunes past this many entries
LOCAL_PRUNE_AT = 10_000


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
        self._tagged = False  # any hard tag budget: only then are a request's tags looked up
        self.budgets: tuple[Budget, ...] = ()
        # (budget id, subject, period start): subject is the end user of an each-user
        # budget, "" for every other
        self.budget_slices: dict[tuple[int, str, dt.datetime], BudgetSlice] = {}
        self.buckets: dict[str, BucketSlice] = {}
        self.user_buckets: dict[str, BucketSlice] = {}  # per (key, end user): pruned when idle
        self.model_limits = RateLimiter(clock=clock, shared=shared)
        self._round: asyncio.Future[None] | None = None
        self.kick = asyncio.Event()
        # shared: no admission until a set of budgets is known (from the store or the
        # disk cache), and a shortage while the store is unreachable is a 503
        self.loaded = not shared
        self.store_down = False

    # -- what applies -------------------------------------------------------------------

    def replace_budgets(self, budgets: Iterable[Budget]) -> None:
        """A new set from the store: swapped whole; slices of removed budgets stay until
        their requests in flight settle, and are then dropped by the syncer."""
        self.budgets = tuple(budgets)
        self.loaded = True
        hard: dict[tuple[BudgetScope, str], list[Budget]] = {}
        for b in self.budgets:
            if b.hard:
                value = b.scope_value
                if b.scope is BudgetScope.TAG:
                    value = "=".join(split_tag(value))
                hard.setdefault((b.scope, value), []).append(b)
        self._hard = {k: tuple(v) for k, v in hard.items()}
        self._tagged = any(scope is BudgetScope.TAG for scope, _ in self._hard)
        by_id = {b.id: b for b in self.budgets}
        for s in self.budget_slices.values():
            s.budget = by_id.get(s.budget.id, s.budget)

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
        if who.end_user is not None:
            found.extend(self._hard.get((BudgetScope.EACH_USER, who.app), ()))
        if self._tagged and who.tags:
            for k, v in who.tags.items():
                found.extend(self._hard.get((BudgetScope.TAG, f"{k.strip()}={v.strip()}"), ()))
        return found

    def applies(self, who: Who) -> bool:
        """Whether `admit` has anything to do for this caller (the fast path's test)."""
        return bool(who.rpm or who.tpm or who.user_limited or self.hard_budgets(who))

    def _slice(self, budget: Budget, now: dt.datetime, who: Who) -> BudgetSlice:
        start, end = budget.window(now)
        subject = (who.end_user or "") if budget.scope is BudgetScope.EACH_USER else ""
        s = self.budget_slices.get((budget.id, subject, start))
        if s is None:
            s = BudgetSlice(budget, start, end, subject)
            self.budget_slices[s.key] = s
        return s

    def _bucket(
        self, name: str, capacity: int, where: dict[str, BucketSlice] | None = None
    ) -> BucketSlice:
        found = self.buckets if where is None else where
        b = found.get(name)
        if b is None:
            b = found[name] = BucketSlice(name, capacity, clock=self._clock, shared=self.shared)
        elif b.capacity != capacity:
            b.resize(capacity)
        return b

    def _limits(self, who: Who, worst: WorstCase) -> list[_Limit]:
        """The key's rpm/tpm buckets and its end user's: what admission takes from."""
        out: list[_Limit] = []
        tokens = worst.tokens or worst.prompt_tokens
        if who.rpm or who.tpm:
            prefix = f"key:{who.key_id}"
            out.append(
                _Limit(
                    self._bucket(f"{prefix}:rpm", who.rpm) if who.rpm else None,
                    self._bucket(f"{prefix}:tpm", who.tpm) if who.tpm else None,
                    # an unbounded output reserves the prompt only and settles the rest
                    min(tokens, who.tpm or 0),
                    "this gateway key",
                )
            )
        if who.user_limited:
            prefix, where = f"key:{who.key_id}:user:{who.end_user}", self.user_buckets
            out.append(
                _Limit(
                    self._bucket(f"{prefix}:rpm", who.user_rpm, where) if who.user_rpm else None,
                    self._bucket(f"{prefix}:tpm", who.user_tpm, where) if who.user_tpm else None,
                    min(tokens, who.user_tpm or 0),
                    "this end user",
                )
            )
        return out

    def key_rate_headers(self, key_id: str | None, rpm: int | None, tpm: int | None
                         ) -> dict[str, str]:
        """OpenAI's `x-ratelimit-*` of a key's own limits as they stand now (after what
        this request took), for every answer to a key with limits."""
        if not (rpm or tpm):
            return {}
        prefix = f"key:{key_id}"
        return rate_headers(self._bucket(f"{prefix}:rpm", rpm) if rpm else None,
                            self._bucket(f"{prefix}:tpm", tpm) if tpm else None)

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
        outputs: int = 1,
        billed: Billed = NO_EXTRAS,
    ) -> tuple[Admission | None, int]:
        """A request's admission: (None, 0) on the fast path (no budget or key limit, no
        token cap to count for), else its worst case priced and, when guarded, admitted;
        with the tokens to reserve on the models' caps."""
        if not self.loaded:
            raise budgets_unavailable()  # any caller may be under a budget not yet known
        guarded = self.applies(who)
        if not guarded and not count_tokens:
            return None, 0
        worst = pricer.price(
            models, messages, max_tokens=max_tokens, key_cap=key_cap, outputs=outputs,
            service_tier=billed.service_tier, web_search=billed.web_search is not None,
            max_searches=billed.max_searches,
        )
        admission = await self.admit(who, worst) if guarded else None
        return admission, worst.tokens or worst.prompt_tokens

    async def admit(self, who: Who, worst: WorstCase) -> Admission:
        budgets = self.hard_budgets(who)
        if budgets and worst.cost_usd is None:
            raise budget_unpriceable(budgets[0], worst.why_unpriced)
        cost = worst.cost_usd or ZERO
        now = self._now()
        if not self.shared and len(self.budget_slices) + len(self.user_buckets) > LOCAL_PRUNE_AT:
            self.prune()
        slices = [self._slice(b, now, who) for b in budgets]
        limits = self._limits(who, worst)
        for round_no in range(MAX_ROUNDS + 1):
            short = False
            for s in slices:
                if s.free < cost:
                    if round_no and self.store_down:
                        raise budgets_unavailable()  # the store cannot grant: not a 429
                    if s.exhausted or round_no == MAX_ROUNDS:
                        raise budget_exceeded(s.budget, s.remaining or ZERO, s.end)
                    s.need(cost)
                    short = True
            for lim in limits:
                checks = ((lim.requests, 1, "requests"), (lim.tokens, lim.want_tokens, "tokens"))
                for b, units, kind in checks:
                    if b is None or b.balance >= units:
                        continue
                    if not b.shared or b.level_now() < units or round_no == MAX_ROUNDS:
                        wait = b.wait_s(units) or 60 / max(1, b.capacity)
                        raise rate_limited(
                            kind, b.capacity, wait, lim.requests, lim.tokens, whose=lim.whose
                        )
                    b.wanted += units  # summed: every waiting request asks for its own
                    short = True
            if not short:
                break
            await self.next_round()
        # every slice has room now: take it all at once, with no await in between
        for s in slices:
            s.try_reserve(cost)
        taken: list[tuple[BucketSlice, int]] = []
        for lim in limits:
            if lim.requests is not None:
                lim.requests.try_take(1)
            if lim.tokens is not None:
                lim.tokens.try_take(lim.want_tokens)
                taken.append((lim.tokens, lim.want_tokens))
        return Admission([(s, cost) for s in slices], taken, {})

    def prune(self) -> None:
        """Drop the idle state of end users: their each-user slices with nothing held,
        owed or wanted, and their rate-limit buckets with nothing held or used lately (a
        local bucket once it is full again). A later request starts them afresh, from the
        store's figures (or a full local bucket)."""
        for key, s in list(self.budget_slices.items()):
            if s.subject and s.idle():
                del self.budget_slices[key]
        for name, b in list(self.user_buckets.items()):
            if b.idle() if b.shared else b.remaining() >= b.capacity:
                del self.user_buckets[name]

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
