"""A batch line's price: the live price of its usage, times the provider's batch factor.
Pure.

Providers bill their Batch APIs at a share of the live price (OpenAI's and Anthropic's:
half). `billing.batch_factor` says which share; unset, it is 0.5 for an `openai` or
`anthropic` provider and 1 for any other (a relay's batch terms are its own). The row
keeps the live list price beside the batch bill, so `list − billed` of a batch row is
what the batch saved: the savings waterfall's "batch discount" step.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal

from gateway.domain.config import Provider
from gateway.domain.pricing import Pricing, quantize_money

DEFAULT_BATCH_FACTORS = {"openai": Decimal("0.5"), "anthropic": Decimal("0.5")}


def batch_factor(provider: Provider) -> Decimal:
    configured = provider.billing.batch_factor
    if configured is not None:
        return configured
    return DEFAULT_BATCH_FACTORS.get(provider.kind, Decimal(1))


def at_batch_rate(live: Pricing, factor: Decimal) -> Pricing:
    """The live pricing of a line's usage with the bill at the batch rate; the list and
    baseline costs stay at the live list price."""
    return dataclasses.replace(
        live,
        actual_cost=quantize_money(live.actual_cost * factor),
        actual_cost_usd=quantize_money(live.actual_cost_usd * factor),
    )


def batch_worst_case(line_costs: list[Decimal | None], factor: Decimal) -> Decimal | None:
    """The most a batch can bill: every line's live worst case at the batch rate (None:
    a line cannot be priced)."""
    total = Decimal(0)
    for cost in line_costs:
        if cost is None:
            return None
        total += cost
    return quantize_money(total * factor)
