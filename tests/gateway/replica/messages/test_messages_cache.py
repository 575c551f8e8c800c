"""The response cache on `POST /v1/messages`, through the plain gateway (the real
GatewayService and HTTP app under uvicorn, its in-replica LRU) and the sim: native to
Anthropic and translated to an OpenAI-compatible upstream, plain and streamed. A hit sends
nothing upstream and is a $0 row with the miss's list price; the key rules are chat's."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from gateway.domain.endpoints import Endpoint

ON = {"x-costgate-cache": "on"}
SIM_MODEL = {"claude-haiku-4.5": "claude-haiku-4-5", "gpt-4o": "gpt-4o"}


def _body(model: str, **extra: Any) -> dict[str, Any]:
    prompt = f"tell me about {uuid.uuid4().hex}"
    return {"model": model, "max_tokens": 40,
            "messages": [{"role": "user", "content": prompt}]} | extra


def _send(gw: Any, body: dict[str, Any], **headers: str) -> tuple[httpx.Response, bytes]:
    sent = {"x-api-key": gw.api_key, "anthropic-version": "2023-06-01"} | headers
    with httpx.Client(base_url=gw.base_url, timeout=30) as client, client.stream(
            "POST", "/v1/messages", json=body, headers=sent) as resp:
        chunks = list(resp.iter_raw())
    return resp, b"".join(chunks)


def _sim_requests(sim: Any, model: str) -> int:
    return int(sim.stats()["requests"].get(SIM_MODEL[model], 0))


def _events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in raw.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


@pytest.mark.parametrize("model", ["claude-haiku-4.5", "gpt-4o"])  # native, translated
def test_a_plain_repeat_is_a_hit_with_no_upstream_call_and_a_zero_dollar_row(
        gw: Any, sim: Any, model: str) -> None:
    body = _body(model)
    first, sent = _send(gw, body, **ON)
    assert first.status_code == 200, sent
    assert first.headers["x-costgate-cache"] == "miss"
    calls = _sim_requests(sim, model)
    second, again = _send(gw, body, **ON)
    assert second.status_code == 200 and second.headers["x-costgate-cache"] == "hit"
    assert again == sent and json.loads(again)["model"] == model
    assert _sim_requests(sim, model) == calls  # the upstream saw nothing
    miss, hit = gw.wait_records(2)
    assert hit.endpoint is Endpoint.MESSAGES and hit.cache_hit and not miss.cache_hit
    assert hit.attempts == 0 and hit.actual_cost_usd == 0
    assert hit.list_cost_usd == miss.list_cost_usd and miss.list_cost_usd > 0
    assert (hit.prompt_tokens, hit.completion_tokens) == (miss.prompt_tokens,
                                                           miss.completion_tokens)
    assert str(hit.request_id) == second.headers["x-costgate-request-id"]


@pytest.mark.parametrize("model", ["claude-haiku-4.5", "gpt-4o"])
def test_a_streamed_repeat_is_replayed_event_by_event(gw: Any, sim: Any, model: str) -> None:
    body = _body(model, stream=True)
    first, raw = _send(gw, body, **ON)
    assert first.status_code == 200 and first.headers["x-costgate-cache"] == "miss"
    events = _events(raw)
    assert [name for name, _ in events][-1] == "message_stop" and len(events) > 4
    calls = _sim_requests(sim, model)
    second, replayed = _send(gw, body, **ON)
    assert second.headers["x-costgate-cache"] == "hit"
    assert second.headers["content-type"].startswith("text/event-stream")
    assert _events(replayed) == events  # as many events, named, in order, usage included
    assert _events(replayed)[0][1]["message"]["model"] == model
    assert _sim_requests(sim, model) == calls
    miss, hit = gw.wait_records(2)
    assert hit.cache_hit and hit.stream and hit.actual_cost_usd == 0
    assert hit.list_cost_usd == miss.list_cost_usd > 0
    # the stream's entry answers the same request made plain: the message assembled
    plain, content = _send(gw, body | {"stream": False}, **ON)
    assert plain.headers["x-costgate-cache"] == "hit"
    assert plain.headers["content-type"].startswith("application/json")
    message = json.loads(content)
    streamed = "".join(e["delta"].get("text", "") for name, e in events
                       if name == "content_block_delta")
    assert message["type"] == "message" and message["model"] == model
    assert message["content"][0]["text"] == streamed and streamed
    assert _sim_requests(sim, model) == calls


def test_messages_follow_the_chat_key_rules(gw: Any, sim: Any) -> None:
    model = "claude-haiku-4.5"
    body = _body(model)
    assert _send(gw, body)[0].headers["x-costgate-cache"] == "off"  # not opted in
    assert _send(gw, body, **ON)[0].headers["x-costgate-cache"] == "miss"
    assert _send(gw, body, **ON)[0].headers["x-costgate-cache"] == "hit"
    # no-cache skips the lookup; other parameters, or another beta, are other entries
    bypass = _send(gw, body, **ON, **{"cache-control": "no-cache"})[0]
    assert bypass.headers["x-costgate-cache"] == "bypass"
    assert _send(gw, body | {"temperature": 0.3}, **ON)[0].headers["x-costgate-cache"] == "miss"
    beta = {"anthropic-beta": "prompt-caching-2024-07-31"}
    assert _send(gw, body, **ON, **beta)[0].headers["x-costgate-cache"] == "miss"
    # an upstream error is not stored: the repeat goes upstream again
    failing = _body(model)
    sim.set_fault(SIM_MODEL[model], "error_503")
    assert _send(gw, failing, **ON, **{"x-costgate-no-fallback": "1"})[0].status_code >= 500
    sim.clear_faults()
    again = _send(gw, failing, **ON, **{"x-costgate-no-fallback": "1"})[0]
    assert again.status_code == 200 and again.headers["x-costgate-cache"] == "miss"
