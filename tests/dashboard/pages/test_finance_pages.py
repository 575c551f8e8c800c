"""The What-if page's scenarios through Streamlit's AppTest on a real PostgreSQL ledger
(tests/db/analytics/finance_seed.py, hand-computed): a routing mix and a price sheet."""

from __future__ import annotations

import datetime as dt

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.access.sessions import SessionStore, SessionUser
from dashboard.auth import MIN_PBKDF2_ITERATIONS, USERS_ENV, hash_password, load_users
from dashboard.components.session import USER_KEY
from gateway.domain.config import default_config_path, load_config
from tests.dashboard.pages.test_pages import (
    APP,
    USERS,
    app_as,
    dashboard_env,
    metrics,
    open_page,
)
from tests.db.analytics.finance_seed import clean_finance_tables, seed_finance_ledger

__all__ = ["dashboard_env"]  # the fixture, used by name below


@pytest.fixture
def finance_ledger(dashboard_env, ledger_engine, clean_ledger):
    clean_finance_tables(ledger_engine)
    at = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    seed_finance_ledger(ledger_engine, load_config(default_config_path()), at=at)


def test_every_auto_request_on_gpt_41(finance_ledger):
    at = open_page(app_as("finance"), "whatif")
    assert metrics(at)["Ledger (USD)"] == "$14.1725"
    at.radio(key="whatif_kind").set_value("Routing mix").run()
    at.selectbox(key="whatif_alias").set_value("auto").run()
    for i in range(3):  # claude-sonnet-4.5, deepseek-v3.2, gemini-2.5-flash: none
        at.number_input(key=f"whatif_w_auto_{i}").set_value(0.0).run()
    assert "At least one weight must be above 0." in [w.value for w in at.warning]
    at.selectbox(key="whatif_extra").set_value("gpt-4.1").run()
    at.number_input(key="whatif_w_extra_gpt-4.1").set_value(1.0).run()
    assert not at.exception
    # 800k in × $2.00 + 200k cached × $0.50 + 500k out × $8.00 = $5.70, not $0.4396
    assert metrics(at)["Difference (USD)"] == "+$5.2604"


def test_the_relay_at_another_fx_rate(finance_ledger):
    at = open_page(app_as("admin"), "whatif")
    at.radio(key="whatif_kind").set_value("Price sheet").run()
    at.selectbox(key="whatif_provider").set_value("relay").run()
    at.number_input(key="whatif_fx").set_value(6.3).run()
    assert not at.exception
    # ¥10.00 and ¥6.30 at 6.3: $1.5873015873 + $1.00 instead of $1.3698630137 + $0.8630136986
    assert metrics(at)["Difference (USD)"] == "+$0.3544"


def test_ops_cannot_open_what_if_nor_reconcile(finance_ledger):
    for page in ("whatif", "reconcile"):
        at = open_page(app_as("ops"), page)
        assert any("is not available to olga (ops)" in e.value for e in at.error)
        assert not at.metric and not at.dataframe


def test_a_payments_finance_user_reprices_its_team_only_and_cannot_reconcile(
    finance_ledger, monkeypatch, ledger_engine
):
    """The seed's `checkout` is team payments ($0.4396), `bot` team support ($13.7329)."""
    monkeypatch.setenv(USERS_ENV, USERS + ",pam:finance:"
                       + hash_password("pw-pam", MIN_PBKDF2_ITERATIONS) + ":payments")
    credential = load_users()["pam"].password_hash
    session = SessionStore.from_environment().open("pam", credential).session_id
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[USER_KEY] = SessionUser("pam", "finance", "payments", session)
    at = open_page(at.run(), "whatif")
    assert metrics(at)["Ledger (USD)"] == "$0.4396"
    assert at.dataframe[0].value["app"].tolist() == ["checkout"]
    at.radio(key="whatif_kind").set_value("Another model").run()
    at.selectbox(key="whatif_from").set_value("deepseek-v3.2").run()
    at.selectbox(key="whatif_to").set_value("gpt-4.1").run()
    assert metrics(at)["What-if (USD)"] == "$5.7000"
    at = open_page(at, "reconcile")
    assert any("only a user without a team can import" in i.value for i in at.info)
    # no totals of other teams, nothing to import with
    assert not at.dataframe and not at.button and not at.get("file_uploader")
    with ledger_engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM invoice_lines").scalar() == 0
