"""What-if: the ledger's token counts re-priced under another routing mix, another
model, or another price sheet. Pure.

A scenario is applied to each ledger group in two steps:
1. where its tokens go: a routing mix (`alias` -> weights) splits an alias's tokens
   across its candidates by weight share; a model swap (`from` -> `to`) moves a model's
   tokens (every model's with `from` None) to another model. Tokens are not re-counted:
   the same counts are priced on the new model.
2. at what price: each model's price version (the version the ledger row was priced
   with, or for a model the row did not use, the latest stored version on or before the
   day) with the scenario's price sheet applied: a provider's multiplier or FX rate, a
   model's list prices.
Cache hits cost nothing in every scenario. The re-priced cost is computed on the group's
token sums at base rates (long-prompt tiers are a per-request rule the sums cannot
apply); what the ledger's own figure differs from that same computation at the row's
own prices stays with the row's model, so only what the scenario changes moves
(docs/FINANCE.md).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from decimal import Context, Decimal, InvalidOperation, localcontext
from typing import Any

from gateway.domain.pricing import PriceVersion, Rates, quantize_money
from gateway.finance.ledger_groups import LedgerGroup

_CTX = Context(prec=50)


@dataclasses.dataclass(frozen=True)
class PriceSheet:
    """Overrides of the stored price versions."""

    multipliers: Mapping[str, Decimal] = dataclasses.field(default_factory=dict)  # provider
    fx_per_usd: Mapping[str, Decimal] = dataclasses.field(default_factory=dict)  # provider
    # model -> list rates per 1M tokens in USD (input, cached_input, output...)
    list_prices: Mapping[str, Rates] = dataclasses.field(default_factory=dict)

    def apply(self, v: PriceVersion) -> PriceVersion:
        list_rates = self.list_prices.get(v.model, v.list_rates)
        multiplier = self.multipliers.get(v.provider, v.multiplier)
        billed = v.billed_rates
        rule = v.billing_rule
        if v.provider in self.multipliers or (v.model in self.list_prices and rule == "multiplier"):
            # a multiplier set for a provider replaces its price table too
            rule = "multiplier"
            billed = list_rates.scaled(multiplier if multiplier is not None else Decimal(1))
        return dataclasses.replace(
            v,
            list_rates=list_rates,
            billed_rates=billed,
            billing_rule=rule,
            multiplier=multiplier if rule == "multiplier" else None,
            fx_per_usd=self.fx_per_usd.get(v.provider, v.fx_per_usd),
        )


@dataclasses.dataclass(frozen=True)
class Scenario:
    routing: Mapping[str, Mapping[str, Decimal]] = dataclasses.field(default_factory=dict)
    swaps: Mapping[str | None, str] = dataclasses.field(default_factory=dict)  # from -> to
    prices: PriceSheet = dataclasses.field(default_factory=PriceSheet)

    def destinations(self, g: LedgerGroup) -> list[tuple[str, Decimal]]:
        """(model, share of the group's tokens) where this scenario sends a group."""
        if g.alias is not None and g.alias in self.routing:
            weights = {m: w for m, w in self.routing[g.alias].items() if w > 0}
            total = sum(weights.values(), Decimal(0))
            with localcontext(_CTX):
                return [(m, w / total) for m, w in sorted(weights.items())]
        to = self.swaps.get(g.model, self.swaps.get(None))
        return [(to if to is not None else g.model, Decimal(1))]


# the latest stored version of a model on or before a day; None: the model has none
VersionLookup = Callable[[str, dt.date], PriceVersion | None]


@dataclasses.dataclass(frozen=True, slots=True)
class WhatIfRow:
    day: dt.date
    app: str
    model: str
    ledger_usd: Decimal  # what the ledger says these tokens cost (at their own model)
    whatif_usd: Decimal  # what the scenario prices them at (at the scenario's model)

    @property
    def difference_usd(self) -> Decimal:
        return self.whatif_usd - self.ledger_usd


class UnpricedModel(LookupError):
    """The scenario sends tokens to a model with no stored price version."""


def cost_usd(v: PriceVersion, g: LedgerGroup, share: Decimal) -> Decimal:
    """Exact USD cost of `share` of a group's tokens on version `v` (base rates)."""
    if g.cache_hit:
        return Decimal(0)
    base = dataclasses.replace(v.billed_rates, tiers=())
    with localcontext(_CTX):
        billed = sum(
            (
                Decimal(n) * share * price / Decimal(1_000_000)
                for n, price in zip(g.tokens.by_class().values(), _class_rates(base), strict=True)
            ),
            Decimal(0),
        )
        return billed / v.fx_per_usd


def _class_rates(r: Rates) -> tuple[Decimal, ...]:
    def pick(v: Decimal | None, default: Decimal) -> Decimal:
        return default if v is None else v

    return (
        r.input,
        pick(r.cached_input, r.input),
        pick(r.cache_write, r.input),
        r.output,
        pick(r.reasoning, r.output),
    )


def reprice(
    groups: Iterable[LedgerGroup], scenario: Scenario, lookup: VersionLookup
) -> list[WhatIfRow]:
    """One row for each group's ledger cost (at its model) and one for each place the
    scenario sends its tokens (at that model); sum them by app, model or day."""
    rows: list[WhatIfRow] = []
    zero = Decimal(0)
    for g in groups:
        # what the ledger's per-request pricing (long-prompt tiers, rounding, cache hits'
        # share) differs from pricing the group's sums: kept as it is, with the group's
        # own model, so a scenario that changes nothing shows no difference at all
        correction = g.actual_cost_usd - quantize_money(cost_usd(g.version, g, Decimal(1)))
        rows.append(WhatIfRow(g.day, g.app, g.model, g.actual_cost_usd, correction))
        for model, share in scenario.destinations(g):
            version = g.version if model == g.model else lookup(model, g.day)
            if version is None:
                raise UnpricedModel(f"no stored price version for model {model!r}")
            cost = cost_usd(scenario.prices.apply(version), g, share)
            rows.append(WhatIfRow(g.day, g.app, model, zero, quantize_money(cost)))
    return rows


def summarize(rows: Iterable[WhatIfRow], by: str) -> dict[object, tuple[Decimal, Decimal]]:
    """(ledger, what-if) USD per `by` ("app", "model", "day", or "total")."""
    out: dict[object, tuple[Decimal, Decimal]] = {}
    for r in rows:
        key = "total" if by == "total" else getattr(r, by)
        ledger, whatif = out.get(key, (Decimal(0), Decimal(0)))
        out[key] = (ledger + r.ledger_usd, whatif + r.whatif_usd)
    return dict(sorted(out.items(), key=lambda kv: str(kv[0])))


def parse_weights(text: str) -> dict[str, Decimal]:
    """ "gpt-4.1=30,deepseek-v3.2=70" -> weights (relative, need not sum to 100)."""
    out = {}
    for part in text.split(","):
        name, sep, weight = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"expected model=weight, got {part!r}")
        w = _number(weight)
        if w < 0:
            raise ValueError(f"weight of {name.strip()} is negative")
        out[name.strip()] = w
    if not any(w > 0 for w in out.values()):
        raise ValueError("at least one weight must be above 0")
    return out


