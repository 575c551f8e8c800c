"""The price sections of the configuration: list prices and their long-prompt tiers,
service tiers and per-call tool fees, and how a provider bills (`gateway.domain.config`
re-exports them)."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

NonNegDecimal = Annotated[Decimal, Field(ge=0)]
# service tiers billed at the base price: OpenAI's `auto` and `default` (and Anthropic's
# `standard`, `standard_only`); a request or answer naming one of these is priced as base
STANDARD_TIERS = frozenset({"auto", "default", "standard", "standard_only"})


class Strict(BaseModel):
    """A config section: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PriceTier(Strict):
    """Prices that apply instead of the base ones when the prompt is above a size."""

    above_prompt_tokens: int = Field(gt=0)
    input: NonNegDecimal
    cached_input: NonNegDecimal | None = None
    output: NonNegDecimal


class TierPrices(Strict):
    """A service tier's prices (OpenAI's `flex`, `priority`...): the base fields, per 1M
    tokens, in the same currency; long-prompt `tiers` apply within it as in the base."""

    input: NonNegDecimal
    cached_input: NonNegDecimal | None = None
    cache_write: NonNegDecimal | None = None
    output: NonNegDecimal = Decimal(0)
    reasoning: NonNegDecimal | None = None
    tiers: tuple[PriceTier, ...] = ()


# service tier names a request may ask for; the standard ones take the base price
SERVICE_TIER_NAME = r"^[a-z][a-z0-9_]*$"


class Prices(TierPrices):
    """Per 1M tokens, in the currency of whoever publishes them (USD for list prices).

    `cache_write` is what a prompt token written to the provider's cache costs (Anthropic
    bills it above the input rate); `output` may be left out only for an embedding model,
    which is billed on its input alone. `service_tiers` price the same tokens at another
    tier (`flex`, `priority`): a tier left out has no price and is refused. `tool_fees`
    price a built-in tool per call (`web_search: "0.01"`), in the same currency."""

    effective_from: dt.date = dt.date(2026, 1, 1)
    service_tiers: dict[str, TierPrices] = Field(default_factory=dict)
    tool_fees: dict[Literal["web_search"], NonNegDecimal] = Field(default_factory=dict)

    @field_validator("service_tiers")
    @classmethod
    def _tier_names(cls, v: dict[str, TierPrices]) -> dict[str, TierPrices]:
        for name in v:
            if name in STANDARD_TIERS or not re.match(SERVICE_TIER_NAME, name):
                raise ValueError(f"service tier {name!r}: a standard tier takes the base price")
        return v


class Billing(Strict):
    """How a provider bills: list price × multiplier, or a table of its own, in a currency;
    `fx_per_usd` units of `currency` buy one USD (7.3 for CNY): usd = cost / fx_per_usd."""

    currency: str = Field(default="USD", min_length=3, max_length=3)
    fx_per_usd: Decimal = Field(default=Decimal(1), gt=0)
    multiplier: NonNegDecimal = Decimal(1)
    # upstream model id -> prices in `currency`, used instead of list × multiplier
    price_table: dict[str, Prices] = Field(default_factory=dict)
    # Batch APIs: this share of the live bill (None: 0.5 for openai/anthropic, 1 elsewhere)
    batch_factor: NonNegDecimal | None = None

    @field_validator("currency")
    @classmethod
    def _upper(cls, v: str) -> str:
        return v.upper()
