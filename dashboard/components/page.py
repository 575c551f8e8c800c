"""What every page starts with: its title, the period said in UTC, the empty state."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import streamlit as st

from dashboard import queries
from dashboard.components.session import SessionUser, current_user
from dashboard.components.sidebar import FILTERS_KEY
from dashboard.filters import Filters
from dashboard.settings import DashboardSettings, load_settings

EMPTY_LEDGER = (
    "**No requests recorded yet.** Start the demo with `make demo` (or `costgate demo`): "
    "it runs the gateway, the simulated providers and demo traffic, and this page fills "
    "in within a minute. To explore realistic history instead, run "
    "`costgate seed --rows 100000`."
)


@dataclasses.dataclass(frozen=True)
class PageContext:
    settings: DashboardSettings
    filters: Filters
    user: SessionUser

    @property
    def url(self) -> str:
        return self.settings.database_url


def start_page(title: str, with_period: bool = True) -> PageContext:
    user = current_user()
    if user is None:  # a page file run on its own, outside app.py
        st.stop()
    ctx = PageContext(load_settings(), st.session_state[FILTERS_KEY], user)
    st.title(title)
    if with_period:
        st.caption(f"Period: {ctx.filters.label()} · all times UTC")
    return ctx


def ledger_is_empty(ctx: PageContext) -> bool:
    """Render the new user's empty state when the ledger has no rows at all."""
    if queries.ledger_is_empty(ctx.url):
        st.info(EMPTY_LEDGER)
        return True
    return False


def no_match() -> None:
    st.info(
        "No requests match these filters in this period. Widen the date range or clear filters."
    )


def refreshing(body: Callable[[], None], settings: DashboardSettings) -> None:
    """Run a page body, re-run on a timer while auto-refresh is on."""
    every = settings.refresh_s if st.session_state.get("auto_refresh", True) else None
    st.fragment(body, run_every=every)()
