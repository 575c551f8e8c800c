"""Requests: the newest requests matching the filters (metadata only), and one in detail."""

from __future__ import annotations

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


def detail() -> None:
    rid = st.text_input("Request id", key="request_id", placeholder="paste a request id")
    if not rid:
        return
    record = queries.request_by_id(ctx.url, rid)
    if record is None:
        st.warning(f"No request with id {rid.strip()!r}.")
        return
    shown = {k: (None if v is None else str(v)) for k, v in record.items()}
    st.json(shown)


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
        st.dataframe(shown, hide_index=True, width="stretch", height=420)


if st.session_state.get("auto_refresh", True):
    refreshing(body, ctx.settings)
else:
    body()
st.subheader("Drill down")
detail()
