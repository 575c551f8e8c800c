"""Every page rendered with AppTest against a real PostgreSQL, empty and seeded; the
figures shown are checked against sums the test computes with its own SQL."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest
import streamlit as st
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from dashboard.auth import USERS_ENV, hash_password
from dashboard.components.session import USER_KEY, SessionUser
from dashboard.settings import load_settings
from gateway.devtools.seed import seed_ledger
from gateway.domain.config import default_config_path, load_config
from tests.dashboard.support.ledger import same_as_shown, shown_money, sql_sums

APP = str(Path(__file__).resolve().parents[3] / "dashboard" / "app.py")
PAGES = ["overview", "savings", "spend", "export", "latency_errors", "routing", "requests"]
CFG = load_config(default_config_path())
NOW = dt.datetime.now(dt.UTC)
TODAY = NOW.date()


@pytest.fixture
def dashboard_env(database_url, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", database_url)
    # nothing listens there: the Routing page must say the gateway is not reachable
    monkeypatch.setenv("COSTGATE_RAY_DASHBOARD_URL", "http://127.0.0.1:19499")
    monkeypatch.setenv(USERS_ENV, f"alice:ops:{hash_password('pw-a', 1000)}")
    load_settings.cache_clear()
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    load_settings.cache_clear()


@pytest.fixture
def seeded(dashboard_env, database_url, empty_usage):
    seed_ledger(database_url, CFG, 4000, days=70, end=NOW, seed=3)


def app_as(role: str | None, **query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    if role:
        at.session_state[USER_KEY] = SessionUser("alice" if role == "ops" else "bob", role)
    at.query_params.update(query)
    return at.run()


def open_page(at: AppTest, page: str) -> AppTest:
    return at.switch_page(f"pages/{page}.py").run()


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_sign_in_is_required_and_checks_the_password(dashboard_env):
    at = app_as(None)
    assert not at.metric and at.button(key="FormSubmitter:sign_in-Sign in")
    at.text_input(key="sign_in_name").input("alice")
    at.text_input(key="sign_in_password").input("wrong")
    at.button(key="FormSubmitter:sign_in-Sign in").click().run()
    assert "Wrong name or password" in at.error[0].value
    at.text_input(key="sign_in_password").input("pw-a")
    at.button(key="FormSubmitter:sign_in-Sign in").click().run()
    assert at.session_state[USER_KEY] == SessionUser("alice", "ops")
    assert "Signed in as **alice** (ops)" in at.sidebar.caption[0].value


def test_every_page_shows_what_to_do_on_an_empty_ledger(dashboard_env, empty_usage):
    at = app_as("ops")
    for page in PAGES:
        open_page(at, page)
        assert not at.exception, (page, at.exception)
        if page != "routing":
            assert any("make demo" in i.value for i in at.info), page
        assert not any(m.value == "$0.00" for m in at.metric), page


def test_every_page_renders_on_a_seeded_ledger(seeded):
    at = app_as("viewer")
    for page in PAGES:
        open_page(at, page)
        assert not at.exception, (page, at.exception)
        assert not any("make demo" in i.value for i in at.info), page


def test_overview_kpis_equal_sql_sums_for_the_period(seeded, ledger_engine):
    at = app_as("viewer")
    start = dt.datetime.combine(TODAY - dt.timedelta(days=29), dt.time(), dt.UTC)
    sums = sql_sums(ledger_engine, "started_at >= :s", s=start)
    shown = metrics(at)
    assert same_as_shown(shown["Spend"], sums["spend"])
    assert same_as_shown(shown["List-price spend"], sums["list_spend"])
    assert same_as_shown(shown["Savings"], sums["savings"])
    assert shown["Requests"] == f"{sums['requests']:,}"
    assert shown["Tokens"] == f"{sums['tokens']:,}"
    assert shown["Error rate"] == f"{sums['errors'] * 100 / sums['requests']:.2f}%"
    pct = sums["savings"] * 100 / sums["list_spend"]
    assert shown["Savings %"] == f"{float(pct):.1f}%"
    with ledger_engine.connect() as conn:
        p95 = conn.execute(
            text(
                "SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY latency_ms) "
                "FROM usage_records WHERE status = 'ok' AND started_at >= :s"
            ),
            {"s": start},
        ).scalar_one()
    # read from histogram bins about 3% wide
    assert abs(float(shown["p95 latency"].removesuffix(" ms").replace(",", "")) - p95) <= 0.04 * p95


def test_unknown_costs_are_said_not_counted_as_zero(seeded, ledger_engine):
    unknown = sql_sums(
        ledger_engine,
        "actual_cost_usd IS NULL AND status IN ('ok', 'cancelled') AND started_at >= :s",
        s=dt.datetime.combine(TODAY - dt.timedelta(days=29), dt.time(), dt.UTC),
    )["requests"]
    at = app_as("viewer")
    assert unknown > 0
    assert any(c.value.startswith(f"{unknown:,} request(s) have unknown cost") for c in at.caption)


def test_an_unreachable_ledger_is_reported_plainly(dashboard_env, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:19498/none")
    load_settings.cache_clear()
    at = app_as("viewer")
    assert not at.exception
    assert "ledger database cannot be reached" in at.error[0].value


def test_filters_come_from_the_url_and_narrow_every_figure(seeded, ledger_engine):
    start = TODAY - dt.timedelta(days=9)
    at = app_as("viewer", **{"from": start.isoformat(), "to": TODAY.isoformat(), "app": "search"})
    sums = sql_sums(
        ledger_engine,
        "started_at >= :s AND app = 'search'",
        s=dt.datetime.combine(start, dt.time(), dt.UTC),
    )
    shown = metrics(at)
    assert shown["Requests"] == f"{sums['requests']:,}"
    assert same_as_shown(shown["Spend"], sums["spend"])
    assert at.query_params["app"] == "search"
    open_page(at, "savings")  # the filters follow the user to another page
    assert same_as_shown(metrics(at)["Provider price & FX savings"], sums["savings"])
    assert same_as_shown(metrics(at)["Routing savings"], sums["routing_savings"])


def test_spend_page_forecast_starts_from_month_to_date(seeded, ledger_engine):
    at = open_page(app_as("viewer"), "spend")
    month_start = dt.datetime.combine(TODAY.replace(day=1), dt.time(), dt.UTC)
    mtd = sql_sums(ledger_engine, "started_at >= :s", s=month_start)["spend"] or Decimal(0)
    shown = metrics(at)
    assert same_as_shown(shown["Month to date"], mtd)
    assert shown_money(shown["Forecast at month end"]) >= shown_money(shown["Month to date"])
    for group in ("App", "Team", "Key", "Model", "Provider"):
        at.radio(key="spend_by").set_value(group).run()
        assert not at.exception, group


def test_routing_page_is_read_only_for_viewers(seeded):
    at = open_page(app_as("viewer"), "routing")
    assert not at.exception
    assert any("only ops can change routing" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "routing_review"]
    # the seeded history's change is listed
    history = at.dataframe[-1].value
    assert history["who"].tolist() == ["seed"] and history["alias"].tolist() == ["auto"]


def test_routing_page_without_a_gateway_says_so_and_shows_config_weights(seeded):
    at = open_page(app_as("ops"), "routing")
    assert "Cannot read the live weights" in at.warning[0].value
    weights = at.dataframe[0].value
    auto = weights[weights["alias"] == "auto"].set_index("model")["weight"]
    assert auto.to_dict() == {
        "deepseek-v3.2": 60.0,
        "gemini-2.5-flash": 30.0,
        "claude-sonnet-4.5": 10.0,
    }


def test_requests_page_drills_down_by_request_id(seeded, ledger_engine):
    at = open_page(app_as("viewer"), "requests")
    log = at.dataframe[0].value
    assert len(log) == 500 and "prompt" not in log.columns
    rid = log["request_id"].iloc[0]
    at.text_input(key="request_id").input(rid).run()
    assert at.json[0].value and rid in at.json[0].value


def test_export_offers_a_csv_that_reconciles(seeded, ledger_engine):
    at = open_page(app_as("viewer"), "export")
    assert not at.exception
    assert any("rows; money in USD" in c.value for c in at.caption)
