"""The demo's first look in a real browser (Debian's Chromium, headless): the history
`costgate demo` seeds before its live traffic (`gateway.devtools.demo._seed_history`, the
demo's own step) plus a few minutes of live rows, a freshly started dashboard with the
demo's sign-ins, and the first one its banner names (an admin) signing in. The Overview's
charts span 30 days, a bar on each of them, and the Savings page draws the waterfall whose
steps add up to its headline. Screenshots go to artifacts/screenshots/demo-*.png."""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterator
from decimal import Decimal

import pytest
from playwright.sync_api import Page, sync_playwright

from dashboard.auth import USERS_ENV
from gateway.devtools.demo import (
    DEMO_DASHBOARD_USERS,
    DEMO_SEED_DAYS,
    _seed_history,
    sign_in_lines,
)
from gateway.devtools.seed import holds_seeded
from gateway.domain.config import default_config_path, load_config
from tests.dashboard.pages.conftest import CHROMIUM_ARGS
from tests.dashboard.pages.test_browser import (
    metric_value,
    open_page,
    shot,
    sign_in,
)
from tests.dashboard.support.dashboard_process import running_dashboard
from tests.dashboard.support.ledger import insert_records, shown_money
from tests.dashboard.support.records import record

pytestmark = pytest.mark.browser

DASHBOARD_PORT_OFFSET = 47

# every Plotly chart on the page: its title and, per trace, the x values that have a y
CHARTS_JS = """
() => [...document.querySelectorAll('.js-plotly-plot')].map(el => ({
  title: (el.layout.title && (el.layout.title.text || el.layout.title)) || '',
  range: el.layout.xaxis && el.layout.xaxis.range,
  traces: el.data.map(t => ({
    type: t.type, name: t.name || '',
    x: (t.x || []).filter((x, i) => t.y && t.y[i] !== null && t.y[i] !== undefined),
    y: t.y || [], text: t.text || [],
  })),
}))
"""


@pytest.fixture(scope="module")
def demo_dashboard(database_url, port_block, tmp_path_factory) -> Iterator[str]:
    port = port_block.port(DASHBOARD_PORT_OFFSET)
    workdir = tmp_path_factory.mktemp("demo-dashboard")
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        COSTGATE_STATE_DIR=str(workdir / "state"),
        COSTGATE_DASHBOARD_REFRESH_S="3600",
    )
    env[USERS_ENV] = DEMO_DASHBOARD_USERS
    with running_dashboard(port, env, default_config_path(), workdir / "streamlit.log") as url:
        yield url


def test_the_demos_first_look_shows_30_days_of_charts(
    database_url, ledger_engine, empty_usage, demo_dashboard
):
    cfg = load_config(default_config_path())
    _seed_history(database_url, cfg)
    assert holds_seeded(database_url)
    _seed_history(database_url, cfg)  # a restarted demo keeps its history, seeds no more
    now = dt.datetime.now(dt.UTC)
    live = [record(started_at=now - dt.timedelta(minutes=m)) for m in range(1, 6)]
    insert_records(ledger_engine, live)  # what the demo's traffic adds after the seeding

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            # the banner's first sign-in, "admin / demo-admin (every page)", as printed
            name, password = sign_in_lines()[0].split(" (")[0].split(" / ")
            assert name == "admin"
            sign_in(page, demo_dashboard, name, password)
            charts = drawn_charts(page, 2)
            shot(page, "demo-overview")
            assert page.get_by_text("This ledger holds seeded synthetic history").is_visible()
            spend = chart(charts, "Spend over time")
            days = {x[:10] for x in spend["traces"][0]["x"]}
            today = now.date()
            expected = {(today - dt.timedelta(days=i)).isoformat() for i in range(DEMO_SEED_DAYS)}
            assert days == expected  # a point on each of the 30 days, today's live ones too
            first, last = (dt.datetime.fromisoformat(v[:19]) for v in spend["range"])
            assert (last - first).days == DEMO_SEED_DAYS
            saved_bars = chart(charts, "Saved over time")
            assert len(saved_bars["traces"][0]["x"]) == DEMO_SEED_DAYS

            open_page(page, "Savings")
            charts = drawn_charts(page, 3)
            shot(page, "demo-savings")
            (fall,) = [c for c in charts if c["traces"] and c["traces"][0]["type"] == "waterfall"]
            texts = fall["traces"][0]["text"]
            start, *steps, end = (_money(t) for t in texts)
            headline = shown_money(metric_value(page, "Saved against no costgate"))
            assert start - sum(steps) == end
            assert sum(steps) == headline > 0
            # routing, cached tokens, relay, cache hits; the demo sends no batch
            routing, cached, relay, batch, hits = steps
            assert batch == 0
            assert all(s > 0 for s in (routing, cached, relay, hits))
        finally:
            browser.close()


def chart(charts: list[dict], title: str) -> dict:
    # Streamlit's theme wraps a title in <b> tags
    found = [c for c in charts if re.sub(r"</?b>", "", c["title"]) == title]
    assert len(found) == 1, [(c["title"], [t["type"] for t in c["traces"]]) for c in charts]
    return found[0]


def drawn_charts(page: Page, at_least: int) -> list[dict]:
    """The page's Plotly charts, once that many are drawn (Plotly paints after the run)."""
    page.wait_for_function(
        f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {at_least}",
        timeout=60_000,
    )
    return page.evaluate(CHARTS_JS)


def _money(text: str) -> Decimal:
    """'$1,234.56', '−$0.12' (a saving) or '+$0.12' (a step that cost more) -> Decimal."""
    sign = -1 if text.startswith("+") else 1
    return sign * Decimal(text.lstrip("−+").lstrip("$").replace(",", ""))
