"""Live routing settings: validated before they can reach a replica, versioned per change."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gateway.domain.config import Config, default_config_path, load_config
from gateway.domain.routing_settings import (
    RoutingError,
    parse_routing,
    parse_weight_args,
    routing_from_config,
)


@pytest.fixture(scope="module")
def cfg() -> Config:
    return load_config(default_config_path())


def test_user_config_round_trips_with_breaker_and_retry_knobs(cfg) -> None:
    settings = routing_from_config(cfg)
    uc = settings.to_user_config()
    assert set(uc) == {"routing"}
    assert uc["routing"]["breaker"]["min_requests"] == 10
    assert uc["routing"]["retries"]["max_attempts"] == 3
    assert parse_routing(uc, cfg) == settings


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"deepseek-v3.2": "-1", "gemini-2.5-flash": "5"}, "negative"),
        ({"deepseek-v3.2": "0", "gemini-2.5-flash": "0"}, "every weight is 0"),
        ({"gpt-9": "5"}, "unknown model"),
    ],
)
def test_bad_weights_are_refused(cfg, weights, message) -> None:
    uc = routing_from_config(cfg).to_user_config()
    uc["routing"]["aliases"]["auto"] = weights
    with pytest.raises(RoutingError, match=message):
        parse_routing(uc, cfg)


def test_unknown_alias_and_knobs_are_refused(cfg) -> None:
    uc = routing_from_config(cfg).to_user_config()
    uc["routing"]["aliases"]["nope"] = {"gpt-4.1": "1"}
    with pytest.raises(RoutingError, match="unknown alias"):
        parse_routing(uc, cfg)
    uc = routing_from_config(cfg).to_user_config()
    uc["routing"]["breaker"]["error_rate"] = 1.5
    with pytest.raises(RoutingError, match="breaker.error_rate"):
        parse_routing(uc, cfg)
    uc = routing_from_config(cfg).to_user_config()
    uc["routing"]["policy"] = {"latency_weight": 0, "cost_weight": 0}
    with pytest.raises(RoutingError, match="both be 0"):
        parse_routing(uc, cfg)


def test_with_weights_bumps_the_version_and_keeps_other_aliases(cfg) -> None:
    s = routing_from_config(cfg)
    t = s.with_weights("auto", {"claude-sonnet-4.5": Decimal(100)})
    assert t.version == s.version + 1
    assert t.aliases["auto"] == {"claude-sonnet-4.5": Decimal(100)}
    assert t.aliases["fast"] == s.aliases["fast"]
    with pytest.raises(RoutingError, match="every weight is 0"):
        s.with_weights("auto", {"claude-sonnet-4.5": Decimal(0)})


def test_weight_arguments_parse_exactly() -> None:
    assert parse_weight_args(["a=60", "b=30.5", "c=0"]) == {
        "a": Decimal(60),
        "b": Decimal("30.5"),
        "c": Decimal(0),
    }
    for bad in (["a"], ["=3"], ["a=x"], ["a=1", "a=2"], ["a=nan"], []):
        with pytest.raises(RoutingError):
            parse_weight_args(bad)
