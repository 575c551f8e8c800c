"""The routing policy chooses as specified: weights, priorities, caps, breakers, fallbacks."""

from __future__ import annotations

import collections
import random
from decimal import Decimal

import pytest

from gateway.domain.config import Config, default_config_path, load_config
from gateway.domain.prices.sections import Prices
from gateway.domain.routing_settings import RoutingSettings, routing_from_config
from gateway.routing.policy import (
    Health,
    Priority,
    RouteHeaderError,
    RouteOverrides,
    RoutePlan,
    RouteRefusal,
    blended_price,
    effective_prices,
    plan_route,
    rank_candidates,
    weighted_choice,
)

# chi-square critical values at p = 0.001 (tables), by degrees of freedom
CHI2_CRITICAL_001 = {1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467}


@pytest.fixture(scope="module")
def cfg() -> Config:
    return load_config(default_config_path())


@pytest.fixture(scope="module")
def settings(cfg: Config) -> RoutingSettings:
    return routing_from_config(cfg)


@pytest.fixture(scope="module")
def prices(cfg: Config) -> dict[str, Decimal | None]:
    return effective_prices(cfg)


def chi_square(counts: dict[str, int], weights: dict[str, Decimal], n: int) -> float:
    total = sum(weights.values())
    stat = 0.0
    for name, w in weights.items():
        expected = n * float(w / total)
        stat += (counts.get(name, 0) - expected) ** 2 / expected
    return stat


def plan(cfg, settings, prices, requested="auto", health=None, seed=0, **overrides):
    return plan_route(
        requested,
        cfg,
        settings,
        health or Health(),
        prices,
        random.Random(seed),
        RouteOverrides(**overrides),
    )


def test_weighted_choice_converges_to_the_weights_by_chi_square() -> None:
    weights = {"deepseek-v3.2": Decimal(60), "gemini-2.5-flash": Decimal(30), "claude": Decimal(10)}
    rng = random.Random(20261129)
    n = 10_000
    counts = collections.Counter(weighted_choice(weights, rng) for _ in range(n))
    assert chi_square(counts, weights, n) < CHI2_CRITICAL_001[len(weights) - 1]
    # the same draws are far from a distribution they were not drawn from: the test bites
    wrong = {"deepseek-v3.2": Decimal(50), "gemini-2.5-flash": Decimal(35), "claude": Decimal(15)}
    assert chi_square(counts, wrong, n) > 10 * CHI2_CRITICAL_001[2]


def test_alias_plans_follow_the_live_weights_over_many_requests(cfg, settings, prices) -> None:
    rng = random.Random(7)
    n = 10_000
    firsts = collections.Counter(
        plan_route("auto", cfg, settings, Health(), prices, rng).first  # type: ignore[union-attr]
        for _ in range(n)
    )
    weights = settings.aliases["auto"]
    assert set(firsts) == set(weights)
    assert chi_square(firsts, weights, n) < CHI2_CRITICAL_001[len(weights) - 1]


def test_changed_weights_move_all_traffic_and_zero_weight_is_never_first(cfg, settings, prices):
    moved = settings.with_weights(
        "auto",
        {"deepseek-v3.2": Decimal(0), "gemini-2.5-flash": Decimal(0), "claude-sonnet-4.5": 100},
    )
    firsts = {plan(cfg, moved, prices, seed=s).first for s in range(300)}
    assert firsts == {"claude-sonnet-4.5"}
    assert moved.version == settings.version + 1


def test_open_breaker_excludes_a_candidate_everywhere_in_the_plan(cfg, settings, prices):
    health = Health(unavailable={"deepseek-v3.2": 5.0})
    for seed in range(200):
        result = plan(cfg, settings, prices, health=health, seed=seed)
        assert isinstance(result, RoutePlan)
        assert "deepseek-v3.2" not in result.models
        assert result.excluded == {"deepseek-v3.2": "breaker_open"}


def test_capped_model_is_skipped_and_weights_renormalise(cfg, settings, prices):
    health = Health(capped={"deepseek-v3.2": 12.0})
    rng = random.Random(3)
    n = 6000
    firsts = collections.Counter(
        plan_route("auto", cfg, settings, health, prices, rng).first  # type: ignore[union-attr]
        for _ in range(n)
    )
    remaining = {"gemini-2.5-flash": Decimal(30), "claude-sonnet-4.5": Decimal(10)}
    assert set(firsts) == set(remaining)
    assert chi_square(firsts, remaining, n) < CHI2_CRITICAL_001[1]


