"""Gemini's native API: the request (model in the URL, key in x-goog-api-key), chat
translated to generateContent and back, thinking tokens as reasoning, and its stream."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.domain.config import Provider
from gateway.domain.pricing import TokenUsage
from gateway.providers.adapter import MalformedReply
from gateway.providers.gemini import GeminiAdapter, GeminiChatStream
from gateway.providers.gemini_translate import chat_to_gemini, usage_from_gemini
from gateway.providers.registry import adapter_for
from gateway.providers.translation import Untranslatable

PROVIDER = Provider(name="google", kind="gemini", base_url="http://127.0.0.1:9/v1beta",
                    api_key_env="GEMINI_KEY")
ADAPTER = GeminiAdapter()
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                         "parameters": {"type": "object"}}}
META = {"promptTokenCount": 1200, "candidatesTokenCount": 30, "thoughtsTokenCount": 70,
        "cachedContentTokenCount": 1024, "totalTokenCount": 1300}


def test_the_registry_and_the_request():
    assert isinstance(adapter_for(PROVIDER), GeminiAdapter)
    body = {"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": "hi"}]}
    plain = ADAPTER.chat_request(PROVIDER, body, "g-key")
    assert plain.url == "http://127.0.0.1:9/v1beta/models/gemini-2.5-flash:generateContent"
    assert plain.headers["x-goog-api-key"] == "g-key" and "authorization" not in plain.headers
    streamed = ADAPTER.chat_request(PROVIDER, {**body, "stream": True}, None)
    assert streamed.url.endswith("/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
    assert "x-goog-api-key" not in streamed.headers
    assert "model" not in json.loads(plain.content)


def test_a_chat_body_becomes_generate_content():
    body = {"model": "m", "max_tokens": 64, "temperature": 0.3, "top_p": 0.8, "stop": ["X"],
            "seed": 7, "tools": [TOOL], "tool_choice": "required",
            "response_format": {"type": "json_schema", "json_schema": {"schema": {
                "type": "object"}}},
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [
                    {"type": "text", "text": "Weather?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
            ]}
    out = chat_to_gemini(body)
    assert out["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert out["contents"] == [
        {"role": "user", "parts": [{"text": "Weather?"},
                                   {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]},
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather",
                                                      "args": {"city": "Paris"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather",
                                                         "response": {"result": "18C"}}}]},
    ]
    assert out["generationConfig"] == {
        "maxOutputTokens": 64, "temperature": 0.3, "topP": 0.8, "seed": 7,
        "stopSequences": ["X"], "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object"}}
    assert out["tools"] == [{"functionDeclarations": [{
        "name": "get_weather", "description": "Weather.", "parameters": {"type": "object"}}]}]
    assert out["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}


@pytest.mark.parametrize(("body", "named"), [
    ({"logprobs": True}, "`logprobs`"),
    ({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://x.org/a.png"}}]}]}, "image by URL"),
    ({"messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]}, "tool result"),
    ({"response_format": {"type": "grammar"}}, "response_format"),
])
def test_what_gemini_cannot_carry_is_a_400(body, named):
    full = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **body}
    with pytest.raises(Untranslatable) as caught:
        chat_to_gemini(full)
    assert named in caught.value.message


def test_usage_thinking_is_reasoning_inside_completion_and_cache_inside_prompt():
    assert usage_from_gemini(META) == TokenUsage(
        prompt_tokens=1200, cached_prompt_tokens=1024, completion_tokens=100,
        reasoning_tokens=70)
    assert usage_from_gemini({"candidatesTokenCount": 3}) is None


def test_an_answer_becomes_a_completion_with_made_up_call_ids():
    answer = {"responseId": "r1", "modelVersion": "gemini-2.5-flash", "usageMetadata": META,
              "candidates": [{"index": 0, "finishReason": "STOP", "content": {
                  "role": "model", "parts": [
                      {"text": "thinking...", "thought": True},
                      {"text": "Calling."},
                      {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}}]}}]}
    reply = ADAPTER.parse_chat(json.dumps(answer).encode())
    choice = reply.body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Calling."
    assert choice["message"]["tool_calls"] == [{"id": "call_r1_0_0", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}}]
    assert reply.usage is not None and reply.usage.reasoning_tokens == 70
    assert reply.body["usage"]["completion_tokens_details"]["reasoning_tokens"] == 70


@pytest.mark.parametrize("content", [b"x", b'{"candidates": []}',
                                     b'{"error": {"status": "INTERNAL"}}'])
def test_a_broken_answer_is_malformed(content):
    with pytest.raises(MalformedReply):
        ADAPTER.parse_chat(content)


def piece(parts: list[dict[str, Any]], finish: str | None = None,
          meta: dict[str, Any] | None = None) -> bytes:
    candidate: dict[str, Any] = {"index": 0, "content": {"role": "model", "parts": parts}}
    if finish:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {"candidates": [candidate], "responseId": "r2",
                            "modelVersion": "gemini-2.5-flash"}
    if meta:
        body["usageMetadata"] = meta
    return json.dumps(body).encode()


def test_the_stream_as_chat_chunks_ends_at_the_finish_with_the_usage():
    parser = GeminiChatStream()
    first = parser.feed(piece([{"text": "Hel"}], meta={"promptTokenCount": 1200}))
    assert first[0]["choices"][0]["delta"] == {"role": "assistant", "content": "Hel"}
    assert not parser.done
    parser.feed(piece([{"text": "lo"}]))
    last = parser.feed(piece([{"functionCall": {"name": "f", "args": {"a": 1}}}], "STOP", META))
    assert last[0]["choices"][0]["delta"]["tool_calls"] == [{"index": 0, "id": "call_r2_0_0",
        "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}]
    assert last[0]["choices"][0]["finish_reason"] == "tool_calls"
    assert last[1]["choices"] == [] and last[1]["usage"]["prompt_tokens"] == 1200
    assert parser.done and parser.finished
    assert parser.usage is not None and parser.usage.completion_tokens == 100
    assert parser.text() == 'Hello{"a":1}'


def test_google_errors_are_read():
    body = {"error": {"code": 400, "message": "bad field", "status": "INVALID_ARGUMENT"}}
    assert ADAPTER.error_body(json.dumps(body).encode()) == {"error": {
        "message": "bad field", "type": "invalid_request_error", "param": None,
        "code": "INVALID_ARGUMENT"}}
    assert ADAPTER.error_body(b"nope") is None


def test_responses_go_through_chat_to_generate_content_and_back():
    from gateway.domain.endpoints import Endpoint

    assert Endpoint.RESPONSES in ADAPTER.endpoints
    wire = ADAPTER.endpoint_request(PROVIDER, Endpoint.RESPONSES, {
        "model": "gemini-2.5-flash", "input": "Hi", "instructions": "Brief.",
        "max_output_tokens": 20, "stream": True}, "g-key")
    assert wire.url.endswith("/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
    sent = json.loads(wire.content)
    assert sent["systemInstruction"] == {"parts": [{"text": "Brief."}]}
    assert sent["generationConfig"]["maxOutputTokens"] == 20
    answer = {"responseId": "r9", "modelVersion": "gemini-2.5-flash", "usageMetadata": META,
              "candidates": [{"index": 0, "finishReason": "STOP",
                              "content": {"role": "model", "parts": [{"text": "Hello"}]}}]}
    reply = ADAPTER.parse_endpoint(Endpoint.RESPONSES, json.dumps(answer).encode())
    assert reply.body["object"] == "response" and reply.body["status"] == "completed"
    assert reply.body["output"][0]["content"][0]["text"] == "Hello"
    assert reply.body["usage"]["output_tokens_details"]["reasoning_tokens"] == 70
    parser = ADAPTER.endpoint_stream_parser(Endpoint.RESPONSES)
    events = parser.feed(piece([{"text": "Hi"}], "STOP", META))
    assert events[0]["type"] == "response.created"
    assert events[-1]["type"] == "response.completed" and parser.done
    assert events[-1]["response"]["usage"]["input_tokens"] == 1200


def test_the_end_users_fields_are_no_generation_parameter():
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}],
            "user": "u-1", "safety_identifier": "u-1"}
    assert "user" not in json.dumps(chat_to_gemini(body)).replace('"role": "user"', "")
