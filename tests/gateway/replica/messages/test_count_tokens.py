"""`POST /v1/messages/count_tokens` through the request path (uvicorn, no Ray): the
official anthropic SDK's `messages.count_tokens` answers with an offline count that grows
with the prompt and the tools; a key is wanted; nothing goes upstream or to the ledger."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx

TOOLS = [{"name": "get_weather", "description": "Current weather for a city.",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]


def claude(gw: Any, key: str | None = None) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.base_url, api_key=key or gw.api_key, max_retries=0)


def test_the_anthropic_sdk_counts_tokens_through_the_gateway(gw, sim):
    before = sim.stats()["requests"]
    short = claude(gw).messages.count_tokens(
        model="claude-sonnet-4.5", messages=[{"role": "user", "content": "Hello"}])
    assert short.input_tokens > 0
    longer = claude(gw).messages.count_tokens(
        model="claude-sonnet-4.5", system="Be brief. " * 50, tools=TOOLS,
        messages=[{"role": "user", "content": "Hello " * 200}])
    assert longer.input_tokens > short.input_tokens + 200 + 100
    assert sim.stats()["requests"] == before  # answered here: no upstream call
    assert gw.records == []  # free: no ledger row


def test_count_tokens_wants_a_key_and_a_model_served(gw, sim):
    body = {"model": "claude-sonnet-4.5", "messages": [{"role": "user", "content": "Hi"}]}
    url = gw.base_url + "/v1/messages/count_tokens"
    no_key = httpx.post(url, json=body)
    assert no_key.status_code == 401
    assert no_key.json()["type"] == "error"
    assert no_key.json()["error"]["type"] == "authentication_error"
    unknown = httpx.post(url, json=body | {"model": "claude-nonesuch"}, headers=gw.headers)
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"
    bad = httpx.post(url, json={"model": "claude-sonnet-4.5"}, headers=gw.headers)
    assert bad.status_code == 400
    assert bad.json()["error"]["type"] == "invalid_request_error"
