"""The Experiments page with AppTest against a real PostgreSQL: the ledger's experiment
(the gateway unreachable, so read from its rows), its variants' figures as the report
computes them, the intervals drawn; a team-scoped user is not shown other teams' traffic."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from sqlalchemy import Engine, text

from tests.dashboard.pages.test_pages import app_as, dashboard_env, open_page  # noqa: F401
from tests.fixtures.ledger_writes import write_records
from tests.gateway.ledger.support import make_record


def _write(database_url: str, ledger_engine: Engine) -> None:
    now = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    rows = [make_record(started_at=now, ended_at=now, experiment="ab",
                        variant=("a", "b")[i % 2],
                        actual_cost_usd=Decimal(10 if i % 2 == 0 else 1 + i % 3) / 10**6)
            for i in range(60)]  # fmt: skip

    write_records(database_url, rows)
    insert = text("INSERT INTO feedback (request_id, rater, app, score) "
                  "VALUES (:r, 'u', 'checkout', :s)")  # fmt: skip
    with ledger_engine.begin() as conn:
        for i, r in enumerate(rows):
            conn.execute(insert, {"r": r.request_id, "s": int(i % 2 == 0 or i % 5 == 0)})


def test_the_page_shows_each_variant_against_the_control(
    dashboard_env: None, database_url: str, ledger_engine: Engine, empty_usage: None  # noqa: F811
) -> None:
    _write(database_url, ledger_engine)
    at = open_page(app_as("finance"), "experiments")
    assert not at.exception, at.exception
    assert any("Cannot read the live experiments" in w.value for w in at.warning)
    table = at.dataframe[0].value
    assert list(table["variant"]) == ["a", "b"] and list(table["requests"]) == [30, 30]
    assert table["USD / request"][1] < table["USD / request"][0]
    assert table["ratings"][1] == 30
    charts = at.get("plotly_chart")
    assert len(charts) >= 2  # cost and feedback intervals at least


def test_a_team_scoped_user_is_not_shown_experiments(
    dashboard_env: None, database_url: str, ledger_engine: Engine, empty_usage: None  # noqa: F811
) -> None:
    _write(database_url, ledger_engine)
    at = open_page(app_as("team"), "experiments")
    assert not at.exception
    assert any("team-scoped" in i.value for i in at.info)
    assert not at.dataframe
