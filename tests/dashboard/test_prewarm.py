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



def test_the_warm_up_at_the_process_start_waits_for_streamlits_runtime(database_url, monkeypatch):
    """The launcher (`dashboard.serve`) starts it before Streamlit's runtime exists: it
    imports and connects once the runtime is there, gives up after RUNTIME_WAIT_S, and
    never runs a query whose result a page would read (that waits for the sign-in page)."""
    from streamlit import runtime

    done: list[str] = []
    monkeypatch.setattr(prewarm, "_import_modules", lambda: done.append("imports"))
    monkeypatch.setattr(prewarm, "_warm", lambda url: done.append("queries"))
    monkeypatch.setattr(prewarm, "RUNTIME_WAIT_S", 0.3)
    assert not runtime.exists()
    thread = prewarm.start_with_process(database_url)
    thread.join(10)
    assert not thread.is_alive() and done == []  # no runtime came: nothing warmed

    answers = iter([False, False, True])  # the runtime appears on the third look
    monkeypatch.setattr(runtime, "exists", lambda: next(answers, True))
    opened: list[str] = []
    real_connect = prewarm._connect
    monkeypatch.setattr(prewarm, "_connect", lambda url: (real_connect(url), opened.append(url)))
    thread = prewarm.start_with_process(database_url)
    thread.join(30)
    assert done == ["imports"] and opened == [database_url]  # a real round trip, no query


def test_the_runtime_wait_ends_once_a_runtime_exists(monkeypatch):
    from streamlit import runtime

    answers = iter([False, False, True])
    monkeypatch.setattr(runtime, "exists", lambda: next(answers))
    assert prewarm._runtime_ready(5)
    monkeypatch.setattr(runtime, "exists", lambda: False)
    assert not prewarm._runtime_ready(0.1)
