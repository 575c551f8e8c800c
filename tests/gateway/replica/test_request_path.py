"""The request path against the real sim, served by uvicorn without Ray."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai
import pytest

from gateway.domain.usage_record import RequestStatus, UsageSource
from tests.fixtures.gateway import PROVIDER_SECRET

MESSAGES = [{"role": "user", "content": "Say something about the weather in Lisbon."}]


def sdk(gw: Any, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0, **kw)


def test_completion_answers_with_the_requested_name_and_names_the_model_used(gw, sim):
    raw = sdk(gw).chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    completion = raw.parse()
    assert completion.model == "auto"
    assert raw.headers["x-costgate-model"] in {"deepseek-v3.2", "gemini-2.5-flash",
                                               "claude-sonnet-4.5"}
    assert raw.headers["x-costgate-request-id"]
    (record,) = gw.wait_records(1)
    assert str(record.request_id) == raw.headers["x-costgate-request-id"]
    assert record.alias == "auto" and record.model == raw.headers["x-costgate-model"]
    assert record.usage_source is UsageSource.PROVIDER
    assert record.prompt_tokens == completion.usage.prompt_tokens
    assert record.completion_tokens == completion.usage.completion_tokens
    assert record.actual_cost_usd is not None and record.actual_cost_usd > 0
    assert record.baseline_model == "gpt-4.1" and record.baseline_cost_usd > 0


def test_openai_parameters_are_passed_through_to_the_upstream(gw, sim):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    sdk(gw).chat.completions.create(
        model="gpt-4.1",
        messages=MESSAGES,
        temperature=0.3,
        top_p=0.9,
        max_tokens=12,
        stop=["\n\n"],
        n=2,
        seed=7,
        user="u-42",
        logprobs=False,
        tools=tools,
        tool_choice="auto",
        response_format={"type": "text"},
        extra_body={"vendor_extra": "kept"},
        extra_headers={"x-request-timeout-seconds": "0"},
    )
    (seen,) = [r for r in sim.recent_requests() if r["model"] == "gpt-4.1"]
    params = seen["params"]
    for name in ("temperature", "top_p", "max_tokens", "n", "seed", "user", "logprobs",
                 "tool_choice", "vendor_extra"):
        assert name in params, name
    assert params["tools"] == "<list>" and params["response_format"] == "<dict>"
    assert "x-request-timeout-seconds" not in seen["header_names"]
    assert seen["bearer"] is True


def test_stream_hides_the_usage_chunk_unless_asked_and_records_usage(gw, sim):
    chunks = list(sdk(gw).chat.completions.create(model="gpt-4.1", messages=MESSAGES,
                                                  stream=True))
    assert chunks and all(c.usage is None for c in chunks)
    assert all(c.model == "gpt-4.1" for c in chunks)
    (record,) = gw.wait_records(1)
    assert record.stream and record.status is RequestStatus.OK
    assert record.usage_source is UsageSource.PROVIDER and record.completion_tokens > 0
    # the upstream was asked for usage although the client did not ask
    (seen,) = sim.recent_requests()
    assert seen["params"]["stream_options"] == "<dict>"

    chunks = list(sdk(gw).chat.completions.create(
        model="budget", messages=MESSAGES, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    assert all(c.model == "budget" for c in chunks)


def test_response_without_usage_is_estimated_and_marked(gw, sim):
    sim.set_fault("gpt-4.1", "no_usage")
    sdk(gw).chat.completions.create(model="gpt-4.1", messages=MESSAGES)
    list(sdk(gw).chat.completions.create(model="gpt-4.1", messages=MESSAGES, stream=True))
    records = gw.wait_records(2)
    assert [r.usage_source for r in records] == [UsageSource.ESTIMATED] * 2
    assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in records)
    assert all(r.actual_cost_usd > 0 for r in records)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        (json.dumps({"messages": MESSAGES}).encode(), "model"),
        (json.dumps({"model": "auto", "messages": []}).encode(), "messages"),
        (json.dumps({"model": "auto", "messages": [{"role": "robot"}]}).encode(),
         "messages[0].role"),
        (json.dumps({"model": "auto", "messages": MESSAGES, "stream": "yes"}).encode(), "stream"),
        (json.dumps({"model": "auto", "messages": MESSAGES, "max_tokens": -1}).encode(),
         "max_tokens"),
    ],
)
def test_bad_input_is_a_400_in_openai_shape(gw, body, param):
    r = httpx.post(gw.base_url + "/v1/chat/completions", content=body,
                   headers={"content-type": "application/json", **gw.headers})
    assert r.status_code == 400
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "invalid_request_error" and err["param"] == param


def test_body_over_the_limit_is_a_413(gw):
    big = {"model": "auto", "messages": [{"role": "user", "content": "x" * 70_000}]}
    r = httpx.post(gw.base_url + "/v1/chat/completions", json=big, headers=gw.headers)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "request_too_large"


def test_unknown_model_and_unknown_route_are_404s(gw):
    with pytest.raises(openai.NotFoundError):
        sdk(gw).chat.completions.create(model="gpt-9", messages=MESSAGES)
    r = httpx.get(gw.base_url + "/v2/nothing")
    assert r.status_code == 404 and r.json()["error"]["code"] == "invalid_route"


def test_upstream_503_reaches_the_client_as_502_and_never_leaks_the_provider_key(gw, sim):
    sim.set_fault("gpt-4o", "error_503")
    with pytest.raises(openai.InternalServerError) as info:
        sdk(gw).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert info.value.status_code == 502
    body = info.value.response.json()
    assert body["error"]["type"] == "upstream_error"
    assert PROVIDER_SECRET not in info.value.response.text
    (record,) = gw.wait_records(1)
    assert record.status is RequestStatus.UPSTREAM_ERROR and record.http_status == 502
    assert record.attempts >= 2  # retried before giving up
    assert record.actual_cost_usd is None and record.usage_source is UsageSource.MISSING


def test_upstream_400_is_not_retried_and_reaches_the_client_as_400(gw, sim):
    sim.set_fault("gpt-4o", "bad_request")
    with pytest.raises(openai.BadRequestError):
        sdk(gw).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert sim.stats()["requests"].get("gpt-4o") == 1
    (record,) = gw.wait_records(1)
    assert record.http_status == 400 and record.attempts == 1


def test_hang_times_out_as_504(gw, sim):
    sim.set_fault("gpt-4o", "hang")
    started = time.monotonic()
    r = httpx.post(gw.base_url + "/v1/chat/completions", timeout=60,
                   headers={"x-costgate-no-fallback": "true", **gw.headers},
                   json={"model": "gpt-4o", "messages": MESSAGES})
    assert r.status_code == 504, r.text
    assert r.json()["error"]["code"] == "timeout"
    assert time.monotonic() - started < 30


def test_failed_model_falls_back_along_its_chain(gw, sim):
    sim.set_fault("gpt-4.1-mini", "error_502")
    raw = sdk(gw).chat.completions.with_raw_response.create(model="gpt-4.1-mini",
                                                            messages=MESSAGES)
    assert raw.parse().model == "gpt-4.1-mini"  # as asked, although another model answered
    assert raw.headers["x-costgate-model"] == "gpt-4o-mini"
    (record,) = gw.wait_records(1)
    assert record.fallback_path[0] == "gpt-4.1-mini"
    assert record.fallback_path[-1] == "gpt-4o-mini" and record.model == "gpt-4o-mini"
    assert record.status is RequestStatus.OK


def test_client_disconnect_mid_stream_closes_the_upstream_and_records_partial_usage(gw, sim):
    sim.set_behaviour("gpt-4o", ttft_ms=5, per_token_ms=50, completion_tokens=[200, 200])
    with httpx.stream("POST", gw.base_url + "/v1/chat/completions", timeout=30,
                      headers=gw.headers,
                      json={"model": "gpt-4o", "messages": MESSAGES, "stream": True}) as r:
        lines = r.iter_lines()
        got = [next(lines) for _ in range(6)]
        assert any(line.startswith("data: ") for line in got)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and sim.stats()["streams_open"]:
        time.sleep(0.05)
    assert sim.stats()["streams_open"] == 0
    (record,) = gw.wait_records(1)
    assert record.status is RequestStatus.CANCELLED
    assert record.usage_source is UsageSource.ESTIMATED
    assert 0 < record.completion_tokens < 200
    assert record.actual_cost_usd > 0


def test_models_list_has_models_aliases_and_prices(gw):
    models = {m.id: m for m in sdk(gw).models.list()}
    assert {"auto", "fast", "balanced", "budget", "code", "gpt-4.1", "deepseek-v3.2"} <= set(models)
    pricing = models["relay-gpt-4.1"].model_extra["costgate_pricing"]
    assert pricing["list_usd"]["output"] == "8.0"
    assert pricing["billing_currency"] == "CNY" and pricing["actual"]["output"] == "8.0"
    assert pricing["actual_usd"]["output"].startswith("1.09589")
