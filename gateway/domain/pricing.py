"""Price catalog and exact cost arithmetic: cost = usage × price version. Pure, no I/O.

Every (provider, model) with list prices gets one `PriceVersion`: its official list
prices (USD per 1M tokens) and what its provider actually bills (per 1M tokens in the
provider's currency: list × multiplier, or the provider's own price table keyed by
upstream model id), with the FX rate in force. A version's id is a uuid5 of all of that,
so the gateway stamps records without asking the database, `db.price_sync` inserts the
very same ids, and any change of price or FX makes a new version (history never moves).

Token rules (usage as OpenAI reports it):
- `prompt_tokens` includes cached and cache-write tokens; the rest is charged at the
  input rate, cached tokens at the cached rate (the input rate if none is set), cache
  writes at the cache-write rate (the input rate if none is set).
- `completion_tokens` includes reasoning tokens (OpenAI counts them inside); reasoning
  tokens are charged at the reasoning rate where one is set, otherwise at the output rate.
- Tiers: when `prompt_tokens` is strictly above a tier's `above_prompt_tokens`, the
  highest such tier's input, cached and output rates apply to the whole request; in a
  tier, reasoning is charged at the tier's output rate and cache writes at the base rate.

Service tiers and tool fees: a version's rates may hold a price per service tier (OpenAI's
`flex`, `priority`), which replaces the base rates for a request the provider answered at
that tier (long-prompt tiers apply inside it), and a fee per built-in tool call (web
search), added per call the provider reports. A tier or a tool call without a price makes
the request's cost unknown (`PriceUnavailable`), never the base price or $0.

Rounding: each amount is computed exactly, then rounded once to 10 decimal places
(ROUND_HALF_EVEN, banker's rounding, so sums over many records carry no upward bias),
which is the scale of the ledger's NUMERIC(20, 10) columns. The USD amount of a bill in
another currency is the *unrounded* bill divided by `fx_per_usd`, then rounded: ¥8.00 at
7.3 CNY/USD is $1.0958904110 (1.0959 at 4 places). Totals are sums of rounded rows.

Savings = list cost − actual cost in USD (what the provider's price and FX saved);
routing savings = baseline list cost − list cost (what routing to a cheaper model
saved). Both may be negative and are reported as they are.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from decimal import Decimal, localcontext
from functools import cached_property

from gateway.domain.config import Config, Model, Provider
from gateway.domain.prices.rates import (
    _CONTEXT,
    MONEY_PLACES,
    PER_TOKENS,
    QUANTUM,
    TOKEN_CLASSES,
    PriceUnavailable,
    Rates,
    Tier,
    TokenUsage,
    _canon,
    quantize_money,
    service_tier_name,
)

__all__ = [
    "MONEY_PLACES", "PER_TOKENS", "PRICE_VERSION_NAMESPACE", "QUANTUM", "TOKEN_CLASSES",
    "PriceCatalog", "PriceUnavailable", "PriceVersion", "Pricing", "Rates", "Tier",
    "TokenUsage", "price_version_for", "quantize_money", "service_tier_name",
]  # fmt: skip

# Fixed forever: changing it would change every price version id.
PRICE_VERSION_NAMESPACE = uuid.UUID("8f6f3e36-5a0e-4c4e-9a51-3c0a7d1b2e90")


@dataclasses.dataclass(frozen=True)
class PriceVersion:
    provider: str
    model: str  # public model name
    upstream_model: str
    effective_from: dt.date
    list_rates: Rates  # USD
    billing_rule: str  # "multiplier" | "price_table"
    billing_currency: str
    fx_per_usd: Decimal  # units of billing_currency per USD
    multiplier: Decimal | None  # None when the provider's price table applies
    billed_rates: Rates  # billing_currency

    @cached_property  # computed once: the request path reads it for every record
    def id(self) -> uuid.UUID:
        content = {
            "provider": self.provider,
            "model": self.model,
            "upstream_model": self.upstream_model,
            "effective_from": self.effective_from.isoformat(),
            "list": self.list_rates.canonical(),
            "billing_rule": self.billing_rule,
            "currency": self.billing_currency,
            "fx_per_usd": _canon(self.fx_per_usd),
            "multiplier": _canon(self.multiplier),
            "billed": self.billed_rates.canonical(),
        }
        return uuid.uuid5(PRICE_VERSION_NAMESPACE, json.dumps(content, sort_keys=True))

    def billed_usd_per_mtok(self) -> Rates:
        """The billed rates converted to USD (for `GET /v1/models`), rounded to 10 places."""
        with localcontext(_CONTEXT):
            r = self.billed_rates.scaled(1 / self.fx_per_usd)
        return _rounded(r)


def _rounded(r: Rates) -> Rates:
    def q(v: Decimal | None) -> Decimal | None:
        return None if v is None else quantize_money(v)

    tiers = tuple(
        Tier(
            t.above_prompt_tokens,
            quantize_money(t.input),
            q(t.cached_input),
            quantize_money(t.output),
        )
        for t in r.tiers
    )
    return Rates(
        quantize_money(r.input),
        q(r.cached_input),
        q(r.cache_write),
        quantize_money(r.output),
        q(r.reasoning),
        tiers,
        tuple((name, _rounded(t)) for name, t in r.service_tiers),
        tuple((name, quantize_money(fee)) for name, fee in r.tool_fees),
    )


def price_version_for(model: Model, provider: Provider) -> PriceVersion | None:
    """A model's current version, or None when it has no list prices (cost stays unknown)."""
    if model.list_prices is None:
        return None
    billing = provider.billing
    list_rates = Rates.from_prices(model.list_prices)
    table = billing.price_table.get(model.upstream_model)
    if table is not None:
        return PriceVersion(
            provider=provider.name,
            model=model.name,
            upstream_model=model.upstream_model,
            effective_from=max(model.list_prices.effective_from, table.effective_from),
            list_rates=list_rates,
            billing_rule="price_table",
            billing_currency=billing.currency,
            fx_per_usd=billing.fx_per_usd,
            multiplier=None,
            billed_rates=Rates.from_prices(table),
        )
    return PriceVersion(
        provider=provider.name,
        model=model.name,
        upstream_model=model.upstream_model,
        effective_from=model.list_prices.effective_from,
        list_rates=list_rates,
        billing_rule="multiplier",
        billing_currency=billing.currency,
        fx_per_usd=billing.fx_per_usd,
        multiplier=billing.multiplier,
        billed_rates=list_rates.scaled(billing.multiplier),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Pricing:
    """One request's costs, each rounded to 10 places (see module docstring)."""

    price_version_id: uuid.UUID
    billing_currency: str
    actual_cost: Decimal  # in billing_currency
    actual_cost_usd: Decimal
    list_cost_usd: Decimal
    baseline_model: str | None
    baseline_cost_usd: Decimal | None  # None without a baseline or without its price
    # the part of actual_cost that is built-in tool calls' fees (in billing_currency)
    tool_fee_cost: Decimal = Decimal(0)

    @property
    def savings_usd(self) -> Decimal:
        return self.list_cost_usd - self.actual_cost_usd

    @property
    def routing_savings_usd(self) -> Decimal | None:
        if self.baseline_cost_usd is None:
            return None
        return self.baseline_cost_usd - self.list_cost_usd


@dataclasses.dataclass(frozen=True)
class PriceCatalog:
    """The current price version of every priced model; immutable, built once per config."""

    versions: dict[str, PriceVersion]  # public model name -> version

    @classmethod
    def from_config(cls, cfg: Config) -> PriceCatalog:
        versions = {}
        for m in cfg.models:
            v = price_version_for(m, cfg.provider(m.provider))
            if v is not None:
                versions[m.name] = v
        return cls(versions)

    def version(self, model: str) -> PriceVersion | None:
        return self.versions.get(model)

    def price(self, model: str, usage: TokenUsage, baseline_model: str | None = None) -> Pricing:
        """Price `usage` on `model`; raises PriceUnavailable if the model has no version.

        A baseline without a price gives `baseline_cost_usd=None` rather than an error:
        the request's own cost is still known.
        """
        v = self.versions.get(model)
        if v is None:
            raise PriceUnavailable(f"no price for model {model!r}")
        with localcontext(_CONTEXT):
            actual = v.billed_rates.cost(usage)
            actual_usd = actual / v.fx_per_usd
            fee = v.billed_rates.tool_fee_cost(usage)
        baseline_cost = None
        if baseline_model is not None:
            b = self.versions.get(baseline_model)
            if b is not None:
                try:
                    baseline_cost = quantize_money(b.list_rates.cost(usage))
                except PriceUnavailable:
                    baseline_cost = None  # the baseline has no price for this tier or tool
        return Pricing(
            price_version_id=v.id,
            billing_currency=v.billing_currency,
            actual_cost=quantize_money(actual),
            actual_cost_usd=quantize_money(actual_usd),
            list_cost_usd=quantize_money(v.list_rates.cost(usage)),
            baseline_model=baseline_model,
            baseline_cost_usd=baseline_cost,
            tool_fee_cost=quantize_money(fee),
        )
