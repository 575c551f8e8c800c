"""Embeddings, legacy completions and Responses through the request path (uvicorn, no
Ray) to the real sim, with the official openai SDK: each parses, is routed, falls back,
and leaves one record with its endpoint and its token classes priced."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import openai
import pytest

from gateway.domain.endpoints import Endpoint
from gateway.domain.usage_record import RequestStatus, UsageSource


def sdk(gw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0)


def test_embeddings_are_recorded_with_their_input_tokens_priced_at_the_input_rate(gw, sim):
    raw = sdk(gw).embeddings.with_raw_response.create(
        model="text-embedding-3-small", input=["a ledger", "of every call"], dimensions=32
    )
    reply = raw.parse()
    assert [len(d.embedding) for d in reply.data] == [32, 32]
    assert reply.model == "text-embedding-3-small"
    (record,) = gw.wait_records(1)
    assert str(record.request_id) == raw.headers["x-costgate-request-id"]
    assert record.endpoint is Endpoint.EMBEDDINGS and record.status is RequestStatus.OK
    assert record.prompt_tokens == reply.usage.prompt_tokens and record.completion_tokens == 0
    assert record.list_cost_usd == Decimal("0.02") * record.prompt_tokens / 1_000_000
    (seen,) = sim.recent_requests()
    assert seen["params"]["dimensions"] == 32  # passed through


def test_token_array_inputs_pass_through(gw, sim):
    r = httpx.post(gw.base_url + "/v1/embeddings", headers=gw.headers,
                   json={"model": "text-embedding-3-small", "input": [[1, 2, 3]],
                         "encoding_format": "float"})
    assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == 3
    assert gw.wait_records(1)[0].prompt_tokens == 3


def test_a_legacy_completion_is_recorded_as_completions(gw, sim):
    reply = sdk(gw).completions.create(model="gpt-4o-mini", prompt="Once upon", max_tokens=8)
    assert reply.model == "gpt-4o-mini" and reply.choices[0].text
    (record,) = gw.wait_records(1)
    assert record.endpoint is Endpoint.COMPLETIONS and not record.stream
    assert (record.prompt_tokens, record.completion_tokens) == (
        reply.usage.prompt_tokens, reply.usage.completion_tokens)
    assert record.actual_cost_usd is not None and record.actual_cost_usd > 0


def test_a_streamed_legacy_completion_hides_usage_unless_asked_and_records_it(gw, sim):
    chunks = list(sdk(gw).completions.create(model="gpt-4o-mini", prompt="Hi", stream=True))
    assert chunks and all(c.usage is None for c in chunks)
    (record,) = gw.wait_records(1)
    assert record.stream and record.status is RequestStatus.OK
    assert record.usage_source is UsageSource.PROVIDER and record.completion_tokens > 0
    (seen,) = sim.recent_requests()
    assert seen["params"]["stream_options"] == "<dict>"  # usage asked of the upstream


def test_a_response_on_an_alias_answers_with_the_alias_and_records_its_usage(gw, sim):
    raw = sdk(gw).responses.with_raw_response.create(
        model="budget", input="Hello there", extra_body={"vendor_extra": "kept"})
    reply = raw.parse()
    (seen,) = sim.recent_requests()
    assert seen["params"]["vendor_extra"] == "kept"  # unknown fields pass through
    assert reply.model == "budget" and reply.output_text
    (record,) = gw.wait_records(1)
    assert record.endpoint is Endpoint.RESPONSES and record.alias == "budget"
    assert record.model == raw.headers["x-costgate-model"]
    assert (record.prompt_tokens, record.completion_tokens) == (
        reply.usage.input_tokens, reply.usage.output_tokens)
    assert record.cached_prompt_tokens == reply.usage.input_tokens_details.cached_tokens


def test_a_streamed_response_keeps_openai_events_and_records_the_completed_usage(gw, sim):
    events = list(sdk(gw).responses.create(model="gpt-4.1", input="Hello", stream=True))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert events[-1].response.model == "gpt-4.1"
    usage = events[-1].response.usage
    (record,) = gw.wait_records(1)
    assert record.stream and record.status is RequestStatus.OK
    assert record.endpoint is Endpoint.RESPONSES and record.ttft_ms is not None
    assert (record.prompt_tokens, record.completion_tokens, record.reasoning_tokens) == (
        usage.input_tokens, usage.output_tokens, usage.output_tokens_details.reasoning_tokens)


def test_a_failing_model_falls_back_on_the_responses_route(gw, sim):
    sim.set_fault("gpt-4.1-mini", "error_503")
    raw = sdk(gw).responses.with_raw_response.create(model="gpt-4.1-mini", input="Hello")
    assert raw.headers["x-costgate-model"] == "gpt-4o-mini"
    assert raw.parse().model == "gpt-4.1-mini"  # the name the app asked for
    (record,) = gw.wait_records(1)
    assert record.fallback_path[0] == "gpt-4.1-mini" and record.attempts >= 2
    assert record.fallback_path[-1] == "gpt-4o-mini" and record.status is RequestStatus.OK


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/v1/embeddings", {"model": "gpt-4.1", "input": "x"}),
        ("/v1/chat/completions",
         {"model": "text-embedding-3-small", "messages": [{"role": "user", "content": "x"}]}),
        ("/v1/responses", {"model": "text-embedding-3-small", "input": "x"}),
    ],
)
def test_a_model_that_does_not_serve_the_route_is_a_400_naming_it(gw, sim, route, body):
    r = httpx.post(gw.base_url + route, headers=gw.headers, json=body)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == "unsupported_endpoint" and route in error["message"]
    (record,) = gw.wait_records(1)
    assert record.status is RequestStatus.CLIENT_ERROR and record.attempts == 0
    assert sim.recent_requests() == []


@pytest.mark.parametrize(
    ("route", "body", "param"),
    [
        ("/v1/embeddings", {"model": "text-embedding-3-small"}, "input"),
        ("/v1/embeddings", {"model": "text-embedding-3-small", "input": [1, "a"]}, "input[0]"),
        ("/v1/embeddings",
         {"model": "text-embedding-3-small", "input": "x", "encoding_format": "hex"},
         "encoding_format"),
        ("/v1/completions", {"model": "gpt-4.1"}, "prompt"),
        ("/v1/completions", {"model": "gpt-4.1", "prompt": "x", "stream": "yes"}, "stream"),
        ("/v1/responses", {"model": "gpt-4.1", "input": 5}, "input"),
        ("/v1/responses", {"model": "gpt-4.1", "input": "x", "max_output_tokens": 0},
         "max_output_tokens"),
    ],
)
def test_bad_bodies_are_400s_with_the_param(gw, sim, route, body, param):
    r = httpx.post(gw.base_url + route, headers=gw.headers, json=body)
    assert r.status_code == 400 and r.json()["error"]["param"] == param


def test_each_route_needs_a_key(gw, sim):
    for route in ("/v1/embeddings", "/v1/completions", "/v1/responses"):
        assert httpx.post(gw.base_url + route, json={"model": "gpt-4.1"}).status_code == 401
    assert gw.wait_records(1, timeout=0.2) == []


def test_models_say_which_endpoints_each_serves(gw, sim):
    data = {m["id"]: m for m in httpx.get(gw.base_url + "/v1/models",
                                          headers=gw.headers).json()["data"]}
    assert data["text-embedding-3-small"]["costgate_endpoints"] == ["embeddings"]
    assert {"chat.completions", "completions", "responses"} <= set(
        data["gpt-4.1"]["costgate_endpoints"])
    assert "embeddings" not in data["budget"]["costgate_endpoints"]


@pytest.mark.parametrize("route", ["/v1/embeddings", "/v1/completions", "/v1/responses"])
@pytest.mark.parametrize(
    "content",
    [b"", b"null", b"[]", b"42", b'"text"', b"{nope", b'{"model": NaN}',
     b'{"model": 5}', b'{"model": "gpt-4.1\\u0000"}', b"[" * 100 + b"]" * 100,
     b'{"model": "gpt-4.1", "input": {"a": 1}, "prompt": {"a": 1}}',
     b'{"model": "gpt-4.1", "input": [[1, 2], "x"], "prompt": [true]}',
     b'{"model": "nope", "input": "x", "prompt": "x"}'],
)
def test_hostile_bodies_get_a_4xx_never_a_5xx(gw, sim, route, content):
    r = httpx.post(gw.base_url + route, headers=gw.headers | {"content-type": "application/json"},
                   content=content)
    assert 400 <= r.status_code < 500, r.text
    assert "error" in r.json()


def test_embeddings_without_reported_usage_are_estimated_from_the_input(gw, sim):
    sim.set_fault("text-embedding-3-small", "no_usage")
    sdk(gw).embeddings.create(model="text-embedding-3-small", input="count these words")
    (record,) = gw.wait_records(1)
    assert record.usage_source is UsageSource.ESTIMATED
    assert record.prompt_tokens > 0 and record.completion_tokens == 0
    assert record.list_cost_usd is not None and record.list_cost_usd > 0


def test_a_streamed_response_the_client_abandons_leaves_one_cancelled_row(gw, sim):
    sim.set_behaviour("gpt-4.1", ttft_ms=5, per_token_ms=40, completion_tokens=[200, 200])
    body = {"model": "gpt-4.1", "input": "Tell me a long story.", "stream": True}
    with httpx.stream("POST", gw.base_url + "/v1/responses", headers=gw.headers, json=body,
                      timeout=30) as r:
        for line in r.iter_lines():
            if "response.output_text.delta" in line:
                break  # the client walks away mid-answer
    (record,) = gw.wait_records(1)
    assert record.status is RequestStatus.CANCELLED and record.endpoint is Endpoint.RESPONSES
    assert record.usage_source is UsageSource.ESTIMATED and record.prompt_tokens > 0
    assert gw.wait_records(2, timeout=1) == [record]  # exactly one row


def test_live_weights_route_responses_calls(gw, sim):
    service = gw.service
    before = service.routing
    live = before.model_copy(update={"aliases": {**before.aliases,
                                                 "budget": {"gpt-4o-mini": Decimal(1),
                                                            "deepseek-v3.2": Decimal(0)}},
                                     "version": before.version + 1})
    service.apply_user_config(live.to_user_config())
    try:
        for _ in range(5):
            raw = sdk(gw).responses.with_raw_response.create(model="budget", input="Hi")
            assert raw.headers["x-costgate-model"] == "gpt-4o-mini"
        assert {r.model for r in gw.wait_records(5)} == {"gpt-4o-mini"}
    finally:
        service.apply_user_config(before.to_user_config())
