"""Customers: spend per end user and per session, against revenue; the fastest growers.

Read only from the attribution rollups (per end user, per session, by day), each figure
one range scan aggregated in PostgreSQL (`dashboard.customers.sql`). One section at a
time runs its queries, so the first visit pays for the end users' figures only.
"""

from __future__ import annotations

from decimal import Decimal

import plotly.graph_objects as go
import streamlit as st

from dashboard.access.end_users import view_for
from dashboard.components.charts import LAYOUT, as_float
from dashboard.components.formatting import format_count, format_usd
from dashboard.components.page import ledger_is_empty, refreshing, start_page
from dashboard.components.tables import show_table
from dashboard.customers import economics as econ
from dashboard.customers import queries as cq
from dashboard.filters import SESSION_ROLLUP_FILTERS, USER_ROLLUP_FILTERS, ignored_note

ctx = start_page("Customers", with_period=False)
VIEW = view_for(ctx.user.role)
FILTERS = cq.for_role(ctx.filters, VIEW)
SECTIONS = ("End users", "Revenue & margin", "Sessions", "Growth")
LABELS = {
    "end_user": "end user",
    "spend_usd": "spend",
    "share_pct": "share of spend %",
    "active_days": "active days",
    "unknown_cost_requests": "unknown cost (requests)",
    "revenue_usd": "revenue",
    "margin_usd": "margin",
    "margin_pct": "margin % of revenue",
    "cost_usd": "cost",
    "first_day": "first day",
    "before_usd": "7 days before",
    "recent_usd": "last 7 days",
    "increase_usd": "increase",
    "increase_pct": "increase %",
    "session_id": "session",
}
BAR_USERS = 20


def metric_row(*figures: tuple[str, str]) -> None:
    """(label, value) tiles side by side, one column each."""
    for col, (label, value) in zip(st.columns(len(figures)), figures, strict=True):
        col.metric(label, value)


def bar(names: list[str], values: list[Decimal | None], title: str) -> go.Figure:
    fig = go.Figure(go.Bar(x=as_float(values), y=names, orientation="h"))
    layout = {**LAYOUT, "hovermode": "closest", "height": 140 + 24 * max(len(names), 3)}
    fig.update_layout(title=title, xaxis_title="USD", **layout)
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig


def end_users() -> None:
    frame = cq.users(ctx.url, FILTERS, VIEW)
    summary = econ.user_summary(frame, cq.user_days(ctx.url, FILTERS, VIEW))
    metric_row(
        ("End users", format_count(summary.end_users)),
        ("Spend (USD)", format_usd(summary.spend_usd)),
        ("User-days", format_count(summary.user_days)),
        ("Mean per user-day", format_usd(summary.day_mean_usd)),
    )
    if summary.end_users == 0:
        st.info("No request of this period carries an end user (or none matches the filters).")
        return
    st.subheader("Cost per end user per day")
    metric_row(
        ("p50 (USD)", format_usd(summary.day_p50_usd)),
        ("p90 (USD)", format_usd(summary.day_p90_usd)),
        ("p99 (USD)", format_usd(summary.day_p99_usd)),
        ("max (USD)", format_usd(summary.day_max_usd)),
    )
    st.caption(
        "Over the end-user days of the period (one per end user and UTC day with requests); "
        "a percentile is the cost of an actual user-day (nearest rank)."
    )
    top = econ.top_users(frame)
    head = top.head(BAR_USERS)
    st.plotly_chart(
        bar([str(u) for u in head["end_user"]], list(head["spend_usd"]),
            f"Top {len(head)} end users by spend"),
        width="stretch",
    )  # fmt: skip
    st.subheader(f"Top {len(top)} end users by spend")
    show_table(top, ["spend_usd"], ["share_pct"], LABELS, key="customers_top")


