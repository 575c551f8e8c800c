"""Warm a freshly started dashboard process while its first user signs in.

The rollups make every query cheap (docs/ROLLUPS.md), but a new process still pays,
once, for what a page's first run touches: importing Plotly and the page modules, opening
the pool's connections, and the default view's queries. `start` does that in a
background thread, so that the first page after sign-in draws from a process that is
already warm (the query results land in the same `st.cache_data` caches the pages read).
`costgate dashboard` starts it with the process (`dashboard.serve`), before the first
browser connects, so that it is not still running, and competing for the same two
cores, when the first user signs in; `app.py` starts it too, a no-op then, for a
dashboard started some other way (`streamlit run`, AppTest). It never blocks a run, and
a failure only costs the page the time it would have taken anyway.
"""

from __future__ import annotations

import datetime as dt
import importlib
import logging
import threading
import time

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


_started: dict[str, threading.Thread] = {}
_lock = threading.Lock()
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


def start(url: str, wait_for_runtime: bool = False) -> threading.Thread:
    """Once per process and database: the warm-up thread (started, not awaited).

    `wait_for_runtime`: started before Streamlit's runtime (by the launcher), it first
    waits for it (and gives up, warming nothing, if none comes)."""

    def run() -> None:
        try:
            if not wait_for_runtime or _runtime_ready(RUNTIME_WAIT_S):
                _warm(url)
        except Exception as err:  # noqa: BLE001 - the pages run the same queries themselves
            log.warning("dashboard warm-up stopped: %s", type(err).__name__)

    with _lock:  # the launcher's thread and a first run's may ask at once
        thread = _started.get(url)
        if thread is None:
            thread = threading.Thread(target=run, name="dashboard-prewarm", daemon=True)
            _started[url] = thread
            thread.start()
    return thread
