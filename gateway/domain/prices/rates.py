"""Token usage and the rates that price it: exact arithmetic, no I/O (the rules are in
`gateway.domain.pricing`'s docstring, which re-exports these names)."""

from __future__ import annotations

import dataclasses
from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext
from typing import Any

from gateway.domain.prices.sections import STANDARD_TIERS, Prices, PriceTier, TierPrices

MONEY_PLACES = 10
QUANTUM = Decimal(1).scaleb(-MONEY_PLACES)  # 1E-10
PER_TOKENS = Decimal(1_000_000)  # prices are per 1M tokens
# ample for token counts × prices / FX before the single final rounding
_CONTEXT = Context(prec=50, rounding=ROUND_HALF_EVEN)

# the token classes priced apart, in the order the ledger and the dashboard show them
TOKEN_CLASSES = ("input", "cached_input", "cache_write", "output", "reasoning")


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
    # built-in web search calls the provider reports (billed per call)
    web_search_calls: int = 0
    # the service tier the provider says it used; None: the standard one (base price)
    service_tier: str | None = None

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


_TOKEN_FIELDS = tuple(f.name for f in dataclasses.fields(TokenUsage) if f.type == "int")


def service_tier_name(tier: object) -> str | None:
    """A request's or an answer's `service_tier` as priced: None for a standard tier (base
    price) or none at all, else its name (Anthropic's `standard` is OpenAI's `default`)."""
    if tier is None or (isinstance(tier, str) and tier in STANDARD_TIERS):
        return None
    return str(tier)[:40]


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
    # (tier name, its rates), by name; a service tier's own rates hold none of these two
    service_tiers: tuple[tuple[str, Rates], ...] = ()
    # (tool, fee per call), by name: "web_search"
    tool_fees: tuple[tuple[str, Decimal], ...] = ()

    @classmethod
    def from_prices(cls, p: Prices | TierPrices | PriceTier) -> Rates:
        if isinstance(p, PriceTier):
            return cls(input=p.input, cached_input=p.cached_input, output=p.output)
        tiers = tuple(
            Tier(t.above_prompt_tokens, t.input, t.cached_input, t.output)
            for t in sorted(p.tiers, key=lambda t: t.above_prompt_tokens)
        )
        base = cls(p.input, p.cached_input, p.cache_write, p.output, p.reasoning, tiers)
        if not isinstance(p, Prices):
            return base
        return dataclasses.replace(
            base,
            service_tiers=tuple(
                (name, cls.from_prices(t)) for name, t in sorted(p.service_tiers.items())
            ),
            tool_fees=tuple(sorted((str(k), v) for k, v in p.tool_fees.items())),
        )

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
            tuple((name, r.scaled(factor)) for name, r in self.service_tiers),
            tuple((name, fee * factor) for name, fee in self.tool_fees),
        )

    def at_tier(self, tier: str | None) -> Rates:
        """The token rates of a service tier (`service_tier_name`'s None: these); raises
        PriceUnavailable for a tier without a price."""
        if tier is None:
            return self
        for name, rates in self.service_tiers:
            if name == tier:
                return rates
        raise PriceUnavailable(f"no price for the service tier {tier!r}")

    def fee(self, tool: str) -> Decimal | None:
        """The fee per call of a built-in tool, None when it has none."""
        return next((fee for name, fee in self.tool_fees if name == tool), None)

    def tool_fee_cost(self, usage: TokenUsage) -> Decimal:
        """The exact fee of `usage`'s tool calls; PriceUnavailable for calls without a fee."""
        if not usage.web_search_calls:
            return Decimal(0)
        fee = self.fee("web_search")
        if fee is None:
            raise PriceUnavailable("no fee for web search calls")
        return usage.web_search_calls * fee

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
        input, cached input, cache writes, visible output, reasoning (`TOKEN_CLASSES`),
        at the service tier the usage names. An embedding's usage has prompt tokens only,
        so only its input is charged."""
        r = self.at_tier(usage.service_tier).for_prompt(usage.prompt_tokens)
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
        """Exact (unrounded) cost of `usage` at these rates: the sum of its classes, and
        its tool calls' fees."""
        with localcontext(_CONTEXT):
            fees = self.tool_fee_cost(usage)
            return sum(self.class_costs(usage).values(), fees)

    def canonical(self) -> dict[str, object]:
        out: dict[str, object] = {
            "input": _canon(self.input),
            "cached_input": _canon(self.cached_input),
            "cache_write": _canon(self.cache_write),
            "output": _canon(self.output),
            "reasoning": _canon(self.reasoning),
            "tiers": self.tiers_json(),
        }
        # only when set: a version without them keeps the id it had before they existed
        out.update(self.extras_json() or {})
        return out

    def extras_json(self) -> dict[str, object] | None:
        """Service tiers and tool fees as stored in price_versions.*_extras (decimal
        strings), None when there are neither."""
        out: dict[str, object] = {}
        if self.service_tiers:
            out["service_tiers"] = {name: r.canonical() for name, r in self.service_tiers}
        if self.tool_fees:
            out["tool_fees"] = {name: _canon(fee) for name, fee in self.tool_fees}
        return out or None

    @classmethod
    def with_extras(cls, base: Rates, extras: dict[str, Any] | None) -> Rates:
        """`base` with the service tiers and fees of `extras_json` (a stored version)."""
        if not extras:
            return base

        def d(v: object) -> Decimal | None:
            return None if v is None else Decimal(str(v))

        def rates(c: dict[str, Any]) -> Rates:
            tiers = tuple(
                Tier(int(t["above_prompt_tokens"]), Decimal(str(t["input"])),
                     d(t.get("cached_input")), Decimal(str(t["output"])))
                for t in c.get("tiers") or ()
            )  # fmt: skip
            return Rates(Decimal(str(c["input"])), d(c.get("cached_input")),
                         d(c.get("cache_write")), Decimal(str(c["output"])),
                         d(c.get("reasoning")), tiers)  # fmt: skip

        tiers = sorted((extras.get("service_tiers") or {}).items())
        fees = sorted((extras.get("tool_fees") or {}).items())
        return dataclasses.replace(
            base,
            service_tiers=tuple((name, rates(c)) for name, c in tiers),
            tool_fees=tuple((name, Decimal(str(v))) for name, v in fees),
        )

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