def revenue_input() -> dict[str, object] | None:
    how = st.radio(
        "Revenue", ["Price per seat", "Plans (CSV)"], horizontal=True, key="customers_revenue"
    )
    if how == "Price per seat":
        text = st.text_input("Price per end user per month (USD)", key="customers_seat")
        if not text.strip():
            return None
        monthly = econ.parse_price(text)
        return {"revenue": econ.revenue_for_range(monthly, FILTERS.days)}
    upload = st.file_uploader("CSV of end_user,plan", type=["csv"], key="customers_plans")
    if upload is None:
        return None
    plans = econ.parse_plans(upload.getvalue().decode("utf-8-sig"))
    prices = {}
    for plan in sorted(set(plans.values())):
        text = st.text_input(f"Price of plan {plan} per month (USD)", key=f"customers_plan_{plan}")
        if text.strip():
            prices[plan] = econ.parse_price(text)
    users, revenue, unpriced = econ.plan_revenue(plans, prices, FILTERS.days)
    if unpriced:
        st.caption(f"No price yet for: {', '.join(unpriced)} (their end users are left out).")
    return {"plan_users": users, "plan_revenue": revenue} if users else None


def revenue_and_margin() -> None:
    st.caption(f"Revenue over the period's {FILTERS.days} days: the monthly price × days / 30.")
    try:
        given = revenue_input()
    except econ.RevenueError as err:
        st.error(str(err))
        return
    if given is None:
        st.info("Enter a price per seat, or upload plans, to see margins per end user.")
        return
    frame = cq.margins(ctx.url, FILTERS, VIEW, **given)  # type: ignore[arg-type]
    summary = econ.margin_summary(frame)
    metric_row(
        ("Revenue (USD)", format_usd(summary.revenue_usd)),
        ("Spend (USD)", format_usd(summary.spend_usd)),
        ("Margin (USD)", format_usd(summary.margin_usd)),
        ("Cost more than they pay", format_count(summary.losing)),
    )
    st.caption(
        f"{format_count(summary.with_revenue)} of {format_count(summary.end_users)} end users "
        "active in the period have a revenue figure."
    )
    st.subheader("End users who cost more than they pay")
    losing = econ.margin_table(frame, losing_only=True)
    if losing.empty:
        st.success("None: every end user with revenue pays more than they cost.")
    else:
        money = ["spend_usd", "revenue_usd", "margin_usd"]
        show_table(losing, money, ["margin_pct"], LABELS, key="customers_losing")


def sessions() -> None:
    if note := ignored_note(FILTERS, SESSION_ROLLUP_FILTERS, "the sessions"):
        st.info(note)
    frame = cq.sessions(ctx.url, FILTERS, VIEW)
    s = econ.session_summary(frame)
    metric_row(
        ("Sessions", format_count(s.sessions)),
        ("Mean (USD)", format_usd(s.mean_usd)),
        ("p50 (USD)", format_usd(s.p50_usd)),
        ("p90 (USD)", format_usd(s.p90_usd)),
        ("max (USD)", format_usd(s.max_usd)),
    )
    top = econ.top_sessions(frame)
    if not top.empty:
        st.subheader(f"Top {len(top)} sessions by cost")
        show_table(top, ["cost_usd"], [], LABELS, key="customers_sessions")


def growth() -> None:
    start, mid, end = cq.growth_window(FILTERS)
    st.caption(
        f"Spend {mid:%Y-%m-%d} → {end:%Y-%m-%d} (the period's last 7 days) against "
        f"{start:%Y-%m-%d} → {mid:%Y-%m-%d}, the largest increases first."
    )
    table = econ.growth_table(cq.growth(ctx.url, FILTERS, VIEW))
    if table.empty:
        st.info("No end user spent more in the last 7 days than in the 7 before.")
        return
    head = table.head(BAR_USERS)
    st.plotly_chart(
        bar([str(u) for u in head["end_user"]], list(head["increase_usd"]),
            "Largest increases in spend"),
        width="stretch",
    )  # fmt: skip
    money = ["before_usd", "recent_usd", "increase_usd"]
    show_table(table, money, ["increase_pct"], LABELS, key="customers_growth")


def body() -> None:
    if ledger_is_empty(ctx):
        return
    st.caption(f"Period: {FILTERS.start:%Y-%m-%d} → {FILTERS.end:%Y-%m-%d} (whole UTC days)")
    if note := ignored_note(FILTERS, USER_ROLLUP_FILTERS, "this page"):
        st.info(note)
    section = (
        st.segmented_control("Section", SECTIONS, default=SECTIONS[0], key="customers_section")
        or SECTIONS[0]
    )
    {
        "End users": end_users,
        "Revenue & margin": revenue_and_margin,
        "Sessions": sessions,
        "Growth": growth,
    }[section]()


refreshing(body, ctx.settings)
