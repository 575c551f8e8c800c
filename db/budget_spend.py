"""A budget's spend over its period, hour by hour, from the ledger: what its burn-down
chart and exhaustion forecast are drawn from (the dashboard's Budgets page)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from sqlalchemy import Engine, and_, func, select

from db.budgets import end_user_spend, scope_filter
from db.models import UsageRow
from gateway.domain.budget_forecast import SpendPoint
from gateway.domain.budgets import Budget, BudgetScope


def hourly_spend(
    engine: Engine, budget: Budget, start: dt.datetime, end: dt.datetime
) -> list[SpendPoint]:
    """Cumulative billed cost at the end of each hour of [start, end) that had any (the
    ledger's actual_cost_usd, counted as `spent_in_period` counts it). An each-user
    budget's are its top spender's (the figure its alerts compare with the limit)."""
    subject = None
    if budget.scope is BudgetScope.EACH_USER:
        leaders = end_user_spend(engine, budget, start, end, top=1).top
        if not leaders:
            return []
        subject = leaders[0][0]
    hour = func.date_trunc("hour", UsageRow.started_at)
    query = (
        select(hour, func.sum(UsageRow.actual_cost_usd))
        .where(
            and_(
                scope_filter(budget.scope, budget.scope_value, subject),
                UsageRow.started_at >= start,
                UsageRow.started_at < end,
                UsageRow.actual_cost_usd.is_not(None),
            )
        )
        .group_by(hour)
        .order_by(hour)
    )
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    points: list[SpendPoint] = []
    total = Decimal(0)
    for at, usd in rows:
        total += Decimal(usd)
        points.append(SpendPoint(min(at + dt.timedelta(hours=1), end), total))
    return points
