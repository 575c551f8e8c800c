"""Choosing the model for a request: weights, priorities, caps and breakers, no I/O.

`plan_route` turns a requested name (a model or an alias), the per-request overrides
and a snapshot of live health into a `RoutePlan`: the model to try first, then the
fallback chain. When nothing can take the request it returns a `RouteRefusal`
instead (429 when the candidates are at their caps, 503 when they are all unhealthy).

For an alias, the first model is chosen among its candidates with a weight above 0
whose breaker lets traffic through and that are under their rpm/tpm caps:

- no priority header: weighted random by the live weights (`weighted`);
- `high`: the lowest measured latency (EWMA);
- `budget`: the lowest blended price;
- `normal`: the lowest score latency_weight × latency + cost_weight × cost, each
  min-max normalised over the usable candidates;
- `quality` (the header, or the alias's `policy: quality`): the cheapest candidate whose
  feedback score over the alias's window is at least its `min_quality` with at least
  `min_feedback` scores; with none such, the weights (recorded as `weighted`).

The chain after it: the chosen model's own fallbacks, the alias's fallbacks, then the
other usable candidates in the policy's order; de-duplicated, unusable ones left out.
A request naming a model (or forcing one with `x-costgate-model`) goes to that model,
then its fallbacks.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable, Mapping
from decimal import Decimal
from enum import StrEnum

from gateway.domain.config import Config
from gateway.domain.prices.sections import Prices
from gateway.domain.routing_settings import RoutingSettings

PRIORITY_HEADER = "x-costgate-priority"
NO_FALLBACK_HEADER = "x-costgate-no-fallback"
MODEL_HEADER = "x-costgate-model"


class Priority(StrEnum):
    HIGH = "high"
    NORMAL = "normal"
    BUDGET = "budget"
    QUALITY = "quality"


class RouteHeaderError(ValueError):
    """A routing header with a value we do not understand (a 400 for the client)."""

    def __init__(self, header: str, message: str):
        super().__init__(message)
        self.header = header


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", ""}


@dataclasses.dataclass(frozen=True, slots=True)
class RouteOverrides:
    priority: Priority | None = None
    no_fallback: bool = False
    model: str | None = None  # forces this model even when an alias was requested

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> RouteOverrides:
        """Read the documented `x-costgate-*` headers (names in lower case, as ASGI gives)."""
        raw_priority = headers.get(PRIORITY_HEADER)
        priority = None
        if raw_priority is not None and raw_priority.strip():
            try:
                priority = Priority(raw_priority.strip().lower())
            except ValueError:
                raise RouteHeaderError(
                    PRIORITY_HEADER,
                    f"{PRIORITY_HEADER} must be one of high, normal, budget, quality "
                    f"(got {raw_priority.strip()[:40]!r})",
                ) from None
        raw_nf = (headers.get(NO_FALLBACK_HEADER) or "").strip().lower()
        if raw_nf not in _TRUE | _FALSE:
            raise RouteHeaderError(
                NO_FALLBACK_HEADER, f"{NO_FALLBACK_HEADER} must be true or false"
            )
        model = (headers.get(MODEL_HEADER) or "").strip() or None
        return cls(priority=priority, no_fallback=raw_nf in _TRUE, model=model)


@dataclasses.dataclass(frozen=True, slots=True)
class Health:
    """What the replica knows right now, by public model name."""

    # breaker open (or its one probe in flight) -> seconds until it may take traffic
    unavailable: Mapping[str, float] = dataclasses.field(default_factory=dict)
    # at its rpm/tpm cap -> seconds until it has room
    capped: Mapping[str, float] = dataclasses.field(default_factory=dict)
    # EWMA latency in seconds, measured models only
    latency_s: Mapping[str, float] = dataclasses.field(default_factory=dict)
    # feedback per window (days) and model: (mean score, count), refreshed in the background
    quality: Mapping[int, Mapping[str, tuple[float, int]]] = dataclasses.field(
        default_factory=dict
    )


@dataclasses.dataclass(frozen=True, slots=True)
class RoutePlan:
    models: tuple[str, ...]  # try in this order; never empty
    policy: str  # weighted | high | normal | budget | direct | fixed: goes into the record
    alias: str | None
    # models left out of the plan and why ("breaker_open", "at_cap"), for explaining it
    excluded: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def first(self) -> str:
        return self.models[0]


@dataclasses.dataclass(frozen=True, slots=True)
class RouteRefusal:
    status: int  # 429, 503, 400 or 404
    reason: str  # rate_limited | unavailable | bad_request | model_not_found
    message: str
    retry_after_s: float | None = None
    param: str | None = None  # OpenAI's error `param`: the header at fault, if any

    @property
    def retry_after_header(self) -> str | None:
        """Whole seconds for a Retry-After header, at least 1."""
        if self.retry_after_s is None:
            return None
        return str(max(1, math.ceil(self.retry_after_s)))


# --- prices -----------------------------------------------------------------------------

# "blended" price: 3 input tokens per output token, the usual chat mix
_INPUT_SHARE = Decimal(3)
_OUTPUT_SHARE = Decimal(1)


def blended_price(prices: Prices) -> Decimal:
    """Per 1M tokens at a 3:1 input:output mix, in the prices' own currency."""
    return (prices.input * _INPUT_SHARE + prices.output * _OUTPUT_SHARE) / (
        _INPUT_SHARE + _OUTPUT_SHARE
    )


