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


def test_a_warm_up_started_before_streamlits_runtime_waits_for_it(monkeypatch):
    """The launcher (`dashboard.serve`) starts it before Streamlit's runtime exists: it
    warms nothing until then (results would land outside the runtime's caches), and gives
    up after RUNTIME_WAIT_S."""
    from streamlit import runtime

    warmed: list[str] = []
    monkeypatch.setattr(prewarm, "_warm", warmed.append)
    monkeypatch.setattr(prewarm, "RUNTIME_WAIT_S", 0.3)
    assert not runtime.exists()
    url = "postgresql+psycopg://nobody@127.0.0.1:1/no-runtime-here"
    thread = prewarm.start(url, wait_for_runtime=True)
    thread.join(10)
    assert not thread.is_alive() and warmed == []
    assert prewarm.start(url) is thread  # app.py's call later gets the same thread

    other = "postgresql+psycopg://nobody@127.0.0.1:1/without-waiting"
    thread = prewarm.start(other)  # app.py's, inside a run: no wait
    thread.join(10)
    assert warmed == [other]


def test_the_runtime_wait_ends_once_a_runtime_exists(monkeypatch):
    from streamlit import runtime

    answers = iter([False, False, True])
    monkeypatch.setattr(runtime, "exists", lambda: next(answers))
    assert prewarm._runtime_ready(5)
    monkeypatch.setattr(runtime, "exists", lambda: False)
    assert not prewarm._runtime_ready(0.1)
