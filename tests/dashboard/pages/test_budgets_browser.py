"""The Budgets page in a real browser (Debian's Chromium, headless) against a real
dashboard process and PostgreSQL: finance creates and changes a budget there (audited
under their name), sees its burn-down and forecast; ops read the same page and cannot
change a budget. No gateway needed: budgets live in the ledger database."""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Iterator
from decimal import Decimal

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import Engine, insert

from dashboard.auth import USERS_ENV
from db.budgets import budget_changes, load_budgets, set_budget
from db.models import UsageRow
from gateway.domain.budgets import BudgetPeriod, BudgetScope
from gateway.domain.config import default_config_path
from tests.dashboard.pages.test_browser import open_page, settle, shot, sign_in
from tests.dashboard.support.dashboard_process import running_dashboard, users_value

pytestmark = pytest.mark.browser

DASHBOARD_PORT_OFFSET = 73


@pytest.fixture(scope="module")
def budgets_dashboard(database_url, port_block, tmp_path_factory) -> Iterator[str]:
    port = port_block.port(DASHBOARD_PORT_OFFSET)
    workdir = tmp_path_factory.mktemp("budgets-dashboard")
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        COSTGATE_STATE_DIR=str(workdir / "state"),
        COSTGATE_DASHBOARD_REFRESH_S="3600",  # no timer reruns while the test types
    )
    env[USERS_ENV] = users_value((
            ("fin", "finance", "fin-pass"),
            ("olga", "ops", "ops-pass"),
        ))
    with running_dashboard(port, env, default_config_path(), workdir / "streamlit.log") as url:
        yield url


def spend_today(engine: Engine, app: str, usd: str) -> None:
    now = dt.datetime.now(dt.UTC)
    with engine.begin() as conn:
        conn.execute(
            insert(UsageRow).values(
                request_id=uuid.uuid4(),
                started_at=now,
                ended_at=now,
                app=app,
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


def fill_budget_form(page: Page, name: str, limit: str, saved: str) -> None:
    page.get_by_role("textbox", name="Name (app or team) or key id").fill(name)
    page.get_by_role("textbox", name="Limit (USD)").fill(limit)
    page.get_by_role("textbox", name="Limit (USD)").press("Tab")
    page.get_by_role("button", name="Save budget").click()
    expect(page.get_by_text(saved)).to_be_visible(timeout=60_000)
    settle(page)


@pytest.mark.usefixtures("clean_ledger")
def test_finance_sets_budgets_in_the_browser_and_ops_only_read_them(
    budgets_dashboard: str, browser, ledger_engine: Engine
) -> None:
    set_budget(ledger_engine, BudgetScope.APP, "shop", BudgetPeriod.DAY, Decimal(1), actor="seed")
    spend_today(ledger_engine, "shop", "0.40")

    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    sign_in(page, budgets_dashboard, "fin", "fin-pass")
    open_page(page, "Budgets")
    table = page.get_by_test_id("stDataFrame").first
    expect(table).to_be_visible()
    expect(page.get_by_test_id("stPlotlyChart")).to_have_count(1)
    expect(page.get_by_text("Spent this period")).to_be_visible()

    # a new daily budget on app search
    fill_budget_form(page, "search", "2.50", "Saved: the daily budget of $2.50 on app 'search'")
    expect(page.get_by_test_id("stPlotlyChart")).to_have_count(2)
    # the same scope and period: a change
    fill_budget_form(page, "shop", "5", "Saved: the daily budget of $5.00 on app 'shop'")
    shot(page, "finance-budgets")
    by_app = {b.scope_value: b for b in load_budgets(ledger_engine)}
    assert by_app["search"].limit_usd == Decimal("2.5") and by_app["search"].hard
    assert by_app["shop"].limit_usd == 5 and len(by_app) == 2
    changed, created, seeded = budget_changes(ledger_engine)
    assert (created.actor, created.before) == ("fin", None)
    assert (changed.actor, seeded.actor) == ("fin", "seed")
    assert changed.before is not None and changed.before["limit_usd"] == "1"
    assert changed.after is not None and changed.after["limit_usd"] == "5"
    page.close()

    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    sign_in(page, budgets_dashboard, "olga", "ops-pass", lands_on="Latency & errors")
    open_page(page, "Budgets")
    expect(page.get_by_test_id("stPlotlyChart")).to_have_count(2)
    expect(page.get_by_text("only finance and admins can change budgets")).to_be_visible()
    expect(page.get_by_role("button", name="Save budget")).to_have_count(0)
    expect(page.get_by_text("History")).to_be_visible()
    shot(page, "ops-budgets")
    page.close()
    assert len(budget_changes(ledger_engine)) == 3  # the seed's and finance's, none from ops
