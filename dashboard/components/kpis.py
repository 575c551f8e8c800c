"""KPI tiles: a figure for the period against the previous period's."""

from __future__ import annotations

from decimal import Decimal

import streamlit as st

from dashboard.components.formatting import (
    format_count,
    format_ms,
    format_pct,
    format_rate,
    format_usd,
    relative_change,
)
from dashboard.spend import Totals


def overview_tiles(
    now: Totals, before: Totals | None, p95_now: float | None, p95_before: float | None
) -> None:
    """`before` None: the ledger does not cover the previous period (a young ledger), so no
    tile claims a change against it (+40,000% against a few stray rows says nothing)."""

    def change(a: Decimal | float | int | None, b: Decimal | float | int | None) -> str | None:
        return None if before is None else relative_change(a, b)

    b = before if before is not None else now  # no change shown: `change` says None
    row1 = st.columns(4)
    row1[0].metric(
        "Spend",
        format_usd(now.spend_usd),
        change(now.spend_usd, b.spend_usd),
        delta_color="inverse",
        help="What the providers billed, in USD at the configured FX rates.",
    )
    row1[1].metric(
        "List-price spend",
        format_usd(now.list_spend_usd),
        change(now.list_spend_usd, b.list_spend_usd),
        delta_color="off",
        help="The same tokens at the official list prices.",
    )
    row1[2].metric(
        "Saved against no costgate",
        format_usd(now.savings.saved_usd),
        change(now.savings.saved_usd, b.savings.saved_usd),
        help="What these requests would have cost without costgate (the alias's baseline "
        "model at list price, every prompt token at the full input rate) − what the "
        "providers billed. The Savings page splits it into its sources.",
    )
    row1[3].metric(
        "Saved %",
        format_pct(now.savings.saved_pct),
        _points(now.savings.saved_pct, b.savings.saved_pct) if before else None,
        help="Saved against no costgate, as a share of the no-costgate cost.",
    )
    row2 = st.columns(4)
    row2[0].metric(
        "Requests", format_count(now.requests), change(now.requests, b.requests)
    )
    row2[1].metric(
        "Tokens",
        format_count(now.tokens),
        change(now.tokens, b.tokens),
        help="Prompt + completion tokens.",
    )
    row2[2].metric(
        "Error rate",
        format_rate(now.error_rate),
        _points(
            None if now.error_rate is None else now.error_rate * 100,
            None if b.error_rate is None else b.error_rate * 100,
            places=2,
        ) if before else None,
        delta_color="inverse",
        help="Requests that did not end ok (client errors, upstream errors, cancellations).",
    )
    row2[3].metric(
        "p95 latency",
        format_ms(p95_now),
        change(p95_now, p95_before),
        delta_color="inverse",
        help="Successful requests, end to end through the gateway.",
    )
    if before is None:
        st.caption("No change is shown: the ledger does not cover the whole previous period.")
    if now.unknown_cost_requests:
        st.caption(
            f"{now.unknown_cost_requests:,} request(s) have unknown cost (the provider "
            "reported no usage and it could not be estimated): they are left out of the "
            "money figures, not counted as $0."
        )


def _points(
    now: Decimal | float | None, before: Decimal | float | None, places: int = 1
) -> str | None:
    if now is None or before is None:
        return None
    return f"{float(now) - float(before):+.{places}f} pts vs previous period"
