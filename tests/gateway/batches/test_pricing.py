"""A batch line's price: the live price times the provider's batch factor, hand-computed."""

from __future__ import annotations

import uuid
from decimal import Decimal as D

from gateway.batches.pricing import at_batch_rate, batch_factor, batch_worst_case
from gateway.domain.config import Billing, Provider
from gateway.domain.pricing import Pricing


def _provider(kind: str, factor: str | None = None) -> Provider:
    billing = Billing(batch_factor=None if factor is None else D(factor))
    return Provider(name="p", kind=kind, base_url="http://x", billing=billing)  # type: ignore[arg-type]


def test_openai_and_anthropic_bill_batches_at_half_others_at_the_live_price() -> None:
    assert batch_factor(_provider("openai")) == D("0.5")
    assert batch_factor(_provider("anthropic")) == D("0.5")
    assert batch_factor(_provider("gemini")) == D(1)
    assert batch_factor(_provider("openai", "0.6")) == D("0.6")


def test_the_bill_is_at_the_batch_rate_and_the_list_price_stays_live() -> None:
    # gpt-4o-mini: 1,000 prompt tokens at $0.15/M and 500 output tokens at $0.60/M
    live = Pricing(uuid.uuid4(), "USD", D("0.00045"), D("0.00045"), D("0.00045"), None, None)
    batch = at_batch_rate(live, D("0.5"))
    assert (batch.actual_cost, batch.actual_cost_usd) == (D("0.000225"), D("0.000225"))
    assert batch.list_cost_usd == D("0.00045")
    assert batch.savings_usd == D("0.000225")


def test_a_batch_worst_case_is_the_sum_at_the_batch_rate_or_unknown() -> None:
    assert batch_worst_case([D("0.01"), D("0.03")], D("0.5")) == D("0.02")
    assert batch_worst_case([D("0.01"), None], D("0.5")) is None
