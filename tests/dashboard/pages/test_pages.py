"""Every page rendered with AppTest against a real PostgreSQL, empty and seeded; the
figures shown are checked against sums the test computes with its own SQL. Users sign in
with real sessions (under a temporary state dir), so the server-side checks every run
makes are the real ones: roles, team scope, sessions, throttling, date clamping.

AppTest (Streamlit 1.67) cannot click the sidebar's widgets of an `st.navigation` app:
after the first run its sidebar comes back empty. The sidebar is read on first runs
here; sign-out and the date picker are driven in the browser (test_browser.py)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest
import streamlit as st
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from dashboard.access.sessions import SessionStore, SessionUser
from dashboard.auth import MIN_PBKDF2_ITERATIONS, USERS_ENV, hash_password, load_users
from dashboard.components.preload import WARM_LABEL
from dashboard.components.session import COOKIE_PENDING_KEY, USER_KEY
from dashboard.settings import load_settings
from gateway.devtools.seed import seed_ledger
from gateway.domain.config import default_config_path, load_config
from tests.dashboard.support.ledger import insert_records, same_as_shown, shown_money, sql_sums
from tests.dashboard.support.records import record
from tests.fixtures.database import scratch_database

APP = str(Path(__file__).resolve().parents[3] / "dashboard" / "app.py")
PAGES = [
    *("overview", "savings", "spend", "export", "whatif", "reconcile", "experiments"),
    *("latency_errors", "routing", "requests", "budgets"),
]
CFG = load_config(default_config_path())
NOW = dt.datetime.now(dt.UTC)
TODAY = NOW.date()


# a user per role, named after it; `tess` is finance for the platform team only
PEOPLE = {
    "admin": "ann",
    "finance": "fin",
    "ops": "olga",
    "viewer": "vic",
    "team": "tess",
}
USERS = (
    ",".join(
        f"{name}:{role}:{hash_password(f'pw-{name}', MIN_PBKDF2_ITERATIONS)}"
        for role, name in PEOPLE.items()
        if role != "team"
    )
    + f",tess:finance:{hash_password('pw-tess', MIN_PBKDF2_ITERATIONS)}:platform"
)
ALLOWED = {
    "admin": set(PAGES),
    "finance": {"overview", "savings", "spend", "export", "whatif", "reconcile", "experiments",
                "budgets"},
    "ops": {"latency_errors", "routing", "requests", "budgets"},
    "viewer": {"overview", "savings", "spend", "experiments", "latency_errors", "routing",
               "budgets"},
}


@pytest.fixture
def dashboard_env(database_url, monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", database_url)
    # nothing listens there: the Routing page must say the gateway is not reachable
    monkeypatch.setenv("COSTGATE_RAY_DASHBOARD_URL", "http://127.0.0.1:19499")
    monkeypatch.setenv(USERS_ENV, USERS)
    # the session secret, the sessions and the stored rollup days of this test alone
    monkeypatch.setenv("COSTGATE_STATE_DIR", str(tmp_path))
    load_settings.cache_clear()
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    load_settings.cache_clear()


@pytest.fixture
def seeded(dashboard_env, database_url, empty_usage):
    seed_ledger(database_url, CFG, 4000, days=70, end=NOW, seed=3)


def signed_in(role: str) -> SessionUser:
    """A real session for the role's user, as the sign-in form would open it."""
    name = PEOPLE[role]
    credential = load_users()[name].password_hash
    session_id = SessionStore.from_environment().open(name, credential).session_id
    team = "platform" if role == "team" else None
    return SessionUser(name, "finance" if role == "team" else role, team, session_id)


