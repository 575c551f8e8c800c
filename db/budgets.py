"""Budgets in PostgreSQL: set, list, remove, each change audited (who, when, before,
after), and what a scope spent in a period according to the ledger.

The replicas read the whole set every few seconds (`load_budgets`) and enforce it by
leasing (`db.leases`); this module is also what `costgate budgets` and the dashboard use.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    and_,
    delete,
    false,
    func,
    insert,
    select,
    text,
    true,
    update,
)
from sqlalchemy.sql.elements import ColumnElement

from db.analytics.attribution_tables import usage_rollup_tag_daily, usage_rollup_user_daily
from db.engine import engine_scope
from db.models import BudgetChange, BudgetRow, UsageRow
from gateway.domain.budgets import (
    DEFAULT_ALERT_AT,
    Budget,
    BudgetPeriod,
    BudgetScope,
    check_budget,
    split_tag,
)
from gateway.domain.pricing import quantize_money


class BudgetNotFound(LookupError):
    """No budget matches what was given."""


@dataclasses.dataclass(frozen=True, slots=True)
class BudgetChangeEntry:
    id: int
    budget_id: int
    scope: str
    scope_value: str
    period: str
    actor: str
    changed_at: dt.datetime
    before: dict[str, Any] | None
    after: dict[str, Any] | None


def _budget(row: BudgetRow) -> Budget:
    return Budget(
        id=row.id,
        scope=BudgetScope(row.scope),
        scope_value=row.scope_value,
        period=BudgetPeriod(row.period),
        limit_usd=Decimal(row.limit_usd),
        hard=row.hard,
        alert_at=tuple(row.alert_at),
    )


def as_json(budget: Budget) -> dict[str, Any]:
    """A budget as the audit trail keeps it (the amount as an exact decimal string)."""
    return {
        "scope": budget.scope.value,
        "scope_value": budget.scope_value,
        "period": budget.period.value,
        "limit_usd": format(budget.limit_usd.normalize(), "f"),
        "hard": budget.hard,
        "alert_at": list(budget.alert_at),
    }


def load_budgets(engine_or_url: Connection | Engine | str | None = None) -> list[Budget]:
    query = select(BudgetRow).order_by(BudgetRow.id)
    if isinstance(engine_or_url, Connection):
        rows = engine_or_url.execute(query).all()
    else:
        with engine_scope(engine_or_url) as engine, engine.connect() as conn:
            rows = conn.execute(query).all()
    return [_budget(BudgetRow(**row._mapping)) for row in rows]


def scope_value_of(scope: BudgetScope, scope_value: str) -> str:
    """The value as stored: "" for the whole gateway, a tag as "key=value" with each side
    stripped (what admission looks a request's tags up by)."""
    if scope is BudgetScope.ALL:
        return ""
    if scope is BudgetScope.TAG:
        key, value = split_tag(scope_value)
        return f"{key}={value}" if key and value else scope_value.strip()
    return scope_value.strip()


def _find(conn: Connection, scope: BudgetScope, value: str, period: BudgetPeriod) -> Budget | None:
    row = conn.execute(
        select(BudgetRow)
        .where(
            BudgetRow.scope == scope.value,
            BudgetRow.scope_value == value,
            BudgetRow.period == period.value,
        )
        .with_for_update()
    ).one_or_none()
    return None if row is None else _budget(BudgetRow(**row._mapping))


def _audit(conn: Connection, actor: str, before: Budget | None, after: Budget | None) -> None:
    subject = after or before
    assert subject is not None
    conn.execute(
        insert(BudgetChange).values(
            budget_id=subject.id,
            scope=subject.scope.value,
            scope_value=subject.scope_value,
            period=subject.period.value,
            actor=actor,
            before=None if before is None else as_json(before),
            after=None if after is None else as_json(after),
        )
    )


def set_budget(
    engine_or_url: Engine | str | None,
    scope: BudgetScope,
    scope_value: str,
    period: BudgetPeriod,
    limit_usd: Decimal,
    *,
    actor: str,
    hard: bool = True,
    alert_at: tuple[int, ...] = DEFAULT_ALERT_AT,
) -> Budget:
    """Create the budget of (scope, value, period) or change it; audited either way."""
    value = scope_value_of(scope, scope_value)
    alerts = tuple(sorted(set(alert_at)))
    check_budget(scope, value, limit_usd, alerts)
    limit_usd = quantize_money(limit_usd)  # as NUMERIC(20, 10) stores it
    if not actor.strip():
        raise ValueError("a budget change needs an actor")
    fields = {"limit_usd": limit_usd, "hard": hard, "alert_at": list(alerts)}
    with engine_scope(engine_or_url) as engine, engine.begin() as conn:
        before = _find(conn, scope, value, period)
        if before is None:
            new_id = conn.execute(
                insert(BudgetRow)
                .values(scope=scope.value, scope_value=value, period=period.value, **fields)
                .returning(BudgetRow.id)
            ).scalar_one()
        else:
            new_id = before.id
            conn.execute(
                update(BudgetRow)
                .where(BudgetRow.id == new_id)
                .values(updated_at=func.now(), **fields)
            )
        after = Budget(new_id, scope, value, period, limit_usd, hard, alerts)
        _audit(conn, actor, before, after)
    return after


def remove_budget(
    engine_or_url: Engine | str | None,
    scope: BudgetScope,
    scope_value: str,
    period: BudgetPeriod | None = None,
    *,
    actor: str,
) -> list[Budget]:
    """Remove the scope's budget of `period` (every period when None); audited.

    Raises BudgetNotFound when nothing matched.
    """
    value = scope_value_of(scope, scope_value)
    periods = list(BudgetPeriod) if period is None else [period]
    removed: list[Budget] = []
    with engine_scope(engine_or_url) as engine, engine.begin() as conn:
        for p in periods:
            found = _find(conn, scope, value, p)
            if found is None:
                continue
            conn.execute(delete(BudgetRow).where(BudgetRow.id == found.id))
            _audit(conn, actor, found, None)
            removed.append(found)
    if not removed:
        raise BudgetNotFound(
            f"no {period or ''} budget on {scope.value} {value!r}".replace("  ", " ")
        )
    return removed


def budget_changes(
    engine_or_url: Engine | str | None = None, limit: int = 100
) -> list[BudgetChangeEntry]:
    """The newest changes first."""
    query = select(BudgetChange).order_by(BudgetChange.id.desc()).limit(limit)
    with engine_scope(engine_or_url) as engine, engine.connect() as conn:
        rows = conn.execute(query).all()
    return [
        BudgetChangeEntry(
            r.id,
            r.budget_id,
            r.scope,
            r.scope_value,
            r.period,
            r.actor,
            r.changed_at,
            r.before,
            r.after,
        )
        for r in rows
    ]


def scope_filter(
    scope: BudgetScope, scope_value: str, subject: str | None = None
) -> ColumnElement[bool]:
    """The ledger rows a budget of this scope counts. An each-user budget counts one end
    user's rows (`subject`, as stored), or with no subject every end user's of the app."""
    if scope is BudgetScope.APP:
        return UsageRow.app == scope_value
    if scope is BudgetScope.TEAM:
        return UsageRow.team == scope_value
    if scope is BudgetScope.KEY:
        try:
            return UsageRow.key_id == uuid.UUID(scope_value)
        except ValueError:
            return false()  # not a key id: no row is that key's
    if scope is BudgetScope.EACH_USER:
        user = UsageRow.end_user.is_not(None) if subject is None else UsageRow.end_user == subject
        return and_(UsageRow.app == scope_value, user)
    if scope is BudgetScope.TAG:
        key, value = split_tag(scope_value)
        return UsageRow.tags.contains({key: value})  # `@>`: one of the row's tags
    return true()


def rollup_spent(
    conn: Connection, scope: BudgetScope, scope_value: str, subject: str, start: dt.datetime,
    end: dt.datetime,
) -> Decimal | None:  # fmt: skip
    """What whole UTC days [start, end) of an each-user or tag budget billed, from the
    daily rollup PostgreSQL keeps in the ledger's own transaction (exact, and still there
    when raw rows are pruned); None for the other scopes (they read raw rows)."""
    if scope is BudgetScope.EACH_USER:
        t = usage_rollup_user_daily.c
        where = and_(t.app == scope_value, t.end_user == subject)
    elif scope is BudgetScope.TAG:
        t = usage_rollup_tag_daily.c
        key, value = split_tag(scope_value)
        where = and_(t.tag_key == key, t.tag_value == value)
    else:
        return None
    if end <= start:
        return Decimal(0)
    found = conn.execute(
        select(func.coalesce(func.sum(t.actual_cost_usd), 0)).where(
            where, t.bucket >= start, t.bucket < end
        )
    ).scalar_one()
    return Decimal(found or 0)


@dataclasses.dataclass(frozen=True, slots=True)
class EndUserSpend:
    """An each-user budget's period across its end users: how many reached the limit,
    and the top spenders (as stored: plain, HMAC or a tombstone)."""

    end_users: int  # with any billed spend this period
    at_or_over: int
    top: tuple[tuple[str, Decimal], ...]


def end_user_spend(
    conn: Connection | Engine, budget: Budget, start: dt.datetime, end: dt.datetime, top: int = 5
) -> EndUserSpend:
    """From the daily end-user rollup: one grouped read of the app's days, however many
    end users it has."""
    t = usage_rollup_user_daily.c
    spent = func.coalesce(func.sum(t.actual_cost_usd), 0).label("spent")
    per_user = (
        select(t.end_user, spent)
        .where(t.app == budget.scope_value, t.bucket >= start, t.bucket < end)
        .group_by(t.end_user)
        .subquery()
    )
    counts = select(
        func.count().filter(per_user.c.spent > 0),
        func.count().filter(per_user.c.spent >= budget.limit_usd),
    )
    leaders = (
        select(per_user.c.end_user, per_user.c.spent)
        .where(per_user.c.spent > 0)
        .order_by(per_user.c.spent.desc(), per_user.c.end_user)
        .limit(top)
    )

    def read(c: Connection) -> EndUserSpend:
        users, over = c.execute(counts).one()
        rows = c.execute(leaders).all()
        return EndUserSpend(int(users), int(over), tuple((r[0], Decimal(r[1])) for r in rows))

    if isinstance(conn, Engine):
        with conn.connect() as c:
            return read(c)
    return read(conn)


def spent_in_period(
    conn: Connection | Engine,
    scope: BudgetScope,
    scope_value: str,
    start: dt.datetime,
    end: dt.datetime,
    subject: str | None = None,
) -> Decimal:
    """What the provider billed (the ledger's actual_cost_usd) for requests of the scope
    that started in [start, end). Requests of unknown cost count as 0 here: under a hard
    budget they were never admitted (docs/BUDGETS.md). An each-user budget without a
    `subject`: what its top spender spent (the figure its alerts and page compare with
    the limit, which each end user has to themselves)."""
    query = select(func.coalesce(func.sum(UsageRow.actual_cost_usd), 0)).where(
        and_(
            scope_filter(scope, scope_value, subject),
            UsageRow.started_at >= start,
            UsageRow.started_at < end,
        )
    )
    if scope is BudgetScope.EACH_USER and subject is None:
        if _midnight(start) and _midnight(end):  # whole days: one grouped rollup read
            budget = Budget(0, scope, scope_value, BudgetPeriod.DAY, Decimal(0), True)
            leaders = end_user_spend(conn, budget, start, end, top=1).top
            return leaders[0][1] if leaders else Decimal(0)
        query = (
            select(func.coalesce(func.sum(UsageRow.actual_cost_usd), 0).label("spent"))
            .where(
                scope_filter(scope, scope_value),
                UsageRow.started_at >= start,
                UsageRow.started_at < end,
            )
            .group_by(UsageRow.end_user)
            .order_by(text("spent DESC"))
            .limit(1)
        )
    if isinstance(conn, Engine):
        with conn.connect() as c:
            return Decimal(c.execute(query).scalar_one_or_none() or 0)
    return Decimal(conn.execute(query).scalar_one_or_none() or 0)


def _midnight(at: dt.datetime) -> bool:
    return at.astimezone(dt.UTC).time() == dt.time(0)
