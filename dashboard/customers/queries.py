"""Reading the Customers page's figures and the tag breakdown from PostgreSQL.

The statements are `dashboard.customers.sql`'s; results are cached per (database,
filters) for `dashboard.queries.CACHE_TTL_S`, like every other query of the dashboard.
The public functions take the caller's `IdView` and return frames whose end-user
column is already what that role may see (`dashboard.access.end_users.present`), so a
page cannot render an id its user may not see; a filter by end user is dropped for a
role that does not see the ids (`for_role`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

import pandas as pd
import streamlit as st

from dashboard.access.end_users import IdView, present
from dashboard.access.sessions import load_secret
from dashboard.customers import sql
from dashboard.filters import Filters
from dashboard.queries import CACHE_TTL_S, _frame
from db.analytics.attribution_sql import SESSION_TABLE, TAG_TABLE, USER_TABLE
from gateway.domain.environment import environment

GROWTH_DAYS = 7
TAG_VALUES_LIMIT = 500


def for_role(filters: Filters, view: IdView) -> Filters:
    """The filters a role may apply: no end-user filter for a role that sees no ids
    (it could otherwise probe which ids exist by the figures a guess yields)."""
    if view is IdView.CLEAR or not filters.end_users:
        return filters
    return dataclasses.replace(filters, end_users=())


@st.cache_resource(show_spinner=False)
def _pseudonym_key() -> bytes:
    # per deployment: the dashboard's own secret, which never leaves the server
    return load_secret(environment())


def _shown(frame: pd.DataFrame, view: IdView) -> pd.DataFrame:
    if view is IdView.CLEAR:
        return frame
    return present(frame, view, _pseudonym_key())


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _users(url: str, filters: Filters, limit: int) -> pd.DataFrame:
    where, params = sql.rollup_where(filters, USER_TABLE)
    return _frame(url, sql.users_sql(where), params | {"limit": limit}, hash_groups=True)


def users(url: str, filters: Filters, view: IdView, limit: int = sql.TOP_LIMIT) -> pd.DataFrame:
    """The top end users by spend, with the range's totals on every row."""
    return _shown(_users(url, for_role(filters, view), limit), view)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _user_days(url: str, filters: Filters) -> pd.DataFrame:
    where, params = sql.rollup_where(filters, USER_TABLE)
    return _frame(url, sql.user_days_sql(where), params, hash_groups=True)


def user_days(url: str, filters: Filters, view: IdView) -> pd.DataFrame:
    """The distribution of cost per end user per day (no ids in it)."""
    return _user_days(url, for_role(filters, view))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _sessions(url: str, filters: Filters, limit: int) -> pd.DataFrame:
    where, params = sql.rollup_where(filters, SESSION_TABLE)
    return _frame(url, sql.sessions_sql(where), params | {"limit": limit}, hash_groups=True)


def sessions(url: str, filters: Filters, view: IdView, limit: int = sql.TOP_LIMIT) -> pd.DataFrame:
    return _shown(_sessions(url, for_role(filters, view), limit), view)


def growth_window(filters: Filters) -> tuple[dt.datetime, dt.datetime, dt.datetime]:
    """(start, middle, end): the range's last 7 days from the middle, the 7 before them."""
    _, end = sql.day_range(filters)
    mid = end - dt.timedelta(days=GROWTH_DAYS)
    return mid - dt.timedelta(days=GROWTH_DAYS), mid, end


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _growth(url: str, filters: Filters, limit: int) -> pd.DataFrame:
    start, mid, end = growth_window(filters)
    where, params = sql.rollup_where(filters, USER_TABLE, start, end)
    params |= {"mid": mid, "limit": limit}
    return _frame(url, sql.growth_sql(where), params, hash_groups=True)


def growth(url: str, filters: Filters, view: IdView, limit: int = sql.TOP_LIMIT) -> pd.DataFrame:
    """The end users whose spend grew most, last 7 days of the range against the 7 before."""
    return _shown(_growth(url, for_role(filters, view), limit), view)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _margins(
    url: str,
    filters: Filters,
    revenue: Decimal | None,
    plan_users: tuple[str, ...],
    plan_revenue: tuple[Decimal, ...],
    limit: int,
) -> pd.DataFrame:
    where, params = sql.rollup_where(filters, USER_TABLE)
    plans = revenue is None
    params |= {"limit": limit}
    if plans:
        params |= {"plan_users": list(plan_users), "plan_revenue": list(plan_revenue)}
    else:
        params["revenue"] = revenue
    return _frame(url, sql.margins_sql(where, plans), params, hash_groups=True)


def margins(
    url: str,
    filters: Filters,
    view: IdView,
    *,
    revenue: Decimal | None = None,
    plan_users: tuple[str, ...] = (),
    plan_revenue: tuple[Decimal, ...] = (),
    limit: int = sql.TOP_LIMIT,
) -> pd.DataFrame:
    """Spend against revenue for the range: `revenue` per end user (a seat), or each
    user's plan revenue (`plan_users[i]` pays `plan_revenue[i]`); lowest margins first."""
    frame = _margins(url, for_role(filters, view), revenue, plan_users, plan_revenue, limit)
    return _shown(frame, view)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def tag_keys(url: str, team: str | None = None) -> list[str]:
    """The tag keys in the rollup (`team`: that team's rows only)."""
    return [str(v) for v in _frame(url, sql.TAG_KEYS_SQL, {"team": team})["value"]]


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def tag_values(url: str, key: str, team: str | None = None) -> list[str]:
    params = {"key": key, "limit": TAG_VALUES_LIMIT, "team": team}
    frame = _frame(url, sql.TAG_VALUES_SQL, params)
    return [str(v) for v in frame["value"]]


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def tag_series(url: str, filters: Filters, key: str) -> pd.DataFrame:
    """Spend per day and value of tag `key`; a tag filter on the same key keeps its values
    (on another key it cannot apply: the page says so)."""
    same_key = filters if filters.tag_key == key else dataclasses.replace(filters, tag_values=())
    where, params = sql.rollup_where(same_key, TAG_TABLE)
    return _frame(url, sql.tag_series_sql(where), params | {"series_key": key})


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _attributed_series(url: str, filters: Filters, by: str) -> pd.DataFrame:
    table = USER_TABLE if filters.end_users else TAG_TABLE
    where, params = sql.rollup_where(filters, table)
    return _frame(url, sql.attributed_series_sql(table, where, by), params)


def attributed_series(url: str, filters: Filters, view: IdView, by: str) -> pd.DataFrame:
    """Spend per day by app or team (`by`) of what the end-user filter (else the tag
    filter) selects: the user rollup, or the tag rollup."""
    if by not in ("app", "team"):
        raise ValueError(f"the attribution rollups cannot split by {by}")
    return _attributed_series(url, for_role(filters, view), by)


def user_export(url: str, filters: Filters, view: IdView) -> pd.DataFrame:
    """Spend per day, app, team and end user, the ids as the role may see them (not
    cached: a file asked for once, possibly large)."""
    where, params = sql.rollup_where(for_role(filters, view), USER_TABLE)
    return _shown(_frame(url, sql.user_export_sql(where), params, hash_groups=True), view)


def tag_export(url: str, filters: Filters) -> pd.DataFrame:
    """Spend per day, app, team, tag key and value."""
    where, params = sql.rollup_where(filters, TAG_TABLE)
    return _frame(url, sql.tag_export_sql(where), params)
