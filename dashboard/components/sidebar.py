"""The sidebar every page shares: filters (mirrored into the URL), refresh, the user.

The date range is clamped (`dashboard.filters.clamp`) to the ledger's data and a
maximum span, both when a URL asks for it and when the date widget picks it, with a
note under the widget saying what was cut.
"""

from __future__ import annotations

import datetime as dt
from typing import TypeAlias, cast

import streamlit as st

from dashboard import queries
from dashboard.access.end_users import IdView, view_for
from dashboard.components.session import SessionUser, sign_out
from dashboard.customers import queries as customer_queries
from dashboard.filters import (
    DIMENSION_PARAMS,
    Filters,
    clamp,
    fitted_default,
    from_query_params,
    to_query_params,
)

FILTERS_KEY = "costgate_filters"
WIDGET_PREFIX = "filter_"
CLAMP_NOTE_KEY = "costgate_clamp_note"
NO_TAG = "(any)"

# What the date range widget returns: its value comes from the (start, end) tuple
# _initial_filters seeds under its key, not from `value`, so Streamlit's overload for the
# default value (a single date) does not apply; mid-selection the range has one date.
DateInput: TypeAlias = dt.date | tuple[()] | tuple[dt.date] | tuple[dt.date, dt.date] | None


def utc_today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def _data_default(database_url: str) -> Filters:
    """The period the ledger's age calls for (`dashboard.filters.fitted_default`)."""
    return fitted_default(queries.first_request_at(database_url), dt.datetime.now(dt.UTC))


def _clamped(filters: Filters, database_url: str) -> Filters:
    first, last = queries.ledger_bounds(database_url)
    clamped, note = clamp(filters, first, last, utc_today())
    st.session_state[CLAMP_NOTE_KEY] = note
    return clamped


def _clamp_picked_dates(database_url: str) -> None:
    """The date widget's on_change: a picked range is clamped before the script runs
    (the one moment Streamlit lets a widget's own value be changed)."""
    key = WIDGET_PREFIX + "dates"
    dates = st.session_state.get(key)
    if isinstance(dates, tuple | list) and len(dates) == 2:
        picked = Filters(start=dates[0], end=dates[1])
        clamped = _clamped(picked, database_url)
        st.session_state[key] = (clamped.start, clamped.end)


def _initial_filters(database_url: str) -> Filters:
    """From the URL on a session's first run; afterwards from the widgets."""
    if FILTERS_KEY not in st.session_state:
        params = {k: st.query_params.get_all(k) for k in st.query_params}
        flat = {k: v[-1] if len(v) == 1 else v for k, v in params.items()}
        default = _data_default(database_url)
        filters = _clamped(from_query_params(flat, utc_today(), default), database_url)
        st.session_state[FILTERS_KEY] = filters
        st.session_state[WIDGET_PREFIX + "dates"] = (filters.start, filters.end)
        for param, field in DIMENSION_PARAMS.items():
            st.session_state[WIDGET_PREFIX + param] = list(getattr(filters, field))
        st.session_state[WIDGET_PREFIX + "user"] = ", ".join(filters.end_users)
        st.session_state[WIDGET_PREFIX + "tag_key"] = filters.tag_key or NO_TAG
        st.session_state[WIDGET_PREFIX + "tag"] = list(filters.tag_values)
    # session_state values are Any; this key only ever holds a Filters (here and in render)
    return cast(Filters, st.session_state[FILTERS_KEY])


def render(user: SessionUser, database_url: str) -> Filters:
    previous = _initial_filters(database_url)
    options = queries.dimension_values(database_url, user.team)
    if user.team is not None:  # a team-scoped user picks among its own team only
        key = WIDGET_PREFIX + "team"
        st.session_state[key] = [t for t in st.session_state.get(key, []) if t == user.team]
    with st.sidebar:
        scope = f" · team {user.team}" if user.team else ""
        st.caption(f"Signed in as **{user.name}** ({user.role}{scope})")
        if st.button("Sign out", key="sign_out"):
            sign_out()
            st.rerun()
        st.subheader("Filters")
        dates = cast(DateInput, st.date_input(
            "Date range (UTC days)",
            key=WIDGET_PREFIX + "dates",
            max_value=utc_today() + dt.timedelta(days=1),
            on_change=_clamp_picked_dates,
            args=(database_url,),
        ))
        if note := st.session_state.get(CLAMP_NOTE_KEY):
            st.info(note)
        start, end = previous.start, previous.end
        if isinstance(dates, tuple | list) and len(dates) == 2:
            start, end = dates
        chosen: dict[str, tuple[str, ...]] = {}
        for param, field in DIMENSION_PARAMS.items():
            key = WIDGET_PREFIX + param
            current = st.session_state.get(key, [])
            # keep values from a shared URL selectable even if not in the ledger yet
            values = sorted(set(options.get(param, [])) | set(current))
            chosen[field] = tuple(st.multiselect(param.capitalize(), values, key=key))
        end_users, tag_key, tag_values = _attribution_widgets(user, database_url)
        st.caption("All dates and times are UTC.")
        if queries.holds_seeded(database_url):
            st.caption(
                ":material/science: This ledger holds **seeded** synthetic history "
                "(`costgate seed --remove` deletes it, and only it)."
            )
        st.toggle("Auto-refresh", value=True, key="auto_refresh")
    # clamped again: a range the widget kept from before the ledger changed stays in bounds
    first, last = queries.ledger_bounds(database_url)
    dated, _ = clamp(Filters(start=start, end=end), first, last, utc_today())
    if previous.since is not None and (start, end) == (previous.start, previous.end):
        # the dates were not picked: keep following the data as the ledger grows
        fitted = _data_default(database_url)
        if fitted.since is not None:
            dated = fitted
    filters = Filters(
        start=dated.start,
        end=dated.end,
        since=dated.since,
        until=dated.until,
        team_scope=user.team,
        end_users=end_users,
        tag_key=tag_key,
        tag_values=tag_values,
        **chosen,
    )
    st.session_state[FILTERS_KEY] = filters
    wanted = to_query_params(filters)
    if {k: st.query_params.get(k) for k in st.query_params} != wanted:
        st.query_params.from_dict(wanted)
    return filters


def _attribution_widgets(
    user: SessionUser, database_url: str
) -> tuple[tuple[str, ...], str | None, tuple[str, ...]]:
    """The end-user filter (ids typed, comma-separated: there may be 100,000s of them),
    only for the roles that see end-user ids; the tag filter: one key, some values."""
    end_users: tuple[str, ...] = ()
    if view_for(user.role) is IdView.CLEAR:
        typed = st.text_input("End users (ids, comma-separated)", key=WIDGET_PREFIX + "user")
        end_users = tuple(sorted({p.strip() for p in typed.split(",") if p.strip()}))
    keys = customer_queries.tag_keys(database_url, user.team)
    key_widget = WIDGET_PREFIX + "tag_key"
    chosen_key = st.session_state.get(key_widget, NO_TAG)
    options = [NO_TAG, *sorted(set(keys) | ({chosen_key} - {NO_TAG}))]
    values_widget = WIDGET_PREFIX + "tag"

    def forget_values() -> None:  # another key's values mean nothing under this one
        st.session_state[values_widget] = []

    key = st.selectbox("Tag key", options, key=key_widget, on_change=forget_values)
    if key is None or key == NO_TAG:
        return end_users, None, ()
    current = st.session_state.get(values_widget, [])
    values = sorted(set(customer_queries.tag_values(database_url, key, user.team)) | set(current))
    picked = st.multiselect(f"Tag {key}", values, key=values_widget)
    return end_users, key, tuple(picked)
