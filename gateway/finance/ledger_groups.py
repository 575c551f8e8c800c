"""The ledger summed per day and who/what, with the price version it was priced with:
what the FOCUS export, the what-if and the reconciliation start from. Pure types.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

from gateway.domain.pricing import TOKEN_CLASSES, PriceVersion, TokenUsage


@dataclasses.dataclass(frozen=True, slots=True)
class Tokens:
    """Token sums by class, as `pricing.TOKEN_CLASSES` names them (uncached input...)."""

    input: int = 0
    cached_input: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0

    @classmethod
    def of_usage_sums(
        cls, prompt: int, cached: int, cache_write: int, completion: int, reasoning: int
    ) -> Tokens:
        return cls(
            prompt - cached - cache_write, cached, cache_write, completion - reasoning, reasoning
        )

    def by_class(self) -> dict[str, int]:
        return {c: getattr(self, c) for c in TOKEN_CLASSES}

    def usage(self) -> TokenUsage:
        """As one OpenAI-style usage (prompt includes cached and writes, output reasoning)."""
        return TokenUsage(
            prompt_tokens=self.input + self.cached_input + self.cache_write,
            cached_prompt_tokens=self.cached_input,
            completion_tokens=self.output + self.reasoning,
            reasoning_tokens=self.reasoning,
            cache_write_tokens=self.cache_write,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class LedgerGroup:
    """Priced ledger rows of one day and one (app, team, key, alias, model, provider,
    price version, cache hit[, end user or tag value]): their token sums and the costs
    the ledger stored."""

    day: dt.date
    app: str
    team: str | None
    key_id: str | None
    alias: str | None
    model: str
    provider: str
    version: PriceVersion
    cache_hit: bool
    requests: int
    tokens: Tokens
    list_cost_usd: Decimal
    actual_cost: Decimal  # in the version's billing currency
    actual_cost_usd: Decimal
    # the end user or tag the group was split by (`export focus --split-by`), as FOCUS
    # Tags pairs: ("costgate:end_user", "u-1") or ("feature", "search"); () when not split
    tags: tuple[tuple[str, str], ...] = ()
    # batch lines (endpoint `batch`): billed at the provider's batch rate (docs/BATCHES.md)
    batch: bool = False
    # hosted web search calls and their fees (in the billing currency, inside actual_cost)
    web_search_calls: int = 0
    tool_fee_cost: Decimal = Decimal(0)
