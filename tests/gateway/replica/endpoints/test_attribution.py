"""The request path's attribution (no Ray: the service on a mock upstream): hashed end
users, the key's tags, the body passed on unchanged, the 400 before any upstream call,
and the cost headers of a plain answer."""

from __future__ import annotations

from decimal import Decimal

import httpx
import pytest

from gateway.attribution.identity import hashed
from gateway.attribution.inputs import KeyTags
from gateway.domain.config import default_config_path, load_config
from gateway.replica.auth import Caller
from tests.gateway.replica.test_service import (
    APP,
    APP_KEY,
    MESSAGES,
    Harness,
    completion,
)
from tests.gateway.replica.test_service import (
    provider_keys as provider_keys,  # a fixture the tests below use
)

BODY = {"model": "gpt-4.1", "messages": MESSAGES}


def ok(_: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=completion())


async def test_a_hashed_end_user_is_stored_as_its_hmac_and_passed_upstream_as_sent(
    provider_keys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CG_TEST_END_USER_KEY", "k3y")
    cfg = load_config(default_config_path())
    cfg = cfg.model_copy(update={"ledger": cfg.ledger.model_copy(update={
        "end_user_hash": "hmac", "end_user_hash_key_env": "CG_TEST_END_USER_KEY"})})  # fmt: skip
    h = Harness(ok, cfg)
    try:
        resp = await h.chat(BODY | {"user": "alice@example.com"})
        assert resp.status_code == 200
        [record] = h.records
        assert record.end_user == hashed("alice@example.com", b"k3y")
        assert "alice" not in record.to_json()
        assert h.upstream_bodies()[0]["user"] == "alice@example.com"  # the provider's own field
    finally:
        await h.aclose()


async def test_a_keys_default_tags_join_the_requests_own(provider_keys: None) -> None:
    tagged = Caller(APP.app, APP.team, APP.key_id, tags=KeyTags({"env": "prod"}))
    h = Harness(ok, keys={APP_KEY: tagged})
    try:
        resp = await h.chat(BODY, **{"x-costgate-tags": "feature=search",
                                     "x-costgate-session": "s-1"})  # fmt: skip
        assert resp.status_code == 200
        [record] = h.records
        assert record.tags == {"env": "prod", "feature": "search"}
        assert record.session_id == "s-1" and record.end_user is None
        # the gateway's own headers are not forwarded to the provider
        assert "x-costgate-tags" not in h.seen[0].headers
    finally:
        await h.aclose()


async def test_an_invalid_value_is_refused_before_any_upstream_call(provider_keys: None) -> None:
    h = Harness(ok)
    try:
        resp = await h.chat(BODY | {"user": "u" * 300})
        assert resp.status_code == 400
        assert resp.json()["error"]["param"] == "user"
        assert resp.json()["error"]["code"] == "invalid_attribution"
        assert h.seen == []
        [record] = h.records
        assert record.http_status == 400 and record.end_user is None
    finally:
        await h.aclose()


async def test_a_plain_answer_says_its_cost_and_list_cost_exactly(provider_keys: None) -> None:
    h = Harness(ok)
    try:
        resp = await h.chat(BODY)
        [record] = h.records
        # gpt-4.1 lists $2.00 in / $8.00 out per 1M tokens: 12 × 2 + 3 × 8 = 48 micro-dollars
        assert resp.headers["x-costgate-list-cost-usd"] == "0.000048"
        assert Decimal(resp.headers["x-costgate-cost-usd"]) == record.actual_cost_usd
    finally:
        await h.aclose()
