"""Export: CSV of day × app × team × key × model × provider with tokens, spend, list spend and
savings (its split as on the Savings page)."""

from __future__ import annotations

import streamlit as st

from dashboard import queries
from dashboard.components.page import ledger_is_empty, no_match, start_page
from dashboard.components.tables import show_table
from dashboard.spend import export_frame

ctx = start_page("Export")

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
