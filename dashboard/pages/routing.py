"""Routing: live weights per alias from the running Serve app; ops and admins edit them, with
a confirm step, through the one update path `costgate routing set` also uses (the role is
checked again on the server when the change is applied); the change history."""

from __future__ import annotations

import streamlit as st

from dashboard import queries
from dashboard.access.guard import PermissionDenied
from dashboard.auth import Permission
from dashboard.components.page import start_page
from dashboard.routing_editor import (
    PendingChange,
    apply_change,
    history_frame,
    propose_change,
    weights_frame,
)
from gateway.domain.routing_settings import RoutingError, RoutingSettings, routing_from_config

ctx = start_page("Routing", with_period=False)
cfg = ctx.settings.config
PENDING_KEY = "routing_pending"
FLASH_KEY = "routing_applied"


def live_settings() -> tuple[RoutingSettings, str | None]:
    """The running app's settings, or the config's with the reason they are not live."""
    try:
        from gateway.control.routing_update import read_routing

        return read_routing(ctx.settings.ray_dashboard_url, ctx.settings.app_name), None
    except Exception as err:  # noqa: BLE001 - any failure: say so, show the config's
        return routing_from_config(cfg), f"{type(err).__name__}: {err}"


settings, unreachable = live_settings()
if unreachable:
    st.warning(
        f"Cannot read the live weights of Serve app `{ctx.settings.app_name}` from "
        f"{ctx.settings.ray_dashboard_url} ({unreachable}). Showing the config's weights; "
        "start the gateway (`costgate up` or `make demo`) to see and change the live ones."
    )
else:
    st.caption(
        f"Live weights of Serve app `{ctx.settings.app_name}` (settings version "
        f"{settings.version}), read from the Ray dashboard at {ctx.settings.ray_dashboard_url}."
    )

st.subheader("Weights per alias")
st.dataframe(
    weights_frame(settings, cfg).rename(columns={"share_pct": "share %"}),
    hide_index=True,
    width="stretch",
)

st.subheader("Change weights")
if FLASH_KEY in st.session_state:
    st.success(st.session_state.pop(FLASH_KEY))
    st.session_state.pop("routing_note", None)  # the next change starts with an empty note
if not ctx.user.can(Permission.ROUTING_EDIT):
    st.info(
        f"Signed in as {ctx.user.name} ({ctx.user.role}): only ops and admins can change routing."
    )
elif ctx.user.team is not None:
    st.info(
        f"Signed in as {ctx.user.name} for team {ctx.user.team}: routing applies to every "
        "team, so only a user without a team can change it."
    )
elif unreachable:
    st.info("Weights can be changed only while the gateway is running.")
else:
    alias = st.selectbox("Alias", sorted(settings.aliases), key="routing_alias")
    current = weights_frame(settings, cfg, alias)[["model", "weight"]]
    edited = st.data_editor(
        current,
        key=f"routing_editor_{alias}_{settings.version}",
        hide_index=True,
        disabled=["model"],
        column_config={
            "weight": st.column_config.NumberColumn(
                "weight", min_value=0, step=1, help="Relative: weights need not sum to 100."
            )
        },
    )
    if st.button("Review change", key="routing_review"):
        try:
            st.session_state[PENDING_KEY] = propose_change(settings, cfg, alias, edited)
        except RoutingError as err:
            st.session_state.pop(PENDING_KEY, None)
            st.error(f"Not applied: {err}")

    pending: PendingChange | None = st.session_state.get(PENDING_KEY)
    if pending is not None and pending.alias == alias:
        st.markdown(f"**Confirm the change of `{pending.alias}`** (before → after):")
        st.dataframe(pending.diff_frame(), hide_index=True)
        note = st.text_input("Note (why)", key="routing_note")
        confirm, cancel = st.columns([1, 5])
        if confirm.button("Confirm and apply", type="primary", key="routing_confirm"):
            try:
                with st.spinner("Applying: waiting until every replica runs the new weights…"):
                    apply_change(ctx.user, pending, note, ctx.settings)
            except PermissionDenied as err:
                st.session_state.pop(PENDING_KEY, None)
                st.error(f"Not applied: {err}")
            except Exception as err:  # noqa: BLE001 - the update path says what went wrong
                st.error(f"Not applied: {err}")
            else:
                st.session_state.pop(PENDING_KEY, None)
                queries.routing_changes.clear()
                st.session_state[FLASH_KEY] = (
                    f"Applied: `{pending.alias}` now routes {pending.after_text()}."
                )
                st.rerun()  # read the live weights again, now the new ones
        if cancel.button("Cancel", key="routing_cancel"):
            st.session_state.pop(PENDING_KEY, None)
            st.rerun()
    elif pending is None:
        st.caption("Edit the weights above, then review the change before it is applied.")

st.subheader("History")
history = history_frame(queries.routing_changes(ctx.url, ctx.settings.app_name))
if history.empty:
    st.caption("No routing changes recorded yet.")
else:
    st.dataframe(history, hide_index=True, width="stretch")
