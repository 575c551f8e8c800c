"""A key's scope against a validated request: which models, how many choices, how many
output tokens, until when. Pure: no service, no network."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from gateway.domain.openai_errors import OpenAIError
from gateway.replica.chat_request import validate_chat_request
from gateway.replica.key_scope import UNSCOPED, KeyScope, check_request

MESSAGES = [{"role": "user", "content": "hi"}]
FAST_ONLY = KeyScope(models=frozenset({"fast", "gpt-4o-mini"}))


def refused(scope: KeyScope, headers: dict[str, str] | None = None, **body: Any) -> OpenAIError:
    req = validate_chat_request({"messages": MESSAGES, **body})
    with pytest.raises(OpenAIError) as info:
        check_request(scope, req, headers or {})
    return info.value


def allowed(scope: KeyScope, headers: dict[str, str] | None = None, **body: Any) -> None:
    check_request(scope, validate_chat_request({"messages": MESSAGES, **body}), headers or {})


def test_an_unscoped_key_may_ask_for_anything():
    allowed(UNSCOPED, {"x-costgate-model": "gpt-4.1"}, model="gpt-4.1", n=9, max_tokens=10**6)


def test_a_model_or_alias_outside_the_scope_is_a_403_model_not_allowed():
    allowed(FAST_ONLY, model="fast")
    allowed(FAST_ONLY, model="gpt-4o-mini")
    err = refused(FAST_ONLY, model="gpt-4.1")
    assert err.status == 403 and err.code == "model_not_allowed" and err.param == "model"
    assert err.type == "invalid_request_error"
    assert "'gpt-4.1'" in err.message and "fast, gpt-4o-mini" in err.message
    body = err.body()["error"]
    assert set(body) == {"message", "type", "param", "code"}


def test_forcing_a_model_outside_the_scope_by_header_is_a_403_even_for_an_allowed_alias():
    allowed(FAST_ONLY, {"x-costgate-model": "gpt-4o-mini"}, model="fast")
    allowed(FAST_ONLY, {"x-costgate-model": "  "}, model="fast")  # blank: no override
    err = refused(FAST_ONLY, {"x-costgate-model": "gpt-4.1"}, model="fast")
    assert err.status == 403 and err.code == "model_not_allowed"
    assert err.param == "x-costgate-model"


def test_a_long_scope_is_listed_briefly():
    many = KeyScope(models=frozenset(f"model-{i:02}" for i in range(30)))
    err = refused(many, model="other")
    assert "model-09, ..." in err.message and "model-10" not in err.message


def test_n_above_the_keys_cap_is_a_400_naming_n():
    capped = KeyScope(max_n=2)
    allowed(capped, model="m")
    allowed(capped, model="m", n=2)
    err = refused(capped, model="m", n=3)
    assert err.status == 400 and err.param == "n" and err.code == "above_key_limit"
    assert "at most 2" in err.message


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_output_tokens_above_the_keys_cap_are_a_400_naming_the_field(field):
    capped = KeyScope(max_output_tokens=256)
    allowed(capped, model="m", **{field: 256})
    err = refused(capped, model="m", **{field: 257})
    assert err.status == 400 and err.param == field and "at most 256" in err.message


def test_a_request_naming_no_output_limit_gets_the_keys_cap_sent_upstream():
    capped = KeyScope(max_output_tokens=64)
    req = check_request(capped, validate_chat_request({"messages": MESSAGES, "model": "m"}), {})
    assert req.max_tokens == 64 and req.body["max_tokens"] == 64
    named = validate_chat_request({"messages": MESSAGES, "model": "m", "max_tokens": 10})
    assert check_request(capped, named, {}) is named  # a limit within the cap: as sent
    free = validate_chat_request({"messages": MESSAGES, "model": "m"})
    assert check_request(UNSCOPED, free, {}) is free and "max_tokens" not in free.body


def test_both_token_fields_are_checked_each_on_its_own():
    capped = KeyScope(max_output_tokens=100)
    err = refused(capped, model="m", max_tokens=50, max_completion_tokens=500)
    assert err.param == "max_completion_tokens"


def test_the_model_is_checked_before_the_caps():
    both = KeyScope(models=frozenset({"fast"}), max_n=1)
    assert refused(both, model="gpt-4.1", n=5).status == 403


def test_expiry_is_the_moment_itself():
    at = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    scope = KeyScope(expires_at=at)
    assert not scope.expired(at - dt.timedelta(microseconds=1))
    assert scope.expired(at) and scope.expired(at + dt.timedelta(days=1))
    assert not UNSCOPED.expired(at)


def test_a_responses_output_cap_is_held_to_the_keys_cap_too():
    from gateway.replica.endpoints.requests import validate_responses_request

    capped = KeyScope(max_output_tokens=100)
    req = validate_responses_request({"model": "m", "input": "x", "max_output_tokens": 101})
    with pytest.raises(OpenAIError) as err:
        check_request(capped, req, {})
    assert (err.value.status, err.value.param) == (400, "max_output_tokens")
