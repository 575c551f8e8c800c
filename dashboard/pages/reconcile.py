"""Reconcile: a provider's invoice (its usage or cost export) against the ledger, by day
and model, in the provider's currency; differences above the threshold highlighted.
The same as `costgate reconcile` (gateway/finance/reconcile.py, docs/FINANCE.md)."""

from __future__ import annotations

import hashlib
from decimal import Decimal

import pandas as pd
import streamlit as st

from dashboard.access.guard import PermissionDenied, authorize
from dashboard.auth import Permission
from dashboard.components.page import ledger_is_empty, start_page
from db.analytics.finance_ledger import ledger_by_day_model
from db.analytics.invoice_store import load_invoice, save_invoice
from gateway.finance.invoices import FORMATS, InvoiceFormatError, parse_invoice, parse_mapping
from gateway.finance.reconcile import Threshold, flagged, invoice_totals, reconcile

ctx = start_page("Reconcile")
if ctx.user.team is not None:
    # a provider's invoice covers every team, and the ledger side of it too: neither its
    # totals nor an import (which replaces the invoice for everyone) are a team's
    st.info(f"Signed in as {ctx.user.name} for team {ctx.user.team}: an invoice covers "
            "every team, so only a user without a team can import or reconcile one.")
    st.stop()
if ledger_is_empty(ctx):
    st.stop()
cfg = ctx.settings.config
start, end = ctx.filters.start, ctx.filters.end
st.caption(f"Whole UTC days {start} to {end}: invoices are daily.")

provider = st.selectbox("Provider", [p.name for p in cfg.providers], key="reconcile_provider")
currency = cfg.provider(provider).billing.currency

with st.expander("Import the provider's export", expanded=False):
    fmt = st.selectbox("Format", FORMATS, key="reconcile_format",
                       help="openai: the platform's cost CSV; anthropic: the Console's cost "
                            "CSV; generic: any CSV, with a column mapping")  # fmt: skip
    mapping_text = st.text_input("Column mapping (generic)", "day=date,model=model,amount=cost",
                                 key="reconcile_mapping")  # fmt: skip
    file_currency = st.text_input("File currency (generic, no currency column)", currency,
                                  key="reconcile_currency")  # fmt: skip
    upload = st.file_uploader("CSV file", type=["csv"], key="reconcile_file")
    if upload is not None and st.button("Import", key="reconcile_import", type="primary"):
        text = upload.getvalue().decode("utf-8-sig")
        models = {m.name: m.upstream_model for m in cfg.models if m.provider == provider}
        try:
            mapping = parse_mapping(mapping_text) if fmt == "generic" else None
            lines = parse_invoice(fmt, text, models, mapping, file_currency)
        except InvoiceFormatError as err:
            st.error(f"{upload.name}: {err}")
        else:
            import_id = hashlib.sha256(text.encode()).hexdigest()[:16]
            try:
                # the write checked on the server as budgets and routing are: the user
                # as configured now, without a team (an import replaces it for everyone)
                authorize(ctx.user, Permission.EXPORT, all_teams=True)
            except PermissionDenied as err:
                st.error(f"Not imported: {err}")
            else:
                saved = save_invoice(ctx.primary_url, provider, fmt, import_id, lines)
                st.success(f"Imported {saved} lines from {upload.name}.")

left, right = st.columns(2)
absolute = left.number_input(f"Threshold ({currency} per day and model)", min_value=0.0,
                             value=0.01, step=0.01, format="%.4f",
                             key="reconcile_threshold")  # fmt: skip
share = right.number_input("or % of the invoiced amount, when larger", min_value=0.0,
                           value=0.0, step=0.5, key="reconcile_pct")  # fmt: skip
# number inputs hand back floats; the comparison stays in Decimal
threshold = Threshold(Decimal(str(absolute)), Decimal(str(share)) / 100)

ledger, ledger_currency = ledger_by_day_model(ctx.primary_url, provider, start, end)
invoice_lines = load_invoice(ctx.primary_url, provider, start, end)
if not invoice_lines:
    st.info(f"No invoice of {provider} imported for {start} to {end}. Import its export above.")
else:
    try:
        matches = reconcile(ledger, invoice_totals(invoice_lines), ledger_currency or currency,
                            threshold)  # fmt: skip
    except ValueError as err:
        st.error(str(err))
    else:
        over = flagged(matches)
        if over:
            st.error(f"{len(over)} of {len(matches)} day/model pairs differ by more than "
                     "the threshold.")  # fmt: skip
        else:
            st.success(f"All {len(matches)} day/model pairs agree within the threshold.")
        frame = pd.DataFrame(
            [
                {"day": m.day.isoformat(), "model": m.model,
                 f"ledger {m.currency}": format(m.ledger, "f"),
                 f"invoice {m.currency}": format(m.invoiced, "f"),
                 "difference": format(m.difference, "f"),
                 "over threshold": "yes" if m.flagged else ""}
                for m in matches
            ]
        )  # fmt: skip

        def highlight(row: pd.Series) -> list[str]:
            style = "background-color: #f8d7da" if row["over threshold"] else ""
            return [style] * len(row)

        st.dataframe(frame.style.apply(highlight, axis=1), hide_index=True, width="stretch",
                     key="reconcile_table")  # fmt: skip