def test_fallback_chain_is_own_fallbacks_then_alias_then_other_candidates(cfg, settings, prices):
    result = plan(cfg, settings, prices, priority=Priority.BUDGET)
    assert isinstance(result, RoutePlan)
    # budget picks deepseek (cheapest); its own fallback, the alias's, then the others
    # in budget order (gemini flash is cheaper than claude sonnet)
    assert result.models == (
        "deepseek-v3.2",
        "relay-deepseek-v3.2",
        "gpt-4.1-mini",
        "gemini-2.5-flash",
        "claude-sonnet-4.5",
    )
    assert result.policy == "budget" and result.alias == "auto"


def test_no_fallback_header_leaves_only_the_chosen_model(cfg, settings, prices):
    result = plan(cfg, settings, prices, no_fallback=True, seed=11)
    assert isinstance(result, RoutePlan)
    assert len(result.models) == 1 and result.models[0] in settings.aliases["auto"]


def test_high_priority_takes_the_lowest_measured_latency(cfg, settings, prices):
    health = Health(
        latency_s={"deepseek-v3.2": 1.9, "gemini-2.5-flash": 0.8, "claude-sonnet-4.5": 0.5}
    )
    result = plan(cfg, settings, prices, health=health, priority=Priority.HIGH)
    assert isinstance(result, RoutePlan)
    assert result.first == "claude-sonnet-4.5" and result.policy == "high"
    # when the measurements change, so does the choice
    slower = Health(
        latency_s={"deepseek-v3.2": 1.9, "gemini-2.5-flash": 0.8, "claude-sonnet-4.5": 2.5}
    )
    assert plan(cfg, settings, prices, health=slower, priority=Priority.HIGH).first == (
        "gemini-2.5-flash"
    )


def test_budget_priority_takes_the_lowest_billed_price(cfg, settings, prices):
    result = plan(cfg, settings, prices, requested="code", priority=Priority.BUDGET)
    assert isinstance(result, RoutePlan)
    # through the CNY relay, gpt-4.1 (blended $3.50 list) bills $0.48 < sonnet's $0.82
    assert result.first == "relay-gpt-4.1"


def test_normal_priority_weighs_latency_and_cost_as_configured(cfg, settings, prices):
    # deepseek is cheapest but slowest; claude fastest but dearest; gemini in between
    health = Health(
        latency_s={"deepseek-v3.2": 3.0, "gemini-2.5-flash": 1.2, "claude-sonnet-4.5": 0.4}
    )
    weights = settings.aliases["auto"]
    # latency normalised: deepseek 1, gemini 0.3077, claude 0
    # cost normalised ($0.315, $0.85, $6.00): deepseek 0, gemini 0.0941, claude 1
    # 0.4/0.6: deepseek 0.4, gemini 0.1796, claude 0.6 -> gemini
    assert rank_candidates(weights, Priority.NORMAL, health, prices, settings) == [
        "gemini-2.5-flash",
        "deepseek-v3.2",
        "claude-sonnet-4.5",
    ]
    latency_only = settings.model_copy(
        update={"policy": settings.policy.model_copy(update={"cost_weight": 0.0})}
    )
    assert rank_candidates(weights, Priority.NORMAL, health, prices, latency_only)[0] == (
        "claude-sonnet-4.5"
    )
    result = plan(cfg, settings, prices, health=health, priority=Priority.NORMAL)
    assert result.first == "gemini-2.5-flash" and result.policy == "normal"


def test_unmeasured_model_counts_as_average_latency(cfg, settings, prices):
    health = Health(latency_s={"deepseek-v3.2": 2.0, "gemini-2.5-flash": 1.0})
    ranked = rank_candidates(settings.aliases["auto"], Priority.HIGH, health, prices, settings)
    assert ranked == ["gemini-2.5-flash", "claude-sonnet-4.5", "deepseek-v3.2"]


def test_every_candidate_capped_is_a_429_with_the_earliest_retry(cfg, settings, prices):
    health = Health(
        capped={
            "deepseek-v3.2": 30.0,
            "gemini-2.5-flash": 4.2,
            "claude-sonnet-4.5": 50.0,
            "relay-deepseek-v3.2": 9.0,
            "relay-claude-sonnet-4.5": 9.0,
            "gpt-4.1-mini": 20.0,
        }
    )
    result = plan(cfg, settings, prices, health=health)
    assert isinstance(result, RouteRefusal)
    assert (result.status, result.reason) == (429, "rate_limited")
    assert result.retry_after_s == 4.2 and result.retry_after_header == "5"


