from __future__ import annotations

import pytest

from gateway.domain.config import CacheOptions
from gateway.domain.openai_errors import OpenAIError
from gateway.replica.cache.policy import OFF, CacheState, decide

OPTS = CacheOptions(aliases=("cached",), models=("gpt-4o",), ttl_s=60)


def test_opt_in_by_header_or_by_a_listed_alias_or_model() -> None:
    assert decide({}, OPTS, "other") is OFF
    assert decide({"x-costgate-cache": "on"}, OPTS, "other").state is CacheState.MISS
    assert decide({}, OPTS, "cached").state is CacheState.MISS
    assert decide({}, OPTS, "gpt-4o").ttl_s == 60
    assert decide({"x-costgate-cache": "off"}, OPTS, "cached") is OFF


def test_cache_control() -> None:
    on = {"x-costgate-cache": "on"}
    bypass = decide(on | {"cache-control": "no-cache"}, OPTS, "m")
    assert (bypass.state, bypass.lookup, bypass.store) == (CacheState.BYPASS, False, True)
    no_store = decide(on | {"cache-control": "no-store"}, OPTS, "m")
    assert (no_store.lookup, no_store.store) == (True, False)
    aged = decide(on | {"cache-control": "max-age=5, no-store"}, OPTS, "m")
    assert (aged.ttl_s, aged.max_age_s, aged.store) == (5, 5, False)
    zero = decide(on | {"cache-control": "max-age=0"}, OPTS, "m")
    assert (zero.lookup, zero.store, zero.state) == (False, False, CacheState.BYPASS)


@pytest.mark.parametrize(
    "headers",
    [{"x-costgate-cache": "yes"}, {"x-costgate-cache": "on", "cache-control": "max-age=x"}],
)
def test_bad_headers_are_the_clients_400(headers: dict[str, str]) -> None:
    with pytest.raises(OpenAIError) as err:
        decide(headers, OPTS, "m")
    assert err.value.status == 400 and err.value.code == "invalid_header"


@pytest.mark.parametrize(
    ("value", "ttl"),
    [("9" * 400, 2**31), ("9" * 5000, 2**31), ("99999999999999999", 2**31), ("0007", 7)],
)
def test_a_max_age_of_any_length_is_bounded_at_2_to_the_31(value: str, ttl: float) -> None:
    d = decide({"x-costgate-cache": "on", "cache-control": f"max-age={value}"}, OPTS, "m")
    assert d.ttl_s == ttl and d.max_age_s == ttl


@pytest.mark.parametrize("value", ["\u00b2", "1\u00b2", "-5", "1.5", ""])
def test_a_max_age_that_is_no_ascii_number_is_the_clients_400(value: str) -> None:
    with pytest.raises(OpenAIError) as err:
        decide({"x-costgate-cache": "on", "cache-control": f"max-age={value}"}, OPTS, "m")
    assert err.value.status == 400