def app_as(role: str | None, **query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    if role:
        at.session_state[USER_KEY] = signed_in(role)
    at.query_params.update(query)
    return at.run()


def sign_in_attempt(at: AppTest, name: str, password: str) -> AppTest:
    at.text_input(key="sign_in_name").input(name)
    at.text_input(key="sign_in_password").input(password)
    return at.button(key="FormSubmitter:sign_in-Sign in").click().run()


def refused(at: AppTest) -> bool:
    return any("is not available to" in e.value for e in at.error)


def open_page(at: AppTest, page: str) -> AppTest:
    return at.switch_page(f"pages/{page}.py").run()


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def figures(at: AppTest) -> list:
    """The page's metrics: not the sign-in page's hidden warm-up (components.preload)."""
    return [m for m in at.metric if m.label != WARM_LABEL]


def test_sign_in_is_required_and_opens_a_session_with_a_signed_cookie(dashboard_env):
    at = app_as(None)
    assert not figures(at) and at.button(key="FormSubmitter:sign_in-Sign in")
    sign_in_attempt(at, "olga", "wrong")
    assert "Wrong name or password" in at.error[0].value
    sign_in_attempt(at, "olga", "pw-olga")
    user = at.session_state[USER_KEY]
    assert (user.name, user.role, user.team) == ("olga", "ops", None)
    assert "Signed in as **olga** (ops)" in at.sidebar.caption[0].value
    # the cookie handed to the browser signs this same session in after a reload
    name, value = at.session_state[COOKIE_PENDING_KEY].split(";")[0].split("=", 1)
    assert name == "costgate_session"
    assert SessionStore.from_environment().resolve(value) == ("olga", user.session_id)


def test_ten_wrong_passwords_are_throttled_and_then_even_the_right_one_waits(dashboard_env):
    at = app_as(None)
    for i in range(10):
        sign_in_attempt(at, "olga", f"guess-{i}")
        message = at.error[0].value
        if i < 4:
            assert message == "Wrong name or password.", i
        elif i == 4:
            assert "Too many failures: the next try waits 30 s" in message
        else:  # locked: refused before the password is looked at
            assert message.startswith("Too many failed sign-ins: try again in"), (i, message)
    sign_in_attempt(at, "olga", "pw-olga")
    assert at.error[0].value.startswith("Too many failed sign-ins")
    assert USER_KEY not in at.session_state


def test_a_session_closed_elsewhere_signs_this_one_out_on_its_next_run(seeded):
    at = app_as("viewer")
    assert at.metric
    SessionStore.from_environment().close(at.session_state[USER_KEY].session_id)
    at.run()  # the page checks the session itself (AppTest reruns only the page)
    assert USER_KEY not in at.session_state and not figures(at)
    assert "Max-Age=0" in at.session_state[COOKIE_PENDING_KEY]  # the cookie is cleared
    # the app script's own check says so, and offers the sign-in form again
    closed = signed_in("viewer")
    SessionStore.from_environment().close(closed.session_id)
    again = AppTest.from_file(APP, default_timeout=120)
    again.session_state[USER_KEY] = closed
    again.run()
    assert any("Your session has ended" in i.value for i in again.info)
    assert again.button(key="FormSubmitter:sign_in-Sign in") and not figures(again)


def test_a_session_state_claiming_another_role_gets_the_configured_one(dashboard_env):
    at = AppTest.from_file(APP, default_timeout=120)
    vic = signed_in("viewer")
    at.session_state[USER_KEY] = SessionUser("vic", "admin", None, vic.session_id)
    at.run()
    assert at.session_state[USER_KEY].role == "viewer"
    assert refused(open_page(at, "export"))


@pytest.mark.parametrize("role", ["admin", "finance", "ops", "viewer"])
def test_each_role_opens_its_pages_and_is_refused_the_others(seeded, role):
    at = app_as(role)
    for page in PAGES:
        open_page(at, page)
        assert not at.exception, (role, page, at.exception)
        assert refused(at) == (page not in ALLOWED[role]), (role, page)
        if refused(at):  # refused before any figure is drawn
            assert not at.metric and not at.dataframe, (role, page)


def test_every_page_shows_what_to_do_on_an_empty_ledger(dashboard_env, empty_usage):
    at = app_as("admin")
    for page in PAGES:
        open_page(at, page)
        assert not at.exception, (page, at.exception)
        if page == "budgets":  # budgets are not ledger rows: their own empty state
            assert any("No budgets yet" in i.value for i in at.info)
        elif page != "routing":
            assert any("make demo" in i.value for i in at.info), page
        assert not any(m.value == "$0.00" for m in at.metric), page


def test_every_page_renders_on_a_seeded_ledger(seeded):
    at = app_as("admin")
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
    saved = sums["no_costgate"] - sums["spend"]
    assert same_as_shown(shown["Saved against no costgate"], saved)
    assert shown["Requests"] == f"{sums['requests']:,}"
    assert shown["Tokens"] == f"{sums['tokens']:,}"
    assert shown["Error rate"] == f"{sums['errors'] * 100 / sums['requests']:.2f}%"
    pct = saved * 100 / sums["no_costgate"]
    assert shown["Saved %"] == f"{float(pct):.1f}%"
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


def test_changes_against_the_previous_period_only_where_the_ledger_covers_it(
    dashboard_env, database_url, empty_usage
):
    seed_ledger(database_url, CFG, 600, days=20, end=NOW, seed=5)  # younger than 30 days
    young = app_as("viewer")
    assert [m.delta for m in young.metric] == [""] * 8  # AppTest: no delta reads as ""
    assert any(c.value.startswith("No change is shown") for c in young.caption)
    seed_ledger(database_url, CFG, 600, days=70, end=NOW, seed=6)  # now it covers 60 days
    st.cache_data.clear()
    covered = app_as("viewer")
    assert {m.label: m.delta for m in covered.metric}["Spend"].endswith("vs previous period")
    assert not any(c.value.startswith("No change is shown") for c in covered.caption)


def test_unknown_costs_are_said_not_counted_as_zero(seeded, ledger_engine):
    unknown = sql_sums(
        ledger_engine,
        "actual_cost_usd IS NULL AND (status IN ('ok', 'cancelled')"
        " OR usage_source = 'estimated') AND started_at >= :s",
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


def test_a_database_never_migrated_says_to_migrate_it(dashboard_env, database_url, monkeypatch):
    with scratch_database(database_url, "costgate_unmigrated", migrate=False) as bare:
        monkeypatch.setenv("DATABASE_URL", bare)
        load_settings.cache_clear()
        at = app_as("viewer")
        assert not at.exception
        assert "no costgate tables yet" in at.error[0].value
        assert "costgate migrate" in at.error[0].value


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
    saved = sums["no_costgate"] - sums["spend"]
    assert same_as_shown(metrics(at)["Saved against no costgate"], saved)
    assert same_as_shown(metrics(at)["No-costgate cost"], sums["no_costgate"])


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
    assert any("only ops and admins can change routing" in i.value for i in at.info)
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
    at = open_page(app_as("ops"), "requests")
    log = at.dataframe[0].value
    assert len(log) == 500 and "prompt" not in log.columns
    rid = log["request_id"].iloc[0]
    at.text_input(key="request_id").input(rid).run()
    assert at.json[0].value and rid in at.json[0].value


def test_export_offers_a_csv_that_reconciles(seeded, ledger_engine):
    at = open_page(app_as("finance"), "export")
    assert not at.exception
    assert any("rows; money in USD" in c.value for c in at.caption)


def test_a_team_scoped_user_sees_only_its_team(seeded, ledger_engine):
    start = dt.datetime.combine(TODAY - dt.timedelta(days=29), dt.time(), dt.UTC)
    team = sql_sums(ledger_engine, "started_at >= :s AND team = 'platform'", s=start)
    everyone = sql_sums(ledger_engine, "started_at >= :s", s=start)
    assert 0 < team["requests"] < everyone["requests"]
    at = app_as("team")
    shown = metrics(at)
    assert shown["Requests"] == f"{team['requests']:,}"
    assert same_as_shown(shown["Spend"], team["spend"])
    assert "team platform" in at.sidebar.caption[0].value
    assert at.sidebar.multiselect(key="filter_team").options == ["platform"]
    assert set(at.sidebar.multiselect(key="filter_app").options) == {"search", "internal-tools"}
    open_page(at, "spend")
    at.radio(key="spend_by").set_value("Team").run()
    assert at.dataframe[0].value["team"].tolist() == ["platform"]  # [-1]: spend by tag
    # another team asked for in the URL is dropped: still only its own team's rows
    at = app_as("team", team="customer")
    assert metrics(at)["Requests"] == f"{team['requests']:,}"
    assert at.query_params.get("team") is None


def test_a_range_from_1900_is_clamped_to_the_ledger_with_a_note(seeded, ledger_engine):
    with ledger_engine.connect() as conn:
        first = conn.execute(
            text("SELECT min(started_at AT TIME ZONE 'UTC')::date FROM usage_records")
        ).scalar_one()
    at = app_as("viewer", **{"from": "1900-01-01", "to": TODAY.isoformat()})
    assert not at.exception
    assert any(f"starts {first:%Y-%m-%d}" in i.value for i in at.sidebar.info)
    assert at.caption[0].value.startswith(f"Period: {first:%Y-%m-%d} → {TODAY:%Y-%m-%d}")
    assert at.query_params["from"] == first.isoformat()
    assert at.sidebar.date_input(key="filter_dates").value == (first, TODAY)
    shown = metrics(at)
    assert shown["Requests"] == f"{sql_sums(ledger_engine)['requests']:,}"


def test_a_tag_filter_narrows_spend_and_other_pages_say_it_does_not_apply(seeded, ledger_engine):
    at_ = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    insert_records(
        ledger_engine,
        [record(started_at=at_, actual_cost_usd=Decimal("1.25"), tags={"cohort": "beta"}),
         record(started_at=at_, actual_cost_usd=Decimal("0.75"), tags={"cohort": "alpha"})],
    )  # fmt: skip
    at = app_as("finance", tag_key="cohort", tag="beta")
    assert any("The tag filter does not apply to this page" in i.value for i in at.info)
    open_page(at, "spend")
    assert not at.exception
    by_app = at.dataframe[0].value  # spend over time's table, from the tag rollup
    assert (by_app["app"].tolist(), by_app["spend"].tolist()) == (["search"], ["$1.25"])
    by_tag = at.dataframe[-1].value  # spend by the tag key's values
    assert (by_tag["cohort"].tolist(), by_tag["spend"].tolist()) == (["beta"], ["$1.25"])


def test_export_builds_the_files_by_end_user_and_by_tag_when_asked(seeded, ledger_engine):
    at = open_page(app_as("finance"), "export")

    def labels_after(button: str) -> list[str]:
        at.button(key=button).click().run()  # a button holds for the run it was clicked in
        assert not at.exception
        return [b.proto.label for b in at.get("download_button")]

    users, tags = labels_after("export_users"), labels_after("export_tags")
    start = dt.datetime.combine(TODAY - dt.timedelta(days=29), dt.time(), dt.UTC)
    with ledger_engine.connect() as conn:
        user_rows, tag_rows = conn.execute(text(
            "SELECT count(DISTINCT (date_trunc('day', started_at, 'UTC'), app, team, end_user))"
            " FILTER (WHERE end_user IS NOT NULL),"
            " (SELECT count(DISTINCT (date_trunc('day', started_at, 'UTC'), app, team, t.key,"
            "  t.value)) FROM usage_records, jsonb_each_text(tags) t WHERE started_at >= :s)"
            " FROM usage_records WHERE started_at >= :s"), {"s": start}).one()  # fmt: skip
    assert f"Download {user_rows:,} rows" in users and f"Download {tag_rows:,} rows" in tags
    assert user_rows > 0 and tag_rows > 0
