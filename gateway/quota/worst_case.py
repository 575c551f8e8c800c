"""The most a request can cost and how many tokens it can use, before it is sent.

Prompt tokens are counted offline (a margin on top: the provider's tokenizer is not
ours), plus the most output it may produce: its `max_tokens`, else the key's output cap,
else the model's output limit from the config. The price is the highest among every model
the route may try, at the dearest rates any prompt up to the bound may get (the base
price and every tier it reaches), input at the dearer of the input and cache-write rates,
output at the dearer of the output and reasoning rates, in USD as billed (multipliers,
own price tables, FX), rounded up to the money quantum. Pure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from decimal import ROUND_CEILING, Context, Decimal, localcontext
from typing import Any

from gateway.domain.config import Config
from gateway.domain.pricing import PER_TOKENS, QUANTUM, PriceCatalog, Rates
from gateway.domain.token_estimate import estimate_prompt_tokens

# our count against the provider's: a few percent and a few tokens either way
PROMPT_MARGIN = Decimal("1.10")
PROMPT_MARGIN_TOKENS = 16


@dataclasses.dataclass(frozen=True, slots=True)
class WorstCase:
    prompt_tokens: int
    output_tokens: int | None  # None: nothing bounds the output
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
        for name in cfg.models_by_name:
            version = catalog.version(name)
            if version is not None:
                self._bands[name] = _bands(version.billed_rates, version.fx_per_usd)

    def price(
        self,
        models: Iterable[str],
        messages: Any,
        *,
        max_tokens: int | None,
        key_cap: int | None = None,
    ) -> WorstCase:
        names = tuple(models)
        first = self.cfg.models_by_name[names[0]].upstream_model if names else None
        prompt = prompt_bound(messages, first)
        output = output_bound(self.cfg, names, max_tokens, key_cap)
        if output is None:
            why = "the request sets no max_tokens and the model has no max_output_tokens"
            return WorstCase(prompt, None, None, why)
        highest = Decimal(0)
        for name in names:
            bands = self._bands.get(name)
            if bands is None:
                return WorstCase(prompt, output, None, f"model {name!r} has no price")
            for band in bands:
                # a tier the bound reaches may apply: the real prompt may be that long
                if band.above_prompt_tokens < prompt or band.above_prompt_tokens == 0:
                    cost = prompt * band.input_usd + output * band.output_usd
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
) -> WorstCase:
    """One request's worst case (a pricer built for it: see `WorstCasePricer`)."""
    return WorstCasePricer(cfg, catalog).price(
        models, messages, max_tokens=max_tokens, key_cap=key_cap
    )
