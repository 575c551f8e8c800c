"""Export: CSV of day × app × team × key × model × provider with tokens, spend, list spend and
savings (its split as on the Savings page); on demand, spend per day and end user, and per
day and tag, from the attribution rollups (end-user ids as the role may see them)."""

from __future__ import annotations

import streamlit as st

from dashboard import queries
from dashboard.access.end_users import view_for
from dashboard.components.page import ledger_is_empty, no_match, start_page
from dashboard.components.tables import show_table
from dashboard.customers import queries as customers
from dashboard.spend import export_frame

ctx = start_page("Export")


def attributed_files() -> None:
    """Per end user and per tag: built when asked (at 100,000 end users, a month is some
    300,000 rows), from the daily rollups."""
    st.subheader("By end user and by tag")
    start, end = f"{ctx.filters.start:%Y%m%d}", f"{ctx.filters.end:%Y%m%d}"
    users_col, tags_col = st.columns(2)
    if users_col.button("Prepare the CSV by end user", key="export_users"):
        users = customers.user_export(ctx.url, ctx.filters, view_for(ctx.user.role))
        users_col.download_button(
            f"Download {len(users):,} rows", users.to_csv(index=False).encode(),
            file_name=f"costgate-end-users-{start}-{end}.csv", mime="text/csv",
        )  # fmt: skip
    if tags_col.button("Prepare the CSV by tag", key="export_tags"):
        tags = customers.tag_export(ctx.url, ctx.filters)
        tags_col.download_button(
            f"Download {len(tags):,} rows", tags.to_csv(index=False).encode(),
            file_name=f"costgate-tags-{start}-{end}.csv", mime="text/csv",
        )  # fmt: skip


if not ledger_is_empty(ctx):
    frame = export_frame(queries.cube(ctx.url, ctx.filters))
    if frame.empty:
        no_match()
    else:
        # exact Decimal strings in the file; an empty cell means unknown cost, never $0
        csv = frame.to_csv(index=False).encode()
        name = f"costgate-{ctx.filters.start:%Y%m%d}-{ctx.filters.end:%Y%m%d}.csv"
        st.download_button("Download CSV", csv, file_name=name, mime="text/csv", type="primary")
        st.caption(
            f"{len(frame):,} rows; money in USD with full precision; an empty spend cell "
            "means the cost is unknown. Preview of the first 200 rows:"
        )
        show_table(frame.head(200), ["spend_usd", "list_spend_usd", "savings_usd"])
    attributed_files()

