"""Routing changes as markers on the time charts of a period."""

from __future__ import annotations

import datetime as dt

import pandas as pd

from dashboard import queries
from dashboard.filters import Filters


def routing_markers(url: str, app_name: str, filters: Filters) -> list[tuple[dt.datetime, str]]:
    changes = queries.routing_changes(url, app_name)
    if changes.empty:
        return []
    at = pd.to_datetime(changes["changed_at"], utc=True)
    inside = (at >= pd.Timestamp(filters.start_at)) & (at < pd.Timestamp(filters.end_at))
    return [
        (when.to_pydatetime(), f"routing: {alias or 'settings'}")
        for when, alias in zip(at[inside], changes.loc[inside, "alias"], strict=True)
    ]
