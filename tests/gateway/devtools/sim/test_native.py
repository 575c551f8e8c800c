"""The simulator as a native Anthropic and Gemini upstream, reached like one: the official
anthropic SDK for Messages (plain, streamed, tools, prompt caching), httpx for Gemini,
and the fault knobs in each format's own error shape."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest

from gateway.devtools.sim.native.requests import parse_anthropic, parse_gemini
from gateway.devtools.sim.request import InvalidRequest

TOOLS = [{"name": "get_weather", "description": "Weather for a city.",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}]
LONG_SYSTEM = "You are a meticulous analyst. " * 300  # well over 1024 tokens


@pytest.fixture
def claude(sim):
    return anthropic.Anthropic(base_url=sim.base_url + "/anthropic", api_key="sk-ant-sim",
                               max_retries=0, timeout=10)


def test_a_plain_message_parses_in_the_sdk(claude, sim):
    message = claude.messages.create(model="claude-sonnet-4-5", max_tokens=20,
                                     messages=[{"role": "user", "content": "Hello"}])
    assert message.type == "message" and message.role == "assistant"
    assert message.content[0].type == "text" and message.content[0].text
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert message.usage.input_tokens > 0 and 1 <= message.usage.output_tokens <= 20
    assert sim.stats()["with_bearer"] == {"claude-sonnet-4-5": 1}  # the SDK's key seen
    raw = httpx.post(sim.base_url + "/v1/messages", headers={"x-api-key": "sk-ant-2"}, json={
        "model": "claude-haiku-4-5", "max_tokens": 3, "messages": [{"role": "user",
                                                                   "content": "x"}]})
    assert raw.status_code == 200 and sim.stats()["with_bearer"]["claude-haiku-4-5"] == 1


def test_a_stream_with_a_tool_call_and_usage_that_adds_up(claude):
    with claude.messages.stream(model="claude-sonnet-4-5", max_tokens=200, tools=TOOLS,
                                messages=[{"role": "user", "content": "Paris?"}]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and "message_stop" in kinds
    assert final.stop_reason == "tool_use"
    [call] = final.content
    assert call.type == "tool_use" and call.name == "get_weather"
    assert isinstance(call.input, dict) and "city" in call.input
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 1


def test_cache_control_writes_the_prefix_then_reads_it(claude):
    system = [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}]
    first = claude.messages.create(model="claude-sonnet-4-5", max_tokens=5, system=system,
                                   messages=[{"role": "user", "content": "One"}])
    second = claude.messages.create(model="claude-sonnet-4-5", max_tokens=5, system=system,
                                    messages=[{"role": "user", "content": "Two"}])
    written = first.usage.cache_creation_input_tokens
    assert written > 1024 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == written
    assert second.usage.cache_creation_input_tokens == 0
    assert second.usage.input_tokens < written


def test_no_cache_control_no_cache_tokens(claude):
    for _ in range(2):
        reply = claude.messages.create(model="claude-sonnet-4-5", max_tokens=5,
                                       system=LONG_SYSTEM,
                                       messages=[{"role": "user", "content": "Same"}])
        assert reply.usage.cache_read_input_tokens == 0
        assert reply.usage.cache_creation_input_tokens == 0


def test_faults_come_in_anthropics_error_shape(claude, sim):
    sim.set_fault("claude-sonnet-4-5", "rate_limit", retry_after_s=2)
    with pytest.raises(anthropic.RateLimitError) as caught:
        claude.messages.create(model="claude-sonnet-4-5", max_tokens=5,
                               messages=[{"role": "user", "content": "x"}])
    assert caught.value.body == {"type": "error", "error": {
        "type": "rate_limit_error", "message": "Rate limit reached for claude-sonnet-4-5."}}
    assert caught.value.response.headers["retry-after"] == "2"
    sim.clear_faults()
    sim.set_fault("claude-sonnet-4-5", "error_503")
    with pytest.raises(anthropic.InternalServerError):
        claude.messages.create(model="claude-sonnet-4-5", max_tokens=5,
                               messages=[{"role": "user", "content": "x"}])


def test_a_malformed_stream_is_broken_json(sim):
    sim.set_fault("claude-haiku-4-5", "malformed")
    body = {"model": "claude-haiku-4-5", "max_tokens": 5, "stream": True,
            "messages": [{"role": "user", "content": "x"}]}
    text = httpx.post(sim.base_url + "/v1/messages", json=body).text
    last = [line for line in text.splitlines() if line.startswith("data: ")][-1]
    with pytest.raises(ValueError):
        json.loads(last[6:])


def gemini(sim, model: str, body: dict, stream: bool = False) -> httpx.Response:
    action = ":streamGenerateContent?alt=sse" if stream else ":generateContent"
    return httpx.post(f"{sim.base_url}/google/v1beta/models/{model}{action}", json=body,
                      headers={"x-goog-api-key": "g-sim"}, timeout=10)


GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "Hello"}]}],
               "generationConfig": {"maxOutputTokens": 30}}


def test_gemini_answers_with_usage_and_thinking_apart(sim):
    sim.set_behaviour("gemini-2.5-flash", reasoning_tokens=[5, 5])
    answer = gemini(sim, "gemini-2.5-flash", GEMINI_BODY).json()
    [candidate] = answer["candidates"]
    assert candidate["content"]["role"] == "model" and candidate["content"]["parts"][0]["text"]
    meta = answer["usageMetadata"]
    assert meta["thoughtsTokenCount"] == 5
    assert meta["totalTokenCount"] == meta["promptTokenCount"] + \
        meta["candidatesTokenCount"] + meta["thoughtsTokenCount"]
    assert sim.stats()["with_bearer"] == {"gemini-2.5-flash": 1}


def test_gemini_streams_text_then_one_last_chunk_with_the_finish_and_usage(sim):
    text = gemini(sim, "gemini-2.5-flash", GEMINI_BODY, stream=True).text
    chunks = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    assert len(chunks) >= 2
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
    assert chunks[-1]["candidates"][0]["finishReason"] in ("STOP", "MAX_TOKENS")
    assert chunks[-1]["usageMetadata"]["candidatesTokenCount"] >= 1
    assert "[DONE]" not in text


def test_gemini_calls_a_declared_function(sim):
    body = {**GEMINI_BODY, "tools": [{"functionDeclarations": [{
        "name": "get_weather", "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}}}}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY"}}}
    answer = gemini(sim, "gemini-2.5-flash", body).json()
    call = answer["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert call["name"] == "get_weather" and "city" in call["args"]


def test_gemini_faults_in_googles_error_shape(sim):
    sim.set_fault("gemini-2.5-flash", "error_503")
    resp = gemini(sim, "gemini-2.5-flash", GEMINI_BODY)
    assert resp.status_code == 503
    assert resp.json()["error"]["status"] == "UNAVAILABLE"


def test_gemini_streams_with_alt_sse_only_and_knows_its_methods(sim):
    url = f"{sim.base_url}/google/v1beta/models/gemini-2.5-flash"
    assert httpx.post(url + ":streamGenerateContent", json=GEMINI_BODY).status_code == 400
    assert httpx.post(url + ":countTokens", json=GEMINI_BODY).status_code == 404


def test_native_bodies_are_checked():
    with pytest.raises(InvalidRequest, match="max_tokens"):
        parse_anthropic({"model": "m", "messages": [{"role": "user", "content": "x"}]})
    with pytest.raises(InvalidRequest, match="role"):
        parse_anthropic({"model": "m", "max_tokens": 1,
                         "messages": [{"role": "system", "content": "x"}]})
    with pytest.raises(InvalidRequest, match="contents"):
        parse_gemini("m", {"contents": []}, False)
    native = parse_anthropic({"model": "m", "max_tokens": 3, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                      "content": "18C"}]}]})
    assert native.chat.messages[-1]["role"] == "tool"  # so "auto" answers instead of calling
