"""The sidebar every page shares: filters (mirrored into the URL), refresh, the user."""

from __future__ import annotations

import datetime as dt
from typing import TypeAlias, cast

import streamlit as st

from dashboard import queries
from dashboard.components.session import SessionUser, sign_out
from dashboard.filters import DIMENSION_PARAMS, Filters, from_query_params, to_query_params

FILTERS_KEY = "costgate_filters"
WIDGET_PREFIX = "filter_"

# What the date range widget returns: its value comes from the (start, end) tuple
# _initial_filters seeds under its key, not from `value`, so Streamlit's overload for the
# default value (a single date) does not apply; mid-selection the range has one date.
DateInput: TypeAlias = dt.date | tuple[()] | tuple[dt.date] | tuple[dt.date, dt.date] | None


def utc_today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def _initial_filters() -> Filters:
    """From the URL on a session's first run; afterwards from the widgets."""
    if FILTERS_KEY not in st.session_state:
        params = {k: st.query_params.get_all(k) for k in st.query_params}
        flat = {k: v[-1] if len(v) == 1 else v for k, v in params.items()}
        filters = from_query_params(flat, utc_today())
        st.session_state[FILTERS_KEY] = filters
        st.session_state[WIDGET_PREFIX + "dates"] = (filters.start, filters.end)
        for param, field in DIMENSION_PARAMS.items():
            st.session_state[WIDGET_PREFIX + param] = list(getattr(filters, field))
    # session_state values are Any; this key only ever holds a Filters (here and in render)
    return cast(Filters, st.session_state[FILTERS_KEY])


def render(user: SessionUser, database_url: str) -> Filters:
    previous = _initial_filters()
    options = queries.dimension_values(database_url)
    with st.sidebar:
        st.caption(f"Signed in as **{user.name}** ({user.role})")
        if st.button("Sign out", key="sign_out"):
            sign_out()
            st.rerun()
        st.subheader("Filters")
        dates = cast(DateInput, st.date_input(
            "Date range (UTC days)",
            key=WIDGET_PREFIX + "dates",
            max_value=utc_today() + dt.timedelta(days=1),
        ))
        start, end = previous.start, previous.end
        if isinstance(dates, tuple | list) and len(dates) == 2:
            start, end = dates
        chosen = {}
        for param, field in DIMENSION_PARAMS.items():
            key = WIDGET_PREFIX + param
            current = st.session_state.get(key, [])
            # keep values from a shared URL selectable even if not in the ledger yet
            values = sorted(set(options.get(param, [])) | set(current))
            chosen[field] = tuple(st.multiselect(param.capitalize(), values, key=key))
        st.caption("All dates and times are UTC.")
        st.toggle("Auto-refresh", value=True, key="auto_refresh")
    filters = Filters(start=start, end=end, **chosen)
    st.session_state[FILTERS_KEY] = filters
    wanted = to_query_params(filters)
    if {k: st.query_params.get(k) for k in st.query_params} != wanted:
        st.query_params.from_dict(wanted)
    return filters