def effective_prices(cfg: Config) -> dict[str, Decimal | None]:
    """model -> blended USD per 1M tokens as the provider bills it (None when unknown).

    What `budget` ranks on: a relay billing ¥1 per $1 of list price at 7.3 CNY/USD is
    cheaper than the same model at the official provider, and the ranking says so.
    """
    out: dict[str, Decimal | None] = {}
    for model in cfg.models:
        billing = cfg.provider(model.provider).billing
        own = billing.price_table.get(model.upstream_model)
        if own is not None:
            out[model.name] = blended_price(own) / billing.fx_per_usd
        elif model.list_prices is not None:
            out[model.name] = (
                blended_price(model.list_prices) * billing.multiplier / billing.fx_per_usd
            )
        else:
            out[model.name] = None
    return out


# --- ranking ----------------------------------------------------------------------------


def weighted_choice(weights: Mapping[str, Decimal | float], rng: random.Random) -> str:
    """One name drawn with probability proportional to its weight (weights > 0)."""
    names = list(weights)
    values = [float(weights[n]) for n in names]
    total = sum(values)
    if not names or total <= 0:
        raise ValueError("weighted_choice needs a positive weight")
    point = rng.random() * total
    acc = 0.0
    for name, w in zip(names, values, strict=True):
        acc += w
        if point < acc:
            return name
    return names[-1]  # float rounding at the very top of the range


def _normalise(values: Mapping[str, float]) -> dict[str, float]:
    lo, hi = min(values.values()), max(values.values())
    if hi <= lo:
        return {k: 0.0 for k in values}
    return {k: (v - lo) / (hi - lo) for k, v in values.items()}


def rank_candidates(
    weights: Mapping[str, Decimal],
    mode: Priority,
    health: Health,
    prices: Mapping[str, Decimal | None],
    settings: RoutingSettings,
) -> list[str]:
    """The candidates best first under a priority mode; ties go to the larger weight.

    An unmeasured model counts as the mean of the measured ones (neither favoured nor
    shunned); a model with no known price counts as the dearest.
    """
    names = list(weights)
    measured = [health.latency_s[n] for n in names if n in health.latency_s]
    neutral = sum(measured) / len(measured) if measured else 0.0
    latency = {n: health.latency_s.get(n, neutral) for n in names}
    known_prices = [float(p) for n in names if (p := prices.get(n)) is not None]
    dearest = max(known_prices) if known_prices else 0.0
    price = {n: float(p) if (p := prices.get(n)) is not None else dearest for n in names}
    if mode is Priority.HIGH:
        score = latency
    elif mode is Priority.BUDGET:
        score = {n: price[n] + (0.0 if prices.get(n) is not None else 1e-9) for n in names}
    else:
        nl, nc = _normalise(latency), _normalise(price)
        unknown_cost = {n: 1.0 if prices.get(n) is None else nc[n] for n in names}
        lw, cw = settings.policy.latency_weight, settings.policy.cost_weight
        score = {n: lw * nl[n] + cw * unknown_cost[n] for n in names}
    return sorted(names, key=lambda n: (score[n], -weights[n], n))


def window_days(window: str) -> int:
    """`7d` -> 7 (the config's `quality_window`, validated there)."""
    return int(window.rstrip("d"))


def quality_ranked(
    live: Mapping[str, Decimal],
    prices: Mapping[str, Decimal | None],
    scores: Mapping[str, tuple[float, int]],
    floor: float,
    min_count: int,
) -> list[str] | None:
    """Candidates at or above the floor (on enough scores) cheapest first, then the rest
    cheapest first; None when no candidate qualifies. An unpriced model counts dearest."""

    def cheap(n: str) -> tuple[bool, Decimal, Decimal, str]:
        p = prices.get(n)
        return (p is None, p or Decimal(0), -live[n], n)

    good = [n for n in live if (s := scores.get(n)) and s[1] >= min_count and s[0] >= floor]
    if not good:
        return None
    return sorted(good, key=cheap) + sorted((n for n in live if n not in good), key=cheap)


