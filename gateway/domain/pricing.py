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
from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext
from functools import cached_property

from gateway.domain.config import Config, Model, Prices, PriceTier, Provider

MONEY_PLACES = 10
QUANTUM = Decimal(1).scaleb(-MONEY_PLACES)  # 1E-10
PER_TOKENS = Decimal(1_000_000)  # prices are per 1M tokens
# ample for token counts × prices / FX before the single final rounding
_CONTEXT = Context(prec=50, rounding=ROUND_HALF_EVEN)

# the token classes priced apart, in the order the ledger and the dashboard show them
TOKEN_CLASSES = ("input", "cached_input", "cache_write", "output", "reasoning")

# Fixed forever: changing it would change every price version id.
PRICE_VERSION_NAMESPACE = uuid.UUID("8f6f3e36-5a0e-4c4e-9a51-3c0a7d1b2e90")


class PriceUnavailable(LookupError):
    """No price version for a model (unknown, or configured without list prices)."""


def quantize_money(amount: Decimal) -> Decimal:
    with localcontext(_CONTEXT):
        return amount.quantize(QUANTUM, rounding=ROUND_HALF_EVEN)


@dataclasses.dataclass(frozen=True, slots=True)
class TokenUsage:
    """Token counts of one request, as OpenAI's usage reports them (see module docstring)."""

    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0

    def __post_init__(self) -> None:
        for name in _TOKEN_FIELDS:  # every request makes one or two: fields() read once
            if getattr(self, name) < 0:
                raise ValueError(f"{name} is negative: {getattr(self, name)}")
        if self.cached_prompt_tokens + self.cache_write_tokens > self.prompt_tokens:
            raise ValueError(
                "cached and cache-write tokens exceed prompt_tokens, which include them"
            )
        if self.reasoning_tokens > self.completion_tokens:
            raise ValueError("reasoning_tokens exceed completion_tokens, which include them")


_TOKEN_FIELDS = tuple(f.name for f in dataclasses.fields(TokenUsage))


@dataclasses.dataclass(frozen=True, slots=True)
class Tier:
    above_prompt_tokens: int
    input: Decimal
    cached_input: Decimal | None
    output: Decimal


@dataclasses.dataclass(frozen=True, slots=True)
class Rates:
    """Prices per 1M tokens in one currency."""

    input: Decimal
    cached_input: Decimal | None = None
    cache_write: Decimal | None = None
    output: Decimal = Decimal(0)
    reasoning: Decimal | None = None
    tiers: tuple[Tier, ...] = ()

    @classmethod
    def from_prices(cls, p: Prices | PriceTier) -> Rates:
        if isinstance(p, PriceTier):
            return cls(input=p.input, cached_input=p.cached_input, output=p.output)
        tiers = tuple(
            Tier(t.above_prompt_tokens, t.input, t.cached_input, t.output)
            for t in sorted(p.tiers, key=lambda t: t.above_prompt_tokens)
        )
        return cls(p.input, p.cached_input, p.cache_write, p.output, p.reasoning, tiers)

    def scaled(self, factor: Decimal) -> Rates:
        def s(v: Decimal | None) -> Decimal | None:
            return None if v is None else v * factor

        tiers = tuple(
            Tier(t.above_prompt_tokens, t.input * factor, s(t.cached_input), t.output * factor)
            for t in self.tiers
        )
        return Rates(
            self.input * factor,
            s(self.cached_input),
            s(self.cache_write),
            self.output * factor,
            s(self.reasoning),
            tiers,
        )

    def for_prompt(self, prompt_tokens: int) -> Rates:
        """The rates that apply to a request with this many prompt tokens (tiers resolved)."""
        tier = None
        for t in self.tiers:  # sorted ascending
            if prompt_tokens > t.above_prompt_tokens:
                tier = t
        if tier is None:
            return self
        return Rates(
            input=tier.input,
            cached_input=tier.cached_input,
            cache_write=self.cache_write,
            output=tier.output,
            reasoning=None,  # in a tier, reasoning follows the tier's output rate
        )

    def class_costs(self, usage: TokenUsage) -> dict[str, Decimal]:
        """Exact (unrounded) cost of each token class of `usage` at these rates: uncached
        input, cached input, cache writes, visible output, reasoning (`TOKEN_CLASSES`).
        An embedding's usage has prompt tokens only, so only its input is charged."""
        r = self.for_prompt(usage.prompt_tokens)
        uncached = usage.prompt_tokens - usage.cached_prompt_tokens - usage.cache_write_tokens
        visible_output = usage.completion_tokens - usage.reasoning_tokens
        with localcontext(_CONTEXT):
            return {
                "input": uncached * r.input / PER_TOKENS,
                "cached_input": usage.cached_prompt_tokens
                * _or(r.cached_input, r.input)
                / PER_TOKENS,
                "cache_write": usage.cache_write_tokens * _or(r.cache_write, r.input) / PER_TOKENS,
                "output": visible_output * r.output / PER_TOKENS,
                "reasoning": usage.reasoning_tokens * _or(r.reasoning, r.output) / PER_TOKENS,
            }

    def cost(self, usage: TokenUsage) -> Decimal:
        """Exact (unrounded) cost of `usage` at these rates: the sum of its classes."""
        with localcontext(_CONTEXT):
            return sum(self.class_costs(usage).values(), Decimal(0))

    def canonical(self) -> dict[str, object]:
        return {
            "input": _canon(self.input),
            "cached_input": _canon(self.cached_input),
            "cache_write": _canon(self.cache_write),
            "output": _canon(self.output),
            "reasoning": _canon(self.reasoning),
            "tiers": self.tiers_json(),
        }

    def tiers_json(self) -> list[dict[str, object]]:
        """Tiers as stored in price_versions.*_tiers: decimal strings, never floats."""
        return [
            {
                "above_prompt_tokens": t.above_prompt_tokens,
                "input": _canon(t.input),
                "cached_input": _canon(t.cached_input),
                "output": _canon(t.output),
            }
            for t in self.tiers
        ]


def _or(v: Decimal | None, default: Decimal) -> Decimal:
    return default if v is None else v


def _canon(v: Decimal | None) -> str | None:
    # 8, 8.0 and 8.00 are the same price and must give the same version id
    return None if v is None else format(v.normalize(), "f")


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
        baseline_cost = None
        if baseline_model is not None:
            b = self.versions.get(baseline_model)
            if b is not None:
                baseline_cost = quantize_money(b.list_rates.cost(usage))
        return Pricing(
            price_version_id=v.id,
            billing_currency=v.billing_currency,
            actual_cost=quantize_money(actual),
            actual_cost_usd=quantize_money(actual_usd),
            list_cost_usd=quantize_money(v.list_rates.cost(usage)),
            baseline_model=baseline_model,
            baseline_cost_usd=baseline_cost,
        )
