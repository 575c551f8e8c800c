"""The warm-up a fresh dashboard process starts at its sign-in page fills the caches the
default view reads, on an empty ledger as on a seeded one."""

from __future__ import annotations

import datetime as dt
import sys

import streamlit as st

from dashboard import prewarm, queries
from dashboard.filters import fitted_default
from gateway.devtools.seed import seed_ledger
from gateway.domain.config import default_config_path, load_config


def test_the_warm_up_runs_the_default_views_queries(database_url, empty_usage, monkeypatch):
    st.cache_data.clear()
    st.cache_resource.clear()
    thread = prewarm.start(database_url)  # an empty ledger: nothing to warm but imports
    thread.join(120)
    assert not thread.is_alive() and "plotly.graph_objects" in sys.modules
    assert prewarm.start(database_url) is thread  # once per process and database

    seed_ledger(database_url, load_config(default_config_path()), 500, days=5)
    st.cache_data.clear()
    prewarm._warm(database_url)
    # the overview's cube now comes from the cache: no statement reaches the database
    ran: list[str] = []
    monkeypatch.setattr(queries, "_frame", lambda *a, **k: ran.append(a[1]))
    f = fitted_default(queries.first_request_at(database_url), dt.datetime.now(dt.UTC))
    assert len(queries.cube_with_previous(database_url, f)) > 0
    assert len(queries.histogram(database_url, f)) > 0
    assert ran == []


def test_the_imports_at_the_process_start_load_plotly_and_no_streamlit_component():
    """`dashboard.serve` runs them before Streamlit's runtime exists: a fresh interpreter
    has Plotly's figures loaded, and none of the dashboard's component modules (their
    components register with the runtime, at import)."""
    check = (
        "import sys; from dashboard import prewarm; prewarm.import_at_start(); "
        "assert 'plotly.graph_objects' in sys.modules and 'pandas' in sys.modules; "
        "loaded = sorted(m for m in sys.modules if m.startswith('dashboard.components')); "
        "assert loaded == [], loaded"
    )
    _in_a_fresh_interpreter(check)


def test_what_the_start_imported_is_out_of_the_collectors_reach() -> None:
    """Streamlit collects every generation after each script run: the start's imports
    (~180k objects) are frozen first, so those collections walk only the runs' own."""
    check = (
        "import gc; from dashboard import serve; serve.prepare(); "
        "frozen, tracked = gc.get_freeze_count(), len(gc.get_objects()); "
        "assert frozen > 50_000 and tracked < frozen / 10, (frozen, tracked)"
    )
    _in_a_fresh_interpreter(check)


def _in_a_fresh_interpreter(check: str) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
