"""Acceptance (issue 32): service tiers and web search fees through the deployed gateway
(Ray Serve, `costgate up`) on the sim, with the ledger in PostgreSQL. `flex` is priced at
the flex rates and `priority` at the priority rates, a web search call at its fee per call
(through Responses and Anthropic's Messages); the expected costs are the row's tokens at
the rates written out here, not the pricing module's. A tier or a search a model has no
price for is the client's 400 `unpriced_feature`, and leaves no upstream call."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import httpx
import openai
import pytest

from tests.fixtures.gateway import TIERED, TIERED_CLAUDE
from tests.gateway.replica.endpoints.test_openai_sdk_through_serve import ledger_row

pytestmark = pytest.mark.ray
Q = Decimal("1e-10")
M = Decimal(1_000_000)
MSG = [{"role": "user", "content": "Say something short."}]
FEE = Decimal("0.01")
# USD per 1M tokens: (input, cached input, output), as TIERED_PRICES says
RATES = {
    None: (Decimal("0.15"), Decimal("0.075"), Decimal("0.6")),
    "flex": (Decimal("0.075"), Decimal("0.0375"), Decimal("0.3")),
    "priority": (Decimal("0.25"), Decimal("0.125"), Decimal("1")),
}


def sdk(gateway: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url + "/v1", api_key=gateway.api_key,
                         max_retries=0, timeout=60)


def expected(row: dict[str, Any], tier: str | None, searches: int = 0) -> Decimal:
    inp, cached_rate, out = RATES[tier]
    cached = row["cached_prompt_tokens"] or 0
    cost = ((row["prompt_tokens"] - cached) * inp + cached * cached_rate
            + row["completion_tokens"] * out) / M + searches * FEE
    return cost.quantize(Q, ROUND_HALF_EVEN)


@pytest.mark.parametrize("tier", ["flex", "priority"])
def test_a_chat_at_a_tier_is_priced_at_that_tiers_rates(gateway, tier):
    raw = sdk(gateway).chat.completions.with_raw_response.create(
        model=TIERED, messages=MSG, max_tokens=20, service_tier=tier)
    reply = raw.parse()
    assert reply.service_tier == tier  # the provider's answer passes through
    row = ledger_row(gateway, raw.headers["x-costgate-request-id"])
    assert (row["status"], row["service_tier"], row["web_search_calls"]) == ("ok", tier, None)
    assert row["prompt_tokens"] == reply.usage.prompt_tokens
    assert row["actual_cost"] == row["list_cost_usd"] == expected(row, tier)
    assert row["actual_cost"] != expected(row, None)  # not the base price


def test_a_streamed_chat_at_priority_is_priced_at_priority(gateway):
    with sdk(gateway).chat.completions.with_streaming_response.create(
        model=TIERED, messages=MSG, max_tokens=20, stream=True, service_tier="priority",
        stream_options={"include_usage": True},
    ) as raw:
        request_id = raw.headers["x-costgate-request-id"]
        chunks = list(raw.parse())
    assert chunks[-1].usage is not None
    row = ledger_row(gateway, request_id)
    assert (row["status"], row["service_tier"]) == ("ok", "priority")
    assert row["actual_cost"] == expected(row, "priority")


def test_a_default_tier_is_priced_at_the_base_rates(gateway):
    raw = sdk(gateway).chat.completions.with_raw_response.create(
        model=TIERED, messages=MSG, max_tokens=20, service_tier="auto")
    row = ledger_row(gateway, raw.headers["x-costgate-request-id"])
    assert row["service_tier"] is None and row["actual_cost"] == expected(row, None)


def test_responses_web_search_calls_are_priced_per_call(gateway):
    raw = sdk(gateway).responses.with_raw_response.create(
        model=TIERED, input="What happened today?", max_output_tokens=30,
        tools=[{"type": "web_search_preview"}], max_tool_calls=2, service_tier="flex")
    reply = raw.parse()
    assert [o.type for o in reply.output].count("web_search_call") == 2
    row = ledger_row(gateway, raw.headers["x-costgate-request-id"])
    assert (row["endpoint"], row["service_tier"], row["web_search_calls"]) == (
        "responses", "flex", 2)
    assert row["tool_fee_cost"] == Decimal("0.02")  # 2 calls × $0.01
    assert row["actual_cost"] == row["list_cost_usd"] == expected(row, "flex", searches=2)


def test_a_streamed_response_with_web_search_is_priced_per_call(gateway):
    with sdk(gateway).responses.with_streaming_response.create(
        model=TIERED, input="news?", max_output_tokens=30, stream=True,
        tools=[{"type": "web_search_preview"}],
    ) as raw:
        request_id = raw.headers["x-costgate-request-id"]
        list(raw.parse())
    row = ledger_row(gateway, request_id)
    assert (row["web_search_calls"], row["tool_fee_cost"]) == (1, Decimal("0.01"))
    assert row["actual_cost"] == expected(row, None, searches=1)


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_web_search_requests_are_priced_per_call(gateway, stream):
    body = {"model": TIERED_CLAUDE, "max_tokens": 30, "messages": MSG, "stream": stream,
            "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]}
    headers = {"x-api-key": gateway.api_key, "anthropic-version": "2023-06-01"}
    reply = httpx.post(gateway.base_url + "/v1/messages", json=body, headers=headers,
                       timeout=60)
    assert reply.status_code == 200, reply.text
    if not stream:
        assert reply.json()["usage"]["server_tool_use"] == {"web_search_requests": 3}
    row = ledger_row(gateway, reply.headers["x-costgate-request-id"])
    assert (row["endpoint"], row["web_search_calls"]) == ("messages", 3)
    assert row["tool_fee_cost"] == Decimal("0.03")
    cached, written = row["cached_prompt_tokens"] or 0, row["cache_write_tokens"] or 0
    tokens = ((row["prompt_tokens"] - cached - written) * Decimal(1) + cached * Decimal("0.1")
              + written * Decimal("1.25") + row["completion_tokens"] * Decimal(5)) / M
    assert row["actual_cost"] == (tokens + 3 * FEE).quantize(Q, ROUND_HALF_EVEN)


@pytest.mark.parametrize(("endpoint", "body", "param"), [
    ("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": MSG, "max_tokens": 5,
                              "service_tier": "priority"}, "service_tier"),
    ("/v1/chat/completions", {"model": TIERED, "messages": MSG, "max_tokens": 5,
                              "service_tier": "scale"}, "service_tier"),
    ("/v1/responses", {"model": "gpt-4o-mini", "input": "x", "max_output_tokens": 5,
                       "tools": [{"type": "web_search_preview"}]}, "tools[0].type"),
    ("/v1/messages", {"model": "claude-haiku-4.5", "max_tokens": 5, "messages": MSG,
                      "tools": [{"type": "web_search_20250305", "name": "web_search"}]},
     "tools[0].type"),
])  # fmt: skip
def test_what_a_model_has_no_price_for_is_refused(gateway, endpoint, body, param):
    reply = httpx.post(gateway.base_url + endpoint, json=body, timeout=60,
                       headers={"authorization": f"Bearer {gateway.api_key}"})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    if endpoint == "/v1/messages":  # Anthropic's error shape: no code, the field named
        assert error["type"] == "invalid_request_error" and param in error["message"]
    else:
        assert (error["code"], error["param"]) == ("unpriced_feature", param)
