"""`POST /v1/messages` through the real GatewayService and HTTP app, upstreams answered by
an `httpx.MockTransport`: native to Anthropic, translated to OpenAI-compatible, Anthropic's
auth and error shapes, cross-format fallback, and one record with endpoint `messages`."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gateway.domain.endpoints import Endpoint
from gateway.domain.usage_record import RequestStatus, UsageSource
from tests.gateway.replica.test_service import (
    APP_KEY,
    SECRET,
    Chunks,
    completion,
    delta,
    sse,
)

BODY = {"model": "claude-sonnet-4.5", "max_tokens": 64,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "Say hello"}]}
PINNED = {"x-costgate-no-fallback": "true"}
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
           "content": [{"type": "text", "text": "Hello!"}], "stop_reason": "end_turn",
           "stop_sequence": None,
           "usage": {"input_tokens": 10, "cache_creation_input_tokens": 1100,
                     "cache_read_input_tokens": 0, "output_tokens": 3}}


def named(*events: dict[str, Any]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def parse_sse(text: str) -> list[dict[str, Any]]:
    out = []
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines:
            event = json.loads(lines["data"])
            assert lines.get("event") == event["type"]
            out.append(event)
    return out


async def post(h: Any, body: dict[str, Any], key: str | None = APP_KEY,
               **headers: str) -> httpx.Response:
    sent = {"anthropic-version": "2023-06-01", **headers}
    if key is not None:
        sent["x-api-key"] = key
    return await h.client.post("/v1/messages", json=body, headers=sent | {"authorization": ""})


async def test_native_to_anthropic_the_body_passes_as_it_came_and_is_recorded(harness_for):
    h = harness_for(lambda _: httpx.Response(200, json=MESSAGE))
    resp = await post(h, BODY, **{"anthropic-beta": "prompt-caching-2024-07-31"})
    assert resp.status_code == 200, resp.text
    assert resp.json() == {**MESSAGE, "model": "claude-sonnet-4.5"}
    [seen] = h.seen
    assert seen.url.path.endswith("/anthropic/v1/messages")
    assert seen.headers["x-api-key"] == SECRET and "authorization" not in seen.headers
    assert seen.headers["anthropic-beta"] == "prompt-caching-2024-07-31"
    sent = json.loads(seen.content)
    assert sent == {**BODY, "model": "claude-sonnet-4-5"}  # cache_control kept
    [record] = h.records
    assert record.endpoint is Endpoint.MESSAGES and record.status is RequestStatus.OK
    assert (record.prompt_tokens, record.cache_write_tokens, record.completion_tokens) == \
        (1110, 1100, 3)
    assert record.usage_source is UsageSource.PROVIDER
    assert str(record.request_id) == resp.headers["x-costgate-request-id"]


async def test_bearer_auth_works_too_and_no_key_is_anthropics_401_with_no_record(harness_for):
    h = harness_for(lambda _: httpx.Response(200, json=MESSAGE))
    ok = await h.client.post("/v1/messages", json=BODY,
                             headers={"authorization": f"Bearer {APP_KEY}"})
    assert ok.status_code == 200
    bad = await post(h, BODY, key="cg-wrong")
    assert bad.status_code == 401
    assert bad.json() == {"type": "error", "error": {
        "type": "authentication_error", "message": bad.json()["error"]["message"]}}
    assert len(h.records) == 1


@pytest.mark.parametrize(("body", "param"), [
    ({"model": "claude-sonnet-4.5", "messages": [{"role": "user", "content": "x"}]},
     "max_tokens"),
    ({"model": "claude-sonnet-4.5", "max_tokens": 5, "messages": []}, "messages"),
    ({"model": "claude-sonnet-4.5", "max_tokens": 5,
      "messages": [{"role": "system", "content": "x"}]}, "messages.0.role"),
    ({"model": "", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}, "model"),
])
async def test_a_bad_body_is_anthropics_400_and_one_client_error_record(harness_for, body, param):
    h = harness_for(lambda _: httpx.Response(200, json=MESSAGE))
    resp = await post(h, body)
    assert resp.status_code == 400
    assert resp.json()["type"] == "error"
    assert resp.json()["error"]["type"] == "invalid_request_error"
    assert param.split(".")[0] in resp.json()["error"]["message"]
    assert not h.seen
    [record] = h.records
    assert record.status is RequestStatus.CLIENT_ERROR and record.endpoint is Endpoint.MESSAGES


async def test_an_unknown_model_is_a_404_not_found_error(harness_for):
    h = harness_for(lambda _: httpx.Response(200, json=MESSAGE))
    resp = await post(h, {**BODY, "model": "no-such-model"})
    assert resp.status_code == 404
    assert resp.json()["error"]["type"] == "not_found_error"


async def test_to_an_openai_upstream_it_is_translated_both_ways(harness_for):
    h = harness_for(lambda _: httpx.Response(200, json=completion("Hi there")))
    resp = await post(h, {**BODY, "model": "gpt-4.1"})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["type"] == "message" and body["model"] == "gpt-4.1"
    assert body["content"] == [{"type": "text", "text": "Hi there"}]
    assert body["usage"]["input_tokens"] == 12 and body["usage"]["output_tokens"] == 3
    sent = json.loads(h.seen[0].content)
    assert h.seen[0].url.path.endswith("/chat/completions")
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
    [record] = h.records
    assert record.endpoint is Endpoint.MESSAGES and record.prompt_tokens == 12


async def test_what_the_translation_cannot_carry_is_a_400_naming_it(harness_for):
    h = harness_for(lambda _: httpx.Response(200, json=completion()))
    resp = await post(h, {**BODY, "model": "gpt-4.1", "top_k": 3})
    assert resp.status_code == 400
    assert "`top_k`" in resp.json()["error"]["message"]
    assert not h.seen
    assert h.records[0].status is RequestStatus.CLIENT_ERROR


async def test_a_failing_anthropic_falls_back_to_the_openai_relay_translated(harness_for):
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/messages"):
            return httpx.Response(529, json={"type": "error", "error": {
                "type": "overloaded_error", "message": "Overloaded"}})
        return httpx.Response(200, json=completion("From the relay"))

    h = harness_for(handler)
    resp = await post(h, BODY)
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-costgate-model"] == "relay-claude-sonnet-4.5"
    assert resp.json()["content"][0]["text"] == "From the relay"
    [record] = h.records
    assert record.fallback_path[0] == "claude-sonnet-4.5"
    assert record.fallback_path[-1] == "relay-claude-sonnet-4.5"


async def test_an_anthropic_4xx_passes_on_with_its_own_type(harness_for):
    error = {"type": "error", "error": {"type": "invalid_request_error",
                                        "message": "messages: roles must alternate"}}
    h = harness_for(lambda _: httpx.Response(400, json=error))
    resp = await post(h, BODY, **PINNED)
    assert resp.status_code == 400
    assert resp.json() == error
    assert len(h.seen) == 1


async def test_a_native_stream_passes_through_and_usage_is_the_last_cumulative(harness_for):
    events = named(
        {"type": "message_start", "message": {**MESSAGE, "content": [], "stop_reason": None,
                                              "usage": {**MESSAGE["usage"], "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text",
                                                                      "text": ""}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                                                              "text": "Hello"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 2}},
        {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 7}},
        {"type": "message_stop"},
    )
    h = harness_for(lambda _: httpx.Response(
        200, stream=Chunks(events), headers={"content-type": "text/event-stream"}))
    resp = await post(h, {**BODY, "stream": True})
    assert resp.status_code == 200
    got = parse_sse(resp.text)
    assert [e["type"] for e in got] == ["message_start", "content_block_start",
                                        "content_block_delta", "content_block_stop",
                                        "message_delta", "message_delta", "message_stop"]
    assert got[0]["message"]["model"] == "claude-sonnet-4.5"
    [record] = h.records
    assert record.status is RequestStatus.OK and record.stream
    assert (record.prompt_tokens, record.cache_write_tokens, record.completion_tokens) == \
        (1110, 1100, 7)


async def test_a_translated_stream_becomes_anthropic_events_with_the_usage(harness_for):
    chunks = sse(delta("Hel"), delta("lo"), delta(None, "stop"),
                 {"id": "c", "object": "chat.completion.chunk", "choices": [],
                  "usage": {"prompt_tokens": 9, "completion_tokens": 2}}, "[DONE]")
    h = harness_for(lambda _: httpx.Response(
        200, stream=Chunks(chunks), headers={"content-type": "text/event-stream"}))
    resp = await post(h, {**BODY, "model": "gpt-4.1", "stream": True})
    got = parse_sse(resp.text)
    assert got[0]["type"] == "message_start" and got[-1]["type"] == "message_stop"
    assert "".join(e["delta"]["text"] for e in got if e["type"] == "content_block_delta") == \
        "Hello"
    assert got[-2]["usage"]["input_tokens"] == 9 and got[-2]["usage"]["output_tokens"] == 2
    assert json.loads(h.seen[0].content)["stream_options"] == {"include_usage": True}
    [record] = h.records
    assert (record.prompt_tokens, record.completion_tokens) == (9, 2)


async def test_a_stream_cut_short_ends_with_an_error_event_and_an_upstream_error(harness_for):
    events = named({"type": "message_start", "message": {**MESSAGE, "content": []}},
                   {"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}})
    h = harness_for(lambda _: httpx.Response(
        200, stream=Chunks(events, fail=True), headers={"content-type": "text/event-stream"}))
    resp = await post(h, {**BODY, "stream": True}, **PINNED)
    got = parse_sse(resp.text)
    assert got[-1]["type"] == "error"
    [record] = h.records
    assert record.status is RequestStatus.UPSTREAM_ERROR
    assert record.prompt_tokens == 1110  # message_start's input usage still counts


async def test_to_a_gemini_upstream_it_goes_through_chat_to_generate_content(harness_for):
    answer = {"responseId": "r1", "modelVersion": "gemini-2.5-flash", "candidates": [{
        "index": 0, "finishReason": "STOP", "content": {"role": "model", "parts": [
            {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}]}}],
        "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 6,
                          "thoughtsTokenCount": 4}}
    h = harness_for(lambda _: httpx.Response(200, json=answer))
    tools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    resp = await post(h, {**BODY, "model": "gemini-2.5-flash", "tools": tools}, **PINNED)
    assert resp.status_code == 200, resp.text
    message = resp.json()
    assert message["stop_reason"] == "tool_use"
    assert message["content"][0]["type"] == "tool_use"
    assert message["content"][0]["input"] == {"city": "Oslo"}
    assert message["usage"]["output_tokens"] == 10
    assert h.seen[0].url.path.endswith("/models/gemini-2.5-flash:generateContent")
    sent = json.loads(h.seen[0].content)
    assert sent["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    [record] = h.records
    assert (record.prompt_tokens, record.completion_tokens, record.reasoning_tokens) == \
        (40, 10, 4)


async def test_an_embedding_model_does_not_serve_messages(harness_for):
    h = harness_for(lambda _: httpx.Response(200, json=MESSAGE))
    resp = await post(h, {**BODY, "model": "text-embedding-3-small"})
    assert resp.status_code == 400
    assert "/v1/messages" in resp.json()["error"]["message"]
    assert not h.seen


async def test_an_anthropic_error_event_mid_stream_reaches_the_client_as_sent(harness_for):
    events = named({"type": "message_start", "message": {**MESSAGE, "content": []}},
                   {"type": "error", "error": {"type": "overloaded_error",
                                               "message": "Overloaded"}})
    h = harness_for(lambda _: httpx.Response(
        200, stream=Chunks(events), headers={"content-type": "text/event-stream"}))
    resp = await post(h, {**BODY, "stream": True}, **PINNED)
    got = parse_sse(resp.text)
    assert got[-1] == {"type": "error", "error": {"type": "overloaded_error",
                                                  "message": "Overloaded"}}
    [record] = h.records
    assert record.status is RequestStatus.UPSTREAM_ERROR
    assert record.error_class == "upstream_5xx" and record.prompt_tokens == 1110
