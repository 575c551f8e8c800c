"""What-if: the period's token counts re-priced under another routing mix, another model
or another price sheet, against what the ledger says, by app, model and day. The same as
`costgate whatif` (gateway/finance/whatif.py, docs/FINANCE.md)."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pandas as pd
import streamlit as st

from dashboard.components.page import ledger_is_empty, start_page
from db.analytics.finance_ledger import whatif_rows
from gateway.domain.pricing import PriceCatalog
from gateway.finance.whatif import PriceSheet, Scenario, UnpricedModel, summarize

ctx = start_page("What-if")
if ledger_is_empty(ctx):
    st.stop()
cfg = ctx.settings.config
catalog = PriceCatalog.from_config(cfg)
priced = sorted(catalog.versions)
scope = "" if ctx.user.team is None else f", team {ctx.user.team} only"
st.caption(f"Whole UTC days {ctx.filters.start} to {ctx.filters.end}, from the daily "
           f"rollups{scope}.")  # fmt: skip


def dec(value: float) -> Decimal:
    return Decimal(str(value))  # the widget's float, as typed, into exact arithmetic


kind = st.radio("Change", ("Routing mix", "Another model", "Price sheet"), horizontal=True,
                key="whatif_kind")  # fmt: skip
scenario = Scenario()
if kind == "Routing mix":
    alias = st.selectbox("Alias", sorted(cfg.aliases), key="whatif_alias")
    current = cfg.aliases[alias].candidates
    st.caption("Weights are relative; 0 sends nothing to a model.")
    weights = {}
    for i, (model, weight) in enumerate(sorted(current.items())):
        weights[model] = dec(st.number_input(model, min_value=0.0, value=float(weight),
                                             key=f"whatif_w_{alias}_{i}"))  # fmt: skip
    extra = st.selectbox("Add a model", ["(none)", *[m for m in priced if m not in current]],
                         key="whatif_extra")  # fmt: skip
    if extra != "(none)":
        weights[extra] = dec(st.number_input(extra, min_value=0.0, value=0.0,
                                             key=f"whatif_w_extra_{extra}"))  # fmt: skip
    if not any(w > 0 for w in weights.values()):
        st.warning("At least one weight must be above 0.")
        st.stop()
    scenario = Scenario(routing={alias: weights})
elif kind == "Another model":
    left, right = st.columns(2)
    source = left.selectbox("Tokens of", ["every model", *priced], key="whatif_from")
    target = right.selectbox("priced on", priced, key="whatif_to")
    scenario = Scenario(swaps={None if source == "every model" else source: target})
else:
    left, right = st.columns(2)
    provider = left.selectbox("Provider", [p.name for p in cfg.providers], key="whatif_provider")
    billing = cfg.provider(provider).billing
    multiplier = left.number_input("Multiplier of list price", min_value=0.0,
                                   value=float(billing.multiplier), key="whatif_multiplier")
    fx = left.number_input(f"{billing.currency} per USD", min_value=0.0001,
                           value=float(billing.fx_per_usd), key="whatif_fx")  # fmt: skip
    model = right.selectbox("Model", priced, key="whatif_model")
    rates = catalog.versions[model].list_rates
    list_in = right.number_input("List input, USD per 1M", min_value=0.0,
                                 value=float(rates.input), key="whatif_in")  # fmt: skip
    list_out = right.number_input("List output, USD per 1M", min_value=0.0,
                                  value=float(rates.output), key="whatif_out")  # fmt: skip
    sheet = PriceSheet(
        multipliers={provider: dec(multiplier)} if dec(multiplier) != billing.multiplier else {},
        fx_per_usd={provider: dec(fx)} if dec(fx) != billing.fx_per_usd else {},
        list_prices={model: dataclasses.replace(rates, input=dec(list_in), output=dec(list_out),
                                                tiers=())}
        if (dec(list_in), dec(list_out)) != (rates.input, rates.output)
        else {},
    )  # fmt: skip
    scenario = Scenario(prices=sheet)

try:
    # the user's team from the server's check: a team-scoped user re-prices its own rows
    rows = whatif_rows(ctx.url, ctx.filters.start, ctx.filters.end, scenario, ctx.user.team)
except UnpricedModel as err:
    st.error(str(err))
    st.stop()
if not rows:
    st.info("No priced requests in this period.")
    st.stop()

ledger, whatif = summarize(rows, "total")["total"]
a, b, c = st.columns(3)
a.metric("Ledger (USD)", f"${ledger:,.4f}")
b.metric("What-if (USD)", f"${whatif:,.4f}")
diff = whatif - ledger
c.metric("Difference (USD)", f"{'-' if diff < 0 else '+'}${abs(diff):,.4f}")


def table(by: str) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {by: str(key), "ledger USD": format(l_, "f"), "what-if USD": format(w, "f"),
             "difference USD": format(w - l_, "f")}
            for key, (l_, w) in summarize(rows, by).items()
        ]
    )  # fmt: skip


for by in ("app", "model", "day"):
    st.subheader(f"By {by}")
    st.dataframe(table(by), hide_index=True, width="stretch", key=f"whatif_by_{by}")