# --- the plan ---------------------------------------------------------------------------


def plan_route(
    requested: str,
    cfg: Config,
    settings: RoutingSettings,
    health: Health,
    prices: Mapping[str, Decimal | None],
    rng: random.Random,
    overrides: RouteOverrides = RouteOverrides(),  # noqa: B008 - frozen
    mix: Mapping[str, Decimal] | None = None,  # an experiment variant's weights
) -> RoutePlan | RouteRefusal:
    excluded = {
        **{m: "at_cap" for m in health.capped},
        **{m: "breaker_open" for m in health.unavailable},
    }

    def usable(name: str) -> bool:
        return name not in excluded

    if overrides.model is not None:
        if cfg.model(overrides.model) is None:
            return RouteRefusal(
                400,
                "bad_request",
                f"{MODEL_HEADER}: unknown model {overrides.model[:80]!r}",
                param=MODEL_HEADER,
            )
        alias_name = requested if requested in cfg.aliases else None
        return _direct(overrides.model, "fixed", alias_name, cfg, health, excluded, overrides)
    if cfg.model(requested) is not None:
        return _direct(requested, "direct", None, cfg, health, excluded, overrides)
    alias = cfg.aliases.get(requested)
    if alias is None:
        return RouteRefusal(
            404, "model_not_found", f"The model {requested[:80]!r} does not exist", param="model"
        )

    mix = settings.weights_for(requested, cfg) if mix is None else mix
    weights = {m: w for m, w in mix.items() if w > 0}
    live = {m: w for m, w in weights.items() if usable(m)}
    mode = overrides.priority
    if mode is None and alias.policy == "quality":
        mode = Priority.QUALITY
    ranked: list[str] | None = None
    if live and mode is Priority.QUALITY:
        scores = health.quality.get(window_days(alias.quality_window), {})
        ranked = quality_ranked(live, prices, scores, alias.min_quality, alias.min_feedback)
        mode = mode if ranked else None  # too little feedback: the weights decide
    policy = mode.value if mode else "weighted"
    if live:
        if not ranked and mode is not None:
            ranked = rank_candidates(live, mode, health, prices, settings)
        elif not ranked:
            first = weighted_choice(live, rng)
            rest = sorted(live, key=lambda n: (-live[n], n))
            ranked = [first] + [m for m in rest if m != first]
        if overrides.no_fallback:
            return RoutePlan((ranked[0],), policy, requested, excluded)
        chain = _dedupe(
            [ranked[0]],
            cfg.models_by_name[ranked[0]].fallbacks,
            alias.fallbacks,
            ranked[1:],
        )
        return RoutePlan(tuple(m for m in chain if usable(m)), policy, requested, excluded)

    # no candidate can take it: their own fallbacks, then the alias's, stand in
    considered = list(weights)
    if not overrides.no_fallback:
        by_weight = sorted(weights, key=lambda n: (-weights[n], n))
        substitutes = _dedupe(
            *(cfg.models_by_name[m].fallbacks for m in by_weight), alias.fallbacks
        )
        chain = [m for m in substitutes if usable(m) and m not in weights]
        if chain:
            return RoutePlan(tuple(chain), policy, requested, excluded)
        considered += substitutes
    return _refusal(requested, considered, health)


def _direct(
    model: str,
    policy: str,
    alias: str | None,
    cfg: Config,
    health: Health,
    excluded: Mapping[str, str],
    overrides: RouteOverrides,
) -> RoutePlan | RouteRefusal:
    chain = (
        [model] if overrides.no_fallback else _dedupe([model], cfg.models_by_name[model].fallbacks)
    )
    plan = [m for m in chain if m not in excluded]
    if plan:
        return RoutePlan(tuple(plan), policy, alias, excluded)
    return _refusal(model, chain, health)


def _refusal(requested: str, considered: Iterable[str], health: Health) -> RouteRefusal:
    considered = list(dict.fromkeys(considered))
    capped = [health.capped[m] for m in considered if m in health.capped]
    if capped:
        return RouteRefusal(
            429,
            "rate_limited",
            f"Every model that can serve {requested[:80]!r} is at its rate limit; retry later",
            retry_after_s=min(capped),
        )
    waits = [health.unavailable[m] for m in considered if m in health.unavailable]
    return RouteRefusal(
        503,
        "unavailable",
        f"Every model that can serve {requested[:80]!r} is unavailable (circuit open); retry later",
        retry_after_s=min(waits) if waits else None,
    )


def _dedupe(*groups: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(m for group in groups for m in group))
