"""Leases: how replicas share a budget or a rate limit without a database call per
request (docs/BUDGETS.md).

A budget's period is shared out in slices: each replica (`holder`) holds an amount it may
reserve against locally, renewed and resized by `sync_budget_lease` from a background
task, under the budget row's lock (`SELECT ... FOR UPDATE`). What is left for everyone =
limit - spent - every live holder's slice. A hold lapses at `expires_at` unless renewed,
so a dead replica's slice comes back by itself.

A rate limit is a token bucket (`limit_buckets`) refilled at capacity per minute;
`take_from_bucket` puts back what a replica did not use and takes a new slice.

Every function takes a Connection inside the caller's transaction, so one sync takes all
its locks in one transaction; callers lock in a fixed order (budget ids, then bucket
names, ascending) so that two replicas never deadlock.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

from sqlalchemy import Connection, Engine, and_, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from db.budgets import EndUserSpend, end_user_spend, load_budgets, rollup_spent, scope_filter
from db.models import BudgetLease, BudgetRow, LimitBucket, UsageRow
from gateway.domain.budgets import Budget, BudgetScope

ZERO = Decimal(0)


@dataclasses.dataclass(frozen=True, slots=True)
class BudgetLeaseState:
    """A holder's slice after a sync, and the budget's figures for the period."""

    held_usd: Decimal  # what this holder may now reserve against, in flight included
    granted_usd: Decimal  # added to its slice by this sync
    renewed: bool  # False: the hold was new or had lapsed, so it restarted at in_use
    limit_usd: Decimal
    spent_usd: Decimal
    reserved_usd: Decimal  # every live holder's slice, this one's included
    holders: int  # live holders, this one included

    @property
    def remaining_usd(self) -> Decimal:
        return max(ZERO, self.limit_usd - self.spent_usd - self.reserved_usd)


def ledger_spent(
    conn: Connection,
    budget_id: int,
    scope: BudgetScope,
    scope_value: str,
    start: dt.datetime,
    end: dt.datetime,
    subject: str = "",
) -> tuple[Decimal, Decimal]:
    """(the ledger's total for the scope (and subject) and period, the part of it that
    started before the period's first lease). Read before the budget's lock is taken: the
    ledger lags anyway, and its scan must not hold the lock that every replica's sync
    waits for.

    Each-user and tag budgets read whole days before the first lease's day (or before
    today, with no lease yet) from their daily rollup, and only the rest from raw rows: a
    month of a popular tag is a few rollup rows, not a scan. Every row of those days
    started before the first lease, so they count in both figures."""
    first = conn.execute(
        select(func.min(BudgetLease.created_at)).where(
            BudgetLease.budget_id == budget_id,
            BudgetLease.period_start == start,
            BudgetLease.subject == subject,
        )
    ).scalar_one()
    split = _day(first if first is not None else dt.datetime.now(dt.UTC))
    split = min(max(split, start), end)
    rolled = rollup_spent(conn, scope, scope_value, subject, start, split)
    if rolled is None:  # a scope without a daily rollup: every row raw, as before
        rolled, split = ZERO, start
    cost = UsageRow.actual_cost_usd
    in_period = and_(
        scope_filter(scope, scope_value, subject or None),
        UsageRow.started_at >= split,
        UsageRow.started_at < end,
    )
    before_first = UsageRow.started_at < first if first is not None else text("true")
    total, baseline = conn.execute(
        select(
            func.coalesce(func.sum(cost), 0),
            func.coalesce(func.sum(cost).filter(before_first), 0),
        ).where(in_period)
    ).one()
    return rolled + Decimal(total or 0), rolled + Decimal(baseline or 0)


def _day(at: dt.datetime) -> dt.datetime:
    utc = at.astimezone(dt.UTC)
    return dt.datetime(utc.year, utc.month, utc.day, tzinfo=dt.UTC)


def period_spent(
    conn: Connection,
    budget_id: int,
    scope: BudgetScope,
    scope_value: str,
    start: dt.datetime,
    end: dt.datetime,
    ledger: tuple[Decimal, Decimal] | None = None,
    subject: str = "",
) -> tuple[Decimal, Decimal, Decimal, int]:
    """(spent, reserved by live holders, settled counted by holders, live holders).

    Spent is the larger of the ledger's total and (the ledger before the first lease of
    the period + what holders settled since): holders report a settled cost before the
    ledger's batched write lands, the ledger knows what came before any lease. `ledger`:
    `ledger_spent`'s figures when the caller read them already.
    """
    leases = conn.execute(
        select(
            func.coalesce(func.sum(BudgetLease.settled_usd), 0),
            func.coalesce(
                func.sum(BudgetLease.held_usd).filter(BudgetLease.expires_at > func.now()), 0
            ),
            func.count().filter(BudgetLease.expires_at > func.now()),
        ).where(
            BudgetLease.budget_id == budget_id,
            BudgetLease.period_start == start,
            BudgetLease.subject == subject,
        )
    ).one()
    settled, reserved, live = Decimal(leases[0]), Decimal(leases[1]), leases[2]
    total, baseline = ledger or ledger_spent(
        conn, budget_id, scope, scope_value, start, end, subject
    )
    spent = max(total, baseline + settled)
    return spent, reserved, settled, int(live)


def sync_budget_lease(
    conn: Connection,
    budget_id: int,
    start: dt.datetime,
    end: dt.datetime,
    holder: str,
    *,
    settled_delta: Decimal,
    returned_usd: Decimal,
    in_use_usd: Decimal,
    want_free_usd: Decimal,
    min_free_usd: Decimal = ZERO,
    ttl_s: float,
    ledger: tuple[Decimal, Decimal] | None = None,
    subject: str = "",
) -> BudgetLeaseState | None:
    """One holder's sync of one budget period (of one end user, `subject`, for an
    each-user budget: each has the whole limit), under the budget row's lock.

    The holder reports what it settled since its last sync (`settled_delta`: it leaves
    the hold and counts as spent at once, before the ledger has it) and what it puts
    back unused (`returned_usd`); what it has in flight (`in_use_usd`) stays held even
    past the limit (those requests are already upstream). Then its free part grows by up
    to `want_free_usd`, at most a fair share of what is free (free / live holders) unless
    `min_free_usd` (one waiting request's worst case) still fits.

    None if the budget is gone (removed meanwhile).
    """
    found = conn.execute(
        select(BudgetRow.scope, BudgetRow.scope_value).where(BudgetRow.id == budget_id)
    ).one_or_none()
    if found is None:
        return None
    scope, value = BudgetScope(found[0]), found[1]
    if ledger is None:  # a caller syncing several budgets reads every ledger figure first
        ledger = ledger_spent(conn, budget_id, scope, value, start, end, subject)
    # from here on under the budget's lock: a few short statements
    limit = conn.execute(
        select(BudgetRow.limit_usd).where(BudgetRow.id == budget_id).with_for_update()
    ).scalar_one_or_none()
    if limit is None:
        return None
    limit = Decimal(limit)
    key = (
        BudgetLease.budget_id == budget_id,
        BudgetLease.period_start == start,
        BudgetLease.subject == subject,
        BudgetLease.holder == holder,
    )
    row = conn.execute(
        select(BudgetLease.held_usd, BudgetLease.expires_at > func.now()).where(*key)
    ).one_or_none()
    renewed = row is not None and bool(row[1])
    held = in_use_usd
    if row is not None and renewed:
        held = max(in_use_usd, Decimal(row[0]) - settled_delta - returned_usd)
    expires = func.now() + dt.timedelta(seconds=ttl_s)
    conn.execute(
        pg_insert(BudgetLease)
        .values(
            budget_id=budget_id,
            period_start=start,
            subject=subject,
            holder=holder,
            held_usd=held,
            settled_usd=settled_delta,
            expires_at=expires,
        )
        .on_conflict_do_update(
            index_elements=["budget_id", "period_start", "subject", "holder"],
            set_={
                "held_usd": held,
                "settled_usd": BudgetLease.settled_usd + settled_delta,
                "expires_at": expires,
            },
        )
    )
    spent, reserved, _, live = period_spent(
        conn, budget_id, scope, value, start, end, ledger, subject
    )
    free = limit - spent - reserved  # `reserved` holds this holder's new hold already
    fair = free / max(1, live)
    grant = max(ZERO, min(want_free_usd, max(fair, min_free_usd), free))
    if grant > 0:
        conn.execute(update(BudgetLease).where(*key).values(held_usd=held + grant))
    return BudgetLeaseState(held + grant, grant, renewed, limit, spent, reserved + grant, live)


@dataclasses.dataclass(frozen=True, slots=True)
class BucketState:
    granted: int  # taken for this holder now
    level: Decimal  # what is left in the shared bucket after this take
    capacity: int


def take_from_bucket(
    conn: Connection, name: str, capacity: int, *, give_back: int, want: int
) -> BucketState:
    """Refill the bucket for the time passed (capacity per minute, never past capacity),
    put back `give_back` unused units, and take up to `want` whole units."""
    conn.execute(
        pg_insert(LimitBucket)
        .values(name=name, level=capacity)
        .on_conflict_do_nothing(index_elements=["name"])
    )
    level, elapsed = conn.execute(
        select(
            LimitBucket.level,
            func.extract("epoch", func.clock_timestamp() - LimitBucket.updated_at),
        )
        .where(LimitBucket.name == name)
        .with_for_update()
    ).one()
    refill = Decimal(max(0.0, float(elapsed))) * capacity / 60
    level = min(Decimal(capacity), Decimal(level) + refill + give_back)
    granted = max(0, min(want, int(level)))
    level -= granted
    conn.execute(
        update(LimitBucket)
        .where(LimitBucket.name == name)
        .values(level=level.quantize(Decimal("0.000001")), updated_at=func.clock_timestamp())
    )
    return BucketState(granted, level, capacity)


# a lease that lapsed this long ago belongs to a period that has ended (none is longer
# than 31 days): nothing reads it any more
PRUNE_AFTER = dt.timedelta(days=32)


def prune_leases(conn: Connection) -> int:
    """Drop leases of ended periods (an each-user budget leaves a row per end user and
    holder each period); returns how many."""
    done = conn.execute(
        delete(BudgetLease).where(BudgetLease.expires_at < func.now() - PRUNE_AFTER)
    )
    return int(done.rowcount or 0)


@dataclasses.dataclass(frozen=True, slots=True)
class BudgetStatus:
    """A budget's current period, as `costgate budgets list` and the dashboard show it.
    An each-user budget's figures are its top spender's (every end user has the whole
    limit), and `end_users` says how many spent and reached it."""

    budget: Budget
    period_start: dt.datetime
    period_end: dt.datetime
    spent_usd: Decimal
    reserved_usd: Decimal  # held by live replicas (what is in flight and their free slices)
    end_users: EndUserSpend | None = None

    @property
    def remaining_usd(self) -> Decimal:
        return max(ZERO, self.budget.limit_usd - self.spent_usd - self.reserved_usd)


def budget_statuses(
    engine: Engine, now: dt.datetime | None = None, top: int = 5
) -> list[BudgetStatus]:
    """Every budget's current period (`top`: the top spenders kept of each-user ones)."""
    at = now or dt.datetime.now(dt.UTC)
    out = []
    with engine.connect() as conn:
        for b in load_budgets(conn):
            start, end = b.window(at)
            if b.scope is BudgetScope.EACH_USER:
                users = end_user_spend(conn, b, start, end, top)
                leader = users.top[0][0] if users.top else None
                spent, reserved = ZERO, ZERO
                if leader is not None:  # the top spender as its replicas see it
                    spent, reserved, _, _ = period_spent(
                        conn, b.id, b.scope, b.scope_value, start, end, subject=leader
                    )
                out.append(BudgetStatus(b, start, end, spent, reserved, users))
                continue
            spent, reserved, _, _ = period_spent(conn, b.id, b.scope, b.scope_value, start, end)
            out.append(BudgetStatus(b, start, end, spent, reserved))
    return out