def parse_routing(text: str) -> tuple[str, dict[str, Decimal]]:
    """ "auto:gpt-4.1=30,deepseek-v3.2=70" -> ("auto", weights)."""
    alias, sep, weights = text.partition(":")
    if not sep or not alias.strip():
        raise ValueError(f"expected alias:model=weight,..., got {text!r}")
    return alias.strip(), parse_weights(weights)


RATE_FIELDS = ("input", "cached_input", "cache_write", "output", "reasoning")


def parse_prices(text: str, current: Rates) -> tuple[str, Rates]:
    """ "gpt-4.1:input=1,output=4" -> ("gpt-4.1", its list rates with those replaced)."""
    model, sep, fields = text.partition(":")
    if not sep or not model.strip():
        raise ValueError(f"expected model:input=X,output=Y, got {text!r}")
    changes: dict[str, Any] = {}  # token rate fields only (RATE_FIELDS)
    for part in fields.split(","):
        name, eq, value = part.partition("=")
        if not eq or name.strip() not in RATE_FIELDS:
            raise ValueError(f"expected one of {', '.join(RATE_FIELDS)}=PRICE, got {part!r}")
        price = _number(value)
        if price < 0:
            raise ValueError(f"{name.strip()} is negative")
        changes[name.strip()] = price
    # an explicit price replaces tiers: the scenario says what the model costs
    return model.strip(), dataclasses.replace(current, tiers=(), **changes)


def _number(text: str) -> Decimal:
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise ValueError(f"not a number: {text.strip()!r}") from None
    if not value.is_finite():
        raise ValueError(f"not a number: {text.strip()!r}")
    return value
