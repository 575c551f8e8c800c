"""The most a request can cost and how many tokens it can use, before it is sent.

Prompt tokens are counted offline (a margin on top: the provider's tokenizer is not
ours), plus the most output it may produce: its `max_tokens`, else the key's output cap,
else the model's output limit from the config. The price is the highest among every model
the route may try, with the price tier the prompt falls in (and the next one up when the
prompt is near a tier's edge), output billed at the higher of the output and reasoning
rates. Pure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from decimal import Context, Decimal, localcontext
from typing import Any

from gateway.domain.config import Config
from gateway.domain.pricing import PER_TOKENS, PriceCatalog, Rates, quantize_money
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


def worst_case(
    cfg: Config,
    catalog: PriceCatalog,
    models: Iterable[str],
    messages: Any,
    *,
    max_tokens: int | None,
    key_cap: int | None = None,
) -> WorstCase:
    names = tuple(models)
    first = cfg.models_by_name[names[0]].upstream_model if names else None
    prompt = prompt_bound(messages, first)
    output = output_bound(cfg, names, max_tokens, key_cap)
    if output is None:
        return WorstCase(
            prompt,
            None,
            None,
            "the request sets no max_tokens and the model has no max_output_tokens in the config",
        )
    highest: Decimal | None = None
    for name in names:
        version = catalog.version(name)
        if version is None:
            return WorstCase(prompt, output, None, f"model {name!r} has no price")
        cost = _highest_cost(version.billed_rates, prompt, output) / version.fx_per_usd
        highest = cost if highest is None else max(highest, cost)
    return WorstCase(prompt, output, None if highest is None else quantize_money(highest))


def _highest_cost(rates: Rates, prompt: int, output: int) -> Decimal:
    """The cost of (prompt, output) at the dearest rates any prompt up to `prompt` may
    get: the base rates and every tier it may reach, reasoning where it is dearer."""
    candidates = [rates] + [
        rates.for_prompt(t.above_prompt_tokens + 1)
        for t in rates.tiers
        if t.above_prompt_tokens < prompt
    ]
    worst = Decimal(0)
    for r in candidates:
        out_rate = max(r.output, r.reasoning or r.output)
        with localcontext(Context(prec=50)):
            cost = (
                prompt * max(r.input, r.cache_write or r.input) + output * out_rate
            ) / PER_TOKENS
        worst = max(worst, cost)
    return worst
