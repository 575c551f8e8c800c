"""Warm a freshly started dashboard process while its first user signs in.

The rollups make every query cheap (docs/ROLLUPS.md), but a new process still pays,
once, for what a page's first run touches: importing Plotly and the page modules, opening
the pool's connections, and the default view's queries. `start` does that in a
background thread when the sign-in page is first served, so that the first page after
sign-in draws from a process that is already warm (the query results land in the same
`st.cache_data` caches the pages read). It never blocks a run, and a failure only costs
the page the time it would have taken anyway.
"""

from __future__ import annotations

import datetime as dt
import importlib
import logging
import threading

import streamlit as st

log = logging.getLogger(__name__)

# what the pages import beyond app.py's own imports: Plotly's figure modules, mostly
MODULES = (
    "plotly.graph_objects",
    "dashboard.components.charts",
    "dashboard.components.kpis",
    "dashboard.components.tables",
    "dashboard.components.markers",
    "dashboard.spend",
    "dashboard.failures",
    "dashboard.forecast",
    "dashboard.budget_board",
    "dashboard.routing_editor",
)


def _warm(url: str) -> None:
    from dashboard import queries
    from dashboard.filters import fitted_default

    for name in MODULES:
        importlib.import_module(name)
    f = fitted_default(queries.first_request_at(url), dt.datetime.now(dt.UTC))
    queries.ledger_bounds(url)
    queries.ledger_is_empty(url)
    queries.holds_seeded(url)
    queries.dimension_values(url)
    queries.cube_with_previous(url, f)  # the overview's, where a sign-in lands
    queries.histogram(url, f, f.previous.start_at, f.end_at, per_model=False)
    queries.cube(url, f, dims=queries.SAVINGS_DIMS)
    queries.cube(url, f)  # the other finance pages'
    queries.histogram(url, f)  # latency & errors


@st.cache_resource(show_spinner=False)
def start(url: str) -> threading.Thread:
    """Once per process and database: the warm-up thread (started, not awaited)."""

    def run() -> None:
        try:
            _warm(url)
        except Exception as err:  # noqa: BLE001 - the pages run the same queries themselves
            log.warning("dashboard warm-up stopped: %s", type(err).__name__)

    thread = threading.Thread(target=run, name="dashboard-prewarm", daemon=True)
    thread.start()
    return thread
