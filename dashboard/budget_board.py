"""The Budgets page's data and its one action: each budget with its figures, burn-down
points and exhaustion forecast; the budget table and the audit trail as frames; and a
budget change, checked on the server and audited as the signed-in user.

Reads go through `db.budget_alerts.budget_figures` (what the alerts read, so the page and
the webhooks agree) and `db.budget_spend.hourly_spend`; the change through
`db.budgets.set_budget`, the same path as `costgate budgets set`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from dashboard.access.guard import authorize
from dashboard.access.sessions import SessionStore, SessionUser
from dashboard.auth import Permission, User
from dashboard.components.formatting import format_pct, format_usd
from db.budget_alerts import BudgetFigures, budget_figures
from db.budget_spend import hourly_spend
from db.budgets import BudgetChangeEntry, set_budget
from gateway.domain.budget_forecast import (
    ExhaustionForecast,
    SpendPoint,
    forecast_exhaustion,
)
from gateway.domain.budgets import Budget, BudgetPeriod, BudgetScope, describe_scope, parse_alert_at

SCOPE_LABELS = {
    BudgetScope.APP: "an app",
    BudgetScope.TEAM: "a team",
    BudgetScope.KEY: "a key (its id)",
    BudgetScope.ALL: "the whole gateway",
    BudgetScope.EACH_USER: "each end user of an app (its name)",
    BudgetScope.TAG: "a tag (key=value)",
}


@dataclasses.dataclass(frozen=True)
class BudgetView:
    figures: BudgetFigures
    points: list[SpendPoint]  # cumulative spend, clamped to now
    forecast: ExhaustionForecast

    @property
    def budget(self) -> Budget:
        return self.figures.budget

    @property
    def title(self) -> str:
        b = self.budget
        return f"#{b.id} · {describe_scope(b.scope, b.scope_value)} · per {b.period.value}"


def visible_to(budget: Budget, team: str | None) -> bool:
    """A team-scoped user sees only the budget of their own team."""
    return team is None or (budget.scope is BudgetScope.TEAM and budget.scope_value == team)


def load_board(engine: Engine, now: dt.datetime, team: str | None = None) -> list[BudgetView]:
    views = []
    for f in budget_figures(engine, now):
        if not visible_to(f.budget, team):
            continue
        points = [
            SpendPoint(min(p.at, now), p.cumulative_usd)
            for p in hourly_spend(engine, f.budget, f.period_start, f.period_end)
        ]
        forecast = forecast_exhaustion(
            f.budget.limit_usd, points, f.period_start, f.period_end, now
        )
        views.append(BudgetView(f, points, forecast))
    return views


def _when(at: dt.datetime | None) -> str:
    return "—" if at is None else at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M")


def runs_out_text(view: BudgetView) -> str:
    f = view.forecast
    if f.already_exhausted:
        return f"spent at {_when(f.exhausted_at)}"
    if f.exhausted_at is None:
        return "not this period"
    return _when(f.exhausted_at)


def board_frame(views: Sequence[BudgetView]) -> pd.DataFrame:
    columns = [
        "budget", "applies to", "period", "kind", "limit", "spent", "reserved",
        "remaining", "used", "period ends (UTC)", "runs out (UTC)", "alerts at",
    ]  # fmt: skip
    rows = []
    for v in views:
        b, f = v.budget, v.figures
        rows.append(
            [
                b.id,
                describe_scope(b.scope, b.scope_value),
                b.period.value,
                "hard" if b.hard else "soft",
                format_usd(b.limit_usd),
                format_usd(f.spent_usd),
                format_usd(f.reserved_usd),
                format_usd(max(Decimal(0), b.limit_usd - f.spent_usd - f.reserved_usd)),
                format_pct(f.spent_pct),
                _when(f.period_end),
                runs_out_text(v),
                ", ".join(f"{a}%" for a in b.alert_at),
            ]
        )
    return pd.DataFrame(rows, columns=columns)


def history_frame(changes: Sequence[BudgetChangeEntry], team: str | None = None) -> pd.DataFrame:
    """who changed which budget when, before → after; newest first."""
    columns = ["when (UTC)", "who", "budget", "applies to", "period", "before", "after"]

    def text(state: Mapping[str, Any] | None) -> str:
        if state is None:
            return "—"
        kind = "hard" if state.get("hard") else "soft"
        alerts = ",".join(str(a) for a in state.get("alert_at", []))
        return f"${state.get('limit_usd')} {kind}, alerts at {alerts}%"

    rows = [
        [
            _when(c.changed_at) if c.changed_at.tzinfo else str(c.changed_at),
            c.actor,
            c.budget_id,
            describe_scope(BudgetScope(c.scope), c.scope_value),
            c.period,
            text(c.before),
            text(c.after),
        ]
        for c in changes
        if team is None or (c.scope == BudgetScope.TEAM.value and c.scope_value == team)
    ]
    return pd.DataFrame(rows, columns=columns)


class BudgetFormError(ValueError):
    """What is wrong with the form, for the person who filled it in."""


@dataclasses.dataclass(frozen=True)
class BudgetForm:
    scope: BudgetScope
    scope_value: str
    period: BudgetPeriod
    limit_usd: Decimal
    hard: bool
    alert_at: tuple[int, ...]


def read_form(
    scope: str, scope_value: str, period: str, limit_text: str, hard: bool, alert_text: str
) -> BudgetForm:
    """The form's fields as a budget, or BudgetFormError saying what to fix."""
    try:
        limit = Decimal(limit_text.strip().lstrip("$").replace(",", ""))
    except InvalidOperation:
        raise BudgetFormError(f"the limit is not an amount in USD: {limit_text!r}") from None
    if not limit.is_finite() or limit < 0:
        raise BudgetFormError("the limit is a USD amount of 0 or more")
    try:
        alerts = parse_alert_at(alert_text)
    except ValueError as err:
        raise BudgetFormError(str(err)) from None
    budget_scope = BudgetScope(scope)
    value = "" if budget_scope is BudgetScope.ALL else scope_value.strip()
    if budget_scope is not BudgetScope.ALL and not value:
        raise BudgetFormError(f"name the {budget_scope.value} the budget applies to")
    return BudgetForm(budget_scope, value, BudgetPeriod(period), limit, hard, alerts)


def apply_budget(
    user: SessionUser,
    form: BudgetForm,
    engine: Engine,
    *,
    users: Mapping[str, User] | None = None,
    store: SessionStore | None = None,
) -> Budget:
    """Create or change the budget as `user`, audited with the configured user's name.

    Raises `PermissionDenied` (nothing written) unless `user`'s session is open and the
    configured role may change budgets, for every team (a budget may cap any of them).
    """
    who = authorize(user, Permission.BUDGETS_EDIT, all_teams=True, users=users, store=store)
    return set_budget(
        engine,
        form.scope,
        form.scope_value,
        form.period,
        form.limit_usd,
        actor=who.name,
        hard=form.hard,
        alert_at=form.alert_at,
    )
