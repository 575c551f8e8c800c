"""Warm a freshly started dashboard process before and while its first user signs in.

The rollups make every query cheap (docs/ROLLUPS.md), but a new process still pays,
once, for what a page's first run touches: importing Plotly, pandas and the page
modules, opening the pool's connections, and the default view's queries. Two steps do
that, so that the first page after sign-in draws from a process that is already warm:

- `import_at_start` (`costgate dashboard` runs it first, `dashboard.serve`): the heavy
  third-party imports, in the launcher before Streamlit starts serving, so that they are
  done before any browser connects (not competing with the first sign-in for the
  machine) and never run in a thread beside a script run importing the same modules;
- `start` (`app.py`, when the sign-in page is first served): the dashboard's own modules
  and the default view's queries, whose results land in the same `st.cache_data` caches
  the pages read. Not at the process's start: a result is then kept for its TTL from the
  first sign-in page, as before, not from a start that may predate the ledger's rows.

`start` runs in a background thread and never blocks a run; a failure only costs the
page the time it would have taken anyway.
"""

from __future__ import annotations

import datetime as dt
import gc
import importlib
import logging
import threading
from typing import TYPE_CHECKING

import streamlit as st

if TYPE_CHECKING:
    import pandas as pd

    from dashboard.filters import Filters

log = logging.getLogger(__name__)

# third-party modules the pages need, imported before Streamlit starts (no module here
# may register a Streamlit component: that needs the runtime)
START_MODULES = ("pandas", "sqlalchemy", "psycopg", "plotly.graph_objects")
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
    "dashboard.customers.economics",
    "dashboard.customers.tags",
    # the Routing page's reader of the live weights (the control plane's client, the
    # change audit): about half a second of imports on its first visit
    "gateway.control.routing_update",
)


def import_at_start() -> None:
    """The heavy third-party imports, synchronously: before Streamlit serves anything."""
    for name in START_MODULES:
        importlib.import_module(name)


def _import_modules() -> None:
    for name in MODULES:
        importlib.import_module(name)


def _warm(url: str) -> None:
    from dashboard import queries
    from dashboard.access.end_users import IdView
    from dashboard.customers import queries as customer_queries
    from dashboard.filters import fitted_default

    _import_modules()
    gc.freeze()  # the pages' modules too, as dashboard.serve does for the heavy imports
    f = fitted_default(queries.first_request_at(url), dt.datetime.now(dt.UTC))
    queries.ledger_bounds(url)
    queries.ledger_is_empty(url)
    queries.holds_seeded(url)
    queries.dimension_values(url, None)  # as the sidebar calls it: the cache keys by the call
    customer_queries.tag_keys(url)  # the sidebar's tag filter
    both = queries.cube_with_previous(url, f)  # the overview's, where a sign-in lands
    _draw_once(both, f)
    queries.histogram(url, f, f.previous.start_at, f.end_at, per_model=False)
    queries.cube(url, f, dims=queries.SAVINGS_DIMS)
    queries.cube(url, f)  # the other finance pages'
    queries.histogram(url, f)  # latency & errors
    # the Customers page's first section (the cache is keyed by the filters, not the role)
    customer_queries.users(url, f, IdView.CLEAR)
    customer_queries.user_days(url, f, IdView.CLEAR)


def _draw_once(both: pd.DataFrame, f: Filters) -> None:
    """Build and serialise the Overview's two kinds of chart once, as its run will: Plotly's
    first figure from a DataFrame imports its dataframe layer (narwhals) and fills its
    validators' caches, measured at about a fifth of a second of the first sign-in's run."""
    import plotly.io

    from dashboard.components.charts import time_chart
    from dashboard.cube import between
    from dashboard.spend import over_time

    span = (f.start_at, f.end_at)
    series = over_time(between(both, *span), f.freq)
    if series.empty:
        return
    for kind in ("line", "bar"):
        fig = time_chart(series, {"saved_usd": ""}, "", "", kind=kind, span=span, freq=f.freq)
        plotly.io.to_json(fig, validate=False)  # what st.plotly_chart sends


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
