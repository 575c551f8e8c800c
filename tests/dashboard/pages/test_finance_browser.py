"""The What-if and Reconcile pages in a real browser (Debian's Chromium, headless)
against a real dashboard process and PostgreSQL, on the hand-computed ledger of
tests/db/analytics/finance_seed.py: finance re-prices the DeepSeek tokens on gpt-4.1 and
sees the difference; imports a Claude Console export whose $0.02 gap is highlighted;
ops cannot open either page."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import Engine

from dashboard.auth import MIN_PBKDF2_ITERATIONS, USERS_ENV, hash_password
from gateway.domain.config import default_config_path, load_config
from tests.dashboard.pages.test_browser import metric_value, open_page, settle, shot, sign_in
from tests.dashboard.support.dashboard_process import running_dashboard, users_value
from tests.db.analytics.finance_seed import clean_finance_tables, seed_finance_ledger

pytestmark = pytest.mark.browser

DASHBOARD_PORT_OFFSET = 77
CONSOLE_EXPORT = (
    "usage_date_utc,model,workspace,api_key,usage_type,context_window,token_type,cost_usd\n"
    "{day},Claude Haiku 4.5,Default,bot,message,≤ 200k,input_no_cache,1.00\n"
    "{day},Claude Haiku 4.5,Default,bot,message,≤ 200k,output,0.48\n"
)


@pytest.fixture(scope="module")
def finance_dashboard(database_url, port_block, tmp_path_factory) -> Iterator[str]:
    port = port_block.port(DASHBOARD_PORT_OFFSET)
    workdir = tmp_path_factory.mktemp("finance-dashboard")
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        COSTGATE_STATE_DIR=str(workdir / "state"),
        COSTGATE_DASHBOARD_REFRESH_S="3600",  # no timer reruns while the test clicks
    )
    env[USERS_ENV] = users_value((("fin", "finance", "fin-pass"), ("olga", "ops", "ops-pass"))) \
        + f",pam:finance:{hash_password('pam-pass', MIN_PBKDF2_ITERATIONS)}:payments"
    with running_dashboard(port, env, default_config_path(), workdir / "streamlit.log") as url:
        yield url


def choose(page: Page, label: str, option: str) -> None:
    page.get_by_test_id("stSelectbox").filter(has_text=label).click()
    page.get_by_role("option", name=option, exact=True).click()
    settle(page)


def metric(page: Page, label: str) -> str:
    card = page.get_by_test_id("stMetric").filter(has_text=label)
    return card.get_by_test_id("stMetricValue").inner_text().strip()


@pytest.mark.usefixtures("clean_ledger")
def test_finance_reprices_and_reconciles_in_the_browser(
    finance_dashboard: str, browser, ledger_engine: Engine, tmp_path
) -> None:
    at = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    clean_finance_tables(ledger_engine)
    seed_finance_ledger(ledger_engine, load_config(default_config_path()), at=at)

    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    sign_in(page, finance_dashboard, "fin", "fin-pass")
    open_page(page, "What-if")
    # the ledger: $0.4396 + $10 + $1.3698630137 + $0.8630136986 + $1.50 = $14.1724767123
    expect(page.get_by_test_id("stMetric").filter(has_text="Ledger (USD)")).to_contain_text(
        "$14.1725"
    )
    page.get_by_text("Another model", exact=True).click()
    settle(page)
    choose(page, "Tokens of", "deepseek-v3.2")
    choose(page, "priced on", "gpt-4.1")
    # 800k in × $2.00 + 200k cached × $0.50 + 500k out × $8.00 = $5.70 instead of $0.4396
    assert metric(page, "Difference (USD)") == "+$5.2604"
    assert metric(page, "What-if (USD)") == "$19.4329"
    by_app = page.get_by_test_id("stDataFrame").first
    expect(by_app).to_be_visible()
    shot(page, "finance-whatif")

    open_page(page, "Reconcile")
    choose(page, "Provider", "anthropic")
    expect(page.get_by_text("No invoice of anthropic imported")).to_be_visible()
    page.get_by_text("Import the provider's export").click()
    settle(page)  # the expander's widgets are drawn by the rerun the click starts
    choose(page, "Format", "anthropic")
    export = tmp_path / "claude-console.csv"
    export.write_text(CONSOLE_EXPORT.format(day=at.date().isoformat()))
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(export))
    settle(page)
    page.get_by_role("button", name="Import").click()
    settle(page)
    expect(page.get_by_text("Imported 2 lines from claude-console.csv.")).to_be_visible()
    # the ledger says $1.50, the console $1.48: over the $0.01 threshold
    expect(
        page.get_by_text("1 of 1 day/model pairs differ by more than the threshold.")
    ).to_be_visible()
    table = page.get_by_test_id("stDataFrame").first
    expect(table).to_be_visible()
    table.scroll_into_view_if_needed()
    settle(page)
    shot(page, "finance-reconcile")
    threshold = page.get_by_role("spinbutton", name="Threshold (USD per day and model)")
    threshold.fill("0.02")
    threshold.press("Enter")
    settle(page)
    expect(page.get_by_text("All 1 day/model pairs agree within the threshold.")).to_be_visible()
    page.close()

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    sign_in(page, finance_dashboard, "olga", "ops-pass", lands_on="Latency & errors")
    page.goto(f"{finance_dashboard}/reconcile")
    expect(page.get_by_text("Reconcile is not available to olga (ops).")).to_be_visible(
        timeout=60_000
    )
    page.close()


@pytest.mark.usefixtures("clean_ledger")
def test_a_team_scoped_finance_user_sees_its_team_on_every_page_in_the_browser(
    finance_dashboard: str, browser, ledger_engine: Engine
) -> None:
    """`pam` is finance for team payments: app `checkout` ($0.4396); `bot` is support's."""
    at = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    clean_finance_tables(ledger_engine)
    seed_finance_ledger(ledger_engine, load_config(default_config_path()), at=at)
    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    sign_in(page, finance_dashboard, "pam", "pam-pass")
    expect(page.get_by_test_id("stSidebar")).to_contain_text("team payments")
    assert metric_value(page, "Spend") == "$0.4396"
    for title in ("Savings", "Spend", "Export"):
        open_page(page, title)
        expect(page.get_by_test_id("stMain")).not_to_contain_text("bot")
    open_page(page, "What-if")
    assert metric(page, "Ledger (USD)") == "$0.4396"
    open_page(page, "Reconcile")
    expect(page.get_by_text("only a user without a team can import or reconcile")).to_be_visible()
    expect(page.get_by_role("button", name="Import")).to_have_count(0)
    expect(page.get_by_text("Import the provider's export")).to_have_count(0)
    page.close()
    with ledger_engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM invoice_lines").scalar() == 0
