"""The Customers page in a real browser (Debian's Chromium, headless) against a real
dashboard process and PostgreSQL: finance reads the figures of a hand-made ledger;
ops and a viewer cannot open the page, and ops never receive an end user's id."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from decimal import Decimal

import pytest
from playwright.sync_api import expect
from sqlalchemy import Engine

from dashboard.auth import USERS_ENV
from gateway.domain.config import default_config_path
from tests.dashboard.pages.test_browser import (
    metric_value,
    open_page,
    settle,
    shot,
    sign_in,
)
from tests.dashboard.support.dashboard_process import running_dashboard, users_value
from tests.dashboard.support.ledger import insert_records
from tests.dashboard.support.records import record

pytestmark = pytest.mark.browser

DASHBOARD_PORT_OFFSET = 83
ALICE, BOB = "cust-alice-7f3a", "cust-bob-19c2"


@pytest.fixture(scope="module")
def customers_dashboard(database_url, port_block, tmp_path_factory) -> Iterator[str]:
    port = port_block.port(DASHBOARD_PORT_OFFSET)
    workdir = tmp_path_factory.mktemp("customers-dashboard")
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        COSTGATE_STATE_DIR=str(workdir / "state"),
        COSTGATE_DASHBOARD_REFRESH_S="3600",  # no timer reruns while the test clicks
    )
    env[USERS_ENV] = users_value(
        (("fin", "finance", "fin-pass"), ("olga", "ops", "ops-pass"),
         ("vic", "viewer", "view-pass"))
    )  # fmt: skip
    with running_dashboard(port, env, default_config_path(), workdir / "streamlit.log") as url:
        yield url


def spent(usd: str, end_user: str, session: str, at: dt.datetime):
    cost = Decimal(usd)
    return record(started_at=at, actual_cost=cost, actual_cost_usd=cost, end_user=end_user,
                  session_id=session, tags={"tier": "gold"})  # fmt: skip


@pytest.mark.usefixtures("empty_usage")
def test_finance_reads_customers_ops_and_viewers_cannot(
    customers_dashboard: str, browser, ledger_engine: Engine
) -> None:
    now = dt.datetime.now(dt.UTC)
    # today's (UTC), even in the first minutes of a day: the page's default range is the
    # ledger's days, and a row of yesterday would make it two days of revenue
    at = max(now - dt.timedelta(minutes=5), now.replace(hour=0, minute=0, second=0, microsecond=0))
    # alice: $3.00 + $1.50 in one session (one user-day of $4.50); bob: $0.25
    insert_records(
        ledger_engine,
        [spent("3.00", ALICE, "s-1", at), spent("1.50", ALICE, "s-1", at),
         spent("0.25", BOB, "s-2", at)],
    )  # fmt: skip

    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    sign_in(page, customers_dashboard, "fin", "fin-pass")
    open_page(page, "Customers")
    expect(page.get_by_test_id("stMetric").filter(has_text="End users")).to_contain_text("2")
    assert metric_value(page, "Spend (USD)") == "$4.75"
    assert metric_value(page, "p50 (USD)") == "$0.2500"  # of the user-days $0.25 and $4.50
    assert metric_value(page, "max (USD)") == "$4.50"
    table = page.get_by_test_id("stDataFrame").first
    expect(table).to_be_visible()
    expect(page.get_by_text(ALICE).first).to_be_attached()  # the bar chart's axis
    shot(page, "customers-finance")
    page.get_by_test_id("stButtonGroup").get_by_text("Revenue & margin").click()
    settle(page)
    seat = page.get_by_role("textbox", name="Price per end user per month (USD)")
    seat.fill("60")  # $2.00 a day: the default range here is today only (a young ledger)
    seat.press("Enter")
    settle(page)
    expect(
        page.get_by_test_id("stMetric").filter(has_text="Cost more than they pay")
    ).to_contain_text("1")
    expect(page.get_by_text("End users who cost more than they pay")).to_be_visible()
    # revenue $2.00 each: $4.00 against $4.75 spent; alice, at $4.50, costs more than she pays
    assert metric_value(page, "Revenue (USD)") == "$4.00"
    assert metric_value(page, "Margin (USD)") == "-$0.7500"
    shot(page, "customers-margin")
    page.close()

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    sign_in(page, customers_dashboard, "olga", "ops-pass", lands_on="Latency & errors")
    expect(page.get_by_test_id("stSidebarNav").get_by_role("link", name="Customers")).to_have_count(
        0
    )
    assert page.get_by_role("textbox", name="End users (ids, comma-separated)").count() == 0
    page.goto(f"{customers_dashboard}/customers")
    expect(page.get_by_text("Customers is not available to olga (ops).")).to_be_visible(
        timeout=60_000
    )
    settle(page)
    assert ALICE not in page.content() and BOB not in page.content()
    open_page(page, "Requests")
    assert ALICE not in page.content()
    page.close()

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    sign_in(page, customers_dashboard, "vic", "view-pass")
    page.goto(f"{customers_dashboard}/customers")
    expect(page.get_by_text("Customers is not available to vic (viewer).")).to_be_visible(
        timeout=60_000
    )
    assert ALICE not in page.content()
    page.close()