def test_every_candidate_unhealthy_is_a_503(cfg, settings, prices):
    down = ["deepseek-v3.2", "gemini-2.5-flash", "claude-sonnet-4.5", "gpt-4.1-mini"]
    down += ["relay-deepseek-v3.2", "relay-claude-sonnet-4.5"]
    result = plan(cfg, settings, prices, health=Health(unavailable={m: 8.0 for m in down}))
    assert isinstance(result, RouteRefusal)
    assert (result.status, result.reason, result.retry_after_header) == (503, "unavailable", "8")


def test_candidates_down_but_fallbacks_up_routes_to_the_fallbacks(cfg, settings, prices):
    down = {"deepseek-v3.2": 5.0, "gemini-2.5-flash": 5.0, "claude-sonnet-4.5": 5.0}
    result = plan(cfg, settings, prices, health=Health(unavailable=down))
    assert isinstance(result, RoutePlan)
    # the candidates' own fallbacks by weight (deepseek 60, gemini 30, claude 10), then
    # the alias's (gpt-4.1-mini, already there as gemini's)
    assert result.models == ("relay-deepseek-v3.2", "gpt-4.1-mini", "relay-claude-sonnet-4.5")


def test_named_model_goes_to_it_then_its_fallbacks(cfg, settings, prices):
    result = plan(cfg, settings, prices, requested="gpt-4.1")
    assert isinstance(result, RoutePlan)
    assert result.models == ("gpt-4.1", "relay-gpt-4.1")
    assert (result.policy, result.alias) == ("direct", None)
    down = plan(cfg, settings, prices, requested="gpt-4.1", health=Health({"gpt-4.1": 3.0}))
    assert down.models == ("relay-gpt-4.1",)
    strict = plan(
        cfg,
        settings,
        prices,
        requested="gpt-4.1",
        health=Health({"gpt-4.1": 3.0}),
        no_fallback=True,
    )
    assert isinstance(strict, RouteRefusal) and strict.status == 503


def test_model_header_forces_a_model_even_for_an_alias(cfg, settings, prices):
    result = plan(cfg, settings, prices, model="gpt-4o")
    assert isinstance(result, RoutePlan)
    assert (result.models, result.policy, result.alias) == (("gpt-4o",), "fixed", "auto")
    unknown = plan(cfg, settings, prices, model="gpt-9")
    assert isinstance(unknown, RouteRefusal)
    assert (unknown.status, unknown.param) == (400, "x-costgate-model")


def test_unknown_requested_name_is_a_404(cfg, settings, prices):
    result = plan(cfg, settings, prices, requested="no-such-model")
    assert isinstance(result, RouteRefusal) and result.status == 404


def test_headers_parse_into_overrides_and_bad_values_are_refused():
    o = RouteOverrides.from_headers(
        {"x-costgate-priority": "Budget", "x-costgate-no-fallback": "true", "x-costgate-model": "m"}
    )
    assert o == RouteOverrides(priority=Priority.BUDGET, no_fallback=True, model="m")
    assert RouteOverrides.from_headers({}) == RouteOverrides()
    with pytest.raises(RouteHeaderError) as err:
        RouteOverrides.from_headers({"x-costgate-priority": "urgent"})
    assert err.value.header == "x-costgate-priority"
    with pytest.raises(RouteHeaderError):
        RouteOverrides.from_headers({"x-costgate-no-fallback": "maybe"})


def test_blended_price_is_three_inputs_to_one_output():
    assert blended_price(Prices(input=Decimal("2.00"), output=Decimal("8.00"))) == Decimal("3.5")


def test_effective_price_applies_the_relays_multiplier_and_fx(prices):
    assert prices["gpt-4.1"] == Decimal("3.5")
    # ¥1 per $1 of list at 7.3 CNY/USD
    assert prices["relay-gpt-4.1"] == Decimal("3.5") / Decimal("7.3")
    # the relay's own table for deepseek: (3 × 2.50 + 3.80) / 4 = ¥2.825
    assert prices["relay-deepseek-v3.2"] == Decimal("2.825") / Decimal("7.3")
