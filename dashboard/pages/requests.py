"""Requests: the newest requests matching the filters (metadata only), and one in detail."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import queries
from dashboard.components.page import ledger_is_empty, refreshing, start_page
from dashboard.components.tables import for_display

ctx = start_page("Requests")

STATUSES = ["ok", "client_error", "upstream_error", "cancelled"]
LOG_COLUMNS = [
    "started_at",
    "request_id",
    "app",
    "team",
    "requested_model",
    "model",
    "provider",
    "endpoint",
    "stream",
    "status",
    "http_status",
    "error_class",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    "ttft_ms",
    "attempts",
    "actual_cost_usd",
    "list_cost_usd",
]


def show_record(rid: str) -> None:
    record = queries.request_by_id(ctx.url, rid, team=ctx.user.team)
    if record is None:
        st.warning(f"No request with id {rid.strip()!r}.")
        return
    shown = {k: (None if v is None else str(v)) for k, v in record.items()}
    st.json(shown)


def detail() -> None:
    rid = st.text_input("Request id", key="request_id", placeholder="paste a request id")
    if rid:
        show_record(rid)


def body() -> None:
    if ledger_is_empty(ctx):
        return
    statuses = st.multiselect("Status", STATUSES, key="request_status")
    log = queries.recent_requests(ctx.url, ctx.filters, tuple(statuses))
    st.caption(
        f"The newest {len(log):,} request(s) matching the filters (at most "
        f"{queries.REQUEST_LOG_LIMIT}); prompts and completions are never stored."
    )
    if len(log):
        shown = for_display(log[LOG_COLUMNS], money=["actual_cost_usd", "list_cost_usd"])
        shown["request_id"] = shown["request_id"].astype(str)
        shown["started_at"] = pd.to_datetime(shown["started_at"], utc=True).dt.strftime(
            "%Y-%m-%d %H:%M:%S"
        )
        event = st.dataframe(
            shown.rename(columns={"started_at": "started (UTC)"}),
            hide_index=True,
            width="stretch",
            height=420,
            on_select="rerun",
            selection_mode="single-row",
            key="request_log",
        )
        st.caption("Select a row to see the whole record.")
        rows = event.selection.rows if event is not None else []
        if rows:
            show_record(shown["request_id"].iloc[rows[0]])


if st.session_state.get("auto_refresh", True):
    refreshing(body, ctx.settings)
else:
    body()
st.subheader("Drill down")
detail()
