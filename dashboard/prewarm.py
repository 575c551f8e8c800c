"""Warm a freshly started dashboard process before and while its first user signs in.

The rollups make every query cheap (docs/ROLLUPS.md), but a new process still pays,
once, for what a page's first run touches: importing Plotly, pandas and the page
modules, opening the pool's connections, and the default view's queries. Two
background threads do that, so that the first page after sign-in draws from a process
that is already warm:

- `start_with_process` (`costgate dashboard` runs it first, `dashboard.serve`): the
  imports and a first connection, as the process starts, before any browser connects,
  so that they are not competing with the first sign-in for the machine;
- `start` (`app.py`, when the sign-in page is first served): the default view's queries,
  whose results land in the same `st.cache_data` caches the pages read. Not at the
  process's start: a result is then kept for its TTL from the first sign-in page, as
  before, not from a start that may predate the ledger's first rows.

Neither blocks a run, and a failure only costs the page the time it would have taken
anyway.
"""

from __future__ import annotations

import datetime as dt
import importlib
import logging
import threading
import time

import streamlit as st

log = logging.getLogger(__name__)

# what app.py and the pages import: Streamlit's and pandas' heavy parts, Plotly's figure
# modules, the dashboard's own
MODULES = (
    "pandas",
    "sqlalchemy",
    "plotly.graph_objects",
    "dashboard.queries",
    "dashboard.components.session",
    "dashboard.components.sidebar",
    "dashboard.components.page",
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


def _import_modules() -> None:
    for name in MODULES:
        importlib.import_module(name)


def _connect(url: str) -> None:
    """One connection of the pages' pool opened (and its first round trip made)."""
    from sqlalchemy import text

    from dashboard import queries

    with queries.engine_for(url).connect() as conn:
        conn.execute(text("SELECT 1"))


def _warm(url: str) -> None:
    from dashboard import queries
    from dashboard.filters import fitted_default

    _import_modules()
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


RUNTIME_WAIT_S = 60.0


def _runtime_ready(timeout_s: float) -> bool:
    """Whether Streamlit's runtime exists (within `timeout_s`): `st.cache_data` keeps its
    results in the runtime's caches, so a warm-up started with the process waits for it."""
    from streamlit import runtime

    deadline = time.monotonic() + timeout_s
    while not runtime.exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def start_with_process(url: str) -> threading.Thread:
    """The imports and a first connection, as the process starts (started, not awaited).

    Started before Streamlit's runtime, it first waits for it (the page modules register
    their components with it, the pool is an `st.cache_resource`), and gives up, warming
    nothing, if none comes within RUNTIME_WAIT_S."""

    def run() -> None:
        try:
            if _runtime_ready(RUNTIME_WAIT_S):
                _import_modules()
                _connect(url)
        except Exception as err:  # noqa: BLE001 - the first run imports and connects itself
            log.warning("dashboard warm-up at start stopped: %s", type(err).__name__)

    thread = threading.Thread(target=run, name="dashboard-prewarm-start", daemon=True)
    thread.start()
    return thread


@st.cache_resource(show_spinner=False)
def start(url: str) -> threading.Thread:
    """Once per process and database: the queries' warm-up thread (started, not awaited)."""

    def run() -> None:
        try:
            _warm(url)
        except Exception as err:  # noqa: BLE001 - the pages run the same queries themselves
            log.warning("dashboard warm-up stopped: %s", type(err).__name__)

    thread = threading.Thread(target=run, name="dashboard-prewarm", daemon=True)
    thread.start()
    return thread
