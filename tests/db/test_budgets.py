"""Budgets in PostgreSQL: set, change, remove, every change audited; spend from the ledger."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest
from sqlalchemy import Engine, insert

from db.budgets import (
    BudgetNotFound,
    budget_changes,
    end_user_spend,
    load_budgets,
    remove_budget,
    scope_value_of,
    set_budget,
    spent_in_period,
)
from db.models import BUDGET_PERIODS, BUDGET_SCOPES, UsageRow
from gateway.domain.budgets import BudgetPeriod, BudgetScope

pytestmark = pytest.mark.usefixtures("clean_ledger")

DAY, APP = BudgetPeriod.DAY, BudgetScope.APP


def test_set_creates_then_changes_one_budget_and_audits_both(ledger_engine: Engine) -> None:
    first = set_budget(ledger_engine, APP, "shop", DAY, Decimal("0.02"), actor="alice")
    second = set_budget(
        ledger_engine, APP, "shop", DAY, Decimal("0.05"), actor="bob", hard=False, alert_at=(90,)
    )
    assert second.id == first.id
    (loaded,) = load_budgets(ledger_engine)
    assert (loaded.limit_usd, loaded.hard, loaded.alert_at) == (Decimal("0.05"), False, (90,))
    newest, oldest = budget_changes(ledger_engine)
    assert (oldest.actor, oldest.before) == ("alice", None)
    assert oldest.after is not None and oldest.after["limit_usd"] == "0.02"
    assert newest.actor == "bob"
    assert newest.before == oldest.after
    assert newest.after is not None and newest.after["hard"] is False


def test_the_same_scope_may_have_one_budget_per_period(ledger_engine: Engine) -> None:
    set_budget(ledger_engine, APP, "shop", DAY, Decimal(1), actor="a")
    set_budget(ledger_engine, APP, "shop", BudgetPeriod.MONTH, Decimal(20), actor="a")
    set_budget(ledger_engine, BudgetScope.ALL, "ignored", DAY, Decimal(100), actor="a")
    budgets = load_budgets(ledger_engine)
    assert [(b.scope, b.scope_value, b.period) for b in budgets] == [
        (APP, "shop", DAY),
        (APP, "shop", BudgetPeriod.MONTH),
        (BudgetScope.ALL, "", DAY),
    ]


def test_remove_deletes_and_audits_and_refuses_what_is_not_there(ledger_engine: Engine) -> None:
    set_budget(ledger_engine, APP, "shop", DAY, Decimal(1), actor="a")
    set_budget(ledger_engine, APP, "shop", BudgetPeriod.WEEK, Decimal(5), actor="a")
    removed = remove_budget(ledger_engine, APP, "shop", actor="carol")
    assert {b.period for b in removed} == {DAY, BudgetPeriod.WEEK}
    assert load_budgets(ledger_engine) == []
    audit = budget_changes(ledger_engine)
    assert [(c.actor, c.after) for c in audit[:2]] == [("carol", None), ("carol", None)]
    with pytest.raises(BudgetNotFound):
        remove_budget(ledger_engine, APP, "shop", DAY, actor="carol")


@pytest.mark.parametrize("bad", [Decimal(-1), Decimal("NaN")])
def test_an_impossible_limit_is_refused(ledger_engine: Engine, bad: Decimal) -> None:
    with pytest.raises(ValueError):
        set_budget(ledger_engine, APP, "shop", DAY, bad, actor="a")
    assert load_budgets(ledger_engine) == []


def _record(engine: Engine, at: dt.datetime, cost: str | None, **who: object) -> None:
    row = {
        "request_id": uuid.uuid4(),
        "started_at": at,
        "ended_at": at,
        "app": "shop",
        "team": None,
        "key_id": None,
        "requested_model": "m",
        "stream": False,
        "status": "ok",
        "http_status": 200,
        "usage_source": "provider",
        "latency_ms": 1,
        "attempts": 1,
        "actual_cost_usd": None if cost is None else Decimal(cost),
    } | who
    with engine.begin() as conn:
        conn.execute(insert(UsageRow).values(**row))


def test_spent_counts_the_scopes_billed_cost_inside_the_period(ledger_engine: Engine) -> None:
    key = uuid.uuid4()
    start = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    end = start + dt.timedelta(days=1)
    _record(ledger_engine, start, "0.0010000001", team="t1", key_id=key)
    _record(ledger_engine, end - dt.timedelta(microseconds=1), "0.002", team="t1")
    _record(ledger_engine, end, "5")  # the next day
    _record(ledger_engine, start, None)  # unknown cost
    _record(ledger_engine, start, "7", app="other")
    assert spent_in_period(ledger_engine, APP, "shop", start, end) == Decimal("0.0030000001")
    assert spent_in_period(ledger_engine, BudgetScope.TEAM, "t1", start, end) == Decimal(
        "0.0030000001"
    )
    assert spent_in_period(ledger_engine, BudgetScope.KEY, str(key), start, end) == Decimal(
        "0.0010000001"
    )
    assert spent_in_period(ledger_engine, BudgetScope.KEY, "not-a-uuid", start, end) == 0
    assert spent_in_period(ledger_engine, BudgetScope.ALL, "", start, end) == Decimal(
        "7.0030000001"
    )


def test_the_schema_allows_exactly_the_domains_scopes_and_periods() -> None:
    assert set(BUDGET_SCOPES) == {s.value for s in BudgetScope}
    assert set(BUDGET_PERIODS) == {p.value for p in BudgetPeriod}


def test_each_user_and_tag_scopes_count_their_own_rows(ledger_engine: Engine) -> None:
    start = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    end = start + dt.timedelta(days=1)
    _record(ledger_engine, start, "0.5", end_user="alice", tags={"feature": "search"})
    _record(ledger_engine, start, "0.25", end_user="alice")
    _record(ledger_engine, start, "0.125", end_user="bob", tags={"feature": "chat"})
    _record(ledger_engine, start, "8", end_user="alice", app="blog", tags={"feature": "search"})
    _record(ledger_engine, start, "16")  # no end user, no tag
    each, tag = BudgetScope.EACH_USER, BudgetScope.TAG
    assert spent_in_period(ledger_engine, each, "shop", start, end, "alice") == Decimal("0.75")
    assert spent_in_period(ledger_engine, each, "shop", start, end, "bob") == Decimal("0.125")
    # no subject: the top spender's (what alerts compare with the limit each user has)
    assert spent_in_period(ledger_engine, each, "shop", start, end) == Decimal("0.75")
    assert spent_in_period(ledger_engine, tag, "feature=search", start, end) == Decimal("8.5")
    budget = set_budget(ledger_engine, each, "shop", DAY, Decimal("0.5"), actor="a")
    users = end_user_spend(ledger_engine, budget, start, end)
    assert (users.end_users, users.at_or_over) == (2, 1)
    assert users.top == (("alice", Decimal("0.75")), ("bob", Decimal("0.125")))


def test_a_tag_budget_is_stored_as_key_equals_value() -> None:
    assert scope_value_of(BudgetScope.TAG, " feature = search ") == "feature=search"
    assert scope_value_of(BudgetScope.ALL, "x") == ""
    with pytest.raises(ValueError):
        set_budget(None, BudgetScope.TAG, "feature", DAY, Decimal(1), actor="a")
