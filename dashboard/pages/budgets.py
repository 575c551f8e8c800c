"""Budgets: each budget's limit, spend, reservations and forecast date of exhaustion, its
burn-down over the period; finance and admins create and change budgets here (the role
is checked again on the server when the change is applied, and the change is audited as
the signed-in user); every role reads them; the change history."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from dashboard import queries
from dashboard.access.guard import PermissionDenied
from dashboard.auth import Permission
from dashboard.budget_board import (
    SCOPE_LABELS,
    BudgetFormError,
    apply_budget,
    board_frame,
    history_frame,
    load_board,
    read_form,
    runs_out_text,
)
from dashboard.components.budget_chart import burn_down_figure
from dashboard.components.formatting import format_usd
from dashboard.components.page import start_page
from db.budgets import budget_changes
from gateway.domain.budgets import DEFAULT_ALERT_AT, BudgetPeriod, BudgetScope

ctx = start_page("Budgets", with_period=False)
FLASH_KEY = "budgets_applied"
engine = queries.engine_for(ctx.primary_url)
now = dt.datetime.now(dt.UTC)
st.caption(
    "Limits per UTC day, week (from Monday) or month, in USD of what the providers bill. "
    "A hard budget refuses requests past its limit; a soft one only alerts. "
    "Forecasts assume the pace so far this period goes on."
)

if FLASH_KEY in st.session_state:
    st.success(st.session_state.pop(FLASH_KEY))

views = load_board(engine, now, team=ctx.user.team)
if not views:
    st.info(
        "**No budgets yet.** Finance and admins create one below, or with "
        "`costgate budgets set --app NAME --usd 50 --period month`."
    )
else:
    st.dataframe(board_frame(views), hide_index=True, width="stretch")
    st.subheader("Burn-down")
    for view in views:
        left, right = st.columns([3, 1])
        window = (view.figures.period_start, view.figures.period_end)
        figure = burn_down_figure(view.title, window, view.points, view.forecast, now)
        left.plotly_chart(figure, key=f"burn_{view.budget.id}")
        right.metric("Spent this period", format_usd(view.figures.spent_usd))
        right.metric("Runs out", runs_out_text(view))
        right.metric("At period end, at this pace", format_usd(view.forecast.projected_end_usd))

st.subheader("Create or change a budget")
if not ctx.user.can(Permission.BUDGETS_EDIT):
    st.info(
        f"Signed in as {ctx.user.name} ({ctx.user.role}): only finance and admins can "
        "change budgets."
    )
elif ctx.user.team is not None:
    st.info(
        f"Signed in as {ctx.user.name} for team {ctx.user.team}: a budget may cap any "
        "team, so only a user without a team can change budgets."
    )
else:
    with st.form("budget_form"):
        scope = st.selectbox(
            "Applies to",
            [s.value for s in BudgetScope],
            format_func=lambda v: SCOPE_LABELS[BudgetScope(v)],
        )
        scope_value = st.text_input(
            "Name (app or team) or key id",
            help="Leave empty for the whole gateway. A tag budget: key=value.",
        )
        period = st.selectbox("Period", [p.value for p in BudgetPeriod])
        limit_text = st.text_input("Limit (USD)", placeholder="50.00")
        hard = st.checkbox("Hard: refuse requests past the limit", value=True)
        alert_text = st.text_input(
            "Alert at (% of the limit)", value=",".join(str(a) for a in DEFAULT_ALERT_AT)
        )
        submitted = st.form_submit_button("Save budget", type="primary")
    if submitted:
        try:
            form = read_form(scope, scope_value, period, limit_text, hard, alert_text)
            saved = apply_budget(ctx.user, form, engine)
        except (BudgetFormError, PermissionDenied) as err:
            st.error(f"Not saved: {err}")
        else:
            st.session_state[FLASH_KEY] = (
                f"Saved: {saved.describe()} ({'hard' if saved.hard else 'soft'}), "
                f"by {ctx.user.name}."
            )
            st.rerun()

st.subheader("History")
history = history_frame(budget_changes(engine, limit=200), team=ctx.user.team)
if history.empty:
    st.caption("No budget changes recorded yet.")
else:
    st.dataframe(history, hide_index=True, width="stretch")
