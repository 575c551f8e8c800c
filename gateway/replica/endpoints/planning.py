"""The route of one request: the caller's routing headers, the replica's view of its
upstreams' health, latency and measured quality, and an experiment's variant mix, given
to the pure `gateway.routing.policy.plan_route`; a refusal is the client's error."""

from __future__ import annotations

import random
from collections.abc import Mapping
from decimal import Decimal
from typing import Protocol

from gateway.domain.config import Config
from gateway.domain.openai_errors import OpenAIError
from gateway.domain.routing_settings import RoutingSettings
from gateway.routing.circuit_breaker import BreakerBoard
from gateway.routing.latency_tracker import LatencyTracker
from gateway.routing.policy import (
    Health,
    RouteHeaderError,
    RouteOverrides,
    RoutePlan,
    RouteRefusal,
    plan_route,
)
from gateway.routing.rate_limits import RateLimiter


class Replica(Protocol):
    """What of a replica's state a route depends on (`GatewayService` has it)."""

    cfg: Config
    routing: RoutingSettings
    latency: LatencyTracker
    breakers: BreakerBoard
    limits: RateLimiter
    quality: dict[int, dict[str, tuple[float, int]]]
    prices: dict[str, Decimal | None]
    rng: random.Random


def plan_request(svc: Replica, requested: str, headers: Mapping[str, str],
                 mix: Mapping[str, Decimal] | None = None) -> RoutePlan:  # fmt: skip
    try:
        overrides = RouteOverrides.from_headers(headers)
    except RouteHeaderError as err:
        raise OpenAIError(400, str(err), param=err.header, code="invalid_header") from None
    latency: dict[str, float] = {}
    if overrides.priority is not None:
        for name in svc.cfg.models_by_name:
            figure = svc.latency.figures(name).latency_s
            if figure is not None:
                latency[name] = figure
    health = Health(
        unavailable={model: wait for (_, model), wait in svc.breakers.unavailable().items()},
        capped=svc.limits.at_cap(),
        latency_s=latency,
        quality=svc.quality,
    )
    plan = plan_route(requested, svc.cfg, svc.routing, health, svc.prices, svc.rng, overrides,
                      mix)  # fmt: skip
    if isinstance(plan, RouteRefusal):
        wait = plan.retry_after_header
        raise OpenAIError(plan.status, plan.message, code=plan.reason, param=plan.param,
                          headers={} if wait is None else {"retry-after": wait})  # fmt: skip
    return plan
