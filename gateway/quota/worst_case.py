"""The most a request can cost and how many tokens it can use, before it is sent.

Prompt tokens are counted offline (a margin on top: the provider's tokenizer is not
ours), plus the most output it may produce: its `max_tokens`, else the key's output cap,
else the model's output limit from the config, times the outputs billed for the one
prompt (`n`, `best_of`: Gemini's `candidateCount` is `n` translated). The price is the
highest among every model the route may try, at the dearest rates any prompt up to the
bound may get (the base price and every tier it reaches), input at the dearer of the input
and cache-write rates, output at the dearer of the output and reasoning rates, in USD as
billed (multipliers, own price tables, FX), rounded up to the money quantum. A request
for a service tier is priced at that tier's rates (`flex`, `priority`); one that may call
web search adds its most calls (`max_tool_calls`, the tool's `max_uses`, else the model's
`max_tool_calls`) times the fee per call. Pure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from decimal import ROUND_CEILING, Context, Decimal, localcontext
from typing import Any

from gateway.domain.config import Config
from gateway.domain.pricing import (
    PER_TOKENS,
    QUANTUM,
    PriceCatalog,
    PriceUnavailable,
    PriceVersion,
    Rates,
)
from gateway.domain.token_estimate import estimate_prompt_tokens

# our count against the provider's: a few percent and a few tokens either way
PROMPT_MARGIN = Decimal("1.10")
PROMPT_MARGIN_TOKENS = 16


@dataclasses.dataclass(frozen=True, slots=True)
class Billed:
    """What a request asks for beyond tokens that a price may cover."""

    service_tier: str | None = None  # None: a standard tier (the base price)
    web_search: str | None = None  # the field that asks for it: "tools[2].type"
    # the most web search calls the request allows itself (`max_tool_calls`, the tool's
    # `max_uses`); None: the request sets none (the model's `max_tool_calls` bounds it)
    max_searches: int | None = None


NO_EXTRAS = Billed()


@dataclasses.dataclass(frozen=True, slots=True)
class WorstCase:
    prompt_tokens: int
    output_tokens: int | None  # every output's together; None: nothing bounds the output
    cost_usd: Decimal | None  # None: it cannot be priced
    why_unpriced: str = ""

    @property
    def tokens(self) -> int | None:
        if self.output_tokens is None:
            return None
        return self.prompt_tokens + self.output_tokens


def prompt_bound(messages: Any, model: str | None) -> int:
    """Our estimate of the prompt, with the margin; a body without a message list counts
    its text as JSON (the request was validated before this)."""
    counted = estimate_prompt_tokens(messages if isinstance(messages, list) else [], model)
    return math.ceil(counted * PROMPT_MARGIN) + PROMPT_MARGIN_TOKENS


def output_bound(
    cfg: Config, models: Iterable[str], max_tokens: int | None, key_cap: int | None
) -> int | None:
    if max_tokens is not None:
        return max_tokens
    if key_cap is not None:
        return key_cap
    limits = [cfg.models_by_name[m].max_output_tokens for m in models]
    if not limits or any(limit is None for limit in limits):
        return None
    return max(limit for limit in limits if limit is not None)


@dataclasses.dataclass(frozen=True, slots=True)
class _Band:
    """From `above_prompt_tokens` on: USD per input and per output token, the dearest."""

    above_prompt_tokens: int
    input_usd: Decimal
    output_usd: Decimal


def _bands(rates: Rates, fx_per_usd: Decimal) -> tuple[_Band, ...]:
    """The base rates and each tier's, per token in USD: input at the dearer of the input
    and cache-write rates, output at the dearer of the output and reasoning rates."""
    out = []
    for above, r in [(0, rates)] + [
        (t.above_prompt_tokens, rates.for_prompt(t.above_prompt_tokens + 1)) for t in rates.tiers
    ]:
        with localcontext(Context(prec=50)):
            per_in = max(r.input, r.cache_write or r.input) / PER_TOKENS / fx_per_usd
            per_out = max(r.output, r.reasoning or r.output) / PER_TOKENS / fx_per_usd
        out.append(_Band(above, per_in, per_out))
    return tuple(out)


class WorstCasePricer:
    """Worst cases for one config: per-token rates resolved once, so a request costs a
    token count and a few multiplications."""

    def __init__(self, cfg: Config, catalog: PriceCatalog) -> None:
        self.cfg = cfg
        self._bands: dict[str, tuple[_Band, ...]] = {}
        self._versions: dict[str, PriceVersion] = {}
        for name in cfg.models_by_name:
            version = catalog.version(name)
            if version is not None:
                self._bands[name] = _bands(version.billed_rates, version.fx_per_usd)
                self._versions[name] = version

    def _tier_bands(self, name: str, tier: str | None) -> tuple[_Band, ...] | None:
        if tier is None:
            return self._bands.get(name)
        version = self._versions.get(name)
        if version is None:
            return None
        try:
            return _bands(version.billed_rates.at_tier(tier), version.fx_per_usd)
        except PriceUnavailable:
            return None

    def _search_fee_usd(self, name: str) -> Decimal | None:
        version = self._versions.get(name)
        fee = None if version is None else version.billed_rates.fee("web_search")
        if fee is None or version is None:
            return None
        with localcontext(Context(prec=50)):
            return fee / version.fx_per_usd

    def price(
        self,
        models: Iterable[str],
        messages: Any,
        *,
        max_tokens: int | None,
        key_cap: int | None = None,
        outputs: int = 1,
        service_tier: str | None = None,
        web_search: bool = False,
        max_searches: int | None = None,
    ) -> WorstCase:
        """`service_tier`: the tier asked for (None: standard); `web_search`: the request
        may call it, at most `max_searches` times (None: the models' `max_tool_calls`)."""
        names = tuple(models)
        first = self.cfg.models_by_name[names[0]].upstream_model if names else None
        prompt = prompt_bound(messages, first)
        each = output_bound(self.cfg, names, max_tokens, key_cap)
        if each is None:
            why = "the request sets no max_tokens and the model has no max_output_tokens"
            return WorstCase(prompt, None, None, why)
        output = each * max(1, outputs)  # the prompt is billed once, each output in full
        highest = Decimal(0)
        for name in names:
            bands = self._tier_bands(name, service_tier)
            if bands is None:
                what = "" if service_tier is None else f" at the {service_tier!r} tier"
                return WorstCase(prompt, output, None, f"model {name!r} has no price{what}")
            fees = Decimal(0)
            if web_search:
                calls = max_searches
                if calls is None:
                    calls = self.cfg.models_by_name[name].max_tool_calls
                fee = self._search_fee_usd(name)
                if calls is None or fee is None:
                    why = "the request sets no max_tool_calls and the model no max_tool_calls"
                    return WorstCase(prompt, output, None, why if fee else "no web search fee")
                fees = calls * fee
            for band in bands:
                # a tier the bound reaches may apply: the real prompt may be that long
                if band.above_prompt_tokens < prompt or band.above_prompt_tokens == 0:
                    cost = prompt * band.input_usd + output * band.output_usd + fees
                    if cost > highest:
                        highest = cost
        # up to the money quantum, never down: a bound must not round below the cost
        return WorstCase(prompt, output, highest.quantize(QUANTUM, rounding=ROUND_CEILING))


def worst_case(
    cfg: Config,
    catalog: PriceCatalog,
    models: Iterable[str],
    messages: Any,
    *,
    max_tokens: int | None,
    key_cap: int | None = None,
    outputs: int = 1,
    service_tier: str | None = None,
    web_search: bool = False,
    max_searches: int | None = None,
) -> WorstCase:
    """One request's worst case (a pricer built for it: see `WorstCasePricer`)."""
    return WorstCasePricer(cfg, catalog).price(
        models, messages, max_tokens=max_tokens, key_cap=key_cap, outputs=outputs,
        service_tier=service_tier, web_search=web_search, max_searches=max_searches,
    )
