"""Gateway keys on the request path and the HTTP surface: the real GatewayService and app,
the upstream an `httpx.MockTransport` (see test_service.py).

Who gets in (missing, unknown, expired keys; keys off), what a scoped key may ask for,
the one ledger record each authenticated refusal leaves, and the admin, model-list,
metrics and health endpoints.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import yaml

from gateway.domain.config import Config, default_config_path, parse_config
from gateway.domain.usage_record import RequestStatus
from gateway.replica.auth import ANONYMOUS_APP, Caller
from gateway.replica.key_scope import KeyScope
from tests.gateway.replica.test_service import APP, APP_KEY, SECRET, Harness, completion

MESSAGES = [{"role": "user", "content": "Say hello"}]
SCOPED_KEY = "cg-unit-scoped"
SCOPED = Caller(
    app="scoped-app",
    team=None,
    key_id=uuid.uuid4(),
    scope=KeyScope(models=frozenset({"fast", "gpt-4o-mini"}), max_n=1, max_output_tokens=200),
)
ADMIN_KEY = "cg-unit-admin"
ADMIN = Caller(app="ops", team=None, key_id=uuid.uuid4(), scope=KeyScope(admin=True))
EXPIRED_KEY = "cg-unit-expired"
EXPIRED = Caller(
    app="old-app",
    team=None,
    key_id=uuid.uuid4(),
    scope=KeyScope(expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)),
)
KEYS = {APP_KEY: APP, SCOPED_KEY: SCOPED, ADMIN_KEY: ADMIN, EXPIRED_KEY: EXPIRED}


def config(**gateway: Any) -> Config:
    data = yaml.safe_load(default_config_path().read_text())
    data["gateway"].update(gateway)
    return parse_config(data)


def native_answer(request: httpx.Request) -> httpx.Response:
    """A completion in the format of the upstream asked: `fast` has a Gemini model."""
    if ":generateContent" in request.url.path:
        return httpx.Response(200, json={"responseId": "r", "candidates": [{
            "index": 0, "finishReason": "STOP",
            "content": {"role": "model", "parts": [{"text": "Hello!"}]}}],
            "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 3}})
    return httpx.Response(200, json=completion())


@pytest.fixture
async def make(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Callable[..., Harness]]:
    for env in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY",
                "RELAY_API_KEY"):
        monkeypatch.setenv(env, SECRET)
    made: list[Harness] = []

    def build(cfg: Config | None = None, **kw: Any) -> Harness:
        made.append(Harness(native_answer, cfg,
                            keys=KEYS, key=None, **kw))
        return made[-1]

    yield build
    for h in made:
        await h.aclose()


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def test_missing_unknown_and_expired_keys_are_401s_and_leave_no_record(make):
    h = make()
    for headers in ({}, bearer("cg-nobody"), {"authorization": "Basic eA=="}, bearer(EXPIRED_KEY)):
        resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES}, **headers)
        assert resp.status_code == 401, headers
        assert resp.json()["error"]["type"] == "authentication_error"
        assert "cg-nobody" not in resp.text
    expired = await h.chat({"model": "gpt-4.1", "messages": MESSAGES}, **bearer(EXPIRED_KEY))
    assert "expired" in expired.json()["error"]["message"]
    assert h.seen == [] and h.records == []
    ok = await h.chat({"model": "gpt-4.1", "messages": MESSAGES}, **bearer(APP_KEY))
    assert ok.status_code == 200
    [record] = h.records
    assert (record.app, record.team, record.key_id) == (APP.app, APP.team, APP.key_id)


async def test_with_keys_off_only_a_request_without_a_key_is_anonymous(make):
    h = make(config(require_keys=False))
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES})
    assert resp.status_code == 200
    assert [r.app for r in h.records] == [ANONYMOUS_APP]
    for key in ("cg-typo", EXPIRED_KEY):
        resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES}, **bearer(key))
        assert resp.status_code == 401, key
    assert len(h.records) == 1


async def test_a_scoped_key_outside_its_models_is_a_403_with_one_record(make):
    h = make()
    resp = await h.chat({"model": "gpt-4.1", "messages": MESSAGES}, **bearer(SCOPED_KEY))
    assert resp.status_code == 403
    err = resp.json()["error"]
    assert (err["type"], err["code"], err["param"]) == (
        "invalid_request_error", "model_not_allowed", "model")
    assert h.seen == []  # refused before any upstream call
    [record] = h.records
    assert record.app == "scoped-app" and record.key_id == SCOPED.key_id
    assert record.status is RequestStatus.CLIENT_ERROR and record.http_status == 403
    assert record.error_class == "model_not_allowed" and record.requested_model == "gpt-4.1"
    assert str(record.request_id) == resp.headers["x-costgate-request-id"]


async def test_a_scoped_key_may_use_its_alias_but_not_force_another_model(make):
    h = make()
    ok = await h.chat({"model": "fast", "messages": MESSAGES}, **bearer(SCOPED_KEY))
    assert ok.status_code == 200
    forced_in = await h.chat({"model": "fast", "messages": MESSAGES},
                             **bearer(SCOPED_KEY), **{"x-costgate-model": "gpt-4o-mini"})
    assert forced_in.status_code == 200 and forced_in.headers["x-costgate-model"] == "gpt-4o-mini"
    forced_out = await h.chat({"model": "fast", "messages": MESSAGES},
                              **bearer(SCOPED_KEY), **{"x-costgate-model": "gpt-4.1"})
    assert forced_out.status_code == 403
    assert forced_out.json()["error"]["param"] == "x-costgate-model"
    assert len(h.seen) == 2
    assert [r.http_status for r in h.records] == [200, 200, 403]


@pytest.mark.parametrize(("extra", "param"), [
    ({"n": 2}, "n"),
    ({"max_tokens": 201}, "max_tokens"),
    ({"max_completion_tokens": 5000}, "max_completion_tokens"),
])
async def test_a_scoped_key_above_its_caps_is_a_400_naming_the_param(make, extra, param):
    h = make()
    resp = await h.chat({"model": "fast", "messages": MESSAGES, **extra}, **bearer(SCOPED_KEY))
    assert resp.status_code == 400
    assert resp.json()["error"]["param"] == param
    assert h.seen == []
    [record] = h.records
    assert record.http_status == 400 and record.app == "scoped-app"
    within = await h.chat({"model": "fast", "messages": MESSAGES, "n": 1, "max_tokens": 200},
                          **bearer(SCOPED_KEY))
    assert within.status_code == 200


async def test_the_model_list_wants_a_key_and_shows_a_scoped_key_its_models_only(make):
    h = make()
    assert (await h.client.get("/v1/models")).status_code == 401
    assert (await h.client.get("/v1/models", headers=bearer("cg-nobody"))).status_code == 401
    full = {m["id"] for m in (await h.client.get("/v1/models", headers=bearer(APP_KEY))).json()[
        "data"]}
    assert {"gpt-4.1", "fast", "auto"} <= full
    scoped = (await h.client.get("/v1/models", headers=bearer(SCOPED_KEY))).json()
    assert scoped["object"] == "list" and {m["id"] for m in scoped["data"]} == {
        "fast", "gpt-4o-mini"}
    one = await h.client.get("/v1/models/gpt-4.1", headers=bearer(SCOPED_KEY))
    assert one.status_code == 404
    assert (await h.client.get("/v1/models/fast", headers=bearer(SCOPED_KEY))).status_code == 200
    anonymous = make(config(require_keys=False))
    assert (await anonymous.client.get("/v1/models")).status_code == 200


async def test_routing_info_wants_an_admin_key(make):
    h = make()
    for headers, status in (({}, 401), (bearer("cg-nobody"), 401), (bearer(APP_KEY), 403)):
        resp = await h.client.get("/costgate/routing", headers=headers)
        assert resp.status_code == status, headers
        assert set(resp.json()["error"]) == {"message", "type", "param", "code"}
    resp = await h.client.get("/costgate/routing", headers=bearer(ADMIN_KEY))
    assert resp.status_code == 200
    assert isinstance(resp.json()["pid"], int) and "version" in resp.json()["routing"]
    # keys off is about apps' requests: the admin endpoint still wants an admin key
    anonymous = make(config(require_keys=False))
    assert (await anonymous.client.get("/costgate/routing")).status_code == 401


async def test_health_says_nothing_about_the_process(make):
    resp = await make().client.get("/healthz")
    assert resp.status_code == 200 and resp.json() == {"status": "ok"}


async def render() -> tuple[bytes, str]:
    return b"costgate_up 1\n", "text/plain; version=0.0.4"


async def test_metrics_with_a_token_configured_want_that_token(make, monkeypatch):
    monkeypatch.setenv("UNIT_METRICS_TOKEN", "metrics-s3cret")
    h = make(config(metrics_token_env="UNIT_METRICS_TOKEN"), render_metrics=render)
    for headers in ({}, bearer("wrong"), bearer(ADMIN_KEY), {"authorization": "metrics-s3cret"}):
        resp = await h.client.get("/metrics", headers=headers)
        assert resp.status_code == 401, headers
        assert "metrics-s3cret" not in resp.text
    ok = await h.client.get("/metrics", headers=bearer("metrics-s3cret"))
    assert ok.status_code == 200 and ok.content == b"costgate_up 1\n"
    open_metrics = make(render_metrics=render)
    assert (await open_metrics.client.get("/metrics")).status_code == 200


async def test_metrics_whose_token_variable_is_unset_refuse_every_scrape(make, monkeypatch):
    monkeypatch.delenv("UNIT_METRICS_TOKEN", raising=False)
    h = make(config(metrics_token_env="UNIT_METRICS_TOKEN"), render_metrics=render)
    for headers in ({}, bearer(""), {"authorization": "Bearer"}):
        assert (await h.client.get("/metrics", headers=headers)).status_code == 401


async def test_the_replicas_ledger_report_wants_an_admin_key(make):
    from gateway.replica.http_api import build_app

    h = make()
    report = {"abc123": {"alive": 1.0, "buffer_depth": 2.0, "spool_depth": 0.0}}

    async def ledgers() -> dict[str, dict[str, float]]:
        return report

    app = build_app(h.service, replica_ledgers=ledgers)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        for headers, status in (({}, 401), (bearer(APP_KEY), 403)):
            resp = await c.get("/costgate/replicas", headers=headers)
            assert resp.status_code == status and "abc123" not in resp.text
        resp = await c.get("/costgate/replicas", headers=bearer(ADMIN_KEY))
        assert resp.status_code == 200 and resp.json() == {"replicas": report}


async def test_best_of_above_a_keys_max_n_is_a_400_and_n_above_128_for_any_key(make):
    h = make()
    resp = await h.client.post(
        "/v1/completions", headers=bearer(SCOPED_KEY),
        json={"model": "gpt-4o-mini", "prompt": "Once", "n": 1, "best_of": 3, "max_tokens": 5})
    assert resp.status_code == 400
    assert resp.json()["error"]["param"] == "best_of"
    assert resp.json()["error"]["code"] == "above_key_limit"
    for path, body in (
        ("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": MESSAGES, "n": 129}),
        ("/v1/completions", {"model": "gpt-4o-mini", "prompt": "Once", "best_of": 129}),
    ):
        resp = await h.client.post(path, headers=bearer(APP_KEY), json=body)
        assert resp.status_code == 400, resp.text
        assert resp.json()["error"]["param"] in ("n", "best_of")
    assert h.seen == []
    assert [r.http_status for r in h.records] == [400, 400, 400]


async def test_a_background_responses_request_is_refused_before_the_upstream(make):
    h = make()
    resp = await h.client.post(
        "/v1/responses", headers=bearer(APP_KEY),
        json={"model": "gpt-4o-mini", "input": "Write a novel", "background": True})
    assert resp.status_code == 400
    assert resp.json()["error"]["param"] == "background"
    assert resp.json()["error"]["code"] == "unpriced_feature"
    assert h.seen == []
    [record] = h.records
    assert record.http_status == 400 and record.actual_cost_usd is None


async def test_a_message_of_a_million_characters_is_answered_never_a_500(make):
    h = make()
    text = "a" * 1_000_000  # bpe-openai alone raises on it
    resp = await h.chat({"model": "gpt-4o", "messages": [{"role": "user", "content": text}],
                         "max_tokens": 5}, **bearer(APP_KEY))
    assert resp.status_code in (200, 400), resp.text
    assert len(h.records) == 1


async def test_metrics_beyond_loopback_without_a_token_configured_refuse_every_scrape(make):
    h = make(config(host="0.0.0.0"), render_metrics=render)
    for headers in ({}, bearer(""), bearer(ADMIN_KEY), bearer(APP_KEY)):
        resp = await h.client.get("/metrics", headers=headers)
        assert resp.status_code == 401 and "costgate_up" not in resp.text
    loopback = make(config(host="127.0.0.1"), render_metrics=render)
    assert (await loopback.client.get("/metrics")).status_code == 200


async def test_the_openapi_schema_wants_a_gateway_key(make):
    h = make()
    for headers in ({}, bearer("wrong")):
        resp = await h.client.get("/openapi.json", headers=headers)
        assert resp.status_code == 401 and "paths" not in resp.text
    resp = await h.client.get("/openapi.json", headers=bearer(APP_KEY))
    assert resp.status_code == 200 and "/v1/chat/completions" in resp.json()["paths"]
    keyless = make(config(require_keys=False))
    assert (await keyless.client.get("/openapi.json")).status_code == 401


async def test_an_admin_key_cannot_call_models(make):
    h = make()
    for path, body in (("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": MESSAGES}),
                       ("/v1/messages", {"model": "gpt-4o-mini", "max_tokens": 20,
                                         "messages": MESSAGES})):  # fmt: skip
        resp = await h.client.post(path, json=body, headers=bearer(ADMIN_KEY))
        assert resp.status_code == 403, resp.text
        assert "admin" in resp.text
    # it still does its own work, and an app's key still calls models
    assert (await h.client.get("/costgate/routing", headers=bearer(ADMIN_KEY))).status_code == 200
    resp = await h.client.post("/v1/chat/completions", headers=bearer(APP_KEY),
                               json={"model": "gpt-4o-mini", "messages": MESSAGES})
    assert resp.status_code == 200
