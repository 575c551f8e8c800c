"""Routing by quality, with hand-set feedback scores: the cheapest candidate at or above
the floor; the weights when too few scores say anything; the header for one request."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest
import yaml

from gateway.domain.config import Config, default_config_path, parse_config
from gateway.domain.routing_settings import routing_from_config
from gateway.routing.policy import (
    Health,
    Priority,
    RouteOverrides,
    RoutePlan,
    effective_prices,
    plan_route,
    weighted_choice,
)

CHEAP, MID, DEAR = "deepseek-v3.2", "gemini-2.5-flash", "claude-sonnet-4.5"  # auto's, by price


def _cfg(**auto: Any) -> Config:
    data = yaml.safe_load(default_config_path().read_text())
    data["aliases"]["auto"].update(auto)
    return parse_config(data)


def _plan(cfg: Config, scores: dict[str, tuple[float, int]], seed: int = 0,
          **overrides: Any) -> RoutePlan:  # fmt: skip
    health, rng = Health(quality={7: scores}), random.Random(seed)
    plan = plan_route("auto", cfg, routing_from_config(cfg), health, effective_prices(cfg), rng,
                      RouteOverrides(**overrides))  # fmt: skip
    assert isinstance(plan, RoutePlan)
    return plan


QUALITY = {"policy": "quality", "min_quality": 0.8, "quality_window": "7d", "min_feedback": 50}


def test_the_cheapest_candidate_above_the_floor_goes_first() -> None:
    cfg = _cfg(**QUALITY)
    scores = {CHEAP: (0.62, 400), MID: (0.85, 400), DEAR: (0.95, 400)}
    plan = _plan(cfg, scores)
    assert plan.policy == "quality" and plan.models[0] == MID
    # below the floor, the cheap one still serves as a fallback after the good ones
    assert plan.models.index(DEAR) < plan.models.index(CHEAP)
    scores[CHEAP] = (0.81, 400)
    assert _plan(cfg, scores).models[0] == CHEAP


def test_too_few_scores_fall_back_to_the_weights() -> None:
    cfg = _cfg(**QUALITY)
    few = {CHEAP: (0.9, 49), MID: (0.9, 10), DEAR: (0.99, 3)}
    live = routing_from_config(cfg).weights_for("auto", cfg)
    for seed in range(20):
        plan = _plan(cfg, few, seed=seed)
        assert plan.policy == "weighted"
        assert plan.models[0] == weighted_choice(live, random.Random(seed))
    assert _plan(cfg, {}).policy == "weighted"  # no feedback at all


def test_a_candidate_below_the_minimum_count_is_not_trusted_however_high() -> None:
    cfg = _cfg(**QUALITY)
    plan = _plan(cfg, {CHEAP: (1.0, 5), MID: (0.7, 500), DEAR: (0.9, 500)})
    assert plan.models[0] == DEAR


def test_the_header_routes_one_request_by_quality_on_a_weighted_alias() -> None:
    cfg = _cfg(min_quality=0.9, min_feedback=20)
    scores = {CHEAP: (0.5, 100), MID: (0.92, 100), DEAR: (0.97, 100)}
    assert _plan(cfg, scores, priority=Priority.QUALITY).models[0] == MID
    assert _plan(cfg, scores).policy == "weighted"
    header = RouteOverrides.from_headers({"x-costgate-priority": "quality"})
    assert header.priority is Priority.QUALITY


def test_the_window_and_floor_are_checked_in_the_config() -> None:
    from gateway.domain.config import ConfigError

    for bad in ({"quality_window": "7"}, {"min_quality": 1.5}, {"policy": "best"}):
        with pytest.raises(ConfigError):
            _cfg(**bad)
    assert _cfg(quality_window="30d").aliases["auto"].quality_window == "30d"
    assert Decimal(str(_cfg(**QUALITY).aliases["auto"].min_quality)) == Decimal("0.8")
