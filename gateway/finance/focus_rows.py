"""Ledger groups as FOCUS 1.2 rows: one row per token class per day per app, key and
model (and per end user or tag value with `export focus --split-by`; Tags then carries
it: `{"costgate:end_user": ...}` or `{"feature": ...}`). Pure; the column rules are in
`focus_columns`.

What each cost column means here (FOCUS 1.2 definitions):
- ListCost: the official list unit price × PricingQuantity, in the BillingCurrency (the
  list price in USD at the price version's FX rate).
- ContractedCost: the provider's agreed unit price (its multiplier or price table) ×
  quantity; costgate knows no other negotiated rate, so it is what the provider bills.
- BilledCost: what the provider invoices, in its BillingCurrency: the ledger's actual cost.
- EffectiveCost: BilledCost, since nothing is prepaid or amortised.
A response-cache hit bills nothing: Billed, Contracted and Effective cost 0, ListCost kept.

Quantities are tokens (PricingUnit and ConsumedUnit "Tokens"), so unit prices are per
token. Each row's cost is that class's tokens at the version's base rate; the ledger
rounds per request (and applies long-prompt tiers per request), so what the sums of the
ledger's rounded rows differ from that goes to the group's largest row: the export's
totals equal the ledger's to the last decimal.

Hosted web search calls are a line of their own (PricingUnit "Requests", ChargeDescription
"... web search calls ..."): the ledger's fee amount as billed, the calls at the list fee as
listed; the token lines share what remains of the group's totals. A group at a service
tier (`flex`, `priority`) is not told apart from the base tier here: its token lines take
the base unit prices, and the spread puts the tier's difference on the largest line.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator
from decimal import Context, Decimal, localcontext

from gateway.domain.pricing import PER_TOKENS, Rates, quantize_money
from gateway.finance.focus_columns import HEADER, Value
from gateway.finance.ledger_groups import LedgerGroup

_CTX = Context(prec=50)
CLASS_METERS = {
    "input": "Input Tokens",
    "cached_input": "Cached Input Tokens",
    "cache_write": "Cache Write Tokens",
    "output": "Output Tokens",
    "reasoning": "Reasoning Tokens",
}
PUBLISHERS = (
    ("gpt", "OpenAI"),
    ("o1", "OpenAI"),
    ("o3", "OpenAI"),
    ("o4", "OpenAI"),
    ("text-embedding", "OpenAI"),
    ("claude", "Anthropic"),
    ("gemini", "Google"),
    ("deepseek", "DeepSeek"),
)


def publisher_of(model: str, upstream_model: str, provider: str) -> str:
    """Who made the model (a relay resells others' models): by the model id's family."""
    for name in (upstream_model.lower(), model.lower()):
        for prefix, publisher in PUBLISHERS:
            if name.startswith(prefix) or f"-{prefix}" in name:
                return publisher
    return provider


def _rate(rates: Rates, token_class: str) -> Decimal:
    def pick(v: Decimal | None, default: Decimal) -> Decimal:
        return default if v is None else v

    return {
        "input": rates.input,
        "cached_input": pick(rates.cached_input, rates.input),
        "cache_write": pick(rates.cache_write, rates.input),
        "output": rates.output,
        "reasoning": pick(rates.reasoning, rates.output),
    }[token_class]


def _iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _day_start(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def _month(day: dt.date) -> tuple[dt.datetime, dt.datetime]:
    start = dt.datetime(day.year, day.month, 1, tzinfo=dt.UTC)
    nxt = dt.datetime(day.year + day.month // 12, day.month % 12 + 1, 1, tzinfo=dt.UTC)
    return start, nxt


def _spread(total: Decimal, parts: list[Decimal]) -> list[Decimal]:
    """Round each part, then put what the rounded parts miss of `total` on the largest."""
    rounded = [quantize_money(p) for p in parts]
    if rounded:
        biggest = max(range(len(parts)), key=lambda i: abs(parts[i]))
        rounded[biggest] += total - sum(rounded, Decimal(0))
    return rounded


def _batch_share(g: LedgerGroup, billed: list[Decimal], fees: Decimal) -> Decimal:
    """1 for live requests; for batch lines, their bill over the live bill of the same
    tokens (the provider's batch factor, 0.5 by default), read from the ledger's figures."""
    live = sum(billed, Decimal(0))
    if not g.batch or not live:
        return Decimal(1)
    return (g.actual_cost - fees) / live


def _fee_line(g: LedgerGroup) -> tuple[Decimal, Decimal, Decimal]:
    """The web search line's (list USD, billed, billed USD), each rounded; zeros without."""
    if not g.web_search_calls or g.cache_hit:
        return Decimal(0), Decimal(0), Decimal(0)
    v = g.version
    with localcontext(_CTX):
        billed = g.tool_fee_cost
        fee = v.list_rates.fee("web_search")
        listed = billed / v.fx_per_usd if fee is None else g.web_search_calls * fee
        return quantize_money(listed), quantize_money(billed), quantize_money(billed / v.fx_per_usd)


def group_rows(g: LedgerGroup) -> list[dict[str, Value]]:
    v = g.version
    list_rates = v.list_rates
    billed_rates = v.billed_rates
    classes = [(c, n) for c, n in g.tokens.by_class().items() if n > 0]
    fee_list, fee_billed, fee_billed_usd = _fee_line(g)
    if not classes and not g.web_search_calls:
        return []
    with localcontext(_CTX):
        list_usd = [n * _rate(list_rates, c) / PER_TOKENS for c, n in classes]
        billed = [
            Decimal(0) if g.cache_hit else n * _rate(billed_rates, c) / PER_TOKENS
            for c, n in classes
        ]
        # batch lines bill a share of the version's rates: the ledger's own bill says which
        share = _batch_share(g, billed, fee_billed)
        billed = [b * share for b in billed]
        billed_usd = [b / v.fx_per_usd for b in billed]
        list_usd_r = _spread(g.list_cost_usd - fee_list, list_usd)
        billed_r = _spread(g.actual_cost - fee_billed, billed)
        billed_usd_r = _spread(g.actual_cost_usd - fee_billed_usd, billed_usd)
        list_local = [quantize_money(x * v.fx_per_usd) for x in list_usd_r]
    period_start, period_end = _month(g.day)
    charge_start = _day_start(g.day)
    # the group's own dimensions win over a split tag of the same name
    tags = {**dict(g.tags), "app": g.app, "team": g.team, "key_id": g.key_id, "alias": g.alias}
    tags_json = json.dumps({k: val for k, val in tags.items() if val is not None}, sort_keys=True)
    rows: list[dict[str, Value]] = []
    for i, (c, n) in enumerate(classes):
        with localcontext(_CTX):
            list_unit = _rate(list_rates, c) * v.fx_per_usd / PER_TOKENS
            contracted_unit = (Decimal(0) if g.cache_hit
                               else _rate(billed_rates, c) * share / PER_TOKENS)  # fmt: skip
        rows.append(
            {
                "BilledCost": billed_r[i],
                "BillingAccountId": f"{v.provider}",
                "BillingAccountName": f"costgate account at {v.provider}",
                "BillingCurrency": v.billing_currency.upper(),
                "BillingPeriodEnd": _iso(period_end),
                "BillingPeriodStart": _iso(period_start),
                "ChargeCategory": "Usage",
                "ChargeClass": None,
                "ChargeDescription": f"{g.model} {CLASS_METERS[c].lower()} via {v.provider}"
                + (" (Batch API, batch rate)" if g.batch else ""),
                "ChargePeriodEnd": _iso(charge_start + dt.timedelta(days=1)),
                "ChargePeriodStart": _iso(charge_start),
                "ContractedCost": billed_r[i],
                "EffectiveCost": billed_r[i],
                "InvoiceIssuerName": v.provider,
                "ListCost": list_local[i],
                "PricingQuantity": Decimal(n),
                "PricingUnit": "Tokens",
                "ProviderName": v.provider,
                "PublisherName": publisher_of(g.model, v.upstream_model, v.provider),
                "ServiceCategory": "AI and Machine Learning",
                "ServiceName": f"{v.provider} model API",
                "ChargeFrequency": "Usage-Based",
                "ConsumedQuantity": Decimal(n),
                "ConsumedUnit": "Tokens",
                "ContractedUnitPrice": contracted_unit.normalize(),
                "ListUnitPrice": list_unit.normalize(),
                # a batch line's price is the provider's batch discount on its list rates
                "PricingCategory": "Other" if g.batch else "Standard",
                "SkuId": f"{v.provider}/{v.upstream_model}/{c}" + ("/batch" if g.batch else ""),
                "SkuMeter": CLASS_METERS[c],
                "SubAccountId": g.app,
                "SubAccountName": g.app,
                "Tags": tags_json,
                "x_TokenClass": c,
                "x_Model": g.model,
                "x_ListCostUsd": list_usd_r[i],
                "x_BilledCostUsd": billed_usd_r[i],
                "x_FxPerUsd": v.fx_per_usd,
                "x_CacheHit": "true" if g.cache_hit else "false",
                "x_PriceVersionId": str(v.id),
                "x_LedgerRequests": Decimal(g.requests) if i == 0 else Decimal(0),
            }
        )
    if g.web_search_calls and not g.cache_hit:
        rows.append(_search_row(g, rows[0] if rows else None, fee_list, fee_billed,
                                fee_billed_usd, tags_json))  # fmt: skip
    return rows


def _search_row(g: LedgerGroup, like: dict[str, Value] | None, list_usd: Decimal,
                billed: Decimal, billed_usd: Decimal, tags_json: str) -> dict[str, Value]:
    """The group's web search calls as a line: the fee per call is its unit price."""
    v, calls = g.version, Decimal(g.web_search_calls)
    period_start, period_end = _month(g.day)
    charge_start = _day_start(g.day)
    with localcontext(_CTX):
        list_local = quantize_money(list_usd * v.fx_per_usd)
        list_unit, billed_unit = list_local / calls, billed / calls
    row: dict[str, Value] = dict(like) if like is not None else {}
    row.update({
        "BilledCost": billed, "ContractedCost": billed, "EffectiveCost": billed,
        "ListCost": list_local,
        "BillingAccountId": v.provider,
        "BillingAccountName": f"costgate account at {v.provider}",
        "BillingCurrency": v.billing_currency.upper(),
        "BillingPeriodEnd": _iso(period_end), "BillingPeriodStart": _iso(period_start),
        "ChargeCategory": "Usage", "ChargeClass": None,
        "ChargeDescription": f"{g.model} web search calls via {v.provider}",
        "ChargePeriodEnd": _iso(charge_start + dt.timedelta(days=1)),
        "ChargePeriodStart": _iso(charge_start),
        "InvoiceIssuerName": v.provider,
        "PricingQuantity": calls, "PricingUnit": "Requests",
        "ConsumedQuantity": calls, "ConsumedUnit": "Requests",
        "ProviderName": v.provider,
        "PublisherName": publisher_of(g.model, v.upstream_model, v.provider),
        "ServiceCategory": "AI and Machine Learning", "ServiceName": f"{v.provider} model API",
        "ChargeFrequency": "Usage-Based",
        "ContractedUnitPrice": billed_unit.normalize(), "ListUnitPrice": list_unit.normalize(),
        "PricingCategory": "Standard",
        "SkuId": f"{v.provider}/{v.upstream_model}/web_search",
        "SkuMeter": "Web Search Calls",
        "SubAccountId": g.app, "SubAccountName": g.app, "Tags": tags_json,
        "x_TokenClass": "web_search", "x_Model": g.model,
        "x_ListCostUsd": list_usd, "x_BilledCostUsd": billed_usd, "x_FxPerUsd": v.fx_per_usd,
        "x_CacheHit": "false", "x_PriceVersionId": str(v.id),
        "x_LedgerRequests": Decimal(0) if like is not None else Decimal(g.requests),
    })  # fmt: skip
    return row


def focus_rows(groups: Iterable[LedgerGroup]) -> Iterator[dict[str, Value]]:
    for g in groups:
        yield from group_rows(g)


def csv_value(value: Value) -> str:
    """FOCUS NumericFormat: plain decimals (no exponent from Decimal's repr, no '+')."""
    if value is None:
        return ""
    if isinstance(value, Decimal):
        text = format(value, "f")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    return value


def header() -> tuple[str, ...]:
    return HEADER
