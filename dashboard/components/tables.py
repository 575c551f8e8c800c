"""Tables on screen: money as exact strings (unknown says so), percentages rounded."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from dashboard.components.formatting import format_pct, format_usd


def for_display(
    frame: pd.DataFrame, money: Sequence[str] = (), pct: Sequence[str] = ()
) -> pd.DataFrame:
    out = frame.copy()
    for c in money:
        if c in out:
            out[c] = [format_usd(v) for v in out[c]]
    for c in pct:
        if c in out:
            out[c] = [format_pct(v) for v in out[c]]
    return out


def show_table(
    frame: pd.DataFrame,
    money: Sequence[str] = (),
    pct: Sequence[str] = (),
    labels: dict[str, str] | None = None,
    key: str | None = None,
) -> None:
    shown = for_display(frame, money, pct).rename(columns=labels or {})
    counts = {
        c: st.column_config.NumberColumn(c, format="localized")  # 1,234,567
        for c in shown.columns
        if pd.api.types.is_integer_dtype(shown[c])
    }
    st.dataframe(shown, hide_index=True, width="stretch", key=key, column_config=counts)
