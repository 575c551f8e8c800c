"""The Budgets page's data and action against real PostgreSQL: figures, burn-down points
and forecast per budget; the form's checks; a change applied only for a role that may,
checked on the server, audited as the configured user."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest
from sqlalchemy import Engine, insert

from dashboard.access.guard import PermissionDenied
from dashboard.access.sessions import SessionStore, SessionUser
from dashboard.auth import MIN_PBKDF2_ITERATIONS, USERS_ENV, hash_password, load_users
from dashboard.budget_board import (
    BudgetFormError,
    apply_budget,
    board_frame,
    history_frame,
    load_board,
    read_form,
    runs_out_text,
)
from db.budgets import budget_changes, load_budgets, set_budget
from db.models import UsageRow
from gateway.domain.budgets import BudgetPeriod, BudgetScope

pytestmark = pytest.mark.usefixtures("clean_ledger")

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
DAY = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def spend(
    engine: Engine, at: dt.datetime, usd: str, app: str = "shop", team: str | None = None
) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(UsageRow).values(
                request_id=uuid.uuid4(),
                started_at=at,
                ended_at=at,
                app=app,
                team=team,
                requested_model="m",
                stream=False,
                status="ok",
                http_status=200,
                usage_source="provider",
                latency_ms=1,
                attempts=1,
                actual_cost_usd=Decimal(usd),
            )
        )


@pytest.fixture
def people(tmp_path):
    cheap = MIN_PBKDF2_ITERATIONS
    users = load_users(
        {
            USERS_ENV: f"fin:finance:{hash_password('f', cheap)},"
            f"ann:admin:{hash_password('a', cheap)},"
            f"olga:ops:{hash_password('o', cheap)},"
            f"vic:viewer:{hash_password('v', cheap)},"
            f"tess:finance:{hash_password('t', cheap)}:platform"
        }
    )
    store = SessionStore(tmp_path / "sessions", b"x" * 32, ttl_s=600)

    def signed_in(name: str, claimed_role: str | None = None) -> SessionUser:
        user = users[name]
        session = store.open(name, user.password_hash).session_id
        return SessionUser(name, claimed_role or user.role, user.team, session)

    return users, store, signed_in


def test_the_board_shows_each_budgets_figures_and_when_it_runs_out(ledger_engine: Engine) -> None:
    set_budget(ledger_engine, BudgetScope.APP, "shop", BudgetPeriod.DAY, Decimal("3.5"), actor="t")
    set_budget(ledger_engine, BudgetScope.TEAM, "platform", BudgetPeriod.DAY, Decimal(1), actor="t")
    spend(ledger_engine, DAY + dt.timedelta(hours=2, minutes=10), "1")
    spend(ledger_engine, DAY + dt.timedelta(hours=5, minutes=30), "1")  # $2 by noon: $1/6 an hour
    spend(ledger_engine, DAY + dt.timedelta(hours=3), "2", app="other", team="platform")
    shop, platform = load_board(ledger_engine, NOW)
    assert shop.figures.spent_usd == 2
    assert [p.cumulative_usd for p in shop.points] == [1, 2]
    assert shop.points[0].at == DAY + dt.timedelta(hours=3)  # the end of its hour
    # the $1.50 left, at that pace, lasts 9 more hours
    assert shop.forecast.exhausted_at == NOW + dt.timedelta(hours=9)
    assert runs_out_text(shop) == "2026-12-01 21:00"
    assert platform.forecast.already_exhausted
    assert runs_out_text(platform) == "spent at 2026-12-01 04:00"
    frame = board_frame([shop, platform])
    assert list(frame["applies to"]) == ["app 'shop'", "team 'platform'"]
    assert list(frame["spent"]) == ["$2.00", "$2.00"]
    assert list(frame["used"]) == ["57.1%", "200.0%"]
    # a user of one team sees that team's budget only
    (only,) = load_board(ledger_engine, NOW, team="platform")
    assert only.budget.scope_value == "platform"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (("app", "shop", "day", "lots", True, "50"), "not an amount"),
        (("app", "shop", "day", "-1", True, "50"), "0 or more"),
        (("app", " ", "day", "5", True, "50"), "name the app"),
        (("team", "t", "week", "5", True, "50,x"), "whole percentages"),
        (("key", "k", "month", "5", True, "0"), "between 1 and 1000"),
    ],
)
def test_a_bad_form_says_what_to_fix(fields: tuple, message: str) -> None:
    with pytest.raises(BudgetFormError, match=message):
        read_form(*fields)


def test_finance_and_admins_save_budgets_audited_under_their_own_name(
    ledger_engine: Engine, people
) -> None:
    users, store, signed_in = people
    form = read_form("app", "shop", "day", "$1,000.50", False, "80,50")
    saved = apply_budget(signed_in("fin"), form, ledger_engine, users=users, store=store)
    assert (saved.limit_usd, saved.hard, saved.alert_at) == (Decimal("1000.50"), False, (50, 80))
    form = read_form("all", "ignored", "month", "20000", True, "100")
    apply_budget(signed_in("ann"), form, ledger_engine, users=users, store=store)
    assert [c.actor for c in budget_changes(ledger_engine)] == ["ann", "fin"]
    history = history_frame(budget_changes(ledger_engine))
    assert list(history["who"]) == ["ann", "fin"]
    assert history["after"].iloc[1] == "$1000.5 soft, alerts at 50,80%"


def test_ops_viewers_forged_roles_team_users_and_ended_sessions_cannot_change_a_budget(
    ledger_engine: Engine, people
) -> None:
    users, store, signed_in = people
    form = read_form("app", "shop", "day", "5", True, "50")
    refused = [
        signed_in("olga"),
        signed_in("vic"),
        signed_in("vic", claimed_role="admin"),  # a session state that claims another role
        signed_in("tess"),  # finance, but for one team only
    ]
    ended = signed_in("fin")
    store.close(ended.session_id)
    for user in [*refused, ended]:
        with pytest.raises(PermissionDenied):
            apply_budget(user, form, ledger_engine, users=users, store=store)
    assert load_budgets(ledger_engine) == []
    assert budget_changes(ledger_engine) == []
